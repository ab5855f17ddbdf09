"""Inside the traced process: start the tracer the moment the user's code imports torch_xla.

Activated by the bootstrap ``sitecustomize`` when ``DETECTIVE_OUT`` is set. Until torch_xla is
imported it only sets a few environment variables and leaves one import hook in place, so
Python processes that never use torch_xla pay (almost) nothing.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import time

from detective.runtime.compile_dumps import DUMP_TO, dump_dir_of, with_dump_flags
from detective.runtime.import_hook import ImportHook

ENV_OUT = "DETECTIVE_OUT"
ENV_MODE = "DETECTIVE_MODE"
ENV_PARENT = "DETECTIVE_PARENT_PID"  # set by `detective run`: its direct child must have torch_xla
ENV_PROGRESS = "DETECTIVE_PROGRESS"
RAW_DIR = "raw"
MODES = ("count", "diagnose")

# What the graph hash or the programs depend on; recorded with every run.
ENV_PREFIXES = ("XLA_", "PT_XLA_", "PJRT_", "TPU_", "LIBTPU_", "DETECTIVE_")


def env_subset(environ) -> dict[str, str]:
    return {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}


def mode_env(mode: str) -> dict[str, str]:
    """Settings torch_xla reads once, before its first compile. Hashes depend on the IR ones."""
    env = {"PT_XLA_DEBUG_LEVEL": "2"}  # level 2: a block per execution, cache hits included
    # torch_xla collects every frame anyway; 8 (its default) often stops before the user's line.
    env["PT_XLA_DEBUG_MAX_FRAME"] = os.environ.get("PT_XLA_DEBUG_MAX_FRAME", "16")
    if mode == "diagnose":  # source lines on IR nodes, and on the HLO lowered from them
        env.update({"XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1"})
    return env


def process_files(out_dir: str, pid: int, mode: str, xla_flags: str = "") -> dict[str, str]:
    """Per-process paths for torch_xla's debug output (read once per process). Diagnose mode adds
    XLA's compile-time dump to the user's XLA_FLAGS (runtime/compile_dumps.py)."""
    raw = os.path.join(out_dir, RAW_DIR)
    files = {"PT_XLA_DEBUG_FILE": os.path.join(raw, f"debug.{pid}.log")}
    if mode == "diagnose":
        mine, inherited = dump_dir(out_dir, pid), dump_dir_of(xla_flags)
        if inherited is not None and os.path.dirname(inherited) == raw:  # a parent process's: not ours
            xla_flags = xla_flags.replace(DUMP_TO + inherited, DUMP_TO + mine)
        files["XLA_FLAGS"] = with_dump_flags(xla_flags, mine)
    return files


def dump_dir(out_dir: str, pid: int) -> str:
    return os.path.join(out_dir, RAW_DIR, f"xla_dump.{pid}")


def compile_dumps(out_dir: str, mode: str):
    """This process's reader of XLA's dump (diagnose mode), or None."""
    if mode != "diagnose":
        return None
    from detective.runtime.compile_dumps import CompileDumps

    path = dump_dir_of(os.environ.get("XLA_FLAGS", ""))
    if path is None:
        return None
    ours = os.path.dirname(os.path.abspath(path)) == os.path.abspath(os.path.join(out_dir, RAW_DIR))
    return CompileDumps(path, owned=ours, since=None if ours else time.time())


def _own_dump_dir_after_fork(out_dir: str) -> None:
    """A forked child parses XLA_FLAGS at its own first compile: give it its own dump directory,
    or it would write (and read) modules into its parent's."""
    files = process_files(out_dir, os.getpid(), "diagnose", os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = files["XLA_FLAGS"]


def versions(torch_xla_module=None) -> dict:
    import torch  # already imported by torch_xla

    from detective import __version__

    return {
        "python": sys.version.split()[0],
        "torch": getattr(torch, "__version__", None),
        "torch_xla": getattr(torch_xla_module, "__version__", None),
        "detective": __version__,
    }


def activate() -> None:
    out_dir = os.environ.get(ENV_OUT)
    if not out_dir:
        return
    mode = os.environ.get(ENV_MODE, "count")
    backend = os.environ.get("DETECTIVE_BACKEND", "xla")
    if backend in ("auto", "dynamo"):  # torch.compile: detective.runtime.dynamo_watch
        from detective.runtime.dynamo_watch import arm

        arm(out_dir, backend)
        if backend == "dynamo":
            return
    os.environ.update(process_files(out_dir, os.getpid(), mode, os.environ.get("XLA_FLAGS", "")))
    if mode == "diagnose":
        os.register_at_fork(after_in_child=lambda: _own_dump_dir_after_fork(out_dir))
    if os.environ.get(ENV_PARENT) == str(os.getppid()) and importlib.util.find_spec("torch_xla") is None \
            and (backend == "xla" or importlib.util.find_spec("torch") is None):
        _report_missing_torch_xla(out_dir)
    ImportHook("torch_xla", _start_tracing).install()


def _report_missing_torch_xla(out_dir: str) -> None:
    # Fail before the user's script runs; `detective run` turns this event into the error line.
    from detective.runtime.events import EventWriter

    EventWriter(os.path.join(out_dir, "events.jsonl")).write(
        {"event": "no_torch_xla", "pid": os.getpid(), "python": sys.executable}
    )
    sys.stderr.flush()
    os._exit(2)


def _start_tracing(torch_xla_module) -> None:
    try:
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met

        from detective.runtime import hang, hooks
        from detective.runtime.rank_tracer import Dispatch, install_spawn_hook
        from detective.runtime.tracer import Tracer

        out_dir = os.environ[ENV_OUT]
        mode = os.environ.get(ENV_MODE, "count")

        def process_tracer() -> Tracer:  # again in a forked child, for its own pid
            tracer = Tracer(
                out_dir,
                mode,
                met,
                debug_file=os.environ["PT_XLA_DEBUG_FILE"],
                dumps=compile_dumps(out_dir, mode),
                progress=os.environ.get(ENV_PROGRESS) != "0" and sys.stderr.isatty(),
            )
            tracer.start_event("run", versions(torch_xla_module), {"env": env_subset(os.environ)})
            _finish_with_multiprocessing(dispatch)
            hang.arm(out_dir)
            return tracer

        dispatch = Dispatch(process_tracer)
        dispatch.process_tracer()
        hooks.install(xm, dispatch.boundary)
        install_spawn_hook(dispatch, out_dir, mode)
        import torch_xla.runtime as xr

        first = dispatch.process_tracer()
        first.cache.wrap_initialize_cache(xr, first.caller_site, first.writer.write)
        # Registered after torch_xla's own atexit handler, so it runs first, runtime still up.
        atexit.register(dispatch.finish_process)
        _active.append(dispatch)
    except Exception as exc:  # never break the user's training because of the tracer
        print(f"detective: tracer did not start: {exc!r}", file=sys.stderr)


def _finish_with_multiprocessing(dispatch) -> None:
    """A multiprocessing child leaves through os._exit after its finalizers, skipping atexit."""
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:
        from multiprocessing import util

        util.Finalize(None, dispatch.finish_process, exitpriority=100)


_active: list = []


def active_tracer():
    """The tracer `detective run` started in this process, if any."""
    return _active[0].process_tracer() if _active else None
