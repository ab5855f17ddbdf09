"""In-process tracing: ``with detective.watch(out=DIR) as w:`` around a training loop.

Same events and record as ``detective run``, without a child process. torch_xla reads its debug
settings once: the debug level and file at the first compile of the process, XLA_IR_DEBUG at
import. So enter ``watch`` before the first graph runs (and, for diagnose mode, before
``import torch_xla``); otherwise counts still come from torch_xla's metrics, without hashes.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from datetime import datetime, timezone

from detective.runtime import child, hooks
from detective.runtime.compile_dumps import CompileDumps, dump_dir_of, with_dump_flags
from detective.runtime.launcher import XLA_EXTRA_HINT, default_out_dir, prepare_out_dir
from detective.runtime.record import SCHEMA, write_run_json
from detective.runtime.appended import drain
from detective.runtime.tracer import Tracer


class _Process:
    """Process-wide state: one hook, one set of debug files torch_xla keeps writing to."""

    hook_installed = False
    tracer: Tracer | None = None
    auto_step = True
    files: dict[str, str] = {}  # env name -> path, fixed for the life of the process
    dump_dir: str | None = None  # diagnose: XLA's compile-time dump directory (XLA_FLAGS), likewise
    threads = threading.local()  # .tracer: this thread's rank recorder (xmp.spawn thread ranks)
    shared = None  # rank_tracer.SharedCounters of the thread ranks

    @classmethod
    def on_boundary(cls, kind: str) -> None:
        rank_tracer = getattr(cls.threads, "tracer", None)
        if rank_tracer is not None:
            rank_tracer.boundary(kind)
        elif cls.tracer is not None:
            if cls.auto_step:
                cls.tracer.boundary(kind)
        else:
            _drain_all(cls.files)  # nobody watching: keep the files from growing


def _drain_all(files: dict[str, str]) -> None:
    for base in files.values():
        for path in glob.glob(base + "*"):  # XLA_SAVE_TENSORS_FILE gains a .<ordinal> suffix
            drain(path)
    if _Process.dump_dir is not None:
        CompileDumps(_Process.dump_dir, owned=True).clear()


class _SpawnedRanks:
    """What the spawn hook needs (see rank_tracer.Dispatch), for the watch active when xmp.spawn forked."""

    @staticmethod
    def thread_rank(out_dir: str, mode: str, source: str):
        from detective.runtime.metrics import MetricsProbe
        from detective.runtime.rank_tracer import ENV_SAVE, SharedCounters, ThreadRankTracer

        active = _Process.tracer
        if active is None:  # nothing is being watched
            return None
        import torch_xla.debug.metrics as met

        if _Process.shared is None:
            _Process.shared = SharedCounters(MetricsProbe(met))
        tracer = ThreadRankTracer(active.out_dir, active.mode, _Process.shared, os.environ[ENV_SAVE], source)
        _Process.threads.tracer = tracer
        return tracer

    @staticmethod
    def end_thread_rank() -> None:
        tracer = getattr(_Process.threads, "tracer", None)
        if tracer is not None:
            _Process.threads.tracer = None
            tracer.finish("thread_exit")

    @staticmethod
    def finish_process() -> None:
        pass  # the watch finishes its own record when its block ends


def _thread_rank_world() -> int:
    """Devices this process drives as separate ranks (>1: xmp.spawn threads); 1 otherwise."""
    if "torch_xla" not in sys.modules or threading.current_thread() is threading.main_thread():
        return 1
    try:
        import torch_xla
        import torch_xla.runtime as xr

        if not torch_xla._XLAC._xla_runtime_is_initialized():
            return 1  # asking would start the runtime, and xmp.spawn refuses to run after that
        if xr.world_size() > 1 and xr.addressable_device_count() > 1:
            return xr.addressable_device_count()
    except Exception:
        return 1
    return 1


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _debug_files(mode: str) -> dict[str, str]:
    """Point torch_xla's debug output at files we own, if it has not read its settings yet."""
    if _Process.files:
        return _Process.files
    import torch_xla.debug.metrics as met

    already_compiled = (met.counter_value("UncachedCompile") or 0) + (met.counter_value("CachedCompile") or 0)
    if already_compiled:
        return {}
    tmp = tempfile.mkdtemp(prefix=f"detective-{os.getpid()}-")
    atexit.register(shutil.rmtree, tmp, True)
    files = {"PT_XLA_DEBUG_FILE": os.path.join(tmp, "debug.log")}
    os.environ.update(child.mode_env(mode))
    os.environ.update(files)
    if mode == "diagnose":  # XLA parses XLA_FLAGS once, when the runtime starts (not at import)
        flags = os.environ.get("XLA_FLAGS", "")
        if dump_dir_of(flags) is None:
            _Process.dump_dir = os.path.join(tmp, "xla_dump")
            os.environ["XLA_FLAGS"] = with_dump_flags(flags, _Process.dump_dir)
    _Process.files = files
    return files


