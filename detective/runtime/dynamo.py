"""Record torch.compile (Dynamo) compiles per training step, in the XLA tracer's record format.

What it reads (torch 2.9), and how stable that is:

- ``torch._dynamo.utils.get_compilation_metrics()`` — semi-public (torch's own tests, tlparse's
  ``compilation_metrics`` and the docs on compile-time profiling use it): one ``CompilationMetrics``
  per frame compile with ``compile_id``, ``co_name``/``co_filename``/``co_firstlineno``,
  ``recompile_reason`` (the failing guard), ``fail_type`` (``RecompileLimitExceeded`` when the
  frame falls back to eager), ``has_guarded_code``, ``stack_trace`` (where the compiled function
  was called) and compile times; plus one ``is_forward=False`` entry per lazily compiled backward.
  It is a bounded deque (64), so it is also drained at the end of every compile, through
- ``torch._dynamo.callback.callback_handler.end_callbacks`` (the list behind the public
  ``on_compile_end`` decorator); ``torch._dynamo.reset()`` empties it, so it is re-armed at every
  drain.
- ``torch._dynamo.utils.graph_break_reasons`` — semi-public (``torch._dynamo.explain`` reads it):
  one ``GraphCompileReason`` per graph break, with the user stack.

Nothing here parses torch's logs or changes a torch setting; ``TORCH_LOGS`` is left to the user.
Each compile becomes an ``execution`` event (``backend: "dynamo"``) and each training step a
``step`` event with the same keys as the XLA tracer's, so the table, gate, marker and bisect read
a Dynamo run unchanged. When an XLA tracer owns the steps (``torch.compile(backend="openxla")``),
compiles are written as ``dynamo_compile`` events on the XLA tracer's step instead.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable

from detective.runtime.dynamo_events import CompileEvents
from detective.runtime.events import EVENTS_FILE, EventWriter


def _after(items, last) -> list:
    """The items appended after ``last`` (all of them when it is gone: cleared or rotated out)."""
    if last is None:
        return list(items)
    items = list(items)
    for i in range(len(items) - 1, -1, -1):
        if items[i] is last:
            return items[i + 1:]
    return items


class DynamoRecorder:
    """One process's Dynamo compiles, cut into steps at ``boundary``.

    ``xla_step``: returns the step an XLA tracer is on when one owns the steps (torch_xla is in
    use: ``backend="openxla"``), else None; then this recorder writes the steps itself.
    """

    def __init__(self, out_dir: str,
                 xla_step: Callable[[], int | None] = lambda: None, on_first_step: Callable[[], None] | None = None):
        self.out_dir = out_dir
        self.writer = EventWriter(os.path.join(out_dir, EVENTS_FILE))
        self.xla_step = xla_step
        self.on_first_step = on_first_step  # writes the start event, once, when we own the steps
        self.pid = os.getpid()
        self.step = 0
        self.unique = 0
        self.finished = False
        self._last_metric = None
        self._last_break = None
        self._pending: list[dict] = []  # compile events since the last boundary
        self._breaks: list[dict] = []  # graph-break events since the last boundary
        self._orphan_backward_s = 0.0  # backward compiles whose forward was in an earlier step
        self._events = CompileEvents()
        self._totals = {"frames_compiled": 0, "recompiles": 0, "graph_breaks": 0, "cache_limit_fallbacks": 0,
                        "compile_seconds": 0.0}
        self._last_time = time.time()
        self._dirty = True  # a compile may have run since the last drain
        self._activity: tuple | None = None  # Dynamo's frame and graph-break counts at the last drain
        self._stacks: dict[str, list[dict]] = {}  # compile id -> live stack at compile start
        self._steps_at_start: dict[str, int] = {}  # compile id -> step it began in (read later)
        self._on_end = self._compile_ended  # one bound method each, so they can be found again
        self._on_start = self._compile_started

    # -- reading torch ----------------------------------------------------------------------
    def baseline(self) -> None:
        """Ignore what compiled before this recorder started (an in-process watch)."""
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is not None:
            metrics = utils.get_compilation_metrics()
            self._last_metric = metrics[-1] if metrics else None
            self._last_break = utils.graph_break_reasons[-1] if utils.graph_break_reasons else None

    def drain(self, force: bool = False) -> None:
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:  # torch._dynamo never imported: nothing was compiled
            return
        # Steady state: no compile callback fired, no frame compile attempted (the recompile-limit
        # refusal runs no callback but counts as one), no graph break: nothing to read.
        activity = (utils.counters["frames"]["total"], len(utils.graph_break_reasons))
        if not force and not self._dirty and activity == self._activity:
            return
        self._activity, self._dirty = activity, False
        self._arm_callback()
        new = _after(utils.get_compilation_metrics(), self._last_metric)
        if new:
            self._last_metric = new[-1]
        for metric in new:
            self._take(metric)
        breaks = _after(utils.graph_break_reasons, self._last_break)
        if breaks:
            self._last_break = breaks[-1]
        for reason in breaks:
            self._take_break(reason)

    def arm(self) -> None:
        """Register the compile callbacks now (the bootstrap calls this when Dynamo is imported)."""
        try:
            self._arm_callback()
        except Exception as exc:
            print(f"detective: could not hook Dynamo's compile callbacks: {exc!r}", file=sys.stderr)

    def _arm_callback(self) -> None:
        callback = sys.modules.get("torch._dynamo.callback")
        if callback is None:
            return
        handler = callback.callback_handler
        if self._on_end not in handler.end_callbacks:
            handler.register_end_callback(self._on_end)
        if self._on_start not in handler.start_callbacks:
            handler.register_start_callback(self._on_start)

    def _compile_started(self, args) -> None:
        """Keep the live call stack of a compile: torch's stack_trace can stop at the compiled
        function itself (a function called from module level), without the line that called it."""
        self._dirty = True
        try:
            compile_id = str(getattr(args, "compile_id", None))
            if compile_id in self._stacks or len(self._stacks) > 256:
                return
            frames, frame = [], sys._getframe(1)
            while frame is not None and len(frames) < 64:
                code = frame.f_code
                frames.append({"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name})
                frame = frame.f_back
            self._stacks[compile_id] = frames
            self._steps_at_start[compile_id] = self._current_step()
        except Exception:
            pass

    def _compile_ended(self, _args) -> None:
        try:
            self.drain(force=True)  # earlier compiles: the deque holds only the last 64
        except Exception as exc:  # never break the user's compile
            print(f"detective: could not read Dynamo's compile record: {exc!r}", file=sys.stderr)
        self._dirty = True  # this compile's own metrics are recorded after its callbacks

    def disarm(self) -> None:
        callback = sys.modules.get("torch._dynamo.callback")
        if callback is not None:
            handler = callback.callback_handler
            if self._on_end in handler.end_callbacks:
                handler.remove_end_callback(self._on_end)
            if self._on_start in handler.start_callbacks:
                handler.remove_start_callback(self._on_start)

    # -- one compile --------------------------------------------------------------------------
    def _take(self, m) -> None:
        if getattr(m, "is_runtime", False):
            return
        compile_id = str(m.compile_id or "?")
        if m.is_forward is False:  # a backward graph compiled lazily at the first backward()
            seconds = (m.backward_cumulative_compile_time_us or 0) / 1e6
            for event in reversed(self._pending):
                if event["compile_id"] == compile_id:
                    event["backend_seconds"] += seconds
                    event["compile_seconds"] += seconds
                    return
            self._orphan_backward_s += seconds
            return
        self._pending.append({
            "event": "execution" if self._xla_step() is None else "dynamo_compile",
            "step": self._step_of(compile_id),
            "index": len(self._pending),
            **self._events.compile_event(m, self._stacks.pop(compile_id, None)),
            "pid": self.pid,
        })

    def _take_break(self, reason) -> None:
        self._breaks.append({"event": "graph_break", "step": self._current_step(), **self._events.break_event(reason),
                             "pid": self.pid})

    def _xla_step(self) -> int | None:
        try:
            return self.xla_step()
        except Exception:
            return None

    def _step_of(self, compile_id: str) -> int:
        """The step a compile began in: an XLA tracer's steps can move on before it is read."""
        started = self._steps_at_start.pop(compile_id, None)
        return started if started is not None and self._xla_step() is not None else self._current_step()

    def _current_step(self) -> int:
        xla = self._xla_step()
        return self.step if xla is None else xla

    # -- steps ----------------------------------------------------------------------------
    def start_event(self, source: str, versions: dict, extra: dict | None = None) -> dict:
        event = {"event": "start", "source": source, "backend": "dynamo", "pid": self.pid, "ppid": os.getppid(),
                 "mode": "count", "argv": list(sys.argv), "python": sys.executable, "versions": versions,
                 "hashes": None, "time": time.time(), "baseline": {}}
        event.update(extra or {})
        self.writer.write(event)
        return event

    def boundary(self, kind: str) -> None:
        if self.finished:
            return
        self.drain()
        if self._xla_step() is not None:
            self._flush_passive()
            return
        self._close_step(kind, complete=True)

    def _flush_passive(self) -> None:
        self.writer.write(*self._pending, *self._breaks)
        for event in self._pending:
            self._count(event)
        self._totals["graph_breaks"] += len(self._breaks)
        self._pending, self._breaks = [], []

    def _count(self, event: dict) -> None:
        self._totals["frames_compiled"] += event["compiled"]
        self._totals["recompiles"] += event["recompile"]
        self._totals["cache_limit_fallbacks"] += event["fallback"]
        self._totals["compile_seconds"] += event["compile_seconds"]

    def _close_step(self, kind: str, complete: bool) -> None:
        if self.on_first_step is not None:
            self.on_first_step()
            self.on_first_step = None
        events, breaks = self._pending, self._breaks
        for event in events:
            self._count(event)
        self._totals["graph_breaks"] += len(breaks)
        new = sum(e["new"] for e in events)
        self.unique += new
        backward_orphans, self._orphan_backward_s = self._orphan_backward_s, 0.0
        wall = time.time()
        sums = _sums(events) if events else _NO_COMPILES
        step = {
            "event": "step", "step": self.step, "boundary": kind, "complete": complete,
            "executions": None, "compiled": sums["frames_compiled"], "cached": None,
            "new_programs": new, "unique_programs": self.unique,
            "compile_seconds": sums["compile_seconds"] + backward_orphans,
            "host_transfers": 0, "fallback_ops": 0, "fallback_counts": {},
            "time": wall, "duration_s": wall - self._last_time, "pid": self.pid, "rank": None,
            "backend": "dynamo",
            "frames_compiled": sums["frames_compiled"],
            "recompiles": sums["recompiles"],
            "graph_breaks": len(breaks),
            "cache_limit_fallbacks": sums["cache_limit_fallbacks"],
            "failed_compiles": sums["failed_compiles"],
            "dynamo_seconds": sums["dynamo_seconds"],
            "backend_seconds": sums["backend_seconds"] + backward_orphans,
        }
        if events or breaks or backward_orphans or not complete:
            self.writer.write(*events, *breaks, step)  # one write per step: a kill keeps whole steps
        else:  # the steady state: the same line but for four numbers, without json.dumps
            self.writer.write_lines([_QUIET_STEP % (self.step, json.dumps(kind), self.unique, wall,
                                                    step["duration_s"], self.pid)])
        self._pending, self._breaks = [], []
        self._last_time = wall
        self.step += 1

    def finish(self, reason: str = "exit") -> None:
        if self.finished:
            return
        try:
            self.drain()
        finally:
            self.finished = True
        if self._xla_step() is not None:
            self._flush_passive()
        else:
            if self._pending or self._breaks or self._orphan_backward_s:
                self._close_step("exit", complete=False)
            if self.on_first_step is not None:  # no step at all: still say who ran
                self.on_first_step()
                self.on_first_step = None
            self.writer.write({"event": "end", "reason": reason, "pid": self.pid, "rank": None, "backend": "dynamo",
                               "steps": self.step, "unique_programs": self.unique, "time": time.time(),
                               "metrics": self.totals()})
        self.disarm()
        self.writer.close()

    def totals(self) -> dict:
        out = dict(self._totals)
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is not None:  # Dynamo's own process-wide counters, for cross-checking
            out["dynamo_frames"] = dict(utils.counters.get("frames", {}))
            out["unique_graphs"] = utils.counters.get("stats", {}).get("unique_graphs", 0)
        return out


