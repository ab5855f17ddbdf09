"""Recompile or new call site? Classify every new program of a run.

A program is a *recompile* when a computation that already compiled compiles again with
something changed (a shape, a constant, a branch); the first program of a computation not run
before (an eval loop, a checkpoint, a final reduce) is a *new call site*. The line that
triggered execution does not tell them apart: under ``MpDeviceLoader`` every graph of a loop is
triggered at the ``for`` line, and two syncs inside ``xm.mesh_reduce`` share the user's line.
So the evidence is:

- the trigger's whole stack, library frames included (``xla_model.py:1343`` and ``:1357`` are
  two call sites even under one user line) — the only evidence a ``count`` run has, so its
  verdicts are ``likely``;
- in ``diagnose`` mode, the graph itself: how much of it matches the closest earlier graph
  (``share``) and the user lines its ops come from. A graph from a known stack that shares
  less than half its ops, and no user line, with every earlier graph of that stack is a new
  computation; a graph from a new stack that matches an earlier graph of the same trigger
  line almost whole is a recompile reached another way, and so is a graph cut short by a value
  read (``.item()``) whose ops are mostly in an earlier graph (a host-sync split). These
  verdicts are ``sure``.

Optimizer warm-up (state created at an optimizer's first steps) is decided on top of this, in
:mod:`detective.report.warmup`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detective.report.attribution import is_value_read, load_graph

RECOMPILE, NEW_CALL_SITE, WARMUP = "recompile", "new call site", "optimizer warm-up"
SURE, LIKELY = "sure", "likely"
MIN_SHARE = 0.5  # a graph sharing less than this with every earlier one of its stack is new
SAME_COMPUTATION = 0.8  # ... and one from a new stack sharing this much with its line's is not
MAX_CANDIDATES = 16  # earlier graphs diffed per new program (the most recent)


@dataclass
class ProgramClass:
    """The verdict on one new program: what it is, how sure, and why."""

    step: int
    index: int
    graph_hash: str | None
    kind: str  # RECOMPILE | NEW_CALL_SITE | WARMUP
    confidence: str  # SURE (the graph was compared) | LIKELY (call stacks only)
    evidence: str
    previous_step: int | None = None  # the closest earlier program it was compared with
    share: float | None = None  # matched ops / ops of the larger graph (diagnose mode)
    user_lines: list[str] = field(default_factory=list)  # "file:line" its ops come from
    stack: tuple = ()

    def to_json(self) -> dict:
        return {"step": self.step, "index": self.index, "graph_hash": self.graph_hash, "kind": self.kind,
                "confidence": self.confidence, "evidence": self.evidence, "previous_step": self.previous_step,
                "share": None if self.share is None else round(self.share, 3), "user_lines": self.user_lines}


def stack_key(event: dict) -> tuple:
    """The trigger's whole stack (every frame, library ones too) and the compiled function's name."""
    frames = tuple((f.get("file"), f.get("line")) for f in event.get("frames") or ())
    return (event.get("graph_name"), frames)


def _site(event: dict):
    site = event.get("site")
    return (site.get("file"), site.get("line")) if site else None


def _where(frame: tuple) -> str:
    import os

    return f"{os.path.basename(frame[0] or '?')}:{frame[1]}"


def stack_difference(a: tuple, b: tuple) -> str | None:
    """Where two stack keys part, innermost first: 'xla_model.py:1357 (was xla_model.py:1343)'."""
    fa, fb = a[1], b[1]
    for x, y in zip(fa, fb):
        if x != y:
            return f"{_where(x)} (was {_where(y)})"
    if len(fa) != len(fb):
        return f"{len(fa)} frames (was {len(fb)})"
    if a[0] != b[0]:
        return f"compiled function {a[0]!r} (was {b[0]!r})"
    return None


def _user_lines(graph, resolver) -> list[str]:
    """Distinct user "file:line" the graph's ops were made at (library lines dropped), in order."""
    import os

    out: dict[str, None] = {}
    for node in graph.nodes:
        loc = node.location
        if loc is None or node.is_input or node.is_constant:
            continue
        src = resolver.resolve(loc.function, loc.file, loc.line)
        if src is not None:
            out[f"{os.path.basename(src.file)}:{src.line}"] = None
    return list(out)


