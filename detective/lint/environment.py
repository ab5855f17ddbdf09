"""Classes of installed packages, read from their source without importing anything.

``class Head(PreTrainedModel)``: is ``forward`` traced? The base is not in the linted
files, so we look for it in the environment the linter runs in: the top-level package
is found with :meth:`importlib.machinery.PathFinder.find_spec` (which, unlike
``importlib.util.find_spec("a.b")``, never imports ``a``), submodules by walking its
``submodule_search_locations`` ourselves, and each module file is parsed with :mod:`ast`
for its imports, classes, their bases and the buffers/parameters they register. Bases
are followed (through re-exports) up to ``torch.nn.Module`` or
``torch.autograd.Function``.

Anything that cannot be read (no source, a C extension, a file that does not parse, a
star import hiding the name, an inheritance cycle, too many hops) resolves to
``None``: the caller falls back to its guess. Parsed modules are kept per process and,
through :class:`~detective.lint.cache.SummaryCache`, on disk keyed by the file's
content hash.

Answers (``kind``, ``tensor_attrs``) are cached on disk too, with what they were read
from: every module name looked up, the file it was found in (or none) and that file's
size and modification time. :meth:`Environment.valid` re-checks those lookups (a few
``stat`` calls, no reading): a package installed, removed, upgraded or edited, or another
``sys.path``, drops the cached answers and they are worked out again.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.metadata
import os
import re
import sys
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Callable

from detective.lint.cache import paused_gc

MODULE = "torch.nn.modules.module.Module"
FUNCTION = "torch.autograd.function.Function"
# Names the torch package re-exports for the two roots, so the common case parses nothing.
KNOWN = {
    "torch.nn.Module": MODULE, MODULE: MODULE,
    "torch.autograd.Function": FUNCTION, FUNCTION: FUNCTION,
}
_BUILTINS = frozenset(dir(builtins))
_MAX_HOPS = 24  # re-exports plus inheritance depth
_MAX_BYTES = 4_000_000  # larger "modules" are generated data, not class hierarchies
_MAX_PARSED = 2_000  # files parsed per run: a bound on pathological re-export fan-outs


@dataclass
class ClassRecord:
    bases: list[str]  # dotted, imports expanded ("" for what we cannot name)
    tensor_attrs: list[str] = field(default_factory=list)  # register_buffer/parameter names


@dataclass
class ModuleRecord:
    imports: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassRecord] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # modules imported with *


Lookup = tuple  # (path, is_package, st_mtime_ns, st_size) of a module's file, or ()


class Environment:
    """Answers about classes of installed packages; every answer may be None (unknown).

    ``store``: parsed modules by path (a dict, or a function that loads it when the first
    module must be read); ``answers``: an earlier run's :meth:`answers`, used only when
    :meth:`valid` says nothing they were read from changed."""

    def __init__(self, search_path: list[str] | None = None, store: dict | Callable[[], dict] | None = None,
                 answers: dict | None = None):
        self.search_path = search_path  # None: sys.path
        self._store = store if store is not None else {}  # path -> (content hash, ModuleRecord)
        self.dirty = False  # the parsed-module store changed
        self.parsed = 0
        self._modules: dict[str, ModuleRecord | None] = {}
        self._kinds: dict[str, str | None] = {}
        self._tensor_attrs: dict[str, frozenset[str]] = {}
        self.lookups: dict[str, Lookup] = {}  # every module name looked up -> where it was found
        self._tops: dict[str, tuple | None] = {}  # top-level package -> (origin, search locations)
        self.answered = 0  # answers worked out (not from ``answers``)
        # Lookups are re-done with this run's search path, so another sys.path is seen too.
        if answers and self.valid(answers.get("lookups", {})):
            self.lookups.update(answers["lookups"])
            self._kinds.update(answers["kinds"])
            self._tensor_attrs.update(answers["tensor_attrs"])

    @property
    def store(self) -> dict:
        if callable(self._store):
            self._store = self._store()
        return self._store

    def answers(self) -> dict:
        """What a later run may reuse (see :meth:`valid`); plain data."""
        return {"lookups": dict(self.lookups), "kinds": dict(self._kinds),
                "tensor_attrs": dict(self._tensor_attrs)}

    def valid(self, lookups: dict[str, Lookup]) -> bool:
        """Does every module name still resolve to the same, unchanged file (or to none)?"""
        return all(self._lookup(dotted) == seen for dotted, seen in lookups.items())

    def _lookup(self, dotted: str) -> Lookup:
        found = self._locate(dotted)
        if found is None:
            return ()
        try:
            stat = os.stat(found[0])
        except OSError:
            return ()
        return (found[0], found[1], stat.st_mtime_ns, stat.st_size)

    def installed_version(self, distribution: str) -> str:
        """``major.minor`` of an installed distribution (``"2.9"`` for torch ``2.9.0+cpu``),
        read from its metadata on this search path without importing it; "" when it is not
        installed or has no readable version. The top-level module is looked up too, so an
        upgrade (its ``__init__.py`` rewritten) invalidates cached answers like any lookup."""
        self.module_file(distribution)
        try:
            found = next(iter(importlib.metadata.distributions(
                name=distribution, path=self.search_path if self.search_path is not None else sys.path)), None)
            version = found.version if found is not None else ""
        except (OSError, ValueError):
            return ""
        match = re.match(r"(\d+)\.(\d+)", version or "")
        return f"{match[1]}.{match[2]}" if match else ""

    # ------------------------------------------------------------------ files
    def module_file(self, dotted: str) -> tuple[Path, bool] | None:
        """(source file, is_package) of an importable module, found without importing."""
        if dotted not in self.lookups:
            self.lookups[dotted] = self._lookup(dotted)
        seen = self.lookups[dotted]
        return (Path(seen[0]), seen[1]) if seen else None

    def _locate(self, dotted: str) -> tuple[str, bool] | None:
        top, *rest = dotted.split(".")
        if top not in self._tops:
            try:
                spec = PathFinder.find_spec(top, self.search_path)
            except (ImportError, ValueError, OSError):
                spec = None
            self._tops[top] = None if spec is None else (spec.origin, list(spec.submodule_search_locations or []))
        found = self._tops[top]
        if found is None:
            return None
        origin, locations = found
        if not locations:
            return (origin, False) if not rest and origin and origin.endswith(".py") else None
        join, isdir, isfile = os.path.join, os.path.isdir, os.path.isfile
        if not rest:
            init = join(locations[0], "__init__.py")
            return (init, True) if isfile(init) else None
        for index, part in enumerate(rest):
            last = index == len(rest) - 1
            package = None
            for location in locations:
                candidate = join(location, part)
                if isdir(candidate):
                    package = candidate
                    break
                module = candidate + ".py"
                if isfile(module):
                    return (module, False) if last else None
            if package is None:
                return None
            if last:
                init = join(package, "__init__.py")
                return (init, True) if isfile(init) else None
            locations = [package]
        return None

    def _may_define(self, dotted: str, name: str) -> bool:
        """Cheap test before parsing a star-imported module: it names ``name`` or re-exports
        with ``*`` itself (transformers' models/__init__ fans out to hundreds of modules)."""
        if dotted in self._modules:
            return True
        found = self.module_file(dotted)
        if found is None:
            return False
        try:
            raw = found[0].read_bytes()
        except OSError:
            return False
        return name.encode() in raw or b"import *" in raw

    def module(self, dotted: str) -> ModuleRecord | None:
        if dotted in self._modules:
            return self._modules[dotted]
        self._modules[dotted] = None  # also breaks import cycles while parsing
        found = self.module_file(dotted)
        record = self._read(found[0], dotted, found[1]) if found else None
        self._modules[dotted] = record
        return record

    def _read(self, path: Path, dotted: str, is_package: bool) -> ModuleRecord | None:
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        if len(raw) > _MAX_BYTES:
            return None
        digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
        key = str(path)
        cached = self.store.get(key)
        if cached is not None and cached[0] == digest:
            return cached[1]
        self.parsed += 1
        if self.parsed > _MAX_PARSED:
            return None
        # The tree is gone when _parsed returns: re-enabling collection inside it made
        # the first collection walk the whole tree.
        with paused_gc():
            record = _parsed(raw, key, dotted, is_package)
        self.store[key] = (digest, record)
        self.dirty = True
        return record

    # ------------------------------------------------------------------ classes
    def find_class(self, dotted: str, hops: int = 0) -> tuple[str, ClassRecord] | None:
        """The class a dotted name refers to, through re-exports: (canonical name, record)."""
        if hops > _MAX_HOPS or "." not in dotted:
            return None
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.module(".".join(parts[:cut]))
            if module is None:
                continue
            name, rest = parts[cut], parts[cut + 1:]
            if name in module.classes and not rest:
                return f"{'.'.join(parts[:cut])}.{name}", module.classes[name]
            if name in module.imports:
                return self.find_class(".".join([module.imports[name], *rest]), hops + 1)
            for star in module.stars:  # from .modules import *
                if not self._may_define(star, name):
                    continue
                found = self.find_class(".".join([star, name, *rest]), hops + 1)
                if found is not None:
                    return found
            return None
        return None

    def kind(self, dotted: str) -> str | None:
        """"module", "function" (autograd), "other" (resolved, neither) or None (unknown)."""
        if dotted in KNOWN:
            return "module" if KNOWN[dotted] == MODULE else "function"
        if dotted in self._kinds:
            return self._kinds[dotted]
        self._kinds[dotted] = None  # inheritance cycles end as unknown
        result = self._kind(dotted)
        self._kinds[dotted] = result
        self.answered += 1
        return result

    def _kind(self, dotted: str) -> str | None:
        if dotted.split(".", 1)[0] in sys.builtin_module_names or dotted.startswith("builtins."):
            return "other"
        found = self.find_class(dotted)
        if found is None:
            return None
        canonical, record = found
        if canonical in KNOWN:
            return self.kind(canonical)
        unknown = False
        for base in record.bases:
            kind = self.kind(base) if base else None
            if kind in ("module", "function"):
                return kind
            unknown = unknown or kind is None
        return None if unknown else "other"

    def tensor_attrs(self, dotted: str) -> set[str]:
        """Buffers and parameters the class and its installed bases register."""
        if dotted not in self._tensor_attrs:
            self._tensor_attrs[dotted] = frozenset(self._registered(dotted))
            self.answered += 1
        return set(self._tensor_attrs[dotted])

    def _registered(self, dotted: str, hops: int = 0) -> set[str]:
        found = self.find_class(dotted) if hops <= _MAX_HOPS else None
        if found is None:
            return set()
        names = set(found[1].tensor_attrs)
        for base in found[1].bases:
            if base and base not in KNOWN:
                names |= self._registered(base, hops + 1)
        return names


def _parsed(raw: bytes, key: str, dotted: str, is_package: bool) -> ModuleRecord | None:
    try:
        tree = ast.parse(raw, filename=key)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _record(tree, dotted, is_package)


def _record(tree: ast.Module, dotted: str, is_package: bool) -> ModuleRecord:
    record = ModuleRecord()
    package = dotted if is_package else dotted.rpartition(".")[0]
    for node in tree.body:
        for inner in _top_statements(node):
            if isinstance(inner, ast.Import):
                for alias in inner.names:
                    if alias.asname:
                        record.imports[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".", 1)[0]
                        record.imports[head] = head
            elif isinstance(inner, ast.ImportFrom):
                base = inner.module or ""
                if inner.level:
                    parts = package.split(".") if package else []
                    parts = parts[: len(parts) - (inner.level - 1)] if inner.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                for alias in inner.names:
                    if alias.name == "*":
                        record.stars.append(base)
                    else:
                        record.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
            elif isinstance(inner, ast.ClassDef):
                bases = [_dotted(b, record.imports, dotted) for b in inner.bases]
                record.classes[inner.name] = ClassRecord(bases, sorted(_registered(inner)))
            elif isinstance(inner, ast.Assign) and len(inner.targets) == 1 \
                    and isinstance(inner.targets[0], ast.Name):
                value = _dotted(inner.value, record.imports, dotted)
                if value:  # Alias = SomeClass
                    record.imports[inner.targets[0].id] = value
    return record


def _top_statements(node: ast.stmt):
    """Module-level statements, looking into ``if``/``try`` (TYPE_CHECKING, optional imports)."""
    if isinstance(node, ast.If):
        for child in [*node.body, *node.orelse]:
            yield from _top_statements(child)
    elif isinstance(node, ast.Try):
        for child in [*node.body, *node.orelse, *node.finalbody,
                      *(s for h in node.handlers for s in h.body)]:
            yield from _top_statements(child)
    else:
        yield node


def _dotted(node: ast.expr, imports: dict[str, str], module: str) -> str:
    if isinstance(node, ast.Subscript):  # Generic[T], Base[int]
        node = node.value
    if isinstance(node, ast.Name):
        if node.id in imports:
            return imports[node.id]
        return f"builtins.{node.id}" if node.id in _BUILTINS else f"{module}.{node.id}"
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, imports, module)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _registered(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"register_buffer", "register_parameter"} and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in {"Parameter", "UninitializedParameter", "UninitializedBuffer"}:
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        names.add(target.attr)
    return names
