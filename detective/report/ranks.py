"""Across ranks: which ranks ran the same programs, where they diverged, and whether the job hung.

A divergence is a step where ranks executed different graphs: a different hash at the same
step and execution index, or an execution one rank had and another did not. With a collective
in the step that is a hang; without one it is still a bug (ranks no longer compute the same
thing). The lowest rank is the reference ("vs rank 0"). In diagnose mode both graphs' IR is on
disk and the diff is attributed to a line with the recompile machinery.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from detective.paths import short_path
from detective.report.attribution import Locator, causes_of
from detective.report.model import findings_json
from detective.report.steps import JSON_STEP_KEYS
from detective.runtime.tracer import GRAPHS_DIR

MAX_DIVERGENCES = 20  # first divergent steps kept per rank; the first one is the story


@dataclass
class Divergence:
    step: int
    index: int
    ranks: list[int]
    vs_rank: int
    hashes: dict[int, str | None]  # rank -> hash at (step, index); None: no such execution
    steps: list[int] = field(default_factory=list)  # every step where these ranks differ
    kind: str = "different graph"
    before: str | None = None
    after: str | None = None
    source: object | None = None  # report.sources.Source
    trigger: object | None = None
    note: str | None = None
    branch: tuple[int, str] | None = None
    feeds: list = field(default_factory=list)
    linked: list = field(default_factory=list)  # (finding, relation), filled by join

    @property
    def file(self):
        return self.source.file if self.source else None

    @property
    def line(self):
        return self.source.line if self.source else None

    def to_json(self) -> dict:
        src = self.source
        return {
            "step": self.step, "index": self.index, "ranks": self.ranks, "vs_rank": self.vs_rank,
            "hashes": {str(r): h for r, h in self.hashes.items()}, "steps": self.steps, "kind": self.kind,
            "before": self.before, "after": self.after,
            "file": src.file if src else None, "line": src.line if src else None,
            "function": src.function if src else None, "code": src.code() if src else None,
            "note": self.note,
            "findings": findings_json(self.linked),
        }


def _signature(rank) -> list[tuple[int, tuple]]:
    by_step: dict[int, list] = {}
    for e in rank.executions:
        by_step.setdefault(e["step"], []).append((e.get("index", 0), e.get("graph_hash")))
    return {step: tuple(h for _, h in sorted(pairs, key=lambda p: p[0])) for step, pairs in by_step.items()}


def find_divergences(run) -> list[Divergence]:
    """First divergent step of every rank that differs from the lowest rank, grouped by what it ran."""
    ranks = run.ranks
    if len(ranks) < 2:
        return []
    if any(not any(e.get("graph_hash") for e in r.executions) for r in ranks.values()):
        return []  # without hashes (debug output unavailable) ranks cannot be compared
    signatures = {rank: _signature(r) for rank, r in ranks.items()}
    ref_rank = next(iter(ranks))
    ref = signatures[ref_rank]
    groups: dict[tuple, Divergence] = {}
    for rank, sig in signatures.items():
        if rank == ref_rank:
            continue
        common = sorted(set(ref) & set(sig))
        differing = [s for s in common if ref[s] != sig[s]]
        if not differing:
            continue
        step = differing[0]
        a, b = ref[step], sig[step]
        index = next((i for i in range(max(len(a), len(b)))
                      if (a[i] if i < len(a) else None) != (b[i] if i < len(b) else None)), 0)
        mine = b[index] if index < len(b) else None
        theirs = a[index] if index < len(a) else None
        key = (step, index, mine, theirs)
        if key not in groups:
            groups[key] = Divergence(step, index, [], ref_rank, {ref_rank: theirs}, differing[:MAX_DIVERGENCES])
        groups[key].ranks.append(rank)
        groups[key].hashes[rank] = mine
    return sorted(groups.values(), key=lambda d: (d.step, d.ranks))


def attribute_divergences(run, divergences: list[Divergence]) -> None:
    """Fill kind/before/after/source: the IR diff in diagnose mode, else the line that ran the graph."""
    from detective.report.diff import diff_graphs
    from detective.report.sources import Resolver, enclosing_branch, python_values_feeding

    if not divergences:
        return
    executions = [e for r in run.ranks.values() for e in r.executions]
    resolver = Resolver([f["file"] for e in executions for f in (e.get("frames") or [])], run.meta.get("cwd"))
    locator = Locator(resolver)
    sites = {(e.get("rank"), e["step"], e.get("index", 0)): e.get("site") for e in executions}
    for d in divergences:
        rank = d.ranks[0]
        d.trigger = resolver.frame(sites.get((rank, d.step, d.index)) or sites.get((d.vs_rank, d.step, d.index)))
        d.source = d.trigger
        mine, theirs = d.hashes[rank], d.hashes[d.vs_rank]
        if mine is None or theirs is None:
            d.kind = "missing execution" if mine is None else "extra execution"
            d.note = (f"rank {rank} ran {'no' if mine is None else 'one more'} graph at execution {d.index} "
                      f"of step {d.step}")
            continue
        old, new = _graph(run.dir, theirs), _graph(run.dir, mine)
        if old is None or new is None:
            d.note = ("recorded in count mode: `detective run --mode diagnose` names the line that made the "
                      "graphs differ" if run.meta.get("mode") != "diagnose" else "the graphs' IR was not saved")
            continue
        causes = causes_of(diff_graphs(old, new), locator)
        if not causes:
            d.note = "the IR is identical (the hash differs)"
            continue
        primary = causes[0]
        d.kind, d.before, d.after = primary.kind, primary.before, primary.after
        if primary.source is not None:
            d.source = primary.source
            if primary.kind == "structure" and primary.source.found:
                d.branch = enclosing_branch(primary.source.file, primary.source.line)
            if primary.kind == "constant" and primary.source.found:
                d.feeds = python_values_feeding(primary.source.file, primary.source.line)


def _graph(run_dir: str, graph_hash: str):
    from detective.report.ir import read_graph

    for suffix in (".hlo.txt", ".txt"):  # XLA's dump (process ranks), torch_xla's IR text (thread ranks)
        try:
            return read_graph(os.path.join(run_dir, GRAPHS_DIR, graph_hash + suffix))
        except OSError:
            continue
    return None


def join_findings(divergences: list[Divergence], findings) -> None:
    from detective.report.join import relate

    for d in divergences:
        d.linked = relate(d, findings)


# -- hangs --

def find_hang(run) -> dict:
    """``{"detected", "reason", "last_step": {rank: step}, ...}`` from the record's hang evidence."""
    last_step = {rank: max((s["step"] for s in r.steps if s.get("complete", True)), default=None)
                 for rank, r in run.ranks.items()}
    timeouts = [e for e in run.events if e.get("event") in ("collective_timeout", "collective_stuck")]
    stall = next((e for e in run.events if e.get("event") == "stall"), None)
    hang = {"detected": False, "reason": None, "last_step": {str(k): v for k, v in last_step.items()}}
    if stall is not None:
        waiting = [{"rank": s.get("rank"), "pid": s.get("pid"), "frame": s.get("frame"), "innermost": s.get("innermost")}
                   for s in stall.get("stacks", [])]
        hang.update(detected=True, reason=f"no rank completed a step for {stall.get('timeout'):g} s "
                    "(--stall-timeout); the job was stopped", waiting=waiting)
    fatal = [e for e in timeouts if e["event"] == "collective_timeout"] or timeouts
    if fatal:
        e = fatal[0]
        arrived = (f": {e['arrived']} of {e['expected']} participants arrived"
                   if e.get("expected") is not None else "")
        op_ids = sorted({t["op_id"] for t in timeouts if t.get("op_id") is not None})
        reason = (f"XLA {'aborted' if e['event'] == 'collective_timeout' else 'reported'} a collective that never "
                  f"completed ({e['op']}{arrived})")
        if len(op_ids) > 1:
            reason += f"; ranks waited in different collectives (op ids {', '.join(map(str, op_ids))})"
        hang.update(detected=True, reason=(hang["reason"] + "; " if hang["reason"] else "") + reason,
                    message=e.get("message"))
    return hang


