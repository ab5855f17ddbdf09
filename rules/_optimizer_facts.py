"""What RC101 needs to know about optimizers, collected in the shared walk.

- Which call built each name in the function (``optimizer = NeuronZero1Optimizer(...)``),
  so that the rule can tell a torch or library optimizer, whose ``zero_grad`` sets the
  gradients to None by default, from one the project builds itself.
- Whether the project defines a ``zero_grad`` method whose ``set_to_none`` defaults to
  ``False`` (the project fact ``zero-grad:keeps-grads``): an optimizer built by a project
  factory (``nxd.initialize_parallel_optimizer(...)``) may be one of those, and then
  ``optimizer.zero_grad()`` keeps the gradients.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.project_facts import ZERO_GRAD_KEEPS
from detective.lint.rule import Facts


class OptimizerBuilds(Facts):
    def __init__(self, context):
        super().__init__(context)
        self._built: list[dict[str, set[str]]] = [{}]  # per function: name -> dotted calls it was bound from
        self._classes = 0

    def built_from(self, name: str) -> frozenset[str]:
        """Every call the function has bound ``name`` from so far ("?" where not resolved)."""
        return frozenset(self._built[-1].get(name, ()))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes += 1

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A nested def's parameter named like a local of the enclosing function is, as a rule,
        # handed that local (train_loop_fn(model, optimizer, ...)).
        outer = self._built[-1] if len(self._built) > 1 else {}
        params = (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        self._built.append({p.name.value: set(outer[p.name.value]) for p in params if p.name.value in outer})
        if self._classes and node.name.value == "zero_grad":
            for param in (*node.params.params, *node.params.kwonly_params):
                if param.name.value == "set_to_none" and isinstance(param.default, cst.Name) \
                        and param.default.value == "False":
                    facts = self.context.model.project_facts
                    if ZERO_GRAD_KEEPS not in facts:
                        facts.append(ZERO_GRAD_KEEPS)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._built.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name = node.targets[0].target.value
            if isinstance(node.value, cst.Call):  # if adamw: opt = AdamW(...) else: opt = Lamb(...)
                self._built[-1].setdefault(name, set()).add(self.context.model.resolve(node.value.func) or "?")
