"""Why did a step compile a new program? Attribute each new program to a source line.

For every new program of a ``diagnose`` run: take the earlier graphs from the same call site
(the same user frame that triggered execution, or the same ``torch_xla.compile`` name), diff
the new IR against each and keep the closest one (as JAX's explain_cache_misses does), then
classify the first divergence and map it to a line:

- ``shape``: a graph input's shape changed (the line is where the tensor was made);
- ``constant``: a baked-in value changed: a node's output shape changed while its inputs did not
  (slice bounds, sizes from Python ints), or a special scalar 0/1 became a number or back;
- ``structure``: ops were added or removed (a branch, an optional batch key);
- ``host-sync split``: a value read (``.item()``, ``.cpu()``, printing a tensor) cut the step
  into graphs it did not have before; the read's frame is the answer;
- ``new call site``: nothing comparable ran before (not a recompile, but listed);
- ``unknown``: the graph's IR file is missing; only the triggering line is known.
"""

from __future__ import annotations

import os
from detective.report.diff import Change, GraphDiff, diff_graphs, summarize_ops
from detective.report.ir import Graph, Node, read_graph
from detective.report.model import (
    CONSTANT, NEW_SITE, SHAPE, SPLIT, STRUCTURE, UNKNOWN, Attribution, Cause, HostSync, RunAttribution,
)
from detective.report.sources import (
    VALUE_READ, Resolver, Source, enclosing_branch, names_assigned_before, python_values_feeding,
)

_PRIORITY = {SHAPE: 0, CONSTANT: 1, STRUCTURE: 2}
MAX_CANDIDATES = 16  # earlier graphs of one call site diffed per new program (the most recent)


def is_value_read(cause: str | None) -> bool:
    return bool(cause) and VALUE_READ in cause


def _site_key(event: dict):
    site = event.get("site")
    return (site["file"], site["line"]) if site else None


def comparable(a: dict, b: dict) -> bool:
    if a.get("graph_name") and a.get("graph_name") == b.get("graph_name"):
        return True
    key = _site_key(a)
    return key is not None and key == _site_key(b)


class Locator:
    """Find the user line for one diff change."""

    def __init__(self, resolver: Resolver):
        self.resolver = resolver

    def node(self, node: Node | None) -> Source | None:
        if node is None or node.location is None:
            return None
        loc = node.location
        return self.resolver.resolve(loc.function, loc.file, loc.line)

    def change(self, change: Change, graph: Graph) -> tuple[Source | None, str | None]:
        """The node's own line, else a neighbour's (operand or user, one hop), else None."""
        own = self.node(change.node)
        if own is not None:
            return own, None
        users = graph.users()
        neighbours = [graph.by_id[o] for o in change.node.operands if o in graph.by_id]
        neighbours += [graph.by_id[u] for u in users.get(change.node.id, [])]
        for other in sorted(neighbours, key=lambda n: n.is_input):  # computations before inputs
            src = self.node(other)
            if src is not None:
                return src, f"next to {change.node.op} ({other.op} at {other.location})"
        return None, None


def _library_summary(nodes: list[Node]) -> str | None:
    locs: dict[str, int] = {}
    for n in nodes:
        if n.location is not None:
            locs[str(n.location)] = locs.get(str(n.location), 0) + 1
    if not locs:
        return None
    top = sorted(locs.items(), key=lambda kv: -kv[1])[:3]
    return "library code: " + ", ".join(f"{loc} ({n} op{'s' if n > 1 else ''})" for loc, n in top)


def causes_of(diff: GraphDiff, locator: Locator) -> list[Cause]:
    """One cause per (kind, line); structure changes are summarised as one per line."""
    causes: list[Cause] = []
    seen: set = set()
    structure_nodes = [c for c in diff.changes if c.kind == STRUCTURE]
    for change in diff.changes:
        if change.kind == STRUCTURE:
            continue
        src, via = locator.change(change, diff.new)
        key = (change.kind, src.file if src else None, src.line if src else None)
        if key in seen:
            continue
        seen.add(key)
        what = f"{change.node.op} " if change.kind == CONSTANT and not change.node.is_input else ""
        causes.append(Cause(change.kind, what + (change.before or ""), change.after, src, via))
    if structure_nodes:
        added = [c.node for c in structure_nodes if c.side == "new"]
        removed = [c.node for c in structure_nodes if c.side == "old"]
        before = f"{len(diff.old.nodes)} nodes" + (f" ({summarize_ops(removed, '-')})" if removed else "")
        after = f"{len(diff.new.nodes)} nodes" + (f" ({summarize_ops(added, '+')})" if added else "")
        # the first changed computation with a user line of its own (a neighbour's line would
        # be a guess here); graph inputs only when no computation has one
        ordered = sorted(structure_nodes, key=lambda c: (c.node.is_input or c.node.is_constant))
        located = None
        for change in ordered:
            src = locator.node(change.node)
            if src is not None:
                located = Cause(STRUCTURE, before, after, src)
                break
        if located is None:
            located = Cause(STRUCTURE, before, after, None,
                            _library_summary([c.node for c in structure_nodes]))
        causes.append(located)
    causes.sort(key=lambda c: (_PRIORITY.get(c.kind, 9), c.source is None))
    return causes


def load_graph(run_dir: str, event: dict, cache: dict) -> Graph | None:
    rel = event.get("ir_path")
    if not rel:
        return None
    if rel not in cache:
        try:
            cache[rel] = read_graph(os.path.join(run_dir, rel))
        except OSError:
            cache[rel] = None
    return cache[rel]


