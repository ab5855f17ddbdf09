"""Per-file half of :mod:`detective.lint.xla_params`: in the shared walk, the parameters
(default None) whose ``is not None`` test guards each candidate, and what every call passes
for each parameter, keyword or place."""

from __future__ import annotations

from collections import defaultdict

import libcst as cst

from detective.lint import tensors as T
from detective.lint.signatures import signature_of
from detective.lint.xla_branches import bound_names
from detective.lint.xla_params import FORWARDED, NONE, OTHER, XLA_NONE


class ParamGuards:
    """Per-file recorder: guarded candidates and what each call passes."""

    def __init__(self, model, regions):
        self.model = model
        self.regions = regions
        # Per function on the walk's stack: name -> positional index (-1 keyword-only) of
        # each parameter that defaults to None, and every parameter name; both lose a
        # name once it is rebound.
        self._defaults: list[dict[str, int]] = [{}]
        self._params: list[set[str]] = [set()]
        self.cond: dict[int, str] = {}  # node -> parameter that must be non-None for it to run
        self.active: list[tuple[int, str]] = []  # (function depth, parameter) of entered nodes
        self.keyword_passes: dict[str, set[str]] = defaultdict(set)
        self.positional_passes: list[tuple[str, str, str]] = []  # (scope, target, "o,x,@name")

    # ------------------------------------------------------------------ queries
    def guarded_by(self) -> tuple[str, ...]:
        """Parameters of the current function that must be non-None for this point to run."""
        depth = len(self._defaults)
        return tuple(dict.fromkeys(name for d, name in self.active if d == depth))

    def track(self, node: cst.CSTNode) -> None:
        name = self.cond.get(id(node))
        if name is not None:
            self.active.append((len(self._defaults), name))

    def untrack(self, node: cst.CSTNode) -> None:
        if self.cond.pop(id(node), None) is not None:  # left: no need to look for it again
            self.active.pop()

    # ------------------------------------------------------------------ functions
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params
        positional = [*params.posonly_params, *params.params]
        bound = bool(positional) and positional[0].name.value in {"self", "cls"} \
            and self.model.scope.class_name is not None
        if bound:
            positional = positional[1:]  # bound calls pass it implicitly
        if self.model.scope.class_name is not None:
            self.model.scope.signature = signature_of(params, bound)
        defaults = {}
        for index, param in enumerate(positional):
            if _is_none(param.default):
                defaults[param.name.value] = index
        for param in params.kwonly_params:
            if _is_none(param.default):
                defaults[param.name.value] = -1
        if defaults:
            self.model.scope.none_params = dict(defaults)
        self._defaults.append(defaults)
        self._params.append({p.name.value for p in (*positional, *params.kwonly_params)})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defaults.pop()
        self._params.pop()

    def _rebind(self, names) -> None:
        for name in names:
            self._defaults[-1].pop(name, None)
            self._params[-1].discard(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._rebind(bound_names(target.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._rebind(bound_names(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._rebind(bound_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        self._rebind(bound_names(node.target))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._rebind(bound_names(node.target))

    # ------------------------------------------------------------------ guards
    def visit_If(self, node: cst.If) -> None:
        self._guard(node.test, node.body, node.orelse)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._guard(node.test, node.body, node.orelse)

    def _guard(self, test, body, orelse) -> None:
        """``if P is not None:`` (P a parameter defaulting to None): the body runs only when
        P is given; the ``else`` of ``if P is None:`` likewise."""
        defaults = self._defaults[-1]
        if not defaults or self.regions.sense(test):
            return  # no candidate parameter, or already decided within the file
        for name in _names_in(test) & defaults.keys():
            sense = self.regions.sense(test, also_none={name})
            dead = body if sense < 0 else (orelse if sense > 0 else None)
            if isinstance(dead, cst.Else):
                dead = dead.body
            if dead is not None and id(dead) not in self.cond:
                self.cond[id(dead)] = name

    # ------------------------------------------------------------------ passes
    def visit_Call(self, node: cst.Call) -> None:
        positional: list[str] = []
        starred = False
        for arg in node.args:
            if arg.keyword is not None:
                self.keyword_passes[arg.keyword.value].add(self._passed(arg.value, arg.keyword.value))
            elif arg.star:
                starred = True  # *args: the places after it are unknown; **kw: keys unseen here
            elif not starred:
                positional.append(self._passed(arg.value, None))
        if positional:  # what lands in a parameter's place is known once the callee is
            target = self.model.call_target(node.func)
            if target is not None:
                self.positional_passes.append((self.model.scope.qualname, target, ",".join(positional)))

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            key = T.literal_string(element.key) if isinstance(element, cst.DictElement) else None
            if key and key.isidentifier():
                self.keyword_passes[key].add(self._passed(element.value, key))

    def leave_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:  # kwargs["mask"] = m: may be **-expanded into a call
            sub = target.target
            if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 \
                    and isinstance(sub.slice[0].slice, cst.Index):
                key = T.literal_string(sub.slice[0].slice.value)
                if key and key.isidentifier():
                    self.keyword_passes[key].add(self._passed(node.value, key))

    def _passed(self, value: cst.BaseExpression, keyword: str | None) -> str:
        if not isinstance(value, cst.Name):
            return OTHER
        name = value.value
        if name == "None":
            return NONE
        if name in self.regions.xla_nones():
            return XLA_NONE
        if name in self._params[-1]:
            if keyword is None:
                return f"@{name}"  # which parameter it lands in is known once resolved
            return FORWARDED if name == keyword else OTHER
        return OTHER


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _names_in(test: cst.BaseExpression) -> set[str]:
    found = set()
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Comparison):
            stack.append(node.left)
    return found
