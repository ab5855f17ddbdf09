"""The compile-budget gate: does a recorded run stop compiling new programs after step N?

``evaluate(run, budget)`` is pure: a loaded run in, a verdict out. The verdict is
``unusable`` (exit 2) when the run cannot prove anything — it is missing, recorded no
steps, or never reached step N — because a gate must never pass on a run that did not
happen. A run that crashed is gated on the steps it recorded, and the verdict says it
ended early.
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
    max_new_programs: int = 0
    max_unique_programs: int | None = None
    max_compile_seconds: float | None = None
    min_cache_hit_rate: float | None = None  # persistent-cache loads / lookups (a warm restart)

    def describe(self) -> str:
        parts = []
        if self.after_step is not None:
            parts.append(f"at most {self.max_new_programs} new program(s) from step {self.after_step} on")
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
    new_programs: int
    compile_seconds: float
    sites: list[dict] = field(default_factory=list)  # {"file", "line", "function", "code"?, "kind"?}


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
    new_after: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def message(self) -> str:
        head = {PASS: "gate passed", FAIL: "gate FAILED", UNUSABLE: "gate cannot judge this run"}[self.status]
        lines = [f"{head}: {self.budget.describe()}"]
        lines += [f"  - {p}" for p in self.problems]
        for offence in self.offences[:MAX_LISTED_STEPS]:
            lines.append(f"  step {offence.step}: {offence.new_programs} new program(s), "
                         f"{offence.compile_seconds:.2f} s compiling")
            for site in offence.sites:
                lines.append(f"      {_site_text(site)}")
        if len(self.offences) > MAX_LISTED_STEPS:
            hidden = self.offences[MAX_LISTED_STEPS:]
            lines.append(f"  ... and {len(hidden)} more step(s) with {sum(o.new_programs for o in hidden)} "
                         "new program(s) (detective report shows them all)")
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


def evaluate(run, budget: Budget, attributions: dict[int, list[dict]] | None = None) -> Verdict:
    """Judge a loaded run (:func:`detective.runtime.record.load_run`) against a budget.

    ``attributions`` maps a step to source lines that explain its new programs (from
    the attribution report); without them the line that triggered each compile is shown.
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

    executions_by_step: dict[int, list[dict]] = {}
    for execution in run.execution_events:
        if execution.get("new"):
            executions_by_step.setdefault(execution["step"], []).append(execution)
    for step in steps:
        if budget.after_step is not None and step["step"] >= budget.after_step and step.get("new_programs"):
            sites = (attributions or {}).get(step["step"]) or [
                e["site"] for e in executions_by_step.get(step["step"], []) if e.get("site")
            ]
            verdict.offences.append(Offence(step["step"], step["new_programs"],
                                            step.get("compile_seconds") or 0.0, _unique(sites)))
    verdict.new_after = sum(o.new_programs for o in verdict.offences)
    verdict.status = PASS
    if verdict.new_after > budget.max_new_programs:
        verdict.problems.append(
            f"{verdict.new_after} new program(s) from step {budget.after_step} on "
            f"(allowed {budget.max_new_programs}) in step(s) {', '.join(str(o.step) for o in verdict.offences)}"
        )
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
    else:
        verdict.offences = [] if verdict.new_after == 0 else verdict.offences
    return verdict


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
