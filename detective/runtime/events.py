"""Append-only JSON-lines writer: one os.write per batch, so a kill -9 keeps every earlier line."""

from __future__ import annotations

import json
import os

EVENTS_FILE = "events.jsonl"


class EventWriter:
    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *events: dict) -> None:
        self.write_lines([json.dumps(e, separators=(",", ":")) for e in events])

    def write_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        view = memoryview(("\n".join(lines) + "\n").encode())
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
