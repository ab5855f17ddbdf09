"""Per-file half of :mod:`detective.lint.xla_params` and :mod:`detective.lint.arg_facts`:
in the shared walk, the parameters whose test guards each candidate (``if P is not None:``,
``if P:``, the rest of a function after ``if P is None: return``), and what every call
passes for each parameter, by keyword, by place, or as a mapping key."""

from __future__ import annotations

from collections import defaultdict

import libcst as cst

from detective.lint import tensors as T
from detective.lint.signatures import signature_of
from detective.lint.xla_branches import bindings, bound_names
from detective.lint.xla_params import (CONFIG, FALSY, FORWARDED, KEY, LITERAL, NONE, OTHER,
                                       XLA_NONE)

# Names of objects whose attributes are settings (``args.fp16``, ``self.cfg.normalize``,
# ``task_cfg.normalize``): what a call passes from them is a Python value.
CONFIG_NAMES = frozenset({"args", "cfg", "config", "conf", "opt", "opts", "hparams", "hp", "options"})
CONFIG_SUFFIXES = ("_cfg", "_config", "_args", "_conf", "_opts")


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
        self.cond: dict[int, str] = {}  # node -> "P" (P non-None) or "P+" (P true) for it to run
        self.active: list[tuple[int, str]] = []  # (function depth, parameter) of entered nodes
        self.keyword_passes: dict[str, set[str]] = defaultdict(set)
        self.forwards: set[tuple[str, str]] = set()  # (scope, P): passes its own P on as P=P
        # Attributes: what `x.A = v` assigns anywhere, by name; `self.A = P` from a parameter
        # that defaults to None/false, and any assignment in a set_* method, as (scope, A,
        # kind or "@P"); set_* methods
        # called anywhere (not from themselves); calls made under a guard, by node id.
        self.attr_kinds: dict[str, set[str]] = defaultdict(set)
        self.attr_params: set[tuple[str, str, str]] = set()
        self.setters_called: set[str] = set()
        self.guarded_calls: dict[int, tuple[str, ...]] = {}
        self._false_defaults: list[set[str]] = [set()]  # per function: P defaulting to None/false
        self._setter: list[bool] = [False]  # per function: a set_* method
        # (scope, target, "o,x,@name;k=n,**"): kinds by place (``*`` where *args hides the
        # rest), then by keyword (``**`` when a mapping is expanded into the call).
        self.positional_passes: list[tuple[str, str, str]] = []

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
        scope = self.model.scope
        scope.signature = signature_of(params, bound)
        defaults = {}
        for index, param in enumerate(positional):
            if _is_none(param.default):
                defaults[param.name.value] = index
        for param in params.kwonly_params:
            if _is_none(param.default):
                defaults[param.name.value] = -1
        if defaults:
            scope.none_params = dict(defaults)
        others = {p.name.value: _value_kind(p.default) for p in (*positional, *params.kwonly_params)
                  if p.default is not None and not _is_none(p.default)}
        if others:
            scope.defaults = {name: kind if kind in (FALSY, LITERAL) else OTHER for name, kind in others.items()}
        self._defaults.append(defaults)
        names = {p.name.value for p in (*positional, *params.kwonly_params)}
        self._params.append(names)
        self._false_defaults.append(set(defaults) | {n for n, kind in others.items() if kind == FALSY})
        self._setter.append(node.name.value.startswith("set_"))
        self._early_returns(node.body, names)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defaults.pop()
        self._params.pop()
        self._false_defaults.pop()
        self._setter.pop()

    def _rebind(self, names) -> None:
        for name in names:
            self._defaults[-1].pop(name, None)
            self._params[-1].discard(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Attribute):
                self._set_attr(target.target, node.value)
            self._rebind(bound_names(target.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Attribute):
            self.attr_kinds[node.target.attr.value].add(OTHER)
        self._rebind(bound_names(node.target))

    def _set_attr(self, target: cst.Attribute, value) -> None:
        passed = self._passed(value)
        attr = target.attr.value
        if self._setter[-1] or (passed.startswith("@") and passed[1:] in self._false_defaults[-1]
                                and isinstance(target.value, cst.Name) and target.value.value == "self"):
            # a setter's assignments count only where it is called; a flag from a parameter
            # is what the function's calls pass it
            self.attr_params.add((self.model.scope.qualname, attr, passed))
        else:
            self.attr_kinds[attr].add(OTHER if passed.startswith("@") else passed)

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
        """``if P is not None:`` / ``if P:`` (P a parameter): the body runs only when P is
        given (true); the ``else`` of ``if P is None:`` likewise. ``if self.A:`` too."""
        for attr in _self_attrs(test):
            sense = _sense_if_unset(test, attr)
            dead = body if sense < 0 else (orelse if sense > 0 else None)
            if isinstance(dead, cst.Else):
                dead = dead.body
            if dead is not None and id(dead) not in self.cond:
                self.cond[id(dead)] = f"self.{attr}" + ("+" if _tests_truth(test, attr, True) else "")
        params = self._params[-1]
        if not params:
            return
        names = _names_in(test) & params
        if not names or self.regions.sense(test):
            return  # no parameter tested, or already decided within the file
        for name in names:
            sense = self.regions.sense(test, also_none={name})
            dead = body if sense < 0 else (orelse if sense > 0 else None)
            if isinstance(dead, cst.Else):
                dead = dead.body
            if dead is not None and id(dead) not in self.cond:
                self.cond[id(dead)] = name + "+" if _tests_truth(test, name) else name

    def _early_returns(self, body, params: set[str]) -> None:
        """``if mask is None: return x`` at a function's top level: the statements after it
        run only when ``mask`` is given."""
        statements = getattr(body, "body", ())
        if not isinstance(statements, (list, tuple)):
            return
        for index, statement in enumerate(statements):
            if not (isinstance(statement, cst.If) and statement.orelse is None and _exits(statement.body)):
                continue
            for attr in _self_attrs(statement.test):
                if _sense_if_unset(statement.test, attr) > 0:  # if not self.ready: return
                    entry = f"self.{attr}" + ("+" if _tests_truth(statement.test, attr, True) else "")
                    for later in statements[index + 1:]:
                        self.cond.setdefault(id(later), entry)
                    break
            names = _names_in(statement.test) & params
            if not names or self.regions.sense(statement.test):
                continue
            names -= bindings(statements[:index]).keys()  # rebound before the test: no longer the argument
            for name in names:
                if self.regions.sense(statement.test, also_none={name}) > 0:
                    entry = name + "+" if _tests_truth(statement.test, name) else name
                    for later in statements[index + 1:]:
                        self.cond.setdefault(id(later), entry)
                    break

    # ------------------------------------------------------------------ passes
    def visit_Call(self, node: cst.Call) -> None:
        if self.active:
            guards = self.guarded_by()
            if guards:
                self.guarded_calls[id(node)] = guards
        func = node.func
        called = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if isinstance(called, str) and called.startswith("set_") \
                and self.model.scope.qualname.rsplit(".", 1)[-1] != called:
            self.setters_called.add(called)
        if called == "setattr" and len(node.args) >= 2:
            name = T.literal_string(node.args[1].value)
            if name:
                self.attr_kinds[name].add(OTHER)
        positional: list[str] = []
        keywords: list[str] = []
        starred = False
        for arg in node.args:
            if arg.keyword is not None:
                name = arg.keyword.value
                passed = self._passed(arg.value)
                self._by_name(name, passed)
                keywords.append(f"{name}={passed}")
            elif arg.star == "**":
                keywords.append("**")  # its keys are unseen here
            elif arg.star:
                if not starred:
                    positional.append("*")  # the places after it are unknown
                starred = True
            elif not starred:
                positional.append(self._passed(arg.value))
        if positional or keywords:  # what lands in a parameter is known once the callee is
            target = self.model.call_target(node.func)
            if target is not None:
                places = ",".join(positional)
                if keywords:
                    places += ";" + ",".join(keywords)
                self.positional_passes.append((self.model.scope.qualname, target, places))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in {"get", "pop", "setdefault"} \
                and node.args:
            self._key(node.args[0].value, node.func.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            self._key(node.slice[0].slice.value, node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._key(node.left, target.comparator)

    def _key(self, node, mapping) -> None:
        """``m["mask"]``, ``m.get("mask")``, ``"mask" in m``: a mapping with that key exists,
        whose values this file may not show (a tokenizer's output expanded into a model).
        Not a config's (``args.model.get("normalize", False)``): settings are Python values."""
        key = T.literal_string(node)
        if key and key.isidentifier() and not _is_config(mapping):
            self.keyword_passes[key].add(KEY)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            key = T.literal_string(element.key) if isinstance(element, cst.DictElement) else None
            if key and key.isidentifier():
                self._by_name(key, self._passed(element.value))

    def leave_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:  # kwargs["mask"] = m: may be **-expanded into a call
            sub = target.target
            if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 \
                    and isinstance(sub.slice[0].slice, cst.Index):
                key = T.literal_string(sub.slice[0].slice.value)
                if key and key.isidentifier():
                    self._by_name(key, self._passed(node.value))

    def _by_name(self, name: str, passed: str) -> None:
        """A pass by keyword or key, as the name-keyed facts read it."""
        if passed.startswith("@"):
            if passed[1:] == name:
                self.forwards.add((self.model.scope.qualname, name))
                passed = FORWARDED
            else:
                passed = OTHER
        self.keyword_passes[name].add(passed)

    def _passed(self, value: cst.BaseExpression) -> str:
        """What a call passes: a kind (see xla_params), or ``@name`` for the caller's own
        parameter ``name`` passed on."""
        if isinstance(value, cst.Name):
            name = value.value
            if name == "None":
                return NONE
            if name in self.regions.xla_nones():
                return XLA_NONE
            if name in self._params[-1]:
                return f"@{name}"
            return _value_kind(value)
        return _value_kind(value)




def _value_kind(node) -> str:
    """A Python literal (false or not), a setting read from a config object, or other."""
    if isinstance(node, cst.Name):
        return {"True": LITERAL, "False": FALSY, "None": NONE}.get(node.value, OTHER)
    if isinstance(node, (cst.Integer, cst.Float)):
        return FALSY if node.evaluated_value == 0 else LITERAL
    if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float)) \
            and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _value_kind(node.expression)
    if isinstance(node, cst.SimpleString):
        return FALSY if not node.evaluated_value else LITERAL
    if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
        return LITERAL
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr" \
            and len(node.args) >= 2 and _is_config(node.args[0].value):
        return CONFIG  # getattr(args, "fp16", False)
    if isinstance(node, cst.Attribute) and _is_config(node.value):
        return CONFIG
    return OTHER


def _is_config(node) -> bool:
    while isinstance(node, cst.Attribute):
        if _config_name(node.attr.value):
            return True
        node = node.value
    return isinstance(node, cst.Name) and _config_name(node.value)


def _config_name(name: str) -> bool:
    return name in CONFIG_NAMES or name.endswith(CONFIG_SUFFIXES)


def _exits(body) -> bool:
    """Does this block end by leaving the function (``return``, ``raise``)?"""
    statements = getattr(body, "body", ())
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False


def _is_self_attr(node, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == attr \
        and isinstance(node.value, cst.Name) and node.value.value == "self"


def _self_attrs(test) -> list[str]:
    """``self.A`` tested for truth or None-ness in ``test`` (through not/and/or)."""
    found, stack = [], [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            found.append(node.attr.value)
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            stack.append(node.left)
    return found


def _sense_if_unset(test, attr: str) -> int:
    """The test's truth when ``self.attr`` is None (or false where it is tested for truth):
    +1 true, -1 false, 0 unknown."""
    if _is_self_attr(test, attr):
        return -1
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -_sense_if_unset(test.expression, attr)
    if isinstance(test, cst.BooleanOperation):
        left, right = _sense_if_unset(test.left, attr), _sense_if_unset(test.right, attr)
        if isinstance(test.operator, cst.And):
            return -1 if -1 in (left, right) else (1 if left == right == 1 else 0)
        return 1 if 1 in (left, right) else (-1 if left == right == -1 else 0)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and _is_self_attr(test.left, attr):
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            return 1 if isinstance(target.operator, cst.Is) else (
                -1 if isinstance(target.operator, cst.IsNot) else 0)
    return 0


def _tests_truth(test, name: str, attr: bool = False) -> bool:
    """``if P:`` / ``not P`` / ``P and x``: the test needs P true, not only given."""
    stack = [test]
    while stack:
        node = stack.pop()
        if (_is_self_attr(node, name) if attr else (isinstance(node, cst.Name) and node.value == name)):
            return True
        if isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
    return False


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
