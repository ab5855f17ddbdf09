"""Guards that no call in the project's XLA or compiled programs satisfies.

:mod:`detective.lint.arg_facts` asks what *any* call of the project passes a parameter.
fairseq's ``SequenceGenerator._generate`` takes ``prefix_tokens``, and
``generate.py --prefix-size`` passes a tensor: the prefix path is live in the repository.
But the ``--tpu`` trainer reaches the generator only through ``eval_bleu``, which calls
``inference_step(..., prefix_tokens=None)``, and ``generate`` hands it on through
``**kwargs``. On the programs that use torch_xla or compile, the code under
``if prefix_tokens is not None:`` never runs.

The same name-keyed fact as arg_facts', limited to the scopes :mod:`detective.lint.programs`
finds those programs can run (``reached``): every keyword ``P=v`` and dict key ``"P"``
written in a reached scope, and every argument a reached scope passes at ``P``'s place in
a call the graph resolves, is ``None`` (a false value for ``if P:``) or a same-named
parameter passed on (``P=P``, ``f(x, P)``, the caller's own ``**kwargs``); a key ``"P"``
read there poisons it (the mapping may be ``**``-expanded). Some such value must be seen,
and every reached function with a parameter ``P`` that a call by method name may enter
must default it so (a call on a receiver no file can name may pass anything by place:
``self.ema.step(model, self.get_num_updates())`` hands ``updates`` a number unseen). When
no reached scope passes ``P`` at all, every reached function with a ``P`` must be one that
only resolved calls enter (a module-level function, a private method only ``self`` calls),
and keeps its default: fairseq's ``LSTMEncoder`` calls ``convert_padding_direction(src,
pad, left_to_right=True)``; only a unit test passes ``right_to_left=True``.
A private helper only ``self`` calls (``self._prefix_tokens(..., prefix_tokens, ...)``) is
entered through resolved calls alone, so its parameter needs no default.

A finding reached only through such guarded calls, or under such a guard, is ``info``:
the project's own programs never run it; a user's program calling the API with a value
would.
"""

from __future__ import annotations

from collections import defaultdict

from detective.lint.arg_facts import (FALSE_KINDS, NONE_KINDS, ArgFacts, default_kind, function_of,
                                      parameter_names)
from detective.lint.xla_params import FORWARDED, OTHER

Node = tuple[str, str]

_ENTERED_BY_CALL = ("forward", "__call__")  # run by nn.Module.__call__, never by name


class ProgramGuards:
    """Parameter guards dead in the reached scopes of one project's programs."""

    def __init__(self, project, facts: ArgFacts, reached: set[Node], names_called: set[str]):
        """``reached``: scopes the XLA and compiled programs may run; ``names_called``: method
        names those scopes call on receivers no file can name."""
        self.project = project
        self.reached = reached
        self._names_called = names_called
        self._kinds: dict[str, set[str]] = defaultdict(set)  # P -> kinds handed to a P in reach
        self._defaults: dict[str, set[str]] = defaultdict(set)  # P -> defaults where unresolved calls enter
        for summary in project.files.values():
            for scope_name, passes in summary.keyword_passes.items():
                if self._in_reach(summary, scope_name):
                    for name, kinds in passes.items():
                        self._kinds[name].update(kinds.replace(FORWARDED, ""))
        for (callee, name), places in facts.passed_by.items():
            for caller, place in places:
                if caller in self.reached or function_of(project.files[caller[0]], caller[1]) in reached:
                    if place.startswith("@"):
                        if place[1:] != name:
                            self._kinds[name].add(OTHER)
                    else:
                        self._kinds[name].add(place)
        self._every_default: dict[str, set[str]] = defaultdict(set)  # P -> defaults of every reached P
        self._unresolved: set[str] = set()  # P of a reached method calls by name may enter
        for node in reached:
            scope = project.files[node[0]].scopes.get(node[1])
            if scope is None or not scope.signature:
                continue
            resolved_only = self._entered_by_resolved_calls(scope)
            module_level = scope.class_name is None and scope.parent == "<module>"
            for name in parameter_names(scope.signature):
                self._every_default[name].add(default_kind(scope, name))
                if not resolved_only:
                    self._defaults[name].add(default_kind(scope, name))
                if not resolved_only and not module_level:
                    self._unresolved.add(name)
        self._memo: dict[str, str] = {}
        self._edges: set[tuple[Node, Node]] | None = None

    def _in_reach(self, summary, scope_name: str) -> bool:
        return (summary.path, scope_name) in self.reached or function_of(summary, scope_name) in self.reached

    def _entered_by_resolved_calls(self, scope) -> bool:
        """A private method no reached scope calls by name: only ``self._m(...)`` enters it."""
        name = scope.qualname.rsplit(".", 1)[-1]
        return scope.class_name is not None and name.startswith("_") and not name.startswith("__") \
            and name not in self._names_called and name not in _ENTERED_BY_CALL

    def dead(self, entry: str) -> bool:
        """Does no reached call satisfy guard ``entry`` ("P": P given; "P+": P true)?"""
        if entry.startswith("self."):
            return False  # attributes: arg_facts' repository-wide fact only
        if entry not in self._memo:
            name = entry.rstrip("+")
            kinds = FALSE_KINDS if entry.endswith("+") else NONE_KINDS
            seen, defaults = self._kinds.get(name, set()), self._defaults.get(name, set())
            if seen:
                self._memo[entry] = seen <= kinds and defaults <= kinds
            else:  # never passed: every reached P keeps its default, if calls to them are all seen
                every = self._every_default.get(name, set())
                self._memo[entry] = bool(every) and every <= kinds and name not in self._unresolved
        return self._memo[entry]

    def why(self, entry: str) -> str:
        """The condition guard ``entry`` needs, and why the programs never meet it."""
        name = entry.rstrip("+")
        value = "anything but None or a false value" if entry.endswith("+") else "anything but None"
        state = "is set" if entry.endswith("+") else "is given"
        return (f"`{name}` {state}, and no call in this project's XLA or compiled programs "
                f"passes it {value}")

    def dead_edges(self) -> dict[tuple[Node, Node], str]:
        """Calls from reached scopes under a guard no reached call satisfies -> the guard."""
        if self._edges is not None:
            return self._edges
        edges = {}
        project = self.project
        for node in self.reached:
            summary = project.files[node[0]]
            scope = summary.scopes[node[1]]
            for call in scope.calls:
                if call.guard and not call.kind and self.dead(call.guard):
                    callee = project.resolve(call.target, summary, scope.class_name)
                    if callee is not None:
                        edges[(node, callee)] = call.guard
        self._edges = edges
        return edges

    def dead_candidate(self, summary, candidate) -> str:
        """Why a candidate under a parameter guard never runs in the programs ("" if it may)."""
        if not candidate.guarded_by or not self._in_reach(summary, candidate.scope):
            return ""
        return next((f"runs only when {self.why(entry)}" for entry in candidate.guarded_by
                     if self.dead(entry)), "")
