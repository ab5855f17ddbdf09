"""Record thread ranks: ``xmp.spawn`` on a multi-device process runs one thread per device.

The threads share torch_xla's counters and compile cache (whichever compiles a graph first
counts the miss), and PT_XLA_DEBUG writes every thread's blocks into one file without saying
whose. What is per thread: ``XLA_SAVE_TENSORS_FILE``, which torch_xla opens per thread as
``<path>.<device ordinal>`` (``thread_local``, at the thread's first sync) and appends to on that
thread inside every sync: the Python frames, the IR and the graph hash. So a thread rank's
steps come from its own file: a rank's unique programs are the distinct hashes it executed.

Counters that only exist process-wide (compile time, host transfers, fallbacks) are claimed
by whichever rank reaches its boundary next: totals stay right, the split is approximate.
"""

from __future__ import annotations

import os
import re
import threading
import time

from detective.runtime.debug_log import parse_frame, parse_saved_graphs
from detective.runtime.events import EventWriter
from detective.runtime.ranks import identity
from detective.runtime.appended import AppendedFile
from detective.runtime.event_encoding import encode_step
from detective.runtime.progress import Progress
from detective.runtime.tracer import GRAPHS_DIR, Tracer

ENV_SAVE = "XLA_SAVE_TENSORS_FILE"
_RECORD = re.compile(r"^\[[^\]\n]+\]\n(?P<body>.*?)^Graph Hash: (?P<hash>[0-9a-f]+)\s*\n", re.S | re.M)


def parse_records(text: str) -> list[tuple[str, list[dict]]]:
    """(graph hash, frames innermost first) of each complete saved record, in order."""
    records = []
    for m in _RECORD.finditer(text):
        body = m["body"]
        start = body.find("TensorsGraphInfo:\n")
        frames = []
        if start >= 0:
            for line in body[start + len("TensorsGraphInfo:\n"):].split("\n"):
                if not line.startswith("  "):
                    break
                frame = parse_frame(line)
                if frame is not None:
                    frames.append(frame)
        records.append((m["hash"], frames))
    return records


class SharedCounters:
    """Process-wide torch_xla counters, handed out once each to the rank that claims them first."""

    def __init__(self, probe):
        self.probe = probe
        self.lock = threading.Lock()
        self.compiled: set[str] = set()  # hashes some thread in this process already executed
        _, self._compile_ns, _ = probe.compile_time()
        self._transfers = probe.transfers()
        self._fallbacks = probe.fallbacks()

    def claim(self, hashes: list[str]) -> tuple[list[bool], float, int, dict[str, int]]:
        """(compiled flag per hash, compile seconds, host transfers, fallback counts) since the last claim."""
        with self.lock:
            flags = []
            for h in hashes:
                flags.append(h not in self.compiled)
                self.compiled.add(h)
            _, compile_ns, _ = self.probe.compile_time()
            transfers, fallbacks = self.probe.transfers(), self.probe.fallbacks()
            seconds = (compile_ns - self._compile_ns) / 1e9
            moved = transfers - self._transfers
            fell = {k: v - self._fallbacks.get(k, 0) for k, v in fallbacks.items() if v != self._fallbacks.get(k, 0)}
            self._compile_ns, self._transfers, self._fallbacks = compile_ns, transfers, fallbacks
            return flags, seconds, moved, fell


class ThreadRankTracer(Tracer):
    """One thread rank's recorder. Same events as :class:`Tracer`; steps from the rank's saved records."""

    def __init__(self, out_dir: str, mode: str, shared: SharedCounters, save_base: str, source: str,
                 writer: EventWriter | None = None):
        self.out_dir = out_dir
        self.mode = mode
        self.probe = shared.probe
        self.shared = shared
        self.debug_file = save_base
        self.ir_file = save_base if mode == "diagnose" else None
        self.writer = writer or EventWriter(os.path.join(out_dir, "events.jsonl"))
        self.progress = Progress(False)
        self.pid = os.getpid()
        self.step = 0
        self.seen: set[str] = set()
        self.unique = 0
        self.finished = False
        self._last_time = time.time()
        ident = identity(threaded=True)
        self.rank = ident["rank"]
        self._tail = AppendedFile(f"{save_base}.{_device_ordinal()}")
        if self.ir_file is not None:
            os.makedirs(os.path.join(out_dir, GRAPHS_DIR), exist_ok=True)
        self.writer.write(
            {"event": "start", "source": source, "pid": self.pid, "rank": self.rank, "mode": mode,
             "hashes": True, "time": self._last_time},
            ident,
        )

    def boundary(self, kind: str) -> None:
        if not self.finished:
            self._close_step(kind, complete=True)

    def finish(self, metrics_source: str = "exit") -> None:
        if self.finished:
            return
        self._close_step("exit", complete=False)
        self.finished = True
        self.writer.write({"event": "end", "reason": metrics_source, "pid": self.pid, "rank": self.rank,
                           "steps": self.step, "unique_programs": self.unique, "time": time.time(),
                           "metrics": self.probe.totals()})

    def _close_step(self, kind: str, complete: bool) -> None:
        text = self._tail.read_new()
        records = parse_records(text)
        if not records:
            return  # nothing ran on this rank since its last boundary
        hashes = [h for h, _ in records]
        compiled_flags, seconds, transfers, fallbacks = self.shared.claim(hashes)
        executions, new = [], 0
        for index, ((h, frames), compiled) in enumerate(zip(records, compiled_flags)):
            is_new = h not in self.seen
            if is_new:
                self.seen.add(h)
                new += 1
            executions.append({
                "event": "execution", "step": self.step, "index": index, "graph_hash": h,
                "compiled": compiled, "new": is_new, "compile_seconds": None, "pid": self.pid, "rank": self.rank,
                "cause": None, "graph_name": None, "frames": frames, "frames_truncated": False,
                "site": self._user_frame(frames), "inputs": None, "outputs": None, "unexpected": False,
            })
        if self.ir_file is not None:
            self._save_records(text, executions)
        self.unique += new
        wall = time.time()
        step_event = {
            "event": "step", "step": self.step, "boundary": kind, "complete": complete,
            "executions": len(executions), "compiled": sum(compiled_flags),
            "cached": len(executions) - sum(compiled_flags), "new_programs": new, "unique_programs": self.unique,
            "compile_seconds": seconds, "host_transfers": transfers, "fallback_ops": sum(fallbacks.values()),
            "fallback_counts": fallbacks, "time": wall, "duration_s": wall - self._last_time,
            "pid": self.pid, "rank": self.rank,
        }
        self.writer.write(*executions)
        self.writer.write_lines([encode_step(step_event)])
        self._last_time = wall
        self.step += 1

    def _save_records(self, text: str, executions: list[dict]) -> None:
        saved = parse_saved_graphs(text)
        for event in executions:
            h = event["graph_hash"]
            if event["new"] and h in saved:
                rel = os.path.join(GRAPHS_DIR, h + ".txt")
                path = os.path.join(self.out_dir, rel)
                if not os.path.exists(path):  # another rank may have saved the same graph
                    with open(path, "w") as f:
                        f.write(saved[h])
                event["ir_path"] = rel


