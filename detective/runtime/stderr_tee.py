"""Pass a child's stderr through unchanged while keeping the lines that match some patterns.

Some of torch_xla's warnings (a persistent-cache file that does not load) exist only as text on
the process's stderr. The launcher reads that stream and writes every byte on to its own
stderr as it arrives, so the user sees what they would have seen and nothing is held back when
the child crashes. When our stderr is a terminal the child gets a pseudo-terminal, so its
``isatty()`` (progress bars, colours) does not change.
"""

from __future__ import annotations

import os
import threading

_MAX_KEPT = 1000  # matching lines kept; the rest are counted


class StderrTee:
    def __init__(self, patterns: tuple[str, ...], target_fd: int = 2):
        self.patterns = patterns
        self.target_fd = target_fd
        self.kept: list[str] = []
        self.dropped = 0
        self._thread: threading.Thread | None = None
        self._partial = b""
        if _isatty(target_fd):
            import pty
            import tty

            self._read_fd, self.child_fd = pty.openpty()
            tty.setraw(self.child_fd)  # bytes pass as written: no \n -> \r\n, no echo
            _copy_window_size(target_fd, self.child_fd)
        else:
            self._read_fd, self.child_fd = os.pipe()

    def start(self) -> None:
        """Call after the child started: our copy of its end is closed, the reader runs."""
        os.close(self.child_fd)
        self._thread = threading.Thread(target=self._pump, name="detective-stderr", daemon=True)
        self._thread.start()

    def abandon(self) -> None:
        """The child never started."""
        for fd in (self.child_fd, self._read_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def finish(self, timeout: float = 5.0) -> list[str]:
        """Wait for the stream to end (every writer gone); a grandchild may keep it open: give up then."""
        if self._thread is not None:
            self._thread.join(timeout)
        return list(self.kept)

    def _pump(self) -> None:
        while True:
            try:
                data = os.read(self._read_fd, 1 << 16)
            except OSError:  # EIO: a pseudo-terminal whose last writer closed
                data = b""
            if not data:
                break
            _write_all(self.target_fd, data)
            self._scan(data)
        if self._partial:
            self._match(self._partial)
        try:
            os.close(self._read_fd)
        except OSError:
            pass

    def _scan(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > 1 << 16:  # a very long line without an end: keep its start only
            self._partial = self._partial[: 1 << 16]
        for line in lines:
            self._match(line)

    def _match(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if any(p in line for p in self.patterns):
            if len(self.kept) < _MAX_KEPT:
                self.kept.append(line)
            else:
                self.dropped += 1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue
        except OSError:
            return  # our stderr is gone: keep reading so the child never blocks


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _copy_window_size(source: int, dest: int) -> None:
    try:
        import fcntl
        import termios

        size = fcntl.ioctl(source, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dest, termios.TIOCSWINSZ, size)
    except (OSError, ImportError):
        pass
