"""Map an IR ``location=func@basename:line`` back to a user source file, and read its line.

torch_xla prints the basename and the innermost frame only, so a location is resolved against
the files the run's own frames name (full paths), then the run's working tree. A location whose
file is torch's, torch_xla's or the detective's is library code, not the answer. A file that
cannot be found (moved, or run elsewhere) keeps its printed location.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache

from detective.runtime.library import is_library, library_roots

_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "site-packages", "dist-packages", "node_modules",
              ".tox", ".nox", "build", "dist", ".detective", ".mypy_cache", ".pytest_cache"}
_WALK_LIMIT = 20_000
VALUE_READ = "access tensor value"  # in torch_xla's compilation cause for .item(), .cpu(), print(t)


@dataclass(frozen=True)
class Source:
    file: str  # full path when found, else the basename torch_xla printed
    line: int
    function: str
    found: bool = True

    def code(self) -> str | None:
        return line_text(self.file, self.line) if self.found else None


@lru_cache(maxsize=1)
def _library_basenames() -> frozenset[str]:
    names: set[str] = set()
    for root in library_roots()[0]:
        if not root.endswith(os.sep):
            names.add(os.path.basename(root))  # a single-module library
            continue
        for _, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            names.update(f for f in filenames if f.endswith(".py"))
    return frozenset(names)


@lru_cache(maxsize=512)
def _lines(path: str) -> tuple[str, ...] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return tuple(f.read().splitlines())
    except OSError:
        return None


def line_text(path: str, line: int) -> str | None:
    lines = _lines(path)
    if lines is None or not 1 <= line <= len(lines):
        return None
    return lines[line - 1].strip()


def excerpt(path: str, line: int, around: int = 2) -> list[tuple[int, str]]:
    lines = _lines(path) or ()
    lo, hi = max(1, line - around), min(len(lines), line + around)
    return [(n, lines[n - 1]) for n in range(lo, hi + 1)]


@lru_cache(maxsize=256)
def source_tree(path: str) -> ast.AST | None:
    lines = _lines(path)
    if lines is None:
        return None
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None


_SCOPE_NAMES = {ast.Lambda: "<lambda>", ast.DictComp: "<dictcomp>", ast.ListComp: "<listcomp>",
                ast.SetComp: "<setcomp>", ast.GeneratorExp: "<genexpr>"}


@lru_cache(maxsize=256)
def _scopes(path: str) -> tuple[tuple[int, int, bool, ast.AST], ...]:
    """(first line with decorators, last line, is a def, node) of every def, lambda and
    comprehension: one walk per file, however many lines are looked up in it."""
    tree = source_tree(path)
    if tree is None:
        return ()
    out = []
    for node in ast.walk(tree):
        is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if is_def or type(node) in _SCOPE_NAMES:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            out.append((start, getattr(node, "end_lineno", None) or start, is_def, node))
    return tuple(out)


def innermost_scope(path: str, line: int, defs_only: bool = False) -> ast.AST | None:
    """The innermost def (or, unless ``defs_only``, lambda or comprehension) around ``line``,
    decorators included; None at module level or when the file cannot be parsed."""
    best, best_span = None, None
    for start, end, is_def, node in _scopes(path):
        if (is_def or not defs_only) and start <= line <= end and (best_span is None or end - start < best_span):
            best, best_span = node, end - start
    return best


def enclosing_function(path: str, line: int) -> str | None:
    """Name of the innermost def/lambda/comprehension around ``line``; "<module>" at top level."""
    if source_tree(path) is None:
        return None
    node = innermost_scope(path, line)
    if node is None:
        return "<module>"
    return _SCOPE_NAMES.get(type(node)) or node.name


def enclosing_branch(path: str, line: int) -> tuple[int, str] | None:
    """The innermost ``if`` whose body or else holds ``line`` (not its condition): (line, text)."""
    tree = source_tree(path)
    if tree is None:
        return None
    best = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        body_start = node.body[0].lineno
        end = node.end_lineno or body_start
        if body_start <= line <= end and (best is None or node.lineno > best.lineno):
            best = node
    if best is None:
        return None
    return best.lineno, line_text(path, best.lineno) or ""


class Resolver:
    """Resolve IR locations for one run."""

    def __init__(self, frame_files: list[str], cwd: str | None):
        self.frame_files = [f for f in dict.fromkeys(frame_files) if not is_library(f)]
        self.cwd = cwd
        self._walked: dict[str, list[str]] | None = None

    def _cwd_files(self) -> dict[str, list[str]]:
        if self._walked is None:
            self._walked = {}
            count = dirs = 0
            if self.cwd and os.path.isdir(self.cwd):
                for directory, dirnames, filenames in os.walk(self.cwd):
                    dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
                    for name in filenames:
                        if name.endswith(".py"):
                            self._walked.setdefault(name, []).append(os.path.join(directory, name))
                            count += 1
                    dirs += 1
                    if count > _WALK_LIMIT or dirs > _WALK_LIMIT:  # a run started in / or ~: stop early
                        break
        return self._walked

    def resolve(self, function: str, basename: str, line: int) -> Source | None:
        """A user Source, or None for library code."""
        from_frames = [f for f in self.frame_files if os.path.basename(f) == basename]
        existing = [f for f in from_frames if os.path.isfile(f)] or [
            f for f in self._cwd_files().get(basename, []) if not is_library(f)
        ]
        for path in existing:
            found = enclosing_function(path, line)
            if found is not None and (found == function or function.startswith("<")):
                return Source(path, line, function)
        on_disk = [f for f in from_frames if os.path.isfile(f)]
        if on_disk:
            return Source(on_disk[0], line, function)  # the run's own file, edited since
        if from_frames:  # the run's file is gone (moved, or recorded elsewhere): keep its path
            return Source(from_frames[0], line, function, found=False)
        if basename in _library_basenames():
            return None
        return Source(basename, line, function, found=False)  # unknown file: keep what was printed

    def frame(self, frame: dict | None) -> Source | None:
        if not frame:
            return None
        path = frame["file"]
        found = os.path.exists(path)
        if not found:
            alt = self.resolve(frame["function"], os.path.basename(path), frame["line"])
            if alt is not None and alt.found:
                return alt
        return Source(path, frame["line"], frame["function"], found=found)


_NUMBER_CALLS = {"int", "float", "round", "len", "min", "max", "abs", "sum"}


def _python_number_evidence(node: ast.AST) -> bool:
    """An expression that makes a host-side Python number: int(...), math.*, len(...), .item(),
    batch["key"] (a collator field), ..."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name) and f.id in _NUMBER_CALLS:
                return True
            if isinstance(f, ast.Attribute) and (f.attr in ("item", "tolist") or (
                    isinstance(f.value, ast.Name) and f.value.id == "math")):
                return True
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str):
            return True
    return False