def share(diff) -> float:
    return len(diff.new_to_old) / max(len(diff.old.nodes), len(diff.new.nodes), 1)


class _Graphs:
    """Lazily parsed IR of a run's new programs, their diffs and user lines (diagnose mode)."""

    def __init__(self, run, resolver):
        self.run, self.resolver, self._load = run, resolver, load_graph
        self._graphs: dict = {}
        self._lines: dict = {}
        self._diffs: dict = {}

    def graph(self, event: dict):
        return self._load(self.run.dir, event, self._graphs)

    def lines(self, event: dict) -> list[str]:
        key = event.get("ir_path")
        if key not in self._lines:
            g = self.graph(event)
            self._lines[key] = _user_lines(g, self.resolver) if g is not None else []
        return self._lines[key]

    def diff(self, old: dict, new: dict):
        from detective.report.diff import diff_graphs

        key = (old.get("ir_path"), new.get("ir_path"))
        if key not in self._diffs:
            a, b = self.graph(old), self.graph(new)
            self._diffs[key] = diff_graphs(a, b) if a is not None and b is not None else None
        return self._diffs[key]

    def closest(self, event: dict, candidates: list[dict]):
        """(earlier event, diff) with the fewest differences, most recent first on ties."""
        best = None
        for earlier in reversed(candidates[-MAX_CANDIDATES:]):
            d = self.diff(earlier, event)
            if d is not None and (best is None or d.cost < best[1].cost):
                best = (earlier, d)
            if d is not None and d.cost <= 1:
                break
        return best


def new_program_events(run) -> list[dict]:
    return [e for e in run.execution_events if e.get("new")]


def classify_run(run, resolver=None) -> list[ProgramClass]:
    """One verdict per new program of the run, in order (warm-up included, see warmup.py)."""
    from detective.report.warmup import mark_warmup

    new = new_program_events(run)
    diagnose = any(e.get("ir_path") for e in new)
    graphs = None
    if diagnose:
        if resolver is None:
            from detective.report.sources import Resolver

            frame_files = [f["file"] for e in run.execution_events for f in (e.get("frames") or [])]
            resolver = Resolver(frame_files, run.meta.get("cwd"))
        graphs = _Graphs(run, resolver)
    out: list[ProgramClass] = []
    for i, event in enumerate(new):
        out.append(_classify(event, new[:i], graphs))
    if graphs is not None:
        mark_warmup(out, new, graphs)
    return out


