"""The per-step table of a Dynamo run, its fallback headlines, and its JSON section.

A run is a Dynamo run when its step events carry ``backend: "dynamo"``; a torch_xla run that also
compiled with ``torch.compile(backend="openxla")`` keeps the XLA table and gains the Dynamo
compiles as a section (``dynamo_compile`` events).
"""

from __future__ import annotations

from detective.paths import short_path
from detective.report.steps import count as _count
from detective.report.steps import ending, summarize, text_report

DYNAMO_STEP_KEYS = ("frames_compiled", "recompiles", "graph_breaks", "cache_limit_fallbacks", "failed_compiles",
                    "dynamo_seconds", "backend_seconds")
BOUNDARIES = "optimizer.step(), detective.step()"


def is_dynamo_run(run) -> bool:
    """The steps are Dynamo's (not an XLA run that also compiled with backend="openxla")."""
    if run.step_events:
        return run.step_events[0].get("backend") == "dynamo"
    return (run.start or {}).get("backend") == "dynamo"


def compile_events(run) -> list[dict]:
    """Every Dynamo compile of the main process, in order (as its own steps or on XLA steps)."""
    pid = run.pid
    return [e for e in run.events if e.get("pid") == pid and e.get("backend") == "dynamo"
            and e.get("event") in ("execution", "dynamo_compile")]


def graph_breaks(run) -> list[dict]:
    pid = run.pid
    return [e for e in run.events if e.get("event") == "graph_break" and e.get("pid") == pid]


def fallbacks(run) -> list[dict]:
    """One headline per function that fell back to eager after hitting the recompile limit."""
    out = []
    for e in compile_events(run):
        if not e.get("fallback"):
            continue
        function = (e.get("function") or {}).get("function") or e.get("graph_name") or "?"
        site = e.get("site") or e.get("function") or {}
        recompiles = max((e.get("compiles_of_function") or 1) - 1, 0)
        out.append({"function": function, "step": e["step"], "recompiles": recompiles,
                    "file": site.get("file"), "line": site.get("line"), "guard": (e.get("guards") or [None])[0]})
    return out


def fallback_headline(item: dict, show=short_path) -> str:
    where = f"{show(item['file'])}:{item['line']}" if item.get("file") else "?"
    return (f"{item['function']}: fell back to eager after {item['recompiles']} recompiles, "
            f"step {item['step']}, {where}")


def dynamo_rows(run) -> list[dict]:
    keys = ("step", "new_programs", "unique_programs", "compile_seconds", "complete") + DYNAMO_STEP_KEYS
    return [{k: s.get(k) for k in keys} for s in run.step_events]


def text_table(rows: list[dict], warmup: int | None) -> list[str]:
    head = ("step", "frames compiled", "recompiles", "graph breaks", "compile s", "fallbacks to eager")
    body = [(f"{r['step']}" + ("" if r["complete"] else "*"), str(r["frames_compiled"]), str(r["recompiles"]),
             str(r["graph_breaks"]), f"{r['compile_seconds']:.2f}", str(r["cache_limit_fallbacks"])) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    for r, cells in zip(rows, body):
        line = "  ".join(c.rjust(w) for c, w in zip(cells, widths))
        late = warmup is not None and r["step"] >= warmup
        if late and r["cache_limit_fallbacks"]:
            line += "  <- recompile limit: eager from here"
        elif late and r["recompiles"]:
            line += "  <- recompiled after warm-up"
        elif late and r["new_programs"]:
            line += "  <- new after warm-up"
        elif r.get("failed_compiles"):
            line += "  <- compile failed"
        lines.append(line)
    return lines


def dynamo_text_report(run) -> str:
    summary = summarize(run)
    rows = dynamo_rows(run)
    warmup = summary["warmup"]
    lines = [f"run {run.dir}  backend=dynamo  warm-up={warmup} steps"]
    compiles = compile_events(run)
    if not rows:
        lines.append(f"0 steps: no step boundary was reached ({BOUNDARIES})")
    else:
        lines += text_table(rows, warmup)
        if summary["unfinished_step"] is not None:
            lines.append(f"* step {summary['unfinished_step']} never reached a step boundary (the run ended first)")
        recompiles = sum(r["recompiles"] or 0 for r in rows)
        total = (f"{_count(summary['steps_completed'], 'step')}, "
                 f"{_count(sum(r['frames_compiled'] or 0 for r in rows), 'frame compile')} "
                 f"({recompiles} recompile{'' if recompiles == 1 else 's'}), "
                 f"{_count(sum(r['graph_breaks'] or 0 for r in rows), 'graph break')}, "
                 f"{summary['total_compile_seconds']:.2f} s compiling")
        late = [r for r in rows if warmup is not None and r["step"] >= warmup and r["new_programs"]]
        if warmup is not None:
            total += (f"; {sum(r['new_programs'] for r in late)} new after warm-up "
                      f"({'step' if len(late) == 1 else 'steps'} {', '.join(str(r['step']) for r in late)})"
                      if late else "; no new compiles after warm-up")
        lines.append(total)
    if not compiles and not graph_breaks(run):
        lines.append("nothing compiled: the command never ran a torch.compile'd function")
    for item in fallbacks(run):
        lines.append(fallback_headline(item))
    end = ending(run, summary)
    if end:
        lines.append(end)
    return "\n".join(lines)


def openxla_section(run) -> list[str]:
    """For an XLA run that also compiled with Dynamo: one line per Dynamo compile."""
    compiles = compile_events(run)
    if not compiles:
        return []
    lines = [f"torch.compile (Dynamo): {_count(len(compiles), 'frame compile')}, "
             f"{sum(bool(e.get('recompile')) for e in compiles)} recompiles, "
             f"{_count(len(graph_breaks(run)), 'graph break')}"]
    for e in compiles:
        if e.get("recompile") or e.get("fallback"):
            site = e.get("site") or {}
            lines.append(f"  step {e['step']}: {e.get('kind') or 'recompile'} at {site.get('file')}:{site.get('line')}"
                         f": {(e.get('guards') or [''])[0]}")
    lines += [fallback_headline(item) for item in fallbacks(run)]
    return lines


def run_text_report(run, classes=None, all_steps: bool = False) -> str:
    """What `detective run` prints at the end: the table of whichever backend recorded the steps
    (``classes``, ``all_steps``: see :func:`detective.report.steps.text_report`)."""
    if is_dynamo_run(run):
        return dynamo_text_report(run)
    text = text_report(run, classes, all_steps)
    extra = openxla_section(run)
    return text + ("\n" + "\n".join(extra) if extra else "")


def dynamo_json(run) -> dict:
    """Extra keys of `detective report --format json` for runs with Dynamo compiles."""
    return {
        "backend": "dynamo" if is_dynamo_run(run) else "xla",
        "dynamo": {
            "steps": dynamo_rows(run) if is_dynamo_run(run) else [],
            "fallbacks": [dict(item, headline=fallback_headline(item)) for item in fallbacks(run)],
            "totals": (run.end or {}).get("metrics") if is_dynamo_run(run) else None,
            "graph_breaks": [{k: e.get(k) for k in ("step", "file", "line", "function", "code", "reason")}
                             for e in graph_breaks(run)],
            "compiles": len(compile_events(run)),
        },
    }
