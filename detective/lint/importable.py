"""Files whose code never runs as such.

Files that cannot be imported: a top-level relative import names a module the project
lacks (``from ...activations import ACT2FN`` in a file copied from another package "for
reference only"). Python raises ImportError when it imports such a file, so none of its
code runs; its findings are ``info``, with the import that decides it named.

A relative import resolves against the file's directory, not through ``sys.path``, so the
answer needs no environment: the module must be a file or a package directory among the
project's files, or on disk (a file the run excluded still imports, and ``name.*`` counts:
a built ``.so``, a ``.pyx``), or an extension module the project's ``setup.py`` builds. Only in a
whole-project run (a few files linted alone do not show what their package holds), and
only when the directory the import starts from holds project files (a path above the
linted tree says nothing). Imports under ``try``/``if`` are not recorded (a fallback may
be expected; see :func:`detective.lint.analyze._relative_imports`).

Files that import only with CUDA: a top-level import (not under ``try``/``if``) of a package
that installs and imports only with CUDA (``flash_attn``, ``mamba_ssm``: see
:data:`detective.lint.api_names.IMPORT_NEEDS_CUDA`), or of a project module that is such a
file (nanotron's ``nn/attention.py`` imports ``nn/llama3_ring_attention.py``, which imports
``flash_attn``). Importing a module runs its packages' ``__init__`` first, so a package
``__init__`` that is such a file makes every module under it one. The package itself
(state-spaces/mamba is ``mamba_ssm``) is judged by what its own modules import. None of their code runs on
an XLA host; under torch.compile on CUDA it does, as for other code that needs CUDA, and the
findings are ``info`` with the import chain named.

Sources of generated files: transformers writes each ``modeling_x.py`` from a
``modular_x.py`` and says so in the generated file's header ("This file was automatically
generated from src/transformers/models/x/modular_x.py"); its own import machinery skips
``modular_*`` files (``create_import_structure_from_path``). The source never runs, the
generated copy does and carries the same findings, so the source's findings are ``info``,
naming the generated file. Decided from a header among the linted files, matched to a linted
file by path suffix (the header's path is the repository's, ``src/`` and all).
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
from collections import Counter

from detective.lint.api_names import IMPORT_NEEDS_CUDA
from detective.lint.model import EXTENSION_FACT, GENERATED_FROM_FACT, FileSummary

_GENERATED_HEADER = re.compile(r"automatically generated from\s+(\S+\.py)", re.IGNORECASE)


def generated_from(source: str) -> str:
    """The source file a generated file's header names (in its first 15 lines), or ""."""
    head = "\n".join(source.splitlines()[:15])
    found = _GENERATED_HEADER.search(head)
    return found.group(1).rstrip(".") if found else ""


def generation_sources(summaries: list[FileSummary]) -> dict[str, str]:
    """Path -> why its findings are info, for linted files another linted file's header
    says it was generated from."""
    by_suffix: dict[str, list[str]] = {}
    for summary in summaries:
        for fact in summary.facts:
            if fact.startswith(GENERATED_FROM_FACT):
                by_suffix.setdefault(fact[len(GENERATED_FROM_FACT):], []).append(summary.path)
    if not by_suffix:
        return {}
    by_name: dict[str, list[tuple[str, str]]] = {}  # basename -> (normalised path, path as linted)
    for summary in summaries:
        path = posixpath.normpath(summary.path.replace(os.sep, "/"))
        by_name.setdefault(posixpath.basename(path), []).append((path, summary.path))
    found = {}
    for named, generated in by_suffix.items():
        made = sorted(generated, key=lambda p: (not posixpath.basename(p).startswith("modeling"), p))
        what = made[0] if len(made) == 1 else f"{made[0]} and {len(made) - 1} more"
        for path, shown in by_name.get(posixpath.basename(named), ()):
            if shown not in generated and _same_file(named, path):
                found[shown] = (f"this file is the source {what} {'is' if len(made) == 1 else 'are'} generated from; "
                                "the generated code is what runs, and the finding stands there")
    return found


