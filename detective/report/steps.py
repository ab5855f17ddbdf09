"""The per-step table of a loaded run and its summary: facts, one summary line, text and JSON.

The one home of the table every command shows (`detective run`, `report`, the gate's context);
:mod:`detective.report.render` builds on it for the attributed report.
"""

from __future__ import annotations

from detective.runtime.record import STEP_COLUMNS

BOUNDARIES = "torch_xla.sync, xm.mark_step, the end of a torch_xla.compile call, or an MpDeviceLoader batch"
JSON_STEP_KEYS = tuple(STEP_COLUMNS[: STEP_COLUMNS.index("complete") + 1])  # the table's public columns


def summarize(run) -> dict:
    """Whole-run facts a reader wants next to the table."""
    steps = run.step_events
    warmup = run.meta.get("warmup")
    complete = [s for s in steps if s.get("complete", True)]
    late = [s for s in steps if warmup is not None and s["step"] >= warmup and s["new_programs"]]
    end = run.end
    return {
        "mode": run.meta.get("mode") or (run.start or {}).get("mode"),
        "warmup": warmup,
        "steps_completed": len(complete),
        "unfinished_step": next((s["step"] for s in steps if not s.get("complete", True)), None),
        "total_unique_programs": sum(s["new_programs"] for s in steps),
        "total_compile_seconds": sum(s["compile_seconds"] for s in steps),
        "programs_after_warmup": sum(s["new_programs"] for s in late),
        "late_steps": [s["step"] for s in late],
        "exit_code": run.meta.get("exit_code"),
        "status": run.meta.get("status"),
        "torch_xla_metrics": end["metrics"] if end else None,
        "imported_torch_xla": run.start is not None,
        "hashes": (run.start or {}).get("hashes"),
    }


def summary_line(summary: dict) -> str:
    """"12 steps, 3 unique programs, 1.20 s compiling": the run in one line."""
    return (f"{count(summary['steps_completed'], 'step')}, "
            f"{count(summary['total_unique_programs'], 'unique program')}, "
            f"{summary['total_compile_seconds']:.2f} s compiling")


def ending(run, summary: dict) -> str | None:
    """One sentence when the run did not end normally, else None."""
    code = summary["exit_code"]
    where = (
        f" during step {summary['unfinished_step']}"
        if summary["unfinished_step"] is not None
        else f" after {summary['steps_completed']} steps"
    )
    if summary["status"] == "running":
        return "run.json is provisional: `detective run` itself did not finish (killed?); showing what was recorded"
    if code is None or code == 0:
        if summary["imported_torch_xla"] and run.end is None:
            return "the traced process ended without writing its final event (killed?)" + where
        return None
    if code >= 128:
        return f"the run ended early: killed by signal {code - 128}{where}"
    return f"the run ended early: exit code {code}{where}"


