"""What the project's calls pass to a parameter, decided across files.

Two facts, from what :class:`~detective.lint.param_guards.ParamGuards` records per file in
the shared walk (keyword passes and mapping keys by name; every call's arguments by place
and keyword with its target):

**A Python value** (``python_names``): ``forward(self, normalize, x)`` takes ``normalize``
for a tensor by guess (a forward parameter, no annotation, no default). When every value
the project hands a parameter of that *name* anywhere is a Python literal (``True``,
``0.1``, ``"sum"``, ``None``), a setting (read from a config object: ``task.cfg.normalize``,
``getattr(args, "x", False)``; a module's ``self.training``), a builtin's Python number
(``float(sigma)``) or a same-named parameter passed on, at least one of them is a literal
or a setting, and every function with such a parameter defaults it to a literal or
nothing, a truth test on it reads no tensor. A candidate whose tensor evidence rests on
such parameters alone (:attr:`Candidate.rests_on`), directly or through a local bound from
them (``flag = score_threshold > 0; if flag:``), becomes ``info``; so does ``float(p)``.

**Dead in the repository** (guards ``P`` / ``P+`` in :attr:`Candidate.guarded_by`): code
under ``if P is not None:`` (or after ``if P is None: return``) never runs when no call
hands ``P`` anything but ``None``; code under ``if P:`` never runs when no call hands it
anything but ``None`` or a false literal. Decided by name (every function with a
parameter ``P`` defaults it to ``None``/a false literal, and some call passes ``P``, if
only by forwarding it: not library API no one calls), or, for a module-level function,
from its resolved calls alone (``modify_bias(bias, n, pos_mask)`` with the caller's
``pos_mask`` itself always ``None``). A module-level function the project calls, but never
with ``P`` (nor ``P=`` anywhere), keeps its default (``convert_padding_direction(src, pad,
left_to_right=True)``: ``right_to_left`` stays False); ``P and x`` counts as ``x`` under
``if P:``. Such a candidate becomes ``info`` with the reason.

Why by name, and why ``info``. Calls reach methods through ``model(...)``,
``self.encoder(...)`` and ``**kwargs``, which the call graph resolves only in part, so a
keyword ``P=v``, a dict key ``"P"`` (it may be ``**``-expanded) or ``d["P"] = v`` anywhere
counts for every parameter named ``P``, and any value other than the kinds above poisons
the name; a read of key ``"P"`` from a mapping (``batch["P"]``, ``m.get("P")``, ``"P" in
m``) poisons it too, since the mapping may come from data the project never shows (a
tokenizer's output expanded into ``model(**inputs)``). Positional arguments count where
the call graph resolves the callee (``Fn.apply(x, r, False)`` is ``Fn.forward`` after
``ctx``). What stays unseen is a positional argument at a call the graph cannot resolve
(``blk(x, bias, mask)``): the name-keyed Python-value fact therefore asks for a literal or
setting passed *by keyword or at a resolved call* as evidence that the parameter is a
flag or a number, which a tensor parameter does not get; the name-keyed dead-branch fact
asks that every function with the parameter default it to ``None`` (nothing can make
callers pass it). Callers outside the repository are not seen at all: a library function
a user calls with a real mask is still dead *here*. Both facts are therefore ``info``
(shown with ``--min-severity info``, with the reason), not dropped: a wrong "dead" or
"Python value" stays auditable. (:mod:`detective.lint.xla_params` drops candidates: its
``None`` comes from the project's own XLA branch.)
"""

from __future__ import annotations

from collections import defaultdict

from detective.lint.digraph import CycleMemo
from detective.lint.xla_params import CONFIG, DEVICE_TENSOR, FALSY, FORWARDED, LITERAL, NONE, OTHER, XLA_NONE