def _same_file(named: str, path: str) -> bool:
    """Does the header's path name this linted file? They agree on their last three parts
    (fewer when either is shorter): the header names the repository's layout
    (``src/transformers/models/x/modular_x.py``), the linted path may be relative to the
    package or an installed copy (``.../site-packages/transformers/models/x/modular_x.py``)."""
    a, b = named.strip("/").split("/"), path.strip("/").split("/")
    k = min(3, len(a), len(b))
    return a[-k:] == b[-k:]


def unimportable_files(summaries: list[FileSummary], on_disk=None) -> dict[str, str]:
    """Path -> why it cannot be imported, for files whose relative imports name no module.
    ``on_disk(path)``: does a module or package ``path`` (no suffix) exist on disk?"""
    on_disk = on_disk or _on_disk
    extensions = tuple(f[len(EXTENSION_FACT):] for s in summaries for f in s.facts if f.startswith(EXTENSION_FACT))
    files = {posixpath.normpath(s.path.replace(os.sep, "/")) for s in summaries}
    dirs: set[str] = set()
    for path in files:
        parent = posixpath.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    found = {}
    for summary in summaries:
        for entry in summary.relative_imports:
            level, _, module = entry.partition(":")
            base = posixpath.dirname(posixpath.normpath(summary.path.replace(os.sep, "/")))
            for _ in range(int(level) - 1):
                base = posixpath.dirname(base)
            if base not in dirs:
                continue  # above the linted tree, or outside what the run sees
            package = summary.module.split(".") if summary.is_package else summary.module.split(".")[:-1]
            dotted = ".".join([*package[: len(package) - (int(level) - 1)], module])
            if any(dotted == e or dotted.startswith(e + ".") or e.endswith("." + dotted) for e in extensions):
                continue  # built by setup.py
            missing = _missing(base, module.split("."), files, dirs, on_disk)
            if missing:
                found[summary.path] = (f"this file cannot be imported: `from {'.' * int(level)}{module} import` "
                                       f"names no module ({missing} is not in the project)")
                break
    return found


def _missing(base: str, parts: list[str], files: set[str], dirs: set[str], on_disk) -> str:
    """The first component of ``base/a/b`` that is neither a module nor a package, or ""."""
    where = base
    for part in parts:
        where = posixpath.join(where, part)
        if f"{where}.py" in files or where in dirs or on_disk(where):
            continue
        return f"{where}.py"
    return ""


def _on_disk(where: str) -> bool:
    return os.path.isdir(where) or bool(glob.glob(glob.escape(where) + ".*"))


def cuda_only_imports(summaries: list[FileSummary]) -> dict[str, str]:
    """Path -> why it imports only with CUDA, for files whose top-level imports reach a
    package in :data:`IMPORT_NEEDS_CUDA` directly or through project modules (a module name
    two files share, such as scripts' ``utils``, is not followed)."""
    names = Counter(s.module for s in summaries if s.module)
    # The package itself (state-spaces/mamba is mamba_ssm): its own modules are judged by
    # what they import, through the module chain below.
    own = {s.module.split(".", 1)[0] for s in summaries if s.module}
    why: dict[str, str] = {}  # path -> the import that decides it
    cuda_modules: set[str] = set()  # unique module names of such files
    for summary in summaries:
        package = next((n.split(".", 1)[0] for n in summary.top_imports
                        if n.split(".", 1)[0] in IMPORT_NEEDS_CUDA and n.split(".", 1)[0] not in own), None)
        if package is not None:
            why[summary.path] = f"imports {package} at module level, which needs CUDA"
            if names[summary.module] == 1:
                cuda_modules.add(summary.module)
    changed = bool(cuda_modules)
    while changed:  # through project modules and their packages, to a fixed point
        changed = False
        for summary in summaries:
            if summary.path in why or not summary.module:
                continue
            own = _with_packages(summary.module)[:-1]  # pkg/__init__ runs before pkg.m
            reached = next((m for n in (*own, *summary.top_imports) for m in _with_packages(n)
                            if m in cuda_modules and m != summary.module), None)
            if reached is not None:
                why[summary.path] = f"imports {reached} at module level, which needs CUDA"
                if names[summary.module] == 1:
                    cuda_modules.add(summary.module)
                changed = True
    return {path: f"this file cannot be imported on an XLA host: it {reason}" for path, reason in why.items()}


def _with_packages(name: str) -> list[str]:
    """``a``, ``a.b``, ``a.b.c`` for ``a.b.c``: importing it runs each package on the way."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
