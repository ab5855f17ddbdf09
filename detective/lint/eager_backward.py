"""The backward of an autograd Function whose forward breaks the graph runs eagerly under
torch.compile.

Dynamo traces ``Fn.apply(...)`` by tracing ``Fn.forward`` and ``Fn.backward`` together; when
the forward reads a tensor on the host (``.tolist()``, ``if t.any():``: a graph break), the
whole ``apply`` falls back to eager, and autograd later runs ``backward`` eagerly too
(compiled autograd is opt-in). What ``backward`` reads then costs only on torch_xla, where the
backward is traced like everything between syncs. RWKV-v8's ROSA_1bit: the forward's
``.tolist()`` is reported; the host reads in its backward cost nothing under torch.compile.

Decided across files (the class kind comes from the hierarchy), from the candidates the file
recorded: no second walk.
"""

from __future__ import annotations

from dataclasses import replace

# Candidates that break a torch.compile graph where they are.
GRAPH_BREAKS = frozenset({"RC001", "RC002"})
NOTE = (" (in the backward of an autograd Function whose forward breaks the graph: under "
        "torch.compile the Function runs eagerly, backward included)")


class EagerBackwards:
    def __init__(self, project):
        self.project = project
        self._breaking: dict[str, frozenset[str]] = {}  # path -> scopes of forwards that break

    def weigh(self, summary, candidate):
        """The candidate with its costs narrowed to torch_xla when it lies in such a
        backward, with a note for its message; else the candidate and ""."""
        scope = summary.scopes.get(candidate.scope)
        if scope is None or not candidate.scope.endswith(".backward") or scope.class_name is None:
            return candidate, ""
        forward = candidate.scope[:-len("backward")] + "forward"
        if forward not in self._breaks(summary) \
                or self.project.class_kind((summary.path, scope.class_name)) != "function":
            return candidate, ""
        if "xla" not in (candidate.costs_on or ("xla",)):
            return replace(candidate, severity="info"), NOTE  # a cost under torch.compile only: none
        return replace(candidate, costs_on=("xla",)), NOTE

    def _breaks(self, summary) -> frozenset[str]:
        found = self._breaking.get(summary.path)
        if found is None:
            found = self._breaking[summary.path] = frozenset(
                c.scope for c in summary.candidates
                if c.code in GRAPH_BREAKS and c.severity == "warning" and c.scope.endswith(".forward")
                and "compile" in (c.costs_on or ("compile",)) and not c.rests_on and not c.guarded_by)
        return found
