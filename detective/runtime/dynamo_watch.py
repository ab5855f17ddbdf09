"""Start the Dynamo recorder: under `detective run` (when the script imports torch), in-process
with ``detective.watch_compile()``, and end steps at ``optimizer.step()`` or ``detective.step()``.

Steps end through ``torch.optim.optimizer.register_optimizer_step_post_hook`` (public API: a hook
called after every optimizer's ``step()``), installed once per process. With several optimizers,
or gradient accumulation that calls ``step()`` once per accumulated batch, each call ends a step;
use ``auto_step=False`` and ``detective.step()`` to place the boundary yourself.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import warnings
from datetime import datetime, timezone

from detective.runtime.dynamo import DynamoRecorder
from detective.runtime.import_hook import ImportHook

BACKENDS = ("auto", "xla", "dynamo")
ENV_BACKEND = "DETECTIVE_BACKEND"


class _Process:
    recorder: DynamoRecorder | None = None
    auto_step = True
    hook = None  # the optimizer hook's handle, installed once


def _on_optimizer_step(_optimizer, _args, _kwargs) -> None:
    recorder = _Process.recorder
    if recorder is None or not _Process.auto_step:
        return
    try:
        recorder.boundary("optimizer")
    except Exception as exc:  # the recorder must never break training
        _Process.recorder = None
        print(f"detective: Dynamo recording stopped after an internal error: {exc!r}", file=sys.stderr)


def _install_step_hook() -> None:
    if _Process.hook is None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        _Process.hook = register_optimizer_step_post_hook(_on_optimizer_step)


def step() -> None:
    """End the current step of whatever records this process (Dynamo recorder, XLA tracer)."""
    if _Process.recorder is not None:
        _Process.recorder.boundary("manual")
        return
    from detective.runtime.child import active_tracer

    tracer = active_tracer()
    if tracer is not None:
        tracer.boundary("manual")


def _xla_step() -> int | None:
    """The step the XLA tracer is on, when one runs in this process (it then owns the steps)."""
    from detective.runtime.child import active_tracer

    tracer = active_tracer()
    return tracer.step if tracer is not None else None


def _versions() -> dict:
    import torch

    from detective import __version__

    xla = sys.modules.get("torch_xla")
    return {"python": sys.version.split()[0], "torch": getattr(torch, "__version__", None),
            "torch_xla": getattr(xla, "__version__", None), "detective": __version__}


# -- under `detective run` ------------------------------------------------------------------

def arm(out_dir: str, backend: str) -> None:
    """Called by the bootstrap: start recording the moment the script imports torch."""
    if "torch" in sys.modules:
        _start_for_run(out_dir, backend)
    else:
        ImportHook("torch", lambda _torch: _start_for_run(out_dir, backend)).install()


def _arm_compile_callbacks() -> None:
    """Catch the first compile too: arm the recorder's compile callbacks as soon as Dynamo is
    imported (importing it ourselves would cost seconds in scripts that never compile)."""
    if "torch._dynamo.callback" in sys.modules:
        if _Process.recorder is not None:
            _Process.recorder.drain()
        return
    ImportHook("torch._dynamo.callback",
               lambda _callback: _Process.recorder is not None and _Process.recorder.arm()).install()


def _start_for_run(out_dir: str, backend: str) -> None:
    try:
        from detective.runtime.child import env_subset

        recorder = DynamoRecorder(out_dir, xla_step=_xla_step if backend == "auto" else lambda: None)

        def write_start():
            recorder.start_event("run", _versions(), {"env": env_subset(os.environ)})

        if backend == "dynamo":
            write_start()
        else:  # auto: only once it is clear no XLA tracer owns the steps
            recorder.on_first_step = write_start
        _install_step_hook()
        _Process.recorder = recorder
        _arm_compile_callbacks()
        atexit.register(recorder.finish)
    except Exception as exc:  # never break the user's script because of the recorder
        print(f"detective: Dynamo recorder did not start: {exc!r}", file=sys.stderr)


def active_recorder() -> DynamoRecorder | None:
    return _Process.recorder


# -- in process -------------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class watch_compile:
    """Record torch.compile compiles per step while the block runs (``detective.watch`` for Dynamo).

    ``auto_step=True``: every ``optimizer.step()`` ends a step; ``w.step()`` or ``detective.step()``
    may be called too. ``auto_step=False``: only those end a step. Compiles from before the block
    are not counted.
    """

    def __init__(self, out: str | os.PathLike | None = None, warmup: int = 2, auto_step: bool = True):
        self.out = os.fspath(out) if out is not None else None
        self.warmup = warmup
        self.auto_step = auto_step
        self.recorder: DynamoRecorder | None = None
        self._meta: dict = {}
        self._delegated = False
        self._previous = (None, True)

    def __enter__(self) -> "watch_compile":
        from detective.runtime.launcher import default_out_dir, prepare_out_dir
        from detective.runtime.record import SCHEMA

        if _Process.recorder is not None and _Process.recorder.on_first_step is None \
                and os.environ.get("DETECTIVE_OUT") == _Process.recorder.out_dir:
            warnings.warn(f"detective.watch_compile: already recorded by `detective run` into {_Process.recorder.out_dir}")
            self.recorder, self._delegated, self.out = _Process.recorder, True, _Process.recorder.out_dir
            return self
        import torch  # noqa: F401  (the hook needs torch.optim)

        self.out = self.out or default_out_dir()
        self._meta = {"schema": SCHEMA, "command": list(sys.argv), "cwd": os.getcwd(), "mode": "count",
                      "backend": "dynamo", "warmup": self.warmup, "source": "watch", "start_time": _now(),
                      "end_time": None, "exit_code": None, "status": "running"}
        prepare_out_dir(self.out, self._meta)
        self.recorder = DynamoRecorder(self.out)
        self.recorder.baseline()
        start = self.recorder.start_event("watch", _versions())
        self._meta["versions"] = start["versions"]
        _install_step_hook()
        self._previous = (_Process.recorder, _Process.auto_step)
        _Process.recorder, _Process.auto_step = self.recorder, self.auto_step
        _arm_compile_callbacks()
        return self

    def step(self) -> None:
        if self.recorder is not None:
            self.recorder.boundary("manual")

    def __exit__(self, exc_type, exc, tb) -> bool:
        from detective.runtime.record import write_run_json

        if self._delegated or self.recorder is None:
            return False
        _Process.recorder, _Process.auto_step = self._previous
        try:
            self.recorder.finish("watch_exit")
        except Exception as error:
            print(f"detective: could not finish the record: {error!r}", file=sys.stderr)
        self._meta.update(end_time=datetime.fromtimestamp(time.time(), timezone.utc).isoformat(),
                          status="finished" if exc_type is None else "failed",
                          error=None if exc is None else f"{exc_type.__name__}: {exc}",
                          steps=self.recorder.step, unique_programs=self.recorder.unique,
                          final_metrics=self.recorder.totals())
        write_run_json(self.out, self._meta)
        return False

    @property
    def run(self):
        from detective.runtime.record import load_run

        return load_run(self.out)
