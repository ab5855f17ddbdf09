"""Hangs: torch_xla's collective timeouts on stderr, and `--stall-timeout` stack dumps.

In the traced process, :func:`arm` lets `detective run` ask for every thread's Python stack
(faulthandler on SIGUSR1, written to ``raw/stacks.<pid>.txt``). In `detective run`,
:class:`StderrTee` passes the job's stderr through and keeps XLA's rendezvous messages (on CPU
a collective whose peers never arrive aborts the job after 10 s), and :class:`Watchdog` notices
when no rank completed a step for S seconds.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sys
import time

ENV_STALL = "DETECTIVE_STALL_TIMEOUT"
STACKS = "stacks.{pid}.txt"
_armed: dict[int, object] = {}

# external/xla/xla/service/rendezvous.cc: "[id=0] Termination timeout for `all reduce RendezvousKey{...
# op_id=1}` of 10 seconds exceeded. ... Expected 2 threads to join the rendezvous, but only 1 of them arrived"
_RENDEZVOUS = re.compile(r"rendezvous\.cc:\d+\].*?`(?P<op>[^`{]+?) RendezvousKey\{(?P<key>[^`]*)\}`")
_ARRIVED = re.compile(r"Expected (?P<expected>\d+) threads to join the rendezvous, but only (?P<arrived>\d+)")
_OP_ID = re.compile(r"op_id=(\d+)")


def arm(out_dir: str) -> None:
    """In a traced process: dump every thread's stack on SIGUSR1 (only with --stall-timeout)."""
    if not os.environ.get(ENV_STALL) or not hasattr(signal, "SIGUSR1") or os.getpid() in _armed:
        return
    path = os.path.join(out_dir, "raw", STACKS.format(pid=os.getpid()))
    f = open(path, "w")
    faulthandler.register(signal.SIGUSR1, file=f, all_threads=True, chain=False)
    _armed[os.getpid()] = f


def parse_rendezvous(line: str) -> dict | None:
    m = _RENDEZVOUS.search(line)
    if m is None:
        return None
    arrived = _ARRIVED.search(line)
    op_id = _OP_ID.search(m["key"])
    return {
        "event": "collective_timeout" if "Termination timeout" in line else "collective_stuck",
        "op": m["op"].strip(),
        "op_id": int(op_id.group(1)) if op_id else None,
        "expected": int(arrived["expected"]) if arrived else None,
        "arrived": int(arrived["arrived"]) if arrived else None,
        "message": line.strip()[:1000],
        "time": time.time(),
    }


RENDEZVOUS = "rendezvous.cc"  # the lines the launcher's stderr tee keeps for us


def record_collective_messages(out_dir: str, lines: list[str], pid: int) -> None:
    """XLA's rendezvous warnings and aborts from the job's stderr, as events of the record."""
    from detective.runtime.events import EventWriter

    events = [e for e in (parse_rendezvous(line) for line in lines if RENDEZVOUS in line) if e is not None]
    if events:
        writer = EventWriter(os.path.join(out_dir, "events.jsonl"))
        writer.write(*({**e, "pid": pid} for e in events))
        writer.close()


# -- faulthandler's dump: "Thread 0x... (most recent call first):" then '  File "f", line N in fn' --
_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):$")
_FILE = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>.*)$')


def parse_stacks(text: str) -> dict[int, list[dict]]:
    """Thread id -> frames, innermost first."""
    stacks: dict[int, list[dict]] = {}
    current = None
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            tid = int(m.group(1), 16)
            if line.startswith("Current thread"):  # the main thread, where the signal is handled: first
                stacks = {tid: [], **{k: v for k, v in stacks.items() if k != tid}}
            current = stacks.setdefault(tid, [])
            continue
        f = _FILE.match(line)
        if f and current is not None:
            current.append({"file": f["file"], "line": int(f["line"]), "function": f["function"]})
    return stacks


class Watchdog:
    """Says when no step was recorded for ``timeout`` seconds.

    The clock starts once a traced process has imported torch_xla (its start event): the
    imports before it are not a stall. Start events and steps count as progress.
    """

    def __init__(self, events_path: str, timeout: float):
        self.path = events_path
        self.timeout = timeout
        self._offset = 0
        self._since: float | None = None

    def stalled(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                new = f.read()
        except OSError:
            return False
        now = time.monotonic()
        cut = new.rfind(b"\n") + 1  # whole lines only
        self._offset += cut
        if b'{"event":"step"' in new[:cut] or b'{"event":"start"' in new[:cut]:
            self._since = now
            return False
        return self._since is not None and now - self._since >= self.timeout


def _traced_pids(out_dir: str, launcher_child: int) -> tuple[list[int], list[dict]]:
    from detective.runtime.record import read_events

    events, _ = read_events(out_dir)
    pids = [e["pid"] for e in events if e.get("event") == "start" and e.get("rank") is None]
    return [p for p in dict.fromkeys(pids) if p != os.getpid() and _alive(p)], events


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _user_frame(frames: list[dict]) -> dict | None:
    from detective.runtime.library import is_library

    return next((f for f in frames if not is_library(f["file"])), frames[0] if frames else None)


def collect_stacks(out_dir: str, pids: list[int], events: list[dict], wait: float = 1.0) -> list[dict]:
    """Ask every traced process for its threads' stacks; one entry per rank (or per process without one)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass
    time.sleep(wait)
    threads = {(e.get("pid"), e.get("thread")): e.get("rank") for e in events if e.get("event") == "rank"}
    out = []
    for pid in pids:
        try:
            with open(os.path.join(out_dir, "raw", STACKS.format(pid=pid)), encoding="utf-8", errors="replace") as f:
                stacks = parse_stacks(f.read())
        except OSError:
            continue
        ranked = [(threads[(pid, tid)], tid, frames) for tid, frames in stacks.items() if (pid, tid) in threads]
        if not ranked and stacks:  # no rank known in it: its main thread (faulthandler's current one)
            tid, frames = next(iter(stacks.items()))
            ranked = [(None, tid, frames)]
        for rank, tid, frames in sorted(ranked, key=lambda r: (r[0] is None, r[0] or 0)):
            out.append({"rank": rank, "pid": pid, "thread": tid, "frame": _user_frame(frames),
                        "innermost": frames[0] if frames else None, "frames": frames})
    if any(s["rank"] is not None for s in out):  # launcher processes waiting on their ranks are noise
        out = [s for s in out if s["rank"] is not None]
    return out


def _terminate(pids: list[int], grace: float = 5.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def stop_stalled(out_dir: str, proc, timeout: float) -> None:
    """Record every rank's stack, then stop the job: SIGTERM, then SIGKILL after a grace period."""
    from detective.runtime.events import EventWriter

    pids, events = _traced_pids(out_dir, proc.pid)
    stacks = collect_stacks(out_dir, pids, events)
    writer = EventWriter(os.path.join(out_dir, "events.jsonl"))
    writer.write({"event": "stall", "pid": os.getpid(), "timeout": timeout, "time": time.time(), "stacks": stacks})
    writer.close()
    print(f"detective: no rank completed a step for {timeout:g} s: recorded every rank's stack, "
          "stopping the job", file=sys.stderr)
    _terminate(list(dict.fromkeys([*pids, proc.pid])))


def stop_orphans(out_dir: str, child_pid: int) -> None:
    """After the user stops the job: traced processes the child started would outlive it."""
    try:
        pids, _ = _traced_pids(out_dir, child_pid)
    except Exception:
        return
    for pid in pids:
        if pid != child_pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
