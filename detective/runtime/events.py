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
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