def _classify(event: dict, earlier: list[dict], graphs) -> ProgramClass:
    key = stack_key(event)
    item = ProgramClass(event["step"], event.get("index", 0), event.get("graph_hash"), RECOMPILE, LIKELY, "",
                        stack=key)
    if event.get("backend") == "dynamo":  # Dynamo says itself whether a guard failed
        item.confidence = SURE
        if event.get("recompile"):
            item.evidence = "Dynamo recompiled this function: " + ((event.get("guards") or [""])[0] or "a guard failed")
        else:
            item.kind, item.evidence = NEW_CALL_SITE, "Dynamo compiled this function (or graph-break resume) first"
        return item
    if event.get("graph_hash") is None:
        item.evidence = "no graph hash was recorded (torch_xla's debug output was unavailable): counted as a recompile"
        return item
    same_stack = [e for e in earlier if stack_key(e) == key]
    same_line = [e for e in earlier if stack_key(e) != key and (
        _site(e) is not None and _site(e) == _site(event)
        or (event.get("graph_name") and e.get("graph_name") == event.get("graph_name")))]
    if graphs is None or graphs.graph(event) is None:
        return _by_stack(item, event, same_stack, same_line, earlier)
    item.confidence = SURE
    item.user_lines = graphs.lines(event)
    if same_stack:
        best = graphs.closest(event, same_stack)
        if best is None:
            return _by_stack(item, event, same_stack, same_line)
        prev, d = best
        item.previous_step, item.share = prev["step"], share(d)
        common = set(item.user_lines) & set(graphs.lines(prev))
        if item.share < MIN_SHARE and item.user_lines and not common:
            item.kind = NEW_CALL_SITE
            item.evidence = (f"same call stack as step {prev['step']}, but a different computation: it shares "
                             f"{item.share:.0%} of its ops with that graph and none of its source lines "
                             f"({', '.join(item.user_lines[:3])})")
        else:
            item.evidence = (f"the same call stack compiled a different program at step {prev['step']}; "
                             f"{item.share:.0%} of the ops match it")
        return item
    best = graphs.closest(event, same_line) if same_line else None
    if best is not None and share(best[1]) >= SAME_COMPUTATION:
        prev, d = best
        item.previous_step, item.share = prev["step"], share(d)
        item.evidence = (f"a new call stack, but the same computation as the graph of step {prev['step']} "
                         f"from this line ({item.share:.0%} of the ops match)")
        return item
    if is_value_read(event.get("cause")) and earlier:
        cut = _cut_from(event, earlier, graphs)
        if cut is not None:
            prev, contained = cut
            item.previous_step, item.share = prev["step"], contained
            item.evidence = (f"a value read cut a computation that ran before: {contained:.0%} of its ops are in "
                             f"the graph of step {prev['step']} (a host-sync split)")
            return item
    item.kind = NEW_CALL_SITE
    if best is not None:
        item.previous_step, item.share = best[0]["step"], share(best[1])
        item.evidence = (f"its call stack is new ({stack_difference(key, stack_key(best[0]))}) and it shares "
                         f"{item.share:.0%} of its ops with the closest graph of this line (step {best[0]['step']})")
    else:
        item.evidence = "no program ran from this call stack or line before"
    return item


def _cut_from(event: dict, earlier: list[dict], graphs):
    """(earlier event, share of this graph's ops found in it) when a graph cut at a value read is
    mostly a piece of an earlier graph, else None."""
    best = None
    for prev in reversed(earlier[-MAX_CANDIDATES:]):
        d = graphs.diff(prev, event)
        if d is None:
            continue
        contained = len(d.new_to_old) / max(len(d.new.nodes), 1)
        if best is None or contained > best[1]:
            best = (prev, contained)
    return best if best is not None and best[1] >= SAME_COMPUTATION else None


def _by_stack(item: ProgramClass, event: dict, same_stack: list[dict], same_line: list[dict],
              earlier: list[dict]) -> ProgramClass:
    """Count mode: the call stack is all there is (the verdict stays LIKELY)."""
    from detective.report.warmup import EARLY_STEPS

    if same_stack:
        prev = same_stack[-1]
        item.previous_step = prev["step"]
        item.evidence = f"the same call stack compiled a different program at step {prev['step']}"
        if item.step - same_stack[0]["step"] <= EARLY_STEPS:
            item.evidence += (" (within this call stack's first steps: optimizer warm-up and Python accumulators "
                              "look like this; `--mode diagnose` tells them apart from the graphs)")
        return item
    if is_value_read(event.get("cause")) and earlier:
        item.evidence = ("a value read (.item(), .cpu(), printing a tensor) cut a graph at a line that cut none "
                         "before: most likely a piece of a computation that ran before (a host-sync split)")
        return item
    item.kind = NEW_CALL_SITE
    if same_line:
        diff = stack_difference(stack_key(event), stack_key(same_line[-1]))
        item.previous_step = same_line[-1]["step"]
        item.evidence = f"a call stack not seen before: {diff} vs step {same_line[-1]['step']}"
    else:
        item.evidence = "no program ran from this call stack before"
    return item


def by_execution(classes: list[ProgramClass]) -> dict[tuple[int, int], ProgramClass]:
    return {(c.step, c.index): c for c in classes}
