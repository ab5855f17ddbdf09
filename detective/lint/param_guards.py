"""Per-file half of :mod:`detective.lint.xla_params` and :mod:`detective.lint.arg_facts`:
in the shared walk, the parameters whose test guards each candidate (``if P is not None:``,
``if P:``, the rest of a function after ``if P is None: return``), and what every call
passes for each parameter, by keyword, by place, or as a mapping key."""

from __future__ import annotations

from collections import defaultdict

import libcst as cst

from detective.lint import tensors as T
from detective.lint.guard_syntax import (is_config, is_none, names_in, self_attrs, sense_if_unset, tests_truth,
                                         value_kind)
from detective.lint.signatures import signature_of
from detective.lint.syntax import bound_names, ends_in_exit
from detective.lint.xla_branches import bindings
from detective.lint.xla_params import DEVICE_TENSOR, FALSY, FORWARDED, KEY, LITERAL, NONE, OTHER, XLA_NONE


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
        self._star_kwargs: list[str | None] = [None]  # per function: its **kwargs name
        # per function: local -> the kind of its one binding so far (``prefix = None``), "o"
        # once bound twice or to anything else
        self._locals: list[dict[str, str]] = [{}]
        self.cond: dict[int, tuple[str, ...]] = {}  # node -> "P" (P non-None) or "P+" (P true), each needed for it to run
        self.active: list[tuple[int, str]] = []  # (function depth, parameter) of entered nodes
        # scope -> keyword / dict key P -> kinds passed (or read as a key) there
        self.keyword_passes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
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
        self._written: set[int] = set()  # subscripts assigned to, met before their visit

    # ------------------------------------------------------------------ queries
    def guarded_by(self) -> tuple[str, ...]:
        """Parameters of the current function that must be non-None for this point to run."""
        depth = len(self._defaults)
        return tuple(dict.fromkeys(name for d, name in self.active if d == depth))

    def short_circuit(self, test: cst.BaseExpression) -> tuple[str, ...]:
        """``P and x`` / ``P is not None and x`` (P a parameter of this function): ``x`` is
        evaluated only when P is true ("P+") or given ("P")."""
        if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)):
            return ()
        left, params = test.left, self._params[-1]
        if isinstance(left, cst.Name) and left.value in params:
            return (left.value + "+",)
        if isinstance(left, cst.Comparison) and len(left.comparisons) == 1 \
                and isinstance(left.left, cst.Name) and left.left.value in params \
                and isinstance(left.comparisons[0].operator, cst.IsNot) and is_none(left.comparisons[0].comparator):
            return (left.left.value,)
        return ()

    def track(self, node: cst.CSTNode) -> None:
        for name in self.cond.get(id(node), ()):
            self.active.append((len(self._defaults), name))

    def untrack(self, node: cst.CSTNode) -> None:
        for _ in self.cond.pop(id(node), ()):  # left: no need to look for it again
            self.active.pop()

    def _require(self, node: cst.CSTNode, entry: str) -> None:
        """``node`` runs only when ``entry`` holds (one of possibly several: ``if a is not None
        and b is not None:`` needs both, and either one dead makes the side dead)."""
        entries = self.cond.get(id(node), ())
        if entry not in entries:
            self.cond[id(node)] = (*entries, entry)

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
            if is_none(param.default):
                defaults[param.name.value] = index
        for param in params.kwonly_params:
            if is_none(param.default):
                defaults[param.name.value] = -1
        if defaults:
            scope.none_params = dict(defaults)
        others = {p.name.value: value_kind(p.default) for p in (*positional, *params.kwonly_params)
                  if p.default is not None and not is_none(p.default)}
        if others:
            scope.defaults = {name: kind if kind in (FALSY, LITERAL) else OTHER for name, kind in others.items()}
        self._defaults.append(defaults)
        names = {p.name.value for p in (*positional, *params.kwonly_params)}
        self._params.append(names)
        star = params.star_kwarg
        self._star_kwargs.append(star.name.value if isinstance(star, cst.Param) else None)
        self._locals.append({})
        self._false_defaults.append(set(defaults) | {n for n, kind in others.items() if kind == FALSY})
        self._setter.append(node.name.value.startswith("set_"))
        self._early_returns(node.body, names)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defaults.pop()
        self._params.pop()
        self._star_kwargs.pop()
        self._locals.pop()
        self._false_defaults.pop()
        self._setter.pop()

    def _rebind(self, names, value=None) -> None:
        """``names`` are bound (to ``value`` when it is one name's whole value)."""
        for name in names:
            self._defaults[-1].pop(name, None)
            self._params[-1].discard(name)
            first = name not in self._locals[-1] and value is not None
            self._locals[-1][name] = value_kind(value) if first else OTHER
            if name == self._star_kwargs[-1]:
                self._star_kwargs[-1] = None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Attribute):
                self._set_attr(target.target, node.value)
            elif isinstance(target.target, cst.Subscript):
                self._written.add(id(target.target))  # m["k"] = v: what is set, not a read
            single = isinstance(target.target, cst.Name) and len(node.targets) == 1
            self._rebind(bound_names(target.target), node.value if single else None)

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
        for attr in self_attrs(test):
            sense = sense_if_unset(test, attr)
            dead = body if sense < 0 else (orelse if sense > 0 else None)
            if isinstance(dead, cst.Else):
                dead = dead.body
            if dead is not None:
                self._require(dead, f"self.{attr}" + ("+" if tests_truth(test, attr, True) else ""))
        params = self._params[-1]
        if not params:
            return
        names = names_in(test) & params
        if not names or self.regions.sense(test):
            return  # no parameter tested, or already decided within the file
        for name in sorted(names):
            sense = self.regions.sense(test, also_none={name})
            dead = body if sense < 0 else (orelse if sense > 0 else None)
            if isinstance(dead, cst.Else):
                dead = dead.body
            if dead is not None:
                self._require(dead, name + "+" if tests_truth(test, name) else name)

    def _early_returns(self, body, params: set[str]) -> None:
        """``if mask is None: return x`` at a function's top level: the statements after it
        run only when ``mask`` is given."""
        statements = getattr(body, "body", ())
        if not isinstance(statements, (list, tuple)):
            return
        for index, statement in enumerate(statements):
            if not (isinstance(statement, cst.If) and statement.orelse is None and ends_in_exit(statement.body)):
                continue
            for attr in self_attrs(statement.test):
                if sense_if_unset(statement.test, attr) > 0:  # if not self.ready: return
                    entry = f"self.{attr}" + ("+" if tests_truth(statement.test, attr, True) else "")
                    for later in statements[index + 1:]:
                        self._require(later, entry)
            names = names_in(statement.test) & params
            if not names or self.regions.sense(statement.test):
                continue
            names -= bindings(statements[:index]).keys()  # rebound before the test: no longer the argument
            for name in sorted(names):
                if self.regions.sense(statement.test, also_none={name}) > 0:
                    entry = name + "+" if tests_truth(statement.test, name) else name
                    for later in statements[index + 1:]:
                        self._require(later, entry)

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
                # the function's own **kwargs passed on hands on what its callers passed by
                # keyword ("**@"); another mapping's keys are unseen here
                own = isinstance(arg.value, cst.Name) and arg.value.value == self._star_kwargs[-1]
                keywords.append("**@" if own else "**")
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
            self._key(node.args[0].value, node.func.value, _literal_default(node))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self._written:
            self._written.discard(id(node))  # leave_Assign records the value written
            return
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            self._key(node.slice[0].slice.value, node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._key(node.left, target.comparator)

    def _key(self, node, mapping, default: str = "") -> None:
        """``m["mask"]``, ``m.get("mask")``, ``"mask" in m``: a mapping with that key exists,
        whose values this file may not show (a tokenizer's output expanded into a model).
        Not a config's (``args.model.get("normalize", False)``): settings are Python values.
        Nor a read with a Python literal for default (``kwargs.pop("interpolate", False)``):
        the key holds a flag or a number, and what a call sets it to counts where it is set."""
        key = T.literal_string(node)
        if key and key.isidentifier() and not is_config(mapping):
            self.keyword_passes[self.model.scope.qualname][key].add(default or KEY)

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
        self.keyword_passes[self.model.scope.qualname][name].add(passed)

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
            local = self._locals[-1].get(name)
            if local in (None, OTHER):
                function = self.model.function
                if name in function.tensor_names and name not in function.guessed_names \
                        and not self.model.infer.made_on_cpu(value):
                    return DEVICE_TENSOR  # a size parameter handed a device value (RC005)
            return local or value_kind(value)  # True, False: literals
        return _literal_default(value) or value_kind(value)


def _literal_default(node) -> str:
    """``m.get("k", False)`` / ``m.pop("k", 0.5)``: the kind of a Python literal default (a
    flag or a number is what the key holds), "" for any other read."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value in ("get", "pop") and len(node.args) == 2 \
            and T.literal_string(node.args[0].value) is not None:
        kind = value_kind(node.args[1].value)
        if kind in (FALSY, LITERAL):
            return kind
    return ""