_NO_COMPILES = {"frames_compiled": 0, "recompiles": 0, "cache_limit_fallbacks": 0, "failed_compiles": 0,
                "compile_seconds": 0.0, "dynamo_seconds": 0.0, "backend_seconds": 0.0}


def _sums(events: list[dict]) -> dict:
    return {
        "frames_compiled": sum(e["compiled"] for e in events),
        "recompiles": sum(e["recompile"] for e in events),
        "cache_limit_fallbacks": sum(e["fallback"] for e in events),
        "failed_compiles": sum(bool(e["failed"]) for e in events),
        "compile_seconds": sum(e["compile_seconds"] for e in events),
        "dynamo_seconds": sum(e["dynamo_seconds"] for e in events),
        "backend_seconds": sum(e["backend_seconds"] for e in events),
    }


# json.dumps of a step event without compiles or graph breaks, with %-slots for what varies
_QUIET_STEP = (
    '{"event":"step","step":%d,"boundary":%s,"complete":true,"executions":null,"compiled":0,"cached":null,'
    '"new_programs":0,"unique_programs":%d,"compile_seconds":0.0,"host_transfers":0,"fallback_ops":0,'
    '"fallback_counts":{},"time":%r,"duration_s":%r,"pid":%d,"rank":null,"backend":"dynamo",'
    '"frames_compiled":0,"recompiles":0,"graph_breaks":0,"cache_limit_fallbacks":0,"failed_compiles":0,'
    '"dynamo_seconds":0.0,"backend_seconds":0.0}'
)