def attribute_run(run) -> RunAttribution:
    mode = run.meta.get("mode") or (run.start or {}).get("mode")
    warmup = run.meta.get("warmup")
    warmup = 2 if warmup is None else warmup
    executions = run.execution_events
    new = [e for e in executions if e.get("new")]
    if mode != "diagnose" and not any(e.get("ir_path") for e in new):
        return RunAttribution(False, f"this run was recorded in {mode or 'count'} mode, which saves no IR: "
                              "line attribution needs `detective run --mode diagnose`", warmup)
    frame_files = [f["file"] for e in executions for f in (e.get("frames") or [])]
    resolver = Resolver(frame_files, run.meta.get("cwd"))
    locator = Locator(resolver)
    result = RunAttribution(True, None, warmup)

    reads_by_step: dict[int, list[dict]] = {}
    for e in executions:
        if is_value_read(e.get("cause")) and e.get("site"):
            reads_by_step.setdefault(e["step"], []).append(e)
    result.host_syncs = _host_syncs(reads_by_step, resolver, len(run.step_events))

    cache: dict = {}
    for i, event in enumerate(new):
        graph = load_graph(run.dir, event, cache)
        trigger = resolver.frame(event.get("site"))
        item = Attribution(
            step=event["step"], index=event.get("index", 0), graph_hash=event.get("graph_hash"),
            previous_hash=None, previous_step=None, kind=NEW_SITE, before=None, after=None,
            source=trigger, trigger=trigger, cause_text=event.get("cause"),
            compile_seconds=event.get("compile_seconds"),
        )
        item.split_by = [resolver.frame(r["site"]) for r in reads_by_step.get(event["step"], [])
                         if r.get("index", 0) < item.index]
        result.items.append(item)
        if graph is None:
            item.kind = UNKNOWN
            item.note = "its IR was not saved" if not event.get("ir_path") else f"{event['ir_path']} is missing"
            result.missing_graphs.append(event.get("graph_hash") or "?")
            continue
        best: tuple[dict, GraphDiff] | None = None
        candidates = [e for e in new[:i] if comparable(e, event)][-MAX_CANDIDATES:]
        for earlier in reversed(candidates):  # most recent first: ties go to the latest
            old = load_graph(run.dir, earlier, cache)
            if old is None:
                continue
            d = diff_graphs(old, graph)
            if best is None or d.cost < best[1].cost:
                best = (earlier, d)
            if d.cost <= 1:
                break  # one change: nothing closer exists
        new_reads = _new_reads(event, best[0] if best else None, reads_by_step)
        if best is None:
            if is_value_read(event.get("cause")):
                item.kind = SPLIT
                item.note = "the first graph cut at this value read"
            continue
        earlier, d = best
        item.previous_hash, item.previous_step = earlier.get("graph_hash"), earlier["step"]
        item.causes = causes_of(d, locator)
        if new_reads and not is_value_read(event.get("cause")):
            read = new_reads[0]
            item.kind, item.source = SPLIT, resolver.frame(read["site"])
            item.before = f"step {earlier['step']}: no value read here"
            item.after = f"step {event['step']}: graph cut at {read['site']['function']} (line {read['site']['line']})"
            continue
        if not item.causes:
            item.kind, item.note = STRUCTURE, "the IR is identical to the closest earlier graph (the hash differs)"
            continue
        primary = item.causes[0]
        item.kind, item.before, item.after = primary.kind, primary.before, primary.after
        if primary.source is not None:
            item.source = primary.source
            if primary.kind == STRUCTURE and primary.source.found:
                item.branch = enclosing_branch(primary.source.file, primary.source.line)
            if primary.kind == CONSTANT and primary.source.found:
                item.feeds = python_values_feeding(primary.source.file, primary.source.line)
        else:
            item.note = (primary.via + "; " if primary.via else "") + "showing the line that triggered execution"
    return result


def _new_reads(event: dict, earlier: dict | None, reads_by_step: dict) -> list[dict]:
    """Value reads in this step, before this graph, at sites the earlier graph's step lacked."""
    if earlier is None:
        return []
    before = {_site_key(r) for r in reads_by_step.get(earlier["step"], [])}
    return [r for r in reads_by_step.get(event["step"], [])
            if r.get("index", 0) < event.get("index", 0) and _site_key(r) not in before]


def _host_syncs(reads_by_step: dict, resolver: Resolver, steps: int) -> list[HostSync]:
    sites: dict = {}
    for step, reads in reads_by_step.items():
        for r in reads:
            entry = sites.setdefault(_site_key(r), {"site": resolver.frame(r["site"]), "steps": set(), "executions": 0})
            entry["steps"].add(step)
            entry["executions"] += 1
    out = []
    for entry in sites.values():
        src = entry["site"]
        sync = HostSync(src, len(entry["steps"]), steps, entry["executions"], min(entry["steps"]))
        if src.found:
            sync.branch = enclosing_branch(src.file, src.line)
            sync.feeds = names_assigned_before(src.file, src.line)
        out.append(sync)
    return sorted(out, key=lambda h: -h.executions)


def attributions_by_step(run) -> dict[int, list[dict]]:
    """Step -> source sites explaining its new programs ({} for runs without saved IR).

    Used by the compile-budget gate: each site is ``{"file", "line", "function", "kind", "code"}``.
    """
    result = attribute_run(run)
    if not result.available:
        return {}
    out: dict[int, list[dict]] = {}
    for item in result.items:
        src = item.source
        if src is None:
            continue
        site = {"file": src.file, "line": src.line, "function": src.function, "kind": item.kind, "code": src.code()}
        if site not in out.setdefault(item.step, []):
            out[item.step].append(site)
    return out