class watch:
    """Record programs compiled per step while the block runs.

    ``auto_step=True``: every sync-type boundary ends a step (as with ``detective run``);
    ``w.step()`` may be called too. ``auto_step=False``: only ``w.step()`` ends a step.
    """

    def __init__(self, out: str | os.PathLike | None = None, mode: str = "count", warmup: int = 2, auto_step: bool = True):
        if mode not in child.MODES:
            raise ValueError(f"mode must be one of {child.MODES}, not {mode!r}")
        self.out = os.fspath(out) if out is not None else None
        self.mode = mode
        self.warmup = warmup
        self.auto_step = auto_step
        self.tracer: Tracer | None = None
        self._meta: dict = {}
        self._delegated = False

    def __enter__(self) -> "watch":
        running = child.active_tracer()
        if running is not None:  # already under `detective run`: that record is the one
            warnings.warn(f"detective.watch: already traced by `detective run`; recording to {running.out_dir}")
            self.tracer, self._delegated, self.out = running, True, running.out_dir
            return self
        if _thread_rank_world() > 1:
            return self._enter_thread_rank()
        if _Process.tracer is not None:
            raise RuntimeError("detective.watch is already active in this process")
        if self.mode == "diagnose" and "torch_xla" in sys.modules:
            raise RuntimeError(
                "detective.watch(mode='diagnose') must start before `import torch_xla` "
                "(XLA_IR_DEBUG is read at import); or use: detective run --mode diagnose -- python ..."
            )
        if "torch_xla" not in sys.modules:
            os.environ.update(child.mode_env(self.mode))
        try:
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.debug.metrics as met
        except ImportError:
            raise ImportError(f"detective.watch needs torch_xla: {XLA_EXTRA_HINT}") from None
        self.out = self.out or default_out_dir()
        self._meta = {
            "schema": SCHEMA,
            "command": list(sys.argv),
            "cwd": os.getcwd(),
            "mode": self.mode,
            "warmup": self.warmup,
            "source": "watch",
            "start_time": _now(),
            "end_time": None,
            "exit_code": None,
            "status": "running",
        }
        prepare_out_dir(self.out, self._meta)
        files = _debug_files(self.mode)
        self.tracer = Tracer(
            self.out,
            self.mode,
            met,
            debug_file=files.get("PT_XLA_DEBUG_FILE"),
            dumps=CompileDumps(_Process.dump_dir, owned=True) if _Process.dump_dir and self.mode == "diagnose" else None,
            progress=os.environ.get(child.ENV_PROGRESS) != "0" and sys.stderr.isatty(),
        )
        _drain_all(files)  # drop output from before this watch
        start = self.tracer.start_event("watch", child.versions(torch_xla), {"env": child.env_subset(os.environ)})
        self._meta.update(versions=start["versions"], env=start["env"])
        if not files:
            warnings.warn(
                "detective.watch: torch_xla already ran a graph in this process, so its debug output "
                "cannot be redirected; recording counts from its metrics only (no graph hashes)"
            )
        if not _Process.hook_installed:
            hooks.install(xm, _Process.on_boundary)
            from detective.runtime.rank_tracer import install_spawn_hook

            # xmp.spawn (fork) from inside the watch: each device thread records as its own rank
            install_spawn_hook(_SpawnedRanks, self.out, self.mode)
            _Process.hook_installed = True
        _Process.tracer, _Process.auto_step = self.tracer, self.auto_step
        return self

    def _enter_thread_rank(self) -> "watch":
        """One of several device threads of this process (xmp.spawn on CPU): record it as its own rank."""
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met
        import torch_xla.runtime as xr

        from detective.runtime.metrics import MetricsProbe
        from detective.runtime.rank_tracer import ENV_SAVE, SharedCounters, ThreadRankTracer

        if self.out is None:
            raise ValueError("detective.watch in a multi-rank job needs out=DIR, the same for every rank")
        os.makedirs(os.path.join(self.out, child.RAW_DIR), exist_ok=True)
        if xr.global_ordinal() == 0:
            self._meta = {"schema": SCHEMA, "command": list(sys.argv), "cwd": os.getcwd(), "mode": self.mode,
                          "warmup": self.warmup, "source": "watch", "start_time": _now(), "end_time": None,
                          "exit_code": None, "status": "running", "world_size": xr.world_size()}
            write_run_json(self.out, self._meta)
        # torch_xla opens this per thread at the thread's first sync: enter watch before it
        save_base = os.environ.setdefault(ENV_SAVE, os.path.join(tempfile.mkdtemp(prefix="detective-"), "ir"))
        if _Process.shared is None:
            _Process.shared = SharedCounters(MetricsProbe(met))
        self.tracer = ThreadRankTracer(self.out, self.mode, _Process.shared, save_base, "watch")
        _Process.threads.tracer = self.tracer
        if not _Process.hook_installed:
            hooks.install(xm, _Process.on_boundary)
            _Process.hook_installed = True
        return self

    def step(self) -> None:
        """End the current step here (needed with auto_step=False; harmless after a sync)."""
        if self.tracer is not None:
            self.tracer.boundary("manual")

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._delegated or self.tracer is None:
            return False
        if getattr(_Process.threads, "tracer", None) is self.tracer:
            _Process.threads.tracer = None
            self.tracer.finish("watch_exit")
            if self._meta:  # rank 0 owns run.json
                self._meta.update(end_time=_now(), status="finished" if exc_type is None else "failed")
                write_run_json(self.out, self._meta)
            return False
        _Process.tracer = None
        try:
            self.tracer.finish("watch_exit")
        except Exception as error:  # never turn a finished training loop into a crash
            print(f"detective: could not finish the record: {error!r}", file=sys.stderr)
        end = time.time()
        self._meta.update(
            end_time=datetime.fromtimestamp(end, timezone.utc).isoformat(),
            status="finished" if exc_type is None else "failed",
            error=None if exc is None else f"{exc_type.__name__}: {exc}",
            steps=self.tracer.step,
            unique_programs=self.tracer.unique,
            final_metrics=self.tracer.probe.totals(),
        )
        write_run_json(self.out, self._meta)
        return False

    @property
    def run(self):
        """The record so far, loaded (see detective.load_run)."""
        from detective.runtime.record import load_run

        return load_run(self.out)
