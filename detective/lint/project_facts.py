"""Facts about the whole project that weigh a finding: its targets and optional keys.

Like Ruff's ``target-version``: a finding that costs only on a backend the project does not
target is real but does not matter here, so it is ``info``. The facts come from the per-file
summaries (``FileSummary.imports_xla`` and ``FileSummary.facts``), never from a second pass
over the sources, so a run answered from the cache pays nothing for them.

- Targets: ``xla`` when some file imports torch_xla, ``compile`` when some file uses
  ``torch.compile``/``torch._dynamo``/``torch.compiler``, both when neither is found (code
  about to be ported); ``targets = [...]`` in ``[tool.detective]`` overrides.
- Optional keys: ``optional-key:<k>`` when some file removes key ``k`` from a mapping
  (``del m["k"]``, ``m.pop("k")``) or sets it only under a condition on data (not on
  ``self.*`` configuration, not on the key's own presence).
- Keys set: ``key-set:<k>`` when some file writes key ``k`` into a mapping (``m["k"] = ...``,
  ``{"k": ...}``, ``dict(k=...)``): the code that builds the batches (a collater) is in view.

- Partial view: ``view:partial`` when the run lints a few files or a package directory
  rather than a project directory (``.``, ``src/``, or one named with ``--project``).

A need written ``!<fact>`` holds when the fact is absent. RC004 on a batch mapping stays a
warning on a key that no file of the run sets (``!key-set:<k>``) and in a partial view: the
collater that decides the batch's keys is not in view.

Only the files the run sees count: linting a few files alone (without ``--project``) finds
the facts of those files only; ``targets`` in the config pins them.
"""

from __future__ import annotations

from dataclasses import dataclass

from detective.lint.model import Candidate, FileSummary

TARGETS = ("xla", "compile")
TARGET_NAMES = {"xla": "torch_xla", "compile": "torch.compile"}
COMPILE_FACT = "target:compile"
OPTIONAL_KEY = "optional-key:"
KEY_SET = "key-set:"
ABSENT = "!"  # a need that holds when the fact is absent
PARTIAL_VIEW = "view:partial"


@dataclass(frozen=True)
class ProjectFacts:
    targets: tuple[str, ...] = TARGETS
    how: str = "default"  # "config" | "found" | "default" (neither found: both)
    facts: frozenset[str] = frozenset()

    def weigh(self, candidate: Candidate) -> tuple[str, str]:
        """The candidate's severity in this project and a note for its message ("" if none)."""
        if candidate.severity != "warning":
            return candidate.severity, ""
        if candidate.costs_on and not set(candidate.costs_on) & set(self.targets):
            costs = " or ".join(TARGET_NAMES[t] for t in candidate.costs_on)
            targets = " and ".join(TARGET_NAMES[t] for t in self.targets)
            why = "configured" if self.how == "config" else "found"
            return "info", f" (costs only on {costs}; this project targets {targets}, {why})"
        if candidate.needs and not any(self._holds(n) for n in candidate.needs):
            keys = ", ".join(repr(n[len(OPTIONAL_KEY):]) for n in candidate.needs if n.startswith(OPTIONAL_KEY))
            if any(n.startswith(ABSENT + KEY_SET) for n in candidate.needs):
                return "info", (f" (the project sets {keys} but nothing removes it or sets it only for some "
                                "data: every batch of a run has the same key set)")
            return "info", (f" (nothing in the project removes {keys} or sets it only for some data: "
                            "the key set is fixed per call site)")
        return "warning", ""

    def _holds(self, need: str) -> bool:
        if need.startswith(ABSENT):
            return need[len(ABSENT):] not in self.facts
        return need in self.facts


def project_facts(summaries: list[FileSummary], configured: list[str] | None = None,
                  whole: bool = True) -> ProjectFacts:
    facts = frozenset(f for s in summaries for f in s.facts) | (frozenset() if whole else {PARTIAL_VIEW})
    if configured:
        return ProjectFacts(tuple(t for t in TARGETS if t in configured), "config", facts)
    found = tuple(t for t, hit in (("xla", any(s.imports_xla for s in summaries)),
                                   ("compile", COMPILE_FACT in facts)) if hit)
    return ProjectFacts(found, "found", facts) if found else ProjectFacts(TARGETS, "default", facts)
