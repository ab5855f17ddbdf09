"""What a def nested in a function takes from the calls its enclosing function makes to it.

``def train_loop_fn(model, loader)`` inside ``main`` called as ``train_loop_fn(model,
device_loader)`` with ``device_loader = pl.MpDeviceLoader(...)``: its ``loader`` is a syncing
loader. A parameter every call passes a tensor taken only on trust (``masks = np.zeros(...)``;
``_mask(masks[i])``) is that tensor with the same assumptions. A mixin of
:class:`~detective.lint.semantic.SemanticModel` (through
:class:`~detective.lint.bindings.Bindings`), read at the nested def.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.api_names import SYNCING_LOADERS
from detective.lint.walker import walk


class CallSiteParams:
    def bind_params_from_call_sites(self, outer: cst.FunctionDef, node: cst.FunctionDef, frame) -> None:
        """A def nested in a function takes, for each parameter, what the enclosing function
        passes at every call to it when each of those is a tensor only on trust (``masks =
        np.zeros(...)``; ``mask = masks[i]``; ``_mask(mask)``): the parameter is that tensor
        with the same assumptions, so a finding on it stands only if one holds (NumPy's do
        not). Read at the def, with the enclosing function's bindings at that point."""
        params = [p for p in (*node.params.posonly_params, *node.params.params) if p.annotation is None]
        if not params:
            return
        calls = _calls_to(outer.body, node.name.value, node)
        if not calls:
            return
        loaders = self._loaders_bound_in(outer.body)
        for index, param in enumerate(params):  # train_loop_fn(model, device_loader): a loader
            passed = [_argument(call, index, param.name.value) for call in calls]
            if loaders and all(isinstance(a, cst.Name) and a.value in loaders for a in passed):
                frame.loader_names.add(param.name.value)
        infer = self.infer
        for index, param in enumerate(params):
            name = param.name.value
            taken: list[str] = []
            for call in calls:
                arg = _argument(call, index, name)
                infer.assumed.clear()
                if arg is None or not infer.is_tensor(arg) or not infer.assumed:
                    break  # not passed, no tensor, or a tensor on its own evidence: as before
                taken += infer.assumed
            else:
                frame.tensor_names.add(name)
                frame.assumed_names[name] = tuple(dict.fromkeys(taken))
        infer.assumed.clear()

    def _loaders_bound_in(self, body: cst.CSTNode) -> set[str]:
        """Names a function body binds to a syncing loader (``pl.MpDeviceLoader(...)``),
        anywhere in it (the nested train loop is defined before the loader is made)."""
        found: set[str] = set()

        def on_visit(node) -> bool:
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                    and self.resolve(node.value.func) in SYNCING_LOADERS:
                found.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
            return not isinstance(node, (cst.FunctionDef, cst.ClassDef))

        for statement in getattr(body, "body", ()):
            walk(statement, on_visit, lambda node: None)
        return found


def _calls_to(body: cst.CSTNode, name: str, skip: cst.FunctionDef) -> list[cst.Call]:
    """Calls ``name(...)`` in a function body, outside the def ``skip`` itself."""
    calls = []

    def on_visit(node) -> bool:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
            calls.append(node)
        return node is not skip

    walk(body, on_visit, lambda node: None)
    return calls


def _argument(call: cst.Call, index: int, name: str) -> cst.BaseExpression | None:
    """The argument a call passes to parameter ``index``/``name`` (None when not plainly)."""
    positional = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if positional == index:
                return arg.value
            positional += 1
        elif arg.keyword.value == name:
            return arg.value
    return None
