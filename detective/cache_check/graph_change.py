"""Which line changed a program between the cold run and the warm restart.

The same IR alignment as a recompile inside one run (``detective.report``): the warm program is
diffed against the closest cold program from the same call site, and the first divergence is
mapped to a source line. Needs the IR of both, so both runs in diagnose mode.
"""

from __future__ import annotations

from detective.cache_check.verdict import GRAPH_CHANGED, Reason
from detective.report.attribution import Locator, causes_of, comparable, load_graph
from detective.report.diff import diff_graphs
from detective.report.sources import Resolver
from detective.runtime.cache_record import file_name

MAX_CANDIDATES = 32


def _new(run) -> list[dict]:
    return [e for e in run.execution_events if e.get("new")]


def graph_changes(cold, warm, missed: list[dict], misses: int, cold_files: set[str] | None) -> list[Reason]:
    """One reason per changed line (count: programs), or one per triggering site without IR."""
    if not missed:
        return [Reason(GRAPH_CHANGED, f"{misses} programs of the warm run had no file in the cache "
                       "(the graphs differ from the cold run's)", count=misses)]
    diagnose = all((r.meta.get("mode") == "diagnose") for r in (cold, warm))
    frames = [f["file"] for r in (cold, warm) for e in r.execution_events for f in (e.get("frames") or [])]
    locator = Locator(Resolver(frames, warm.meta.get("cwd")))
    cold_new = _new(cold)
    graphs: dict = {}
    found: dict[tuple, Reason] = {}
    for event in missed:
        reason = _explain(event, cold, warm, cold_new, locator, graphs, diagnose)
        if file_name(event.get("graph_hash")) in (cold_files or set()):
            reason.detail += " (its file was in the cache: another process wrote it meanwhile?)"
        key = (reason.file, reason.line, reason.detail)
        if key in found:
            found[key].count += 1
        else:
            found[key] = reason
    return list(found.values())


def _explain(event: dict, cold, warm, cold_new: list[dict], locator, graphs: dict, diagnose: bool) -> Reason:
    site = event.get("site") or {}
    where = f" (triggered at line {site.get('line')})" if site else ""
    if not diagnose:
        return Reason(GRAPH_CHANGED, "the warm run traced a graph the cold run did not" + where +
                      "; rerun with --mode diagnose to name the line that changed it",
                      site.get("file"), site.get("line"), 1)
    new_graph = _graph(warm, event, graphs)
    candidates = [e for e in cold_new if comparable(e, event)][-MAX_CANDIDATES:]
    best = None
    for earlier in candidates:
        old_graph = _graph(cold, earlier, graphs)
        if old_graph is None or new_graph is None:
            continue
        d = diff_graphs(old_graph, new_graph)
        if best is None or d.cost < best[1].cost:
            best = (earlier, d)
    if best is None:
        return Reason(GRAPH_CHANGED, "the warm run compiled a program from a call site the cold run never "
                      "compiled" + where, site.get("file"), site.get("line"), 1)
    causes = causes_of(best[1], locator)
    if not causes:
        return Reason(GRAPH_CHANGED, "same IR as the cold run's program, different hash: something outside the "
                      "graph that enters the key changed" + where, site.get("file"), site.get("line"), 1)
    cause = causes[0]
    src = cause.source
    code = src.code() if src is not None else None
    detail = f"{cause.kind} changed: {cause.before} → {cause.after}" + (f" at `{code.strip()}`" if code else "")
    if src is None:
        return Reason(GRAPH_CHANGED, detail + where, site.get("file"), site.get("line"), 1)
    return Reason(GRAPH_CHANGED, detail, src.file, src.line, 1)


def _graph(run, event: dict, graphs: dict):
    key = (run.dir, event.get("ir_path"))
    if key not in graphs:
        graphs[key] = load_graph(run.dir, event, {})
    return graphs[key]