def stall_text(stall_hang: dict) -> str | None:
    waiting = stall_hang.get("waiting")
    if not waiting:
        return None
    parts = []
    for w in waiting:
        frame, inner = w.get("frame"), w.get("innermost")
        if frame is None:
            where = "no Python frame"
        else:
            where = f"{frame['function']} at {short_path(frame['file'])}:{frame['line']}"
            if inner and inner != frame:
                where = f"{inner['function']} ({os.path.basename(inner['file'])}:{inner['line']}) from " + where
        who = f"rank {w['rank']}" if w.get("rank") is not None else f"process {w.get('pid')}"
        parts.append(f"{who} waiting in {where}")
    return ", ".join(parts)


# -- per-rank summary --

def rank_rows(run) -> list[dict]:
    rows = []
    for rank, r in run.ranks.items():
        steps = sorted(r.steps, key=lambda s: s["step"])
        rows.append({
            "rank": rank, "host": r.host, "local_rank": r.identity.get("local_rank"),
            "world_size": r.identity.get("world_size"), "pid": r.key[1],
            "steps": [{k: s.get(k) for k in JSON_STEP_KEYS} for s in steps],
            "total_unique_programs": sum(s.get("new_programs") or 0 for s in steps),
            "finished": r.end is not None,
        })
    return rows


def alike_groups(run) -> list[list[int]]:
    """Ranks grouped by identical per-step programs (same hashes at every step)."""
    groups: dict = {}
    for rank, r in run.ranks.items():
        key = tuple(sorted(_signature(r).items())) or tuple((s["step"], s.get("new_programs")) for s in r.steps)
        groups.setdefault(key, []).append(rank)
    return sorted(groups.values())
