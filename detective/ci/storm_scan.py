"""Where did a long run start storming? A linear scan of its steps (`detective bisect-steps`)
for the first step from which new programs keep coming.

A run *settles* when it goes ``quiet`` steps in a row without a new program. Only steps from
the warm-up on count (the first programs of a run are expected, not a storm). Walking back from
the last new program, the storm is the stretch of compile steps with no such quiet gap between
them; its first step is where the growth began, and its first new program is the one to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StormFinding:
    storming: bool
    steps_recorded: int
    warmup: int = 0  # steps before this one may compile without counting
    storm_start: int | None = None  # first step of the unbroken compile stretch
    first_recompile_step: int | None = None
    first_recompile: dict | None = None  # the execution event (hash, site, cause)
    programs_in_storm: int = 0
    last_new_step: int | None = None
    settled_at: int | None = None
    compile_steps: list[int] = field(default_factory=list)

    def message(self, quiet: int) -> str:
        if self.steps_recorded == 0:
            return "the run recorded no steps"
        if not self.storming:
            if self.last_new_step is None:
                return (f"no new programs after warm-up (step {self.warmup} on) "
                        f"in {self.steps_recorded} steps")
            return (f"no storm: the program count settled after step {self.last_new_step} "
                    f"({self.steps_recorded - 1 - self.last_new_step} quiet steps to the end)")
        lines = [
            f"storm: new programs keep coming from step {self.storm_start} to the end of the run "
            f"({self.programs_in_storm} programs in {len(self.compile_steps)} compiling steps, "
            f"never {quiet} quiet steps in a row)",
        ]
        if self.first_recompile is not None:
            site = self.first_recompile.get("site") or {}
            where = f"{site.get('file')}:{site.get('line')} in {site.get('function')}" if site else "unknown site"
            lines.append(f"first recompile of the storm: step {self.first_recompile_step}, graph "
                         f"{self.first_recompile.get('graph_hash')} ({self.first_recompile.get('cause')}) "
                         f"triggered at {where}")
        return "\n".join(lines)


def find_storm(run, quiet: int = 5, warmup: int | None = None) -> StormFinding:
    """Scan a loaded run's complete steps; ``warmup`` defaults to the run's own."""
    steps = [s for s in run.step_events if s.get("complete", True)]
    warmup = (run.meta.get("warmup") or 0) if warmup is None else warmup
    finding = StormFinding(storming=False, steps_recorded=len(steps), warmup=warmup)
    compiling = [s["step"] for s in steps if s.get("new_programs") and s["step"] >= warmup]
    if not compiling:
        return finding
    finding.last_new_step = compiling[-1]
    if steps[-1]["step"] - compiling[-1] >= quiet:
        finding.settled_at = compiling[-1] + 1
        return finding
    start_index = len(compiling) - 1
    while start_index > 0 and compiling[start_index] - compiling[start_index - 1] <= quiet:
        start_index -= 1
    stretch = compiling[start_index:]
    finding.storming = True
    finding.storm_start = finding.first_recompile_step = stretch[0]
    finding.compile_steps = stretch
    finding.programs_in_storm = sum(s["new_programs"] for s in steps if s["step"] in set(stretch))
    news = [e for e in run.execution_events if e.get("new") and e.get("step") == stretch[0]]
    finding.first_recompile = news[0] if news else None
    return finding