NO_DEFAULT = "-"
NONE_KINDS = frozenset({NONE, XLA_NONE, FORWARDED})
FALSE_KINDS = NONE_KINDS | {FALSY}
PYTHON_KINDS = FALSE_KINDS | {LITERAL, CONFIG}
PYTHON_EVIDENCE = frozenset({FALSY, LITERAL, CONFIG})
PYTHON_DEFAULTS = frozenset({NONE, FALSY, LITERAL, NO_DEFAULT})
TORCH_SET_ATTRIBUTES = frozenset({"training"})  # nn.Module.train() sets it, outside the project


class ArgFacts:
    """The facts of one project (built once per cross-file pass, on first need)."""

    def __init__(self, project):
        self.project = project
        # Name-keyed: what keywords, dict keys and key reads hand a parameter named P.
        self._names: dict[str, set[str]] = defaultdict(set)
        self._defaults: dict[str, set[str]] = defaultdict(set)  # P -> default kinds of every function
        self._setters_called = {name for summary in project.files.values() for name in summary.setters_called}
        self._attrs: dict[str, set[str]] = defaultdict(set)  # A -> kinds `x.A = v` assigns
        self._attr_params: dict[str, set[tuple]] = defaultdict(set)  # A -> {(function, P)}: self.A = P
        for summary in project.files.values():
            for passes in summary.keyword_passes.values():
                for name, kinds in passes.items():
                    self._names[name].update(kinds)
            for name, kinds in summary.attr_kinds.items():
                self._attrs[name].update(kinds)
            for scope_name, attr, value in summary.attr_params:
                node = function_of(summary, scope_name)
                if node is None:
                    self._attrs[attr].add(OTHER)
                elif not self._uncalled_setter(node):
                    self._attr_params[attr].add((node, value))
            for qualname, scope in summary.scopes.items():
                if scope.signature and not self._uncalled_setter((summary.path, qualname)):
                    for name in parameter_names(scope.signature):
                        self._defaults[name].add(default_kind(scope, name))
        # (callee node, P) -> kinds passed at its resolved calls; "@": a caller's parameter,
        # listed in self._from.
        self._passed: dict[tuple, set[str]] = defaultdict(set)
        self._from: dict[tuple, set[tuple]] = defaultdict(set)
        # the same with the caller: (callee node, P) -> {(caller node, kind or "@Q")}
        self.passed_by: dict[tuple, set[tuple]] = defaultdict(set)
        self._callees: set[tuple] = set()  # functions some resolved call with arguments reaches
        for summary in project.files.values():
            for scope_name, target, places in summary.positional_passes:
                self._record(summary, scope_name, target, places)
        # A function that passes its own P on by keyword (P=P) hands on what its resolved
        # calls gave it: those values reach every parameter named P.
        for summary in project.files.values():
            for scope_name, name in summary.forwards:
                node = function_of(summary, scope_name)
                if node is not None:
                    self._names[name].update(self._handed(node, name, set()))
        self._memo = CycleMemo()  # (function, parameter, kinds) -> _holds

    def _handed(self, node, name: str, seen: set) -> set[str]:
        """The kinds function ``node``'s parameter ``name`` may hold from its resolved calls
        and its default, following callers that pass their own same-named parameter."""
        if (node, name) in seen:
            return set()
        seen.add((node, name))
        kinds = self._passed.get((node, name), set()) - {"@"}
        default = default_kind(self.project.files[node[0]].scopes[node[1]], name)
        if default != NO_DEFAULT:
            kinds.add(default)
        for caller, q in self._from.get((node, name), ()):
            function = function_of(self.project.files[caller[0]], caller[1])
            kinds |= self._handed(function, q, seen) if q == name and function is not None else {OTHER}
        return kinds

    # ------------------------------------------------------------------ per file
    def _record(self, summary, scope_name, target, places) -> None:
        scope = summary.scopes.get(scope_name)
        class_name = scope.class_name if scope else None
        callee, offset = self.project.resolve(target, summary, class_name), 0
        if callee is None and target.endswith(".apply"):  # Fn.apply(...) runs Fn.forward(ctx, ...)
            callee, offset = self.project.resolve(target[:-len("apply")] + "forward", summary, class_name), 1
        if callee is None:
            return
        self._callees.add(callee)
        signature = self.project.files[callee[0]].scopes[callee[1]].signature
        if not signature:
            return
        names, _required, _flags, kwonly = signature.split("|")
        positional = names.split(",")[offset:] if names else []
        keyword_only = kwonly.split(",") if kwonly else []
        caller = (summary.path, scope_name)
        given = set()
        head, _, keywords = places.partition(";")
        for index, place in enumerate(head.split(",") if head else []):
            if place == "*":  # *args: any of the remaining places
                for name in positional[index:]:
                    self._passed[(callee, name)].add(OTHER)
                    given.add(name)
                break
            if index >= len(positional):
                break
            given.add(positional[index])
            self._note(callee, positional[index], place, caller)
        for entry in keywords.split(",") if keywords else []:
            if entry in ("**", "**@"):  # a mapping's keys: any parameter not passed otherwise
                for name in positional + keyword_only:
                    if name not in given:
                        # the caller's own **kwargs: what its callers passed as `name=`
                        self._note(callee, name, f"@{name}" if entry == "**@" else OTHER, caller)
                continue
            name, _, place = entry.partition("=")
            given.add(name)
            self._note(callee, name, place, caller)

    def _note(self, callee, name, place, caller) -> None:
        self.passed_by[(callee, name)].add((caller, place))
        if place.startswith("@"):
            self._passed[(callee, name)].add("@")
            self._from[(callee, name)].add((caller, place[1:]))
        else:
            self._passed[(callee, name)].add(place)

    def _uncalled_setter(self, node) -> bool:
        """A ``set_*`` method no code of the project calls (but from itself): its parameter
        is handed nothing, and what it assigns is never assigned."""
        method = node[1].rsplit(".", 1)[-1]
        return method.startswith("set_") and method not in self._setters_called

    # ------------------------------------------------------------------ queries
    def dead_guard(self, summary, candidate) -> str:
        """Why the candidate's guard never holds in the repository ("" when it may)."""
        for entry in candidate.guarded_by:
            why = self.dead_entry(summary, candidate.scope, entry)
            if why:
                return why
        return ""

    def dead_entry(self, summary, scope: str, entry: str) -> str:
        """Why guard ``entry`` ("P", "P+", "self.A", "self.A+") of code in ``scope`` never
        holds in the repository ("" when it may)."""
        name = entry.rstrip("+")
        if name.startswith("self."):
            attr = name[len("self."):]
            if self._attr_holds(attr, NONE_KINDS):
                return (f" (dead in this repository: `{name}` is set only from a parameter no "
                        f"call the project makes passes anything but None)")
            if entry.endswith("+") and self._attr_holds(attr, FALSE_KINDS):
                return (f" (dead in this repository: `{name}` is set only to false values; no "
                        f"construction or setter call the project makes changes it)")
            return ""
        function = function_of(summary, scope)
        if function is None:
            return ""
        if self._holds(function, name, NONE_KINDS):
            return (f" (dead in this repository: no call the project makes passes `{name}` "
                    f"anything but None)")
        if entry.endswith("+") and self._holds(function, name, FALSE_KINDS):
            return (f" (dead in this repository: no call the project makes passes `{name}` "
                    f"anything but None or a false value)")
        return ""

    def _attr_holds(self, attr: str, kinds: frozenset) -> bool:
        """A constructor flag (``self.A = A``, the parameter defaulting to None/false) that
        every assignment anywhere leaves of ``kinds``. ``training`` is torch's to set."""
        params = self._attr_params.get(attr, ())
        if not any(value.startswith("@") for _node, value in params) or attr in TORCH_SET_ATTRIBUTES \
                or not self._attrs.get(attr, set()) <= kinds:
            return False
        return all(self._holds(node, value[1:], kinds) if value.startswith("@") else value in kinds
                   for node, value in params)

    def handed_device_tensor(self, summary, scope: str, name: str) -> bool:
        """Does some resolved call hand parameter ``name`` of the function of ``scope`` a
        tensor made on the device (``_top_idx(scores, capacity)`` with ``capacity =
        torch.max(counts)``), directly or through callers passing their own ``name`` on?"""
        function = function_of(summary, scope)
        return function is not None and DEVICE_TENSOR in self._handed(function, name, set())

    def python_valued(self, summary, candidate) -> str:
        """Why the parameters a candidate took for tensors by guess hold Python values
        ("" when they may not)."""
        function = function_of(summary, candidate.scope)
        names = candidate.rests_on
        if function is None or not names or not all(
                self._holds(function, name, PYTHON_KINDS) for name in names):
            return ""
        shown = ", ".join(f"`{n}`" for n in names)
        return (f" ({shown}: every call in the project passes a Python value (a literal, a setting "
                f"such as `cfg.x` or `self.training`, `float(...)`) or the caller's own same-named "
                f"parameter, no tensor)")

    def _holds(self, node, name: str, kinds: frozenset, depth: int = 0) -> bool:
        """Is every value the project hands parameter ``name`` of function ``node`` of
        ``kinds`` (see the module doc for what must be seen)?"""
        if depth >= 8:
            self._memo.cut()
            return False
        return self._memo.ask((node, name, kinds), lambda: self._holds_now(node, name, kinds, depth))

    def _holds_now(self, node, name: str, kinds: frozenset, depth: int) -> bool:
        scope = self.project.files[node[0]].scopes[node[1]]
        default = default_kind(scope, name)
        named = self._names.get(name, set())
        passed = self._passed.get((node, name), set())
        # A module-level function is called by name, an autograd.Function's forward through
        # Fn.apply: their resolved calls are their calls, and keywords passed elsewhere go
        # to other functions.
        module_level = (scope.class_name is None and scope.parent == "<module>") \
            or scope.signature.startswith("ctx,")
        seen = passed - {"@"} if module_level else named | passed - {"@"}
        if kinds is PYTHON_KINDS:
            # evidence of a flag or a number, and every function's default a literal or none;
            # a parameter only ever handed its callers' own (std -> Fn.apply(x, std)) takes
            # the evidence of those callers, which the recursion below asks for
            forwarded_only = not seen and "@" in passed and bool(self._from.get((node, name)))
            ok = (bool(seen & PYTHON_EVIDENCE) or forwarded_only) and self._defaults[name] <= PYTHON_DEFAULTS
        elif module_level and not passed and node in self._callees:
            # called by the project, never with P (nor P= anywhere): P is always its default
            ok = default in kinds and named <= kinds
        else:
            # a pass seen; a method's calls may go unresolved: every function with a
            # parameter of that name defaults it to a value of kinds
            ok = bool(passed if module_level else named | passed) and default in kinds | {NO_DEFAULT} \
                and (module_level or self._defaults[name] <= kinds)
        return ok and seen <= kinds and all(
            (caller_fn := function_of(self.project.files[caller[0]], caller[1])) is not None
            and self._holds(caller_fn, q, kinds, depth + 1)
            for caller, q in self._from.get((node, name), ()))


def default_kind(scope, name: str) -> str:
    return NONE if name in scope.none_params else scope.defaults.get(name, NO_DEFAULT)


def parameter_names(signature: str) -> list[str]:
    names, _required, _flags, kwonly = signature.split("|")
    return [n for n in (*names.split(","), *kwonly.split(",")) if n]


def _by_name(place: str, name: str) -> str:
    if place.startswith("@"):
        return FORWARDED if place[1:] == name else OTHER
    return place


def function_of(summary, qualname: str):
    """The function a scope belongs to (a step loop's enclosing def)."""
    scope = summary.scopes.get(qualname)
    while scope is not None and scope.qualname.rsplit(".", 1)[-1].startswith("<") and scope.parent:
        scope = summary.scopes.get(scope.parent)
    return (summary.path, scope.qualname) if scope is not None and scope.signature else None