def count(n: int, noun: str) -> str:
    """"1 step", "2 steps"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def step_rows(run) -> list[dict]:
    rows = [{k: s.get(k) for k in JSON_STEP_KEYS} for s in run.step_events]
    if any("cache" in s for s in run.step_events):  # a persistent cache was set up
        for row, s in zip(rows, run.step_events):
            row["cache"] = s.get("cache")
    return rows


def json_report(run) -> dict:
    summary = summarize(run)
    return {
        "steps": step_rows(run),
        "total_unique_programs": summary["total_unique_programs"],
        **{k: v for k, v in summary.items() if k != "total_unique_programs"},
        "run": run.dir,
        "ending": ending(run, summary),
        "warnings": run.warnings,
        "cache": cache_json(run),
    }


MAX_LISTED = 12  # step numbers named in one line; a storm lists its first ones


def step_list(steps: list[int], limit: int | None = MAX_LISTED) -> str:
    """"3, 5-9, 12": runs of consecutive steps as ranges, at most ``limit`` entries (None: all)."""
    runs: list[str] = []
    start = None
    for i, s in enumerate(steps):
        if start is None:
            start = s
        if i + 1 == len(steps) or steps[i + 1] != s + 1:
            runs.append(str(start) if start == s else f"{start}-{s}")
            start = None
    if limit is None or len(runs) <= limit:
        return ", ".join(runs)
    return ", ".join(runs[:limit]) + f" and {len(runs) - limit} more"


def step_marks(classes, warmup: int | None) -> dict[int, str]:
    """step -> "<- recompile" etc. for steps from ``warmup`` on whose new programs were classified."""
    marks: dict[int, list[str]] = {}
    for item in classes or ():
        if warmup is None or item.step >= warmup:
            kinds = marks.setdefault(item.step, [])
            if item.kind not in kinds:
                kinds.append(item.kind)
    return {step: "  <- " + ", ".join(kinds) for step, kinds in marks.items()}


def text_table(rows: list[dict], warmup: int | None, marks: dict[int, str] | None = None,
               all_steps: bool = True) -> list[str]:
    """The step table; unless ``all_steps``, quiet runs of steps collapse into one row each
    (:mod:`detective.report.compact`). ``marks`` replaces the generic "new after warm-up" tag."""
    from detective.report.compact import Span, compact, span_text

    head = ("step", "executions", "new programs", "unique programs", "compile s", "host transfers", "fallback ops")
    with_cache = any("cache" in r for r in rows)
    if with_cache:
        head += ("persistent cache",)
    shown = rows if all_steps else compact(rows)
    body = []
    for r in shown:
        if isinstance(r, Span):
            body.append((f"{r.first}–{r.last}", span_text(r)))
            continue
        body.append(
            (
                f"{r['step']}" + ("" if r["complete"] else "*"),
                str(r["executions"]),
                str(r["new_programs"]),
                str(r["unique_programs"]),
                f"{r['compile_seconds']:.2f}",
                str(r["host_transfers"]),
                str(r["fallback_ops"]),
            )
            + ((cache_cell(r.get("cache")),) if with_cache else ())
        )
    cells = [b for b in body if len(b) == len(head)]
    widths = [max(len(h), *(len(b[i]) for b in cells)) if cells else len(h) for i, h in enumerate(head)]
    widths[0] = max(widths[0], *(len(b[0]) for b in body))
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    for r, row_cells in zip(shown, body):
        if isinstance(r, Span):
            lines.append(f"{row_cells[0].rjust(widths[0])}  {row_cells[1]}")
            continue
        line = "  ".join(c.rjust(w) for c, w in zip(row_cells, widths))
        if marks is not None:
            line += marks.get(r["step"], "")
        elif warmup is not None and r["step"] >= warmup and r["new_programs"]:
            line += "  <- new after warm-up"
        lines.append(line)
    return lines


def after_warmup_text(classes, warmup: int) -> str:
    """"; after warm-up: 1 recompile (step 236), 3 new call sites (steps 235, 274-275)"."""
    from detective.report.callsites import NEW_CALL_SITE, RECOMPILE, WARMUP

    late = [c for c in classes if c.step >= warmup]
    if not late:
        return "; no new programs after warm-up"
    parts = []
    for kind in (RECOMPILE, NEW_CALL_SITE, WARMUP):
        steps = sorted({c.step for c in late if c.kind == kind})
        n = sum(c.kind == kind for c in late)
        if n:
            parts.append(f"{count(n, kind)} ({'step' if len(steps) == 1 else 'steps'} {step_list(steps)})")
    sure = {c.confidence for c in late}
    how = "" if sure == {"sure"} else " (from call stacks: likely)" if sure == {"likely"} else " (some from call stacks only)"
    return f"; after warm-up: {', '.join(parts)}{how}"


def text_report(run, classes=None, all_steps: bool = False) -> str:
    """The step table and its summary line. ``classes``: the run's classified new programs
    (:func:`detective.report.callsites.classify_run`); computed when not given."""
    summary = summarize(run)
    rows = step_rows(run)
    warmup = summary["warmup"]
    lines = [f"run {run.dir}  mode={summary['mode']}  warm-up={warmup} steps"]
    if not summary["imported_torch_xla"]:
        lines.append("nothing traced: the command never imported torch_xla")
    elif not rows:
        lines.append(f"0 steps: no graph ran and no step boundary was reached ({BOUNDARIES})")
    else:
        if classes is None:
            from detective.report.callsites import classify_run

            classes = classify_run(run)
        classified = sum(s["new_programs"] for s in run.step_events) == len(classes) and bool(classes)
        marks = step_marks(classes, warmup) if classified else None
        lines += text_table(rows, warmup, marks, all_steps)
        if summary["steps_completed"] == 0:
            lines.append(f"0 steps completed: the script never reached a step boundary ({BOUNDARIES})")
        if summary["unfinished_step"] is not None:
            lines.append(f"* step {summary['unfinished_step']} never reached a step boundary (the run ended first)")
        total = summary_line(summary)
        if warmup is not None and classified:
            total += after_warmup_text(classes, warmup)
        elif warmup is not None:
            late, late_steps = summary["programs_after_warmup"], summary["late_steps"]
            total += (
                f"; {late} new after warm-up ({'step' if len(late_steps) == 1 else 'steps'} "
                f"{step_list(late_steps)})"
                if late
                else "; no new programs after warm-up"
            )
        lines.append(total)
        lines += cache_lines(run)
        if summary["hashes"] is False:
            lines.append("note: torch_xla's debug output was unavailable; counts come from its metrics only")
    end = ending(run, summary)
    if end:
        lines.append(end)
    return "\n".join(lines)


def cache_cell(cache: dict | None) -> str:
    """A step's persistent-cache lookups: '2 loaded', '1 miss', '3 load failed', '-'."""
    if not cache:
        return "-"
    parts = [f"{cache[key]} {label}" for key, label in
             (("hits", "loaded"), ("misses", "miss"), ("deserialize_failures", "load failed")) if cache.get(key)]
    return ", ".join(parts) or "-"


def cache_lines(run) -> list[str]:
    """One line about the persistent cache, and torch_xla's reason when files did not load."""
    from detective.runtime.cache_summary import run_cache

    cache = run_cache(run)
    if not cache or not cache.get("path"):
        return []
    totals = cache.get("totals") or {}
    counts = cache_cell(totals)
    lines = [f"persistent cache {cache['path']}{' (read-only)' if cache.get('read_only') else ''}: "
             + (counts if counts != "-" else "no lookups")]
    for message in cache.get("messages") or []:
        lines.append(f"  torch_xla: {message['text']} (x{message['count']})")
    return lines


def cache_json(run) -> dict | None:
    """run.json's cache section, plus what happened to each program (with torch_xla's message
    when its load failed and the run saw exactly one kind of failure message)."""
    from detective.runtime.cache_summary import run_cache

    cache = run_cache(run)
    if not cache:
        return None
    messages = cache.get("messages") or []
    only = messages[0]["text"] if len(messages) == 1 else None
    programs = [{"step": e["step"], "graph_hash": e.get("graph_hash"), "cache": e["cache"],
                 "message": only if e["cache"] == "load-failed" else None}
                for e in run.execution_events if "cache" in e]
    return {**cache, "programs": programs}
