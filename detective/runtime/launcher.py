"""`detective run`: start the user's command with the tracer armed, then complete the record.

The child gets the bootstrap directory first on PYTHONPATH and the settings torch_xla must see
before it is imported. Its stdio is inherited; its exit code becomes ours once run.json is done.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from datetime import datetime, timezone

import detective
from detective.runtime import child
from detective.runtime.cache_record import DESERIALIZE_MESSAGE
from detective.runtime.cache_summary import summarize_cache
from detective.runtime.events import EVENTS_FILE
from detective.runtime.hang import ENV_STALL, RENDEZVOUS, record_collective_messages
from detective.runtime.ranks import group_by_rank
from detective.runtime.record import SCHEMA, main_pid, read_events, write_run_json
from detective.runtime.stderr_tee import StderrTee

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")
DETECTIVE_HOME = os.path.dirname(os.path.dirname(os.path.abspath(detective.__file__)))
XLA_EXTRA_HINT = "pip install 'recompile-detective[xla]'"


class LaunchError(Exception):
    """A problem with the command or the output directory: one line for the user, exit 2."""


def default_out_dir() -> str:
    base = os.path.join(".detective", "runs", datetime.now().strftime("%Y%m%d-%H%M%S"))
    out, n = base, 1
    while os.path.exists(out):
        n += 1
        out = f"{base}-{n}"
    return out


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, timezone.utc).isoformat() if t is not None else None


def prepare_out_dir(out_dir: str, meta: dict) -> None:
    if os.path.exists(os.path.join(out_dir, EVENTS_FILE)):
        raise LaunchError(f"output directory already holds a run: {out_dir} (pick another --out)")
    try:
        os.makedirs(os.path.join(out_dir, child.RAW_DIR), exist_ok=True)
        write_run_json(out_dir, meta)
        open(os.path.join(out_dir, EVENTS_FILE), "a").close()
    except OSError as exc:
        raise LaunchError(f"cannot write to output directory {out_dir}: {exc.strerror or exc}") from None


def child_env(out_dir: str, mode: str, progress: bool, backend: str = "xla") -> dict[str, str]:
    env = dict(os.environ)
    if backend != "dynamo":  # torch_xla's debug settings; a Dynamo-only run leaves them alone
        env.update(child.mode_env(mode))
    env["DETECTIVE_BACKEND"] = backend
    env.update(
        {
            child.ENV_OUT: os.path.abspath(out_dir),
            child.ENV_MODE: mode,
            child.ENV_PARENT: str(os.getpid()),
            child.ENV_PROGRESS: "1" if progress else "0",
            "DETECTIVE_HOME": DETECTIVE_HOME,
        }
    )
    env.pop("XLA_SAVE_TENSORS_FILE", None)  # set per process by the bootstrap, in diagnose mode
    env["PYTHONPATH"] = os.pathsep.join(p for p in (BOOTSTRAP_DIR, os.environ.get("PYTHONPATH")) if p)
    return env


def _wait(proc: subprocess.Popen, out_dir: str, stall_timeout: float | None = None) -> int:
    # Ctrl-C reaches the child from the terminal; we keep waiting so the record gets completed.
    from detective.runtime import hang

    def forward(signum, _frame):
        proc.send_signal(signum)
        hang.stop_orphans(out_dir, proc.pid)

    previous = signal.signal(signal.SIGTERM, forward)
    watchdog = hang.Watchdog(os.path.join(out_dir, EVENTS_FILE), stall_timeout) if stall_timeout else None
    try:
        while True:
            try:
                if watchdog is None:
                    return proc.wait()
                try:
                    return proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    if watchdog.stalled():
                        hang.stop_stalled(out_dir, proc, stall_timeout)
                        watchdog = None
            except KeyboardInterrupt:
                hang.stop_orphans(out_dir, proc.pid)
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(command: list[str], out_dir: str | None, mode: str, warmup: int, progress: bool = True,
        extra_env: dict[str, str] | None = None, stdout: int | None = None,
        backend: str = "xla", stall_timeout: float | None = None) -> tuple[int, str]:
    """Run the command traced. Returns (exit code, run directory).

    `extra_env` is added to the child's environment; `stdout` (a file descriptor) replaces the
    child's inherited stdout (cache-check keeps its own stdout for the verdict).
    """
    if not command:
        raise LaunchError("no command given: detective run [OPTIONS] -- python train.py ARGS...")
    if shutil.which(command[0]) is None:
        raise LaunchError(f"command not found: {command[0]}")
    out_dir = out_dir or default_out_dir()
    started = time.time()
    env = child_env(out_dir, mode, progress, backend)
    env.update(extra_env or {})
    if stall_timeout:
        env[ENV_STALL] = str(stall_timeout)
    meta = {
        "schema": SCHEMA,
        "command": list(command),
        "cwd": os.getcwd(),
        "mode": mode,
        "backend": backend,
        "warmup": warmup,
        "env": child.env_subset(env),
        "versions": {"detective": detective.__version__},
        "launcher_pid": os.getpid(),
        "start_time": _iso(started),
        "end_time": None,
        "exit_code": None,
        "status": "running",
    }
    prepare_out_dir(out_dir, meta)
    # torch_xla says why a cache file did not load, and XLA that a collective hangs, only there
    tee = StderrTee((DESERIALIZE_MESSAGE, RENDEZVOUS))
    try:
        proc = subprocess.Popen(command, env=env, stdout=stdout, stderr=tee.child_fd)
    except OSError as exc:
        tee.abandon()
        raise LaunchError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
    tee.start()
    returncode = _wait(proc, out_dir, stall_timeout)
    stderr_lines = tee.finish()
    record_collective_messages(out_dir, stderr_lines, proc.pid)
    exit_code = returncode if returncode >= 0 else 128 - returncode
    meta = complete_meta(out_dir, meta, exit_code, proc.pid)
    meta["cache"] = summarize_cache(read_events(out_dir)[0], meta["launcher_pid"],
                                    [line for line in stderr_lines if DESERIALIZE_MESSAGE in line])
    write_run_json(out_dir, meta)
    if meta["status"] == "no_torch_xla":
        raise LaunchError(
            f"torch_xla is not installed for {meta['python']}: install the xla extra, {XLA_EXTRA_HINT}"
        )
    return exit_code, out_dir


def complete_meta(out_dir: str, meta: dict, exit_code: int, child_pid: int) -> dict:
    events, _ = read_events(out_dir)
    meta = dict(meta, end_time=_iso(time.time()), exit_code=exit_code)
    missing = [e for e in events if e.get("event") == "no_torch_xla"]
    starts = {e["pid"]: e for e in events if e.get("event") == "start" and e.get("rank") is None}  # processes
    ends = {e["pid"]: e for e in events if e.get("event") == "end"}
    pid = main_pid(events, meta["launcher_pid"])
    if missing and not starts:
        meta.update(status="no_torch_xla", python=missing[0].get("python"))
        return meta
    meta["status"] = "finished" if exit_code == 0 else "failed"
    meta["processes"] = [
        {"pid": p, "ppid": s.get("ppid"), "argv": s.get("argv"), "finished": p in ends} for p, s in starts.items()
    ]
    if pid in starts:
        meta["versions"].update(starts[pid].get("versions") or {})
        meta["traced_env"] = starts[pid].get("env")
    ranks, _ = group_by_rank(events)
    lowest = next(iter(ranks.values()), None)
    end = lowest.end if lowest is not None else ends.get(pid)
    if end is not None:  # the lowest rank's (a thread rank shares its process id with its siblings)
        meta["final_metrics"] = end["metrics"]
        meta["steps"] = end["steps"]
        meta["unique_programs"] = end["unique_programs"]
    if len(ranks) > 1:
        meta["ranks"] = sorted(ranks)
    meta["child_pid"] = child_pid
    return meta
