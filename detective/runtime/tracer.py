"""Turn torch_xla's debug output and metrics into step and execution events, as the run goes.

At each step boundary: if no graph ran since the last boundary, nothing happens (a sync with
nothing pending, or a second boundary right after another, is not a step). Otherwise the new
PT_XLA_DEBUG blocks are read (one per execution at level 2, plus one per compilation), the
metrics deltas are taken, and the step's events are appended in one write.
"""

from __future__ import annotations

import os
import sys
import time

from detective.runtime.cache_record import CacheRecorder, compile_env, configured
from detective.runtime.compile_dumps import GRAPH_SUFFIX, CompileDumps, graph_file_text, pair_modules, source_functions
from detective.runtime.appended import AppendedFile
from detective.runtime.debug_log import BlockCache
from detective.runtime.event_encoding import encode_execution, encode_step
from detective.runtime.events import EVENTS_FILE, EventWriter
from detective.runtime.library import is_library
from detective.runtime.metrics import MetricsProbe
from detective.runtime.progress import Progress

GRAPHS_DIR = "graphs"


class Tracer:
    def __init__(
        self,
        out_dir: str,
        mode: str,
        met,
        debug_file: str | None,
        dumps: CompileDumps | None = None,
        progress: bool = False,
    ):
        self.out_dir = out_dir
        self.mode = mode
        self.probe = MetricsProbe(met)
        self.debug_file = debug_file  # None: hashes unavailable, counts come from metrics only
        self._debug_tail = AppendedFile(debug_file) if debug_file else None
        self._blocks = BlockCache()
        self.dumps = dumps  # diagnose mode: XLA's compile-time dump, read after steps that compiled
        self.writer = EventWriter(os.path.join(out_dir, EVENTS_FILE))
        self.progress = Progress(progress)
        self.pid = os.getpid()
        self.rank: int | None = None
        self.step = 0  # number of the step now running
        self.seen: set[str] = set()
        self.unique = 0
        self.finished = False
        # (cache hits, debug text, encoded execution lines after "step") of the last steady step
        self._steady: tuple[int, str, list[str]] | None = None
        self._last_time = time.time()
        self.cache = CacheRecorder(met)
        self._baseline = self._snapshot()
        if dumps is not None:
            os.makedirs(os.path.join(out_dir, GRAPHS_DIR), exist_ok=True)

    # -- what the metrics looked like at the last boundary that ended a step --
    def _snapshot(self, previous: dict | None = None) -> dict:
        uncached, cached = self.probe.compiles()
        if previous is None or uncached != previous["uncached"]:
            count, total_ns, samples = self.probe.compile_time()
        else:  # nothing compiled: skip reading the sample list
            count, total_ns, samples = previous["compile_count"], previous["compile_ns"], []
        return {
            "uncached": uncached,
            "cached": cached,
            "compile_count": count,
            "compile_ns": total_ns,
            "compile_samples": samples,
            "transfers": self.probe.transfers(),
            "fallbacks": self.probe.fallbacks(),
            "cache": self.cache.counts(previous["cache"] if previous else None),
        }

    def start_event(self, source: str, versions: dict, extra: dict | None = None) -> dict:
        event = {
            "event": "start",
            "source": source,
            "pid": self.pid,
            "ppid": os.getppid(),
            "mode": self.mode,
            "argv": list(sys.argv),
            "python": sys.executable,
            "versions": versions,
            "hashes": self.debug_file is not None,
            "cache": configured(),
            "time": time.time(),
            "baseline": {
                "UncachedCompile": self._baseline["uncached"],
                "CachedCompile": self._baseline["cached"],
            },
        }
        event.update(extra or {})
        self.writer.write(event)
        return event

    def boundary(self, kind: str) -> None:
        if self.finished:
            return
        uncached, cached = self.probe.compiles()
        if uncached == self._baseline["uncached"] and cached == self._baseline["cached"]:
            return  # nothing ran since the last step ended
        self._close_step(kind, complete=True)

    def finish(self, metrics_source: str = "exit") -> None:
        """Record executions after the last boundary (an unfinished step) and the final totals."""
        if self.finished:
            return
        uncached, cached = self.probe.compiles()
        if uncached != self._baseline["uncached"] or cached != self._baseline["cached"]:
            self._close_step("exit", complete=False)
        self.finished = True
        self.progress.clear()
        if self.dumps is not None:
            self.dumps.clear()  # modules nobody paired (thread ranks' compiles): the disk stays flat
        self.writer.write(
            {
                "event": "end",
                "reason": metrics_source,
                "pid": self.pid,
                "rank": self.rank,
                "steps": self.step,
                "unique_programs": self.unique,
                "time": time.time(),
                "metrics": self.probe.totals(),
                "cache": {"config": configured(), "compile_env": compile_env(), "totals": self.cache.counts()},
            }
        )
        self.writer.close()

    # -- one step --
    def _close_step(self, kind: str, complete: bool) -> None:
        if self.rank is None and not getattr(self, "_identified", False):
            self._identify()
        before = self._baseline
        now = self._snapshot(before)
        compiled = now["uncached"] - before["uncached"]
        hits = now["cached"] - before["cached"]
        debug_text = self._debug_tail.read_new() if self._debug_tail else ""
        steady = self._steady
        cache = self.cache.step_cache(before["cache"], now["cache"])
        if compiled == 0 and steady is not None and steady[0] == hits and steady[1] == debug_text:
            # Same cache hits as last step, same blocks: only the step number changes.
            executed, new = hits, 0
            lines = [f'{{"event":"execution","step":{self.step},{rest}' for rest in steady[2]]
        else:
            executions = self._executions(debug_text, compiled + hits, compiled)
            executed = len(executions)
            new = self._mark_new(executions, now, before)
            if cache is not None:
                self.cache.classify(executions, cache, self.seen)
            if self.dumps is not None and compiled:
                self._save_graphs(executions)
            lines = [encode_execution(e, self._block_fields) for e in executions]
            self._steady = None
            if compiled == 0 and all(e["_block"] is not None and "cache" not in e for e in executions):
                self._steady = (hits, debug_text, [line.split(",", 2)[2] for line in lines])
        self.unique += new
        fallbacks = {
            name: count - before["fallbacks"].get(name, 0)
            for name, count in now["fallbacks"].items()
            if count != before["fallbacks"].get(name, 0)
        }
        wall = time.time()
        step_event = {
            "event": "step",
            "step": self.step,
            "boundary": kind,
            "complete": complete,
            "executions": executed,
            "compiled": compiled,
            "cached": hits,
            "new_programs": new,
            "unique_programs": self.unique,
            "compile_seconds": (now["compile_ns"] - before["compile_ns"]) / 1e9,
            "host_transfers": now["transfers"] - before["transfers"],
            "fallback_ops": sum(fallbacks.values()),
            "fallback_counts": fallbacks,
            "time": wall,
            "duration_s": wall - self._last_time,
            "pid": self.pid,
            "rank": self.rank,
        }
        if cache is not None:
            step_event["cache"] = cache
        lines.append(encode_step(step_event))
        self.writer.write_lines(lines)  # one write per step
        self._baseline = now
        self._last_time = wall
        self.progress.update(self.step, self.unique)
        self.step += 1

    def _identify(self) -> None:
        """Once the runtime is up (first step): which rank this process is, recorded once."""
        from detective.runtime.ranks import identity

        fields = identity()
        self.rank, self._identified = fields["rank"], True
        self.writer.write(fields)

    def _mark_new(self, executions: list[dict], now: dict, before: dict) -> int:
        """Fill compile seconds and the "new" flags; returns how many programs are new."""
        self._fill_compile_seconds(executions, now["compile_samples"], now["compile_count"] - before["compile_count"])
        new = 0
        for event in executions:
            h = event["graph_hash"]
            event["new"] = bool(event["compiled"] and h is not None and h not in self.seen)
            if event["new"]:
                self.seen.add(h)
                new += 1
            elif event["compiled"] and h is None:
                new += 1  # no hash to deduplicate on: trust the compile counter
        return new

    def _executions(self, debug_text: str, count: int, compiled: int) -> list[dict]:
        """One event per graph execution, from the debug blocks, padded from the counters."""
        events: list[dict] = []
        awaiting: dict[str, dict] = {}  # compiled, waiting for its own Execution block
        blocks = self._blocks.parse(debug_text)
        for block in blocks:
            if block.kind == "execution" and block.graph_hash in awaiting:
                awaiting.pop(block.graph_hash)
                continue
            event = self._execution_event(block, compiled=block.kind == "compilation")
            if block.kind == "compilation":
                awaiting[block.graph_hash] = event
            events.append(event)
        # Executions torch_xla ran without a block (no Python frame, e.g. autograd threads, or
        # debug output unavailable): keep the counts right, without a hash.
        missing_compiled = compiled - sum(e["compiled"] for e in events)
        while len(events) < count:
            is_compile = missing_compiled > 0
            missing_compiled -= is_compile
            events.append(self._execution_event(None, compiled=is_compile))
        for index, event in enumerate(events):
            event["index"] = index
        return events

    def _execution_event(self, block, compiled: bool) -> dict:
        """The per-execution fields; those from the debug block are added when encoding."""
        return {
            "_block": block,
            "event": "execution",
            "step": self.step,
            "graph_hash": block.graph_hash if block else None,
            "compiled": compiled,
            "compile_seconds": None,
            "pid": self.pid,
            "rank": self.rank,
        }

    def _block_fields(self, block) -> dict:
        frames = block.frames if block else []
        return {
            "graph_hash": block.graph_hash if block else None,
            "cause": block.cause if block else None,
            "graph_name": block.graph_name if block else None,
            "frames": frames,
            "frames_truncated": block.frames_truncated if block else False,
            "site": self._user_frame(frames),
            "inputs": block.inputs if block else None,
            "outputs": block.outputs if block else None,
            "unexpected": bool(block and block.kind == "unexpected_execution"),
        }

    @staticmethod
    def _user_frame(frames: list[dict]) -> dict | None:
        """Innermost frame outside library code: the line of user code that triggered it."""
        for frame in frames:
            if not is_library(frame["file"]):
                return frame
        return frames[-1] if frames else None

    @staticmethod
    def caller_site(frame) -> dict | None:
        """The innermost frame of user code at or above `frame`."""
        while frame is not None and is_library(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return None
        return {"file": frame.f_code.co_filename, "line": frame.f_lineno, "function": frame.f_code.co_name}

    @staticmethod
    def _fill_compile_seconds(events: list[dict], samples: list[float], new_samples: int) -> None:
        compiled = [e for e in events if e["compiled"]]
        recent = samples[-new_samples:] if new_samples > 0 else []
        if len(recent) != len(compiled):
            return  # cannot pair them one to one; the step total stays right
        for event, ns in zip(compiled, recent):
            event["compile_seconds"] = ns / 1e9

    def _save_graphs(self, events: list[dict]) -> None:
        """The HLO XLA dumped for each compile of this step, kept for the new programs."""
        modules = []
        for path in self.dumps.take():
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    modules.append((path, f.read()))
            except OSError:
                continue
        for event, path, text in pair_modules([e for e in events if e["compiled"]], modules):
            h = event["graph_hash"]
            if event["new"] and h is not None:
                rel = os.path.join(GRAPHS_DIR, h + GRAPH_SUFFIX)
                with open(os.path.join(self.out_dir, rel), "w", encoding="utf-8") as f:
                    f.write(graph_file_text(h, path, text, source_functions(text)))
                event["ir_path"] = rel
        self.dumps.discard()
