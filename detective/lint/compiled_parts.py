"""Models compiled block by block: their own ``forward`` runs eagerly around the blocks.

torchtitan's ``apply_compile`` does ``for _, block in model.layers.named_children():
block.compile(...)``; OLMo's training script does ``for block in model.transformer.blocks:
block.compile(...)``. Each compiles the blocks a model keeps in a container attribute and never
the model itself, so the code of the model's ``forward`` outside the blocks (position ids,
masks, a vision encoder's patch bookkeeping) runs eagerly on the GPU.

In the walk (:class:`~detective.lint.entrance_facts.EntranceFacts`): a ``for`` over an attribute chain
of a name (``m.layers``, ``m.layers.named_children()``, ``m.transformer.blocks``) remembers,
for its loop variable, the first attribute (``layers``, ``transformer``); a compile of that
variable (``block.compile(...)``, ``torch.compile(block)``) records the project fact
``compiled-parts:<attribute>``.

Across files (:func:`block_compiled_classes`): in a project that does not target torch_xla
(the lazy tensor traces every forward whatever is compiled), a module class whose ``self.<a>``
is a ``ModuleList``/``ModuleDict``/``Sequential`` (its own or a project base's) for such an
attribute is eager: the blocks it holds are compiled, not it. The classes of the blocks stay
roots.
"""

from __future__ import annotations

PARTS_FACT = "compiled-parts:"
CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
                        "torch.nn.modules.container.ModuleList", "torch.nn.modules.container.ModuleDict",
                        "torch.nn.modules.container.Sequential"})
def block_compiled_classes(project) -> dict:
    """Module classes whose container attribute holds blocks the project compiles one by one:
    class node -> why its forward is eager (the caller checks the project's targets)."""
    attrs = {fact[len(PARTS_FACT):] for summary in project.files.values() for fact in summary.facts
             if fact.startswith(PARTS_FACT)}
    if not attrs:
        return {}
    found = {}
    for path, summary in project.files.items():
        for name in summary.classes:
            held = sorted({a for owner in project.mro((path, name)) for a in attrs
                           if a in (types := project.files[owner[0]].classes[owner[1]].attr_types)
                           and _is_container(project, types[a], project.files[owner[0]])})
            if held and project.class_kind((path, name)) == "module":
                found[(path, name)] = (f"the project compiles the blocks in {name}.{held[0]} one by one, never "
                                       f"{name} itself: its forward runs eagerly around them, and this project "
                                       "does not target torch_xla")
    return found


def _is_container(project, dotted: str, summary, depth: int = 0) -> bool:
    """``nn.ModuleList``/``ModuleDict``/``Sequential``, or a project class built on one
    (torchtitan's ``protocols.module.ModuleDict``)."""
    if dotted.startswith("local:"):
        dotted = "#" + dotted[len("local:"):]
    if dotted in CONTAINERS:
        return True
    node = project.resolve_class(dotted, summary) if depth < 4 else None
    if node is None or node[0] not in project.files or node[1] not in project.files[node[0]].classes:
        return False
    owner = project.files[node[0]]
    return any(_is_container(project, base, owner, depth + 1) for base in owner.classes[node[1]].bases)