def _key(node: ast.AST) -> str | None:
    """"x" for a name, "self.x" for an attribute of a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def python_values_feeding(path: str, line: int) -> list[tuple[int, str]]:
    """Assignments earlier in the same function to names used on ``line`` that compute a Python
    number on the host (the usual way a value gets baked into a graph): [(line, text)]."""
    return _assignments_feeding(path, line, numbers_only=True)


def names_assigned_before(path: str, line: int) -> list[tuple[int, str]]:
    """The latest assignments earlier in the same function to names used on ``line`` (what a
    value read at ``line`` reads): [(line, text)]."""
    return _assignments_feeding(path, line, numbers_only=False)


def _assignments_feeding(path: str, line: int, numbers_only: bool) -> list[tuple[int, str]]:
    func = innermost_scope(path, line, defs_only=True)
    if func is None:
        return []
    used = {_key(n) for n in ast.walk(func) if _key(n) and isinstance(n.ctx, ast.Load)
            and n.lineno <= line <= (n.end_lineno or n.lineno)}
    latest: dict[str, ast.AST] = {}
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.lineno < line and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    key = _key(name)
                    if key in used and (key not in latest or latest[key].lineno < node.lineno):
                        latest[key] = node
    out = {}
    for node in latest.values():
        if not numbers_only or _python_number_evidence(node.value):
            out[node.lineno] = line_text(path, node.lineno) or ""
    return sorted(out.items())
