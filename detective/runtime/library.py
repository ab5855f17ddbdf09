"""Is a file library code (torch, torch_xla, the detective, the standard library) or the user's?

The one definition used by the tracer (to pick the user frame that triggered a graph) and by the
report (to resolve IR locations). Standard library only: it runs inside the traced process.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
from functools import lru_cache

LIBRARY_PACKAGES = ("torch", "torch_xla", "detective", "typing_extensions")
_SITE_DIRS = ("site-packages", "dist-packages")


@lru_cache(maxsize=1)
def library_roots() -> tuple[tuple[str, ...], str]:
    """(prefixes of the library packages' folders and module files, the stdlib folder)."""
    prefixes: list[str] = []
    for name in LIBRARY_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)  # finds, does not import
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if spec.submodule_search_locations:
            prefixes += [os.path.join(os.path.realpath(p), "") for p in spec.submodule_search_locations]
        elif spec.origin and os.path.isabs(spec.origin):
            prefixes.append(os.path.realpath(spec.origin))  # a single-module library
    return tuple(prefixes), os.path.join(os.path.realpath(sysconfig.get_paths()["stdlib"]), "")


@lru_cache(maxsize=4096)
def is_library(path: str) -> bool:
    """True for a file of torch, torch_xla, the detective, typing_extensions or the standard library."""
    if not os.path.isabs(path):
        return False
    packages, stdlib = library_roots()
    real = os.path.realpath(path)
    if real.startswith(packages):
        return True
    parts = real.split(os.sep)
    if any(p in _SITE_DIRS for p in parts):  # another environment's copy, or user packages under stdlib
        i = max(i for i, p in enumerate(parts) if p in _SITE_DIRS)
        return i + 1 < len(parts) and parts[i + 1].removesuffix(".py") in LIBRARY_PACKAGES
    return real.startswith(stdlib)