class Dispatch:
    """Routes each step boundary to the recorder of the thread that reached it."""

    def __init__(self, process_tracer_factory):
        self._factory = process_tracer_factory
        self._local = threading.local()
        self.process: Tracer | None = None
        self.threads: dict[int, ThreadRankTracer] = {}
        self.shared: SharedCounters | None = None
        self.threaded = False  # thread ranks recorded the graphs: the process recorder must not count them
        self._lock = threading.RLock()

    def process_tracer(self) -> Tracer:
        tracer = self.process
        if tracer is None or tracer.pid != os.getpid():  # first use, or a forked child
            with self._lock:
                tracer = self.process
                if tracer is None or tracer.pid != os.getpid():
                    tracer = self.process = self._factory()
        return tracer

    def boundary(self, kind: str) -> None:
        tracer = getattr(self._local, "tracer", None)
        (tracer or self.process_tracer()).boundary(kind)

    def thread_rank(self, out_dir: str, mode: str, source: str) -> ThreadRankTracer:
        """Start recording the calling thread as its own rank (after its default device is set)."""
        process = self.process_tracer()
        with self._lock:
            if self.shared is None:
                self.shared = SharedCounters(process.probe)
            self.threaded = True
        save_base = os.environ[ENV_SAVE]
        tracer = ThreadRankTracer(out_dir, mode, self.shared, save_base, source,
                                  writer=process.writer)
        self._local.tracer = tracer
        self.threads[tracer.rank] = tracer
        return tracer

    def finish_process(self) -> None:
        """At exit: finish this process's own recorder (never one inherited through fork)."""
        process = self.process
        if process is not None and process.pid == os.getpid():
            if self.threaded and not process.finished:
                process._baseline = process._snapshot()  # the thread ranks' graphs are theirs
            process.finish()

    def end_thread_rank(self) -> None:
        tracer = getattr(self._local, "tracer", None)
        if tracer is not None:
            self._local.tracer = None
            tracer.finish("thread_exit")


def prepare_threads(out_dir: str, pid: int) -> str:
    """Before the rank threads' first sync: per-thread saved records, and PT_XLA_DEBUG off (it
    would mix every thread's blocks into one file). Returns the saved-records base path."""
    base = os.environ.get(ENV_SAVE) or os.path.join(out_dir, "raw", f"ir.{pid}")
    os.environ[ENV_SAVE] = base
    os.environ["PT_XLA_DEBUG_LEVEL"] = "0"
    return base


def install_spawn_hook(dispatch: Dispatch, out_dir: str, mode: str) -> None:
    """Wrap torch_xla's per-device thread runner so each device thread records as its own rank.

    ``_run_thread_per_device`` is what both xmp.spawn start methods run in the worker
    process; the wrapper keeps its module and name, so the spawn start method pickles it.
    """
    import functools

    from torch_xla._internal import pjrt

    original = pjrt._run_thread_per_device
    if getattr(original, "__detective__", False):
        return

    @functools.wraps(original)
    def _run_thread_per_device(local_rank, local_world_size, fn, initializer_fn):
        threaded = []

        def initialize(rank, world):
            initializer_fn(rank, world)
            import torch_xla.core.xla_model as xm

            if len(xm.get_xla_supported_devices()) > 1:
                prepare_threads(out_dir, os.getpid())
                threaded.append(True)

        def rank_fn():
            if threaded:
                dispatch.thread_rank(out_dir, mode, "spawn")
            try:
                return fn()
            finally:
                dispatch.end_thread_rank()

        try:
            return original(local_rank, local_world_size, rank_fn, initialize)
        finally:
            dispatch.finish_process()  # forked workers leave through os._exit: no atexit

    _run_thread_per_device.__detective__ = True
    pjrt._run_thread_per_device = _run_thread_per_device


def _device_ordinal() -> int:
    """The suffix torch_xla gives this thread's saved-records file: its device's ordinal."""
    import torch_xla

    return torch_xla.device().index
