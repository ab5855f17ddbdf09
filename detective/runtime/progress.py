"""The live progress line `detective run` shows on a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    """One self-overwriting stderr line on a terminal, for long runs: after `delay` seconds,
    refreshed at most every `interval`, so it rarely lands in the middle of the script's output."""

    def __init__(self, enabled: bool, delay: float = 2.0, interval: float = 1.0):
        self.enabled = enabled
        self._interval = interval
        self._next = time.monotonic() + delay
        self._shown = False

    def update(self, step: int, programs: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._interval
        sys.stderr.write(f"\r\x1b[K[detective] step {step} · {programs} programs")
        sys.stderr.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
