"""Read the files torch_xla appends to (PT_XLA_DEBUG output, saved tensors) as the run goes."""

from __future__ import annotations

import os

_READ_SIZE = 1 << 16


def drain(path: str) -> str:
    """Read a file torch_xla appends to, then empty it.

    torch_xla opens, appends and closes these files inside the sync call, on the calling thread,
    so between two syncs of that thread nothing is half-written.
    """
    try:
        with open(path, "r+b") as f:
            data = f.read()
            if data:
                f.seek(0)
                f.truncate()
    except FileNotFoundError:
        return ""
    return data.decode("utf-8", "replace")


class AppendedFile:
    """The new tail of a file torch_xla appends to; emptied once it passes `limit` bytes.

    Cheaper than `drain` per step: one fstat and one pread on a descriptor kept open.
    """

    def __init__(self, path: str, limit: int = 1 << 20):
        self.path = path
        self.limit = limit
        self._fd: int | None = None
        self._offset = 0

    def read_new(self) -> str:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                return ""
        chunks = []
        while True:  # one pread unless a step wrote more than 64 KiB
            chunk = os.pread(self._fd, _READ_SIZE, self._offset)
            chunks.append(chunk)
            self._offset += len(chunk)
            if len(chunk) < _READ_SIZE:
                break
        data = b"".join(chunks)
        if not data:
            return ""
        self._trim()
        return data.decode("utf-8", "replace")

    def skip(self) -> None:
        """Pass over what was appended since the last read without reading it (one fstat)."""
        if self._fd is None:
            return
        self._offset = os.fstat(self._fd).st_size
        self._trim()

    def _trim(self) -> None:
        if self._offset > self.limit:
            os.ftruncate(self._fd, 0)  # torch_xla appends, so its next write lands at 0
            self._offset = 0
