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
import threading
import time

ENV_STALL = "DETECTIVE_STALL_TIMEOUT"
STACKS = "stacks.{pid}.txt"
_armed: dict[int, object] = {}

# external/xla/xla/service/rendezvous.cc: "[id=0] Termination timeout for `all reduce RendezvousKey{...
# op_id=1}` of 10 seconds exceeded. ... Expected 2 threads to join the rendezvous, but only 1 of them arrived"
_RENDEZVOUS = re.compile(
    r"(?P<severity>[FWE])\S* .*rendezvous\.cc:\d+\].*?(?P<what>Termination timeout|may be stuck|stuck)"
    r".*?`(?P<op>[^`{]+?) RendezvousKey\{(?P<key>[^`]*)\}`"
)
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
        "event": "collective_timeout" if m["what"] == "Termination timeout" else "collective_stuck",
        "op": m["op"].strip(),
        "op_id": int(op_id.group(1)) if op_id else None,
        "expected": int(arrived["expected"]) if arrived else None,
        "arrived": int(arrived["arrived"]) if arrived else None,
        "message": line.strip()[:1000],
        "time": time.time(),
    }


class StderrTee:
    """Copy the job's stderr to ours as it comes; keep torch_xla's rendezvous messages as events."""

    def __init__(self, stream, write_event):
        self._stream = stream
        self._write_event = write_event
        self._thread = threading.Thread(target=self._pump, name="detective-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        pending = b""
        fd = self._stream.fileno()
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            if out is not None:
                out.write(chunk)
                out.flush()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            self._scan(lines)
            pending = pending[-4096:]
        self._scan([pending])

    def _scan(self, lines: list[bytes]) -> None:
        for raw in lines:
            if b"rendezvous" in raw:
                event = parse_rendezvous(raw.decode("utf-8", "replace"))
                if event is not None:
                    self._write_event(event)

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)


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
            current = stacks.setdefault(int(m.group(1), 16), [])
            continue
        f = _FILE.match(line)
        if f and current is not None:
            current.append({"file": f["file"], "line": int(f["line"]), "function": f["function"]})
    return stacks


class Watchdog:
    """Calls ``on_stall`` once when the record has not grown for ``timeout`` seconds."""

    def __init__(self, events_path: str, timeout: float):
        self.path = events_path
        self.timeout = timeout
        self._size = -1
        self._since = time.monotonic()

    def stalled(self) -> bool:
        try:
            size = os.path.getsize(self.path)
        except OSError:
            size = -1
        now = time.monotonic()
        if size != self._size:
            self._size, self._since = size, now
            return False
        return now - self._since >= self.timeout
