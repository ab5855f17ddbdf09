"""The compile-budget gate: does a recorded run stop compiling new programs after step N?

``evaluate(run, budget)`` is pure: a loaded run in, a verdict out. The verdict is
``unusable`` (exit 2) when the run cannot prove anything — it is missing, recorded no
steps, or never reached step N — because a gate must never pass on a run that did not
happen. A run that crashed is gated on the steps it recorded, and the verdict says it
ended early.

What exactly is counted (all in :func:`count_programs`), for each step from ``after_step`` on,
over the step's new programs (first compiles of a graph hash in this run):

- ``recompiles`` (budget ``max_new_programs``, default 0): a computation that compiled
  before compiles again with something changed — the same call stack (or, in a diagnose run,
  the same graph content) produced a different program earlier. New programs the tracer could
  not hash (torch_xla's debug output unavailable) are counted here too: nothing proves them
  harmless.
- ``new call sites`` (budget ``max_new_call_sites``, default unlimited): the first program of
  a computation not run before — an eval loop, a checkpoint, a final ``mesh_reduce``.
- ``optimizer warm-up`` (never counted): in a diagnose run, a program that differs from its
  call stack's previous one only inside torch's optimizer code, at that stack's first steps,
  and never again (:mod:`detective.report.warmup`); the evidence is printed in a note.

``max_unique_programs`` and ``max_compile_seconds`` cap the whole run's totals. How each
program was classified, and how sure that is (a count-mode run compares call stacks only), is
in :mod:`detective.report.callsites`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from detective.paths import short_path

PASS, FAIL, UNUSABLE = 0, 1, 2
MAX_LISTED_STEPS = 10  # a storm can compile on every step; the first ones tell the story


@dataclass(frozen=True)
class Budget:
    after_step: int | None  # None: only the run-wide caps below are checked
    max_new_programs: int = 0  # recompiles from after_step on (see the module doc)
    max_unique_programs: int | None = None
    max_compile_seconds: float | None = None
    min_cache_hit_rate: float | None = None  # persistent-cache loads / lookups (a warm restart)
    max_new_call_sites: int | None = None  # first programs of new call sites from after_step on

    def describe(self) -> str:
        parts = []
        if self.after_step is not None:
            parts.append(f"at most {self.max_new_programs} recompile(s) from step {self.after_step} on")
            if self.max_new_call_sites is not None:
                parts.append(f"at most {self.max_new_call_sites} new call site(s)")
        if self.max_unique_programs is not None:
            parts.append(f"at most {self.max_unique_programs} unique programs")
        if self.max_compile_seconds is not None:
            parts.append(f"at most {self.max_compile_seconds:g} s compiling")
        if self.min_cache_hit_rate is not None:
            parts.append(f"persistent-cache hit rate at least {self.min_cache_hit_rate:g}")
        return "; ".join(parts)


@dataclass
class Offence:
    step: int
    new_programs: int  # the programs of this step that count against the budget
    compile_seconds: float
    sites: list[dict] = field(default_factory=list)  # {"file", "line", "function", "code"?, "kind"?}
    kind: str = "recompile"  # "recompile" | "new call site"
    evidence: list[str] = field(default_factory=list)  # why each program got its kind, how sure


@dataclass
class Counts:
    """New programs from after_step on, by kind: lists of (step, ProgramClass or None)."""

    recompiles: list = field(default_factory=list)
    new_call_sites: list = field(default_factory=list)
    warmup: list = field(default_factory=list)


@dataclass
class Verdict:
    status: int  # PASS, FAIL or UNUSABLE
    budget: Budget
    problems: list[str] = field(default_factory=list)  # why it failed / is unusable
    notes: list[str] = field(default_factory=list)  # facts worth saying either way
    offences: list[Offence] = field(default_factory=list)
    steps_recorded: int = 0
    total_unique_programs: int = 0
    total_compile_seconds: float = 0.0
    new_after: int = 0  # recompiles from after_step on
    counts: Counts = field(default_factory=Counts)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def message(self) -> str:
        head = {PASS: "gate passed", FAIL: "gate FAILED", UNUSABLE: "gate cannot judge this run"}[self.status]
        lines = [f"{head}: {self.budget.describe()}"]
        lines += [f"  - {p}" for p in self.problems]
        for offence in self.offences[:MAX_LISTED_STEPS]:
            lines.append(f"  step {offence.step}: {offence.new_programs} {offence.kind}(s), "
                         f"{offence.compile_seconds:.2f} s compiling")
            for site in offence.sites:
                lines.append(f"      {_site_text(site)}")
            for why in offence.evidence[:2]:
                lines.append(f"      why: {why}")
        if len(self.offences) > MAX_LISTED_STEPS:
            hidden = self.offences[MAX_LISTED_STEPS:]
            lines.append(f"  ... and {len(hidden)} more step(s) with {sum(o.new_programs for o in hidden)} "
                         "program(s) (detective report shows them all)")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(f"  ({self.steps_recorded} steps recorded, {self.total_unique_programs} unique programs, "
                     f"{self.total_compile_seconds:.2f} s compiling)")
        return "\n".join(lines)


def _site_text(site: dict) -> str:
    where = f"{short_path(site.get('file'))}:{site.get('line')}"
    text = f"at {where}"
    if site.get("function"):
        text += f" in {site['function']}"
    if site.get("kind"):
        text = f"{site['kind']} {text}"
    if site.get("code"):
        text += f": {site['code']}"
    return text


def evaluate(run, budget: Budget, attributions: dict[int, list[dict]] | None = None, classes=None) -> Verdict:
    """Judge a loaded run (:func:`detective.runtime.record.load_run`) against a budget.

    ``attributions`` maps a step to source lines that explain its new programs (from
    the attribution report); without them the line that triggered each compile is shown.
    ``classes`` (recompile / new call site / warm-up per new program) are computed when not given.
    """
    steps = [s for s in run.step_events if s.get("complete", True)]
    verdict = Verdict(UNUSABLE, budget, steps_recorded=len(steps))
    verdict.total_unique_programs = sum(s.get("new_programs") or 0 for s in steps)
    verdict.total_compile_seconds = sum(s.get("compile_seconds") or 0.0 for s in steps)
    ended = ended_early(run)
    if ended:
        last = steps[-1]["step"] if steps else None
        when = f"after step {last}" if last is not None else "before any step completed"
        verdict.notes.append(f"the run ended early ({ended}) {when}; gating the steps it recorded")
    if not steps:
        verdict.problems.append("the run recorded no steps (no torch_xla.sync / mark_step / compiled call ran)")
        return verdict
    if budget.after_step is not None and steps[-1]["step"] < budget.after_step:
        verdict.problems.append(
            f"the run recorded steps 0..{steps[-1]['step']} only: it never reached step {budget.after_step}"
        )
        return verdict

    counts = count_programs(run, steps, budget.after_step, classes)
    verdict.counts = counts
    executions_by_step: dict[int, list[dict]] = {}
    for execution in run.execution_events:
        if execution.get("new"):
            executions_by_step.setdefault(execution["step"], []).append(execution)
    step_seconds = {s["step"]: s.get("compile_seconds") or 0.0 for s in steps}

    def offences(found: list, kind: str) -> list[Offence]:
        out: dict[int, Offence] = {}
        for step, item in found:
            offence = out.setdefault(step, Offence(step, 0, step_seconds.get(step, 0.0), kind=kind))
            offence.new_programs += 1
            if item is not None:
                offence.evidence.append(f"{item.kind} ({item.confidence}): {item.evidence}")
        for step, offence in out.items():
            triggered = [e for e in executions_by_step.get(step, []) if e.get("site")]
            if kind != "recompile":  # the attribution names recompiles' lines, not first graphs'
                offence.sites = _unique([e["site"] for e in triggered])
            else:
                offence.sites = _unique((attributions or {}).get(step) or [e["site"] for e in triggered])
        return sorted(out.values(), key=lambda o: o.step)

    verdict.offences = offences(counts.recompiles, "recompile")
    verdict.new_after = len(counts.recompiles)
    verdict.status = PASS
    if budget.after_step is not None and verdict.new_after > budget.max_new_programs:
        verdict.problems.append(
            f"{verdict.new_after} recompile(s) from step {budget.after_step} on "
            f"(allowed {budget.max_new_programs}) in step(s) {', '.join(str(o.step) for o in verdict.offences)}"
        )
    sites = offences(counts.new_call_sites, "new call site")
    if budget.after_step is not None and budget.max_new_call_sites is not None \
            and len(counts.new_call_sites) > budget.max_new_call_sites:
        verdict.problems.append(
            f"{len(counts.new_call_sites)} new call site(s) from step {budget.after_step} on "
            f"(allowed {budget.max_new_call_sites}) in step(s) {', '.join(str(o.step) for o in sites)}")
        verdict.offences = sorted(verdict.offences + sites, key=lambda o: (o.step, o.kind))
    elif counts.new_call_sites:
        verdict.notes.append(f"not counted: {len(counts.new_call_sites)} new call site(s) (first programs of "
                             f"computations not run before) in step(s) {_steps(sites)}")
    for step, item in counts.warmup:
        verdict.notes.append(f"not counted: step {step} optimizer warm-up: {item.evidence}")
    if any(item is not None and item.confidence != "sure" for _, item in counts.recompiles + counts.new_call_sites):
        verdict.notes.append("recompiles and new call sites were told apart by call stacks only (a count-mode run); "
                             "`detective run --mode diagnose` compares the graphs")
    if budget.max_unique_programs is not None and verdict.total_unique_programs > budget.max_unique_programs:
        verdict.problems.append(
            f"{verdict.total_unique_programs} unique programs (allowed {budget.max_unique_programs})")
    if budget.max_compile_seconds is not None and verdict.total_compile_seconds > budget.max_compile_seconds:
        verdict.problems.append(
            f"{verdict.total_compile_seconds:.2f} s compiling (allowed {budget.max_compile_seconds:g} s)")
    if budget.min_cache_hit_rate is not None:
        from detective.ci.cache_gate import cache_problem

        problem = cache_problem(run, steps, budget.min_cache_hit_rate)
        if problem:
            verdict.problems.append(problem)
    from detective.report.dynamo_steps import fallback_headline, fallbacks

    for fallback in fallbacks(run):  # torch.compile gave up on a function: it runs in eager from then on
        if budget.after_step is not None and fallback["step"] >= budget.after_step:
            verdict.problems.append(fallback_headline(fallback) + " (torch._dynamo.config.recompile_limit)")
        else:
            verdict.notes.append(fallback_headline(fallback))
    if verdict.problems:
        verdict.status = FAIL
    return verdict


def count_programs(run, steps: list[dict], after_step: int | None, classes=None) -> Counts:
    """The gate's counting, in one place (what is counted: see the module doc).

    ``classes`` are :func:`detective.report.callsites.classify_run`'s verdicts (computed here when
    not given). A step whose recorded ``new_programs`` exceeds its classified programs (no hash
    to classify by) counts the rest as recompiles.
    """
    from detective.report.callsites import NEW_CALL_SITE, WARMUP, classify_run

    if after_step is None:  # no per-step budget: nothing to count
        return Counts()
    if classes is None:
        classes = classify_run(run)
    by_step: dict[int, list] = {}
    for item in classes:
        by_step.setdefault(item.step, []).append(item)
    counts = Counts()
    for step in steps:
        number = step["step"]
        if number < after_step or not step.get("new_programs"):
            continue
        classified = by_step.get(number, [])
        for item in classified:
            bucket = {NEW_CALL_SITE: counts.new_call_sites, WARMUP: counts.warmup}.get(item.kind, counts.recompiles)
            bucket.append((number, item))
        counts.recompiles += [(number, None)] * max(0, step["new_programs"] - len(classified))
    return counts


def _steps(offences: list[Offence]) -> str:
    shown = ", ".join(str(o.step) for o in offences[:MAX_LISTED_STEPS])
    return shown + (f" and {len(offences) - MAX_LISTED_STEPS} more" if len(offences) > MAX_LISTED_STEPS else "")


def ended_early(run) -> str | None:
    """Why the traced process did not finish normally, or None."""
    status, exit_code = run.meta.get("status"), run.meta.get("exit_code")
    if status == "running":
        return "its record was never closed: the process was killed"
    if status == "no_torch_xla":
        return "torch_xla was never imported"
    if status == "failed" or exit_code not in (None, 0):
        return f"exit code {exit_code}"
    return None


def script_of(run) -> str | None:
    """The training script a run traced (for per-script budgets)."""
    for arg in run.meta.get("command") or []:
        if arg.endswith(".py"):
            return arg
    return None


def _unique(sites: list[dict]) -> list[dict]:
    seen, out = set(), []
    for site in sites:
        key = (site.get("file"), site.get("line"))
        if key not in seen:
            seen.add(key)
            out.append(site)
    return out


def budget_from_config(table: dict, script: str | None, overrides: dict) -> Budget:
    """Merge ``[tool.detective.gate]`` (with per-script sections) and command-line values."""
    def pick(source: dict) -> dict:
        normal = {k.replace("-", "_"): v for k, v in source.items() if k != "scripts"}
        return {k: v for k, v in normal.items() if k in Budget.__dataclass_fields__}

    merged = pick(table)
    scripts = table.get("scripts", {})
    if script is not None:
        for pattern, values in scripts.items():
            if script == pattern or script.endswith("/" + pattern) or os.path.basename(script) == pattern:
                merged.update(pick(values))
    merged.update({k: v for k, v in overrides.items() if v is not None})
    if "after_step" not in merged:
        if merged.get("min_cache_hit_rate") is None and merged.get("max_compile_seconds") is None:
            raise ValueError("no --after-step given and none in [tool.detective.gate]")
        merged["after_step"] = None  # a restart-time budget alone
    return Budget(**merged)
