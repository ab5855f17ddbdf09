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
  ``self.*`` configuration, not on the key's own presence; see ``rules/_key_facts.py``).
- Partial view: ``view:partial`` when the run lints a few files or a package directory
  rather than a project directory (``.``, ``src/``, one named with ``--project``, or the
  project the CLI finds for the paths it is given: :func:`detective.lint.discovery.default_project`).

- Torch version: ``torch>=2.12`` in a candidate's needs holds when the project runs that torch
  or a later one, or when the version is unknown. The version is ``torch-version`` in
  ``[tool.detective]``, else the installed torch's (read from its metadata by
  :meth:`detective.lint.environment.Environment.installed_version`, never imported). A cost
  recorded only from some torch on (RC104) is ``info`` on an earlier one.

- Facts of one file: ``file:<fact>`` holds for the candidates of the file that records it
  only (``file:xla-experimental:nonzero``: the file runs ``nonzero`` with a bounded dynamic
  shape, see ``rules/_bounded_dynamic.py``; RC005 on ``nonzero`` there is ``info``).

A need written ``!<fact>`` holds when the fact is absent. RC004 needs ``optional-key:<k>``
everywhere; in a partial view its ``info`` note says that the code that builds the inputs was
not read.

Only the files the run sees count: linting a few files alone (``--no-project``) finds
the facts of those files only; ``targets`` in the config pins them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from detective.lint.model import Candidate, FileSummary

TARGETS = ("xla", "compile")
TARGET_NAMES = {"xla": "torch_xla", "compile": "torch.compile"}
COMPILE_FACT = "target:compile"
OPTIONAL_KEY = "optional-key:"
ABSENT = "!"  # a need that holds when the fact is absent
PARTIAL_VIEW = "view:partial"
FILE_ONLY = "file:"  # a fact that holds in the file that records it only
XLA_EXPERIMENTAL = FILE_ONLY + "xla-experimental:"
TORCH_AT_LEAST = "torch>="  # a need on the torch version ("torch>=2.12")
ZERO_GRAD_KEEPS = "zero-grad:keeps-grads"  # a project zero_grad defaults set_to_none to False


def version_key(version: str) -> tuple[int, ...]:
    """``"2.12"`` -> ``(2, 12)``, so that 2.12 sorts after 2.9."""
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class ProjectFacts:
    targets: tuple[str, ...] = TARGETS
    how: str = "default"  # "config" | "found" | "default" (neither found: both)
    facts: frozenset[str] = frozenset()
    torch: str = ""  # "2.9": the torch the project runs; "" unknown
    torch_how: str = ""  # "configured" (torch-version) | "installed"

    def weigh(self, candidate: Candidate, below: str = "", file_facts=()) -> tuple[str, str]:
        """The candidate's severity in this project and a note for its message ("" if none).
        ``below``: what was measured on a torch earlier than a version the candidate needs;
        ``file_facts``: the facts of the candidate's own file (``FileSummary.facts``)."""
        if candidate.severity != "warning":
            return candidate.severity, ""
        own = [n for n in candidate.needs if n.lstrip(ABSENT).startswith(FILE_ONLY)]
        if own:
            failing = [n for n in own if (n.startswith(ABSENT)) == (n.lstrip(ABSENT) in file_facts)]
            ops = [n.lstrip(ABSENT)[len(XLA_EXPERIMENTAL):] for n in failing
                   if n.lstrip(ABSENT).startswith(XLA_EXPERIMENTAL)]
            if ops:
                return "info", (f" (this file sets or requires XLA_EXPERIMENTAL for {', '.join(ops)}: torch_xla "
                                "gives it a bounded dynamic shape, no new program when the count changes)")
            if failing:
                return "info", f" (in this file: {', '.join(failing)})"
            candidate = replace(candidate, needs=tuple(n for n in candidate.needs if n not in own))
        versions = [n[len(TORCH_AT_LEAST):] for n in candidate.needs if n.startswith(TORCH_AT_LEAST)]
        if versions:
            least = max(versions, key=version_key)
            if self.torch and version_key(self.torch) < version_key(least):
                return "info", (f" (recorded from torch {least} on; this project runs torch {self.torch}, "
                                f"{self.torch_how}{'; ' + below if below else ''})")
            rest = replace(candidate, needs=tuple(n for n in candidate.needs if not n.startswith(TORCH_AT_LEAST)))
            severity, note = self.weigh(rest)
            if severity == "warning" and not self.torch:
                note = (f" (recorded from torch {least} on; the torch version is unknown: torch is not "
                        f"installed here and [tool.detective] sets no torch-version){note}")
            return severity, note
        if candidate.costs_on and not set(candidate.costs_on) & set(self.targets):
            costs = " or ".join(TARGET_NAMES[t] for t in candidate.costs_on)
            targets = " and ".join(TARGET_NAMES[t] for t in self.targets)
            why = "configured" if self.how == "config" else "found"
            return "info", f" (costs only on {costs}; this project targets {targets}, {why})"
        if candidate.needs and not any(self._holds(n) for n in candidate.needs):
            if ABSENT + ZERO_GRAD_KEEPS in candidate.needs:
                return "info", (" (the optimizer is not built from a torch or library class here, and the "
                                "project defines a zero_grad whose set_to_none defaults to False: it may be "
                                "one of those)")
            keys = ", ".join(repr(n[len(OPTIONAL_KEY):]) for n in candidate.needs if n.startswith(OPTIONAL_KEY))
            if PARTIAL_VIEW in self.facts:
                return "info", (f" (nothing in view removes {keys} or sets it only for some data; only the files "
                                "named were read, and the code that builds the inputs may: lint them with "
                                "their project to know)")
            return "info", (f" (nothing in the project removes {keys} or sets it only for some data: every "
                            "call sees the same key set)")
        return "warning", ""

    def _holds(self, need: str) -> bool:
        if need.startswith(ABSENT):
            return need[len(ABSENT):] not in self.facts
        return need in self.facts


def project_facts(summaries: list[FileSummary], configured: list[str] | None = None,
                  whole: bool = True, torch: tuple[str, str] = ("", "")) -> ProjectFacts:
    """``torch``: (version, "configured" | "installed"), ("", "") when unknown."""
    facts = frozenset(f for s in summaries for f in s.facts) | (frozenset() if whole else {PARTIAL_VIEW})
    if configured:
        return ProjectFacts(tuple(t for t in TARGETS if t in configured), "config", facts, *torch)
    found = tuple(t for t, hit in (("xla", any(s.imports_xla for s in summaries)),
                                   ("compile", COMPILE_FACT in facts)) if hit)
    return ProjectFacts(found or TARGETS, "found" if found else "default", facts, *torch)
