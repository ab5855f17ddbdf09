"""Which files a lint run reads, and what each one is: discovery under the config's excludes,
and per file its absolute path, module name, ``sys.path`` root and the path shown to the user."""

from __future__ import annotations

import fnmatch
import os
from functools import lru_cache
from pathlib import Path, PurePath

from detective.lint.config import Config

DEFAULT_EXCLUDES = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__", "build",
     "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages",
     ".detective", "__pypackages__", "_build", "buck-out"}
)


def discover(paths: list[str], config: Config) -> tuple[list[Path], list[tuple[str, str]]]:
    files: list[Path] = []
    errors: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            errors.append((raw, "no such file or directory"))
        elif path.is_dir():
            for directory, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(
                    d for d in dirnames
                    if d not in DEFAULT_EXCLUDES and not d.endswith(".egg-info")
                    and not _excluded(Path(directory) / d, config)
                )
                for filename in sorted(filenames):
                    if filename.endswith((".py", ".pyi")):
                        candidate = Path(directory) / filename
                        if not _excluded(candidate, config):
                            files.append(candidate)
        elif path.is_file():
            files.append(path)  # named explicitly: linted whatever its suffix
        else:
            errors.append((raw, "not a regular file or directory"))
    unique = list(dict.fromkeys(files))
    return unique, errors


# What marks the top of a project: where its packaging or its version control starts.
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(paths: list[str]) -> Path | None:
    """The project the named paths belong to: the outermost of their nearest directories
    holding a project marker (a build script inside a package, ``__init__.py`` beside it,
    marks no project), if every path lies inside it. None for paths in no project, or in
    one rooted at the home directory or the filesystem root (a dotfiles repository is no
    code base to read)."""
    resolved = [Path(p).resolve() for p in paths]
    roots = {_nearest_root(p if p.is_dir() else p.parent) for p in resolved}
    if not roots or None in roots:
        return None
    root = min(roots, key=lambda r: len(r.parts))
    if root == Path(root.anchor) or root == Path.home().resolve():
        return None
    if not all(p == root or root in p.parents for p in resolved):
        return None
    return root


def _nearest_root(start: Path) -> Path | None:
    for directory in [start, *start.parents]:
        if any((directory / m).exists() for m in PROJECT_MARKERS) and not (directory / "__init__.py").exists():
            return directory
    return None


def is_project_dir(path: str) -> bool:
    """A directory that is no package of its own (``.``, ``src/``): the whole project is in view,
    batch builders included. A package directory or a list of files is only part of it."""
    where = Path(path)
    return where.is_dir() and not (where / "__init__.py").exists()


def default_project(paths: list[str]) -> tuple[str, ...]:
    """What a lint of ``paths`` reads as context when no ``--project`` is named: the project
    they belong to, unless a project directory is named itself. A file's findings then rest
    on the same facts whether it is linted alone or with the rest of its project."""
    if any(is_project_dir(p) for p in paths):
        return ()
    root = project_root(paths)
    return (str(root),) if root is not None else ()


def relative_path(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _excluded(path: Path, config: Config) -> bool:
    if not config.exclude:
        return False
    relative = relative_path(path, config.base)
    return any(fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern)
               for pattern in config.exclude)


def package_parts(directory: PurePath, is_package) -> tuple[tuple[str, ...], PurePath]:
    """Dotted package parts of a directory and the sys.path root above it, with
    ``is_package(d)`` saying whether directory ``d`` holds an ``__init__.py``."""
    parts: list[str] = []
    while is_package(directory) and directory.parent != directory and directory.name:
        parts.append(directory.name)
        parent = directory.parent
        if not is_package(parent) and parent.parent != parent and parent.name and is_package(parent.parent):
            # A directory without __init__.py between two packages is a namespace package
            # (PEP 420): optimum-neuron's backend/modules/decoder imports `...model_wrapper`.
            parts.append(parent.name)
            parent = parent.parent
        directory = parent
    return tuple(reversed(parts)), directory


@lru_cache(maxsize=4096)
def _package_parts(directory: Path) -> tuple[tuple[str, ...], str]:
    parts, root = package_parts(directory, lambda d: (d / "__init__.py").is_file())
    return parts, str(root)


@lru_cache(maxsize=8192)
def _resolved_dir(directory: str) -> Path:
    return Path(directory).resolve()


def absolute_path(path: Path) -> Path:
    """``path.resolve()`` with one resolve per directory rather than per file (keyed by the
    absolute directory, so a change of working directory never reuses a stale answer)."""
    return _resolved_dir(os.path.abspath(path.parent)) / path.name


def file_facts(path: Path) -> tuple[str, str, str, bool, str]:
    """(absolute path, module, root, is_package, path as shown): one resolve per file."""
    absolute = absolute_path(path)
    parts, root = _package_parts(absolute.parent)
    is_package = absolute.stem == "__init__"
    name = ".".join(parts if is_package else (*parts, absolute.stem.split(".")[0]))
    text, here = str(absolute), str(_resolved_dir(os.getcwd()))
    if text.startswith(here) and text[len(here):len(here) + 1] == os.sep:
        shown = text[len(here) + 1:]
    elif here == os.sep and text.startswith(os.sep):
        shown = text[1:]
    else:
        shown = path.as_posix()
    return text, name or absolute.stem, root, is_package, shown


_TEST_DIRS = frozenset({"test", "tests", "testing"})


def is_test_path(path: str) -> bool:
    """A test module by pytest's and unittest's conventions: under a ``test``/``tests``
    directory, or named ``test_*.py``, ``*_test.py`` or ``conftest.py``."""
    *dirs, name = path.replace("\\", "/").split("/")
    return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or any(d in _TEST_DIRS for d in dirs))
