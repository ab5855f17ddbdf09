"""Append-only JSON-lines writer: one os.write per batch, so a kill -9 keeps every earlier line.

Many writers share one file (ranks: processes and threads). O_APPEND makes each write land
whole at the end; the lock (flock between processes, a mutex between threads sharing the
descriptor) keeps a batch together even if the kernel writes it in pieces.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading

EVENTS_FILE = "events.jsonl"


class EventWriter:
    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def write(self, *events: dict) -> None:
        self.write_lines([json.dumps(e, separators=(",", ":")) for e in events])

    def write_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        view = memoryview(("\n".join(lines) + "\n").encode())
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                while view:
                    view = view[os.write(self._fd, view) :]
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
