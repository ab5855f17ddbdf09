"""Models compiled in parts: their own ``forward`` runs eagerly around the parts.

Block by block. torchtitan's ``apply_compile`` does ``for _, block in model.layers.named_children():
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

Method by method. LeRobot's ``PI05Pytorch.__init__`` does ``self.sample_actions =
torch.compile(self.sample_actions)``; its rollout does ``policy.predict_action_chunk =
torch.compile(policy.predict_action_chunk)`` on whatever policy it built. A project that
picks a module's methods to compile and never its ``forward`` runs that ``forward`` (the
training step's loss and its ``.item()`` logging) eagerly: across files
(:func:`method_compiled_classes`), in a project that does not target torch_xla, a module
class is eager when the project compiles a method of it or of a project base (resolved as
calls are; a method of a local of unknown class, ``policy.predict_action_chunk``, means that
method of every project class defining it) other than ``forward``/``__call__``, and compiles
none of their ``forward``/``__call__`` by name nor the module itself (``torch.compile(self)``).
The compiled methods are roots, so what they call stays traced.
Part by part (:func:`part_compiled_classes`): SAM2's ``SAM2Base.__init__`` compiles
``self.image_encoder.forward`` when asked, its video predictor four more components; its
training model ``SAM2Train(SAM2Base)`` runs its own ``forward`` (prompt sampling, ``.tolist()``
of object ids) eagerly around them. A module class whose methods, or a project base's,
compile an attribute of ``self`` that is no method (``torch.compile(self.encoder)``, ``...(self.
encoder.forward)``, ``self.encoder.compile(mode=...)``), and that the project never compiles
itself nor by its forward, is eager in a project that does not target torch_xla.
By its own ``compile`` override (:func:`override_compiled_classes`): DeepSpeed's
``PipelineModule.compile`` compiles each layer and never the pipeline.
A whole instance compiled where the walk knows its class (``model = Train(...)`` then
``torch.compile(model)`` or ``torch.compile(model.forward)`` in the same function) compiles
that class's ``forward`` by name, so the class is not eager. Limit: an instance whose class the
walk does not know (``self.policy = torch.compile(self.policy)``, a model a factory function
returns) is not seen.
"""

from __future__ import annotations

from detective.lint.model import COMPILES, COMPILES_PART, COMPILES_SELF

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



def _compiled_by_name(project) -> tuple[dict, set]:
    """(class node -> the names of its methods the project compiles, other than
    forward/``__call__``; the classes whose forward or ``__call__`` it compiles by name)."""
    project.graph()
    methods: dict = {}
    whole: set = set()
    for path, qualname in project.compiled:
        owner, _, method = qualname.rpartition(".")
        if owner in project.files[path].classes:
            (whole.add((path, owner)) if method in ("forward", "__call__")
             else methods.setdefault((path, owner), set()).add(method))
    return methods, whole


def part_compiled_classes(project) -> dict:
    """Module classes whose methods (their own or a project base's) compile components of the
    module (SAM2Base's ``self.image_encoder.forward = torch.compile(self.image_encoder.forward)``),
    never the module itself nor its forward: class node -> why its forward is eager."""
    _, whole = _compiled_by_name(project)
    found = {}
    for path, summary in project.files.items():
        for name in summary.classes:
            order = project.mro((path, name))
            owned = [(project.files[o[0]], o[1]) for o in order]
            methods = {m for file, cls in owned for m in file.classes[cls].methods}
            parts = sorted((tag[len(COMPILES_PART):], f"{cls}.{m}") for file, cls in owned
                           for m in file.classes[cls].methods if (scope := file.scopes.get(f"{cls}.{m}")) is not None
                           for tag in scope.tags if tag.startswith(COMPILES_PART)
                           and tag[len(COMPILES_PART):] not in methods)
            if not parts or any(o in whole or _compiles_self(project, o) for o in order) \
                    or project.class_kind((path, name)) != "module":
                continue
            part, where = parts[0]
            found[(path, name)] = (f"{where} compiles the part self.{part}, never {name} itself nor its forward: "
                                   f"{name}.forward runs eagerly, and this project does not target torch_xla")
    return found


def method_compiled_classes(project) -> dict:
    """Module classes some of whose methods the project compiles, never their forward nor
    the module: class node -> why its forward is eager (the caller checks the targets)."""
    methods, whole = _compiled_by_name(project)
    if not methods:
        return {}
    found = {}
    for path, summary in project.files.items():
        for name in summary.classes:
            order = project.mro((path, name))
            named = sorted({m for owner in order for m in methods.get(owner, ())})
            if not named or any(owner in whole or _compiles_self(project, owner) for owner in order) \
                    or project.class_kind((path, name)) != "module":
                continue
            found[(path, name)] = (f"the project compiles {name}.{named[0]} by name, never {name}.forward nor "
                                   f"{name} itself: its forward runs eagerly, and this project does not target "
                                   "torch_xla")
    return found


def _compiles_self(project, cls) -> bool:
    summary = project.files[cls[0]]
    return any(COMPILES_SELF in summary.scopes[f"{cls[1]}.{m}"].tags
               for m in summary.classes[cls[1]].methods if f"{cls[1]}.{m}" in summary.scopes)


def override_compiled_classes(project, eager) -> dict:
    """Module classes whose ``compile`` override (their own or a project base's) compiles
    their parts and not the module itself: DeepSpeed's ``PipelineModule.compile`` compiles
    each layer, so ``.compile()`` on one leaves its ``forward`` eager around them. Classes
    already in ``eager`` are left out."""
    found = {}
    for cls in sorted(set(project.class_roots.values())):
        if cls in eager or project.class_kind(cls) == "function":
            continue
        summary = project.files.get(cls[0])
        method = project.resolve("self.compile", summary, cls[1]) if summary is not None else None
        if method is None or method[0] not in project.files or not method[1].endswith(".compile"):
            continue
        scope = project.files[method[0]].scopes[method[1]]
        if COMPILES in scope.tags and COMPILES_SELF not in scope.tags:
            found[cls] = (f"{scope.display} compiles the parts of {cls[1]} one by one, never the "
                          "module itself: its forward runs eagerly, and this project does not target torch_xla")
    return found
