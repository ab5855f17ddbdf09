"""How a path is shown to people: relative to a base folder when inside it, else as given."""

from __future__ import annotations

import os


def short_path(path: str | os.PathLike | None, base: str | None = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when it lies inside it;
    otherwise unchanged; "?" for no path."""
    if not path:
        return "?"
    path = os.fspath(path)
    if not os.path.isabs(path):
        return path
    try:
        relative = os.path.relpath(path, base or os.getcwd())
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative
