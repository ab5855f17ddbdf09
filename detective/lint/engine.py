"""Lint a set of paths: discover files, summarise each (in parallel), join across files.

Data flows one way: source -> FileSummary (per file) -> Project reach (all files) ->
Findings filtered by selection, per-file ignores and suppression comments.
"""

from __future__ import annotations

import fnmatch
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from detective.lint.analyze import SourceError, analyze, decode
from detective.lint.callgraph import Project
from detective.lint.config import Config
from detective.lint.model import FileSummary, Finding
from detective.lint.rule import expand_selectors, rules_by_code

DEFAULT_EXCLUDES = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__", "build",
     "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages",
     ".detective", "__pypackages__", "_build", "buck-out"}
)
PARALLEL_THRESHOLD = 24  # below this a process pool costs more than it saves
_LABEL = re.compile(r"`([^`]+)`")


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line problem)
    files_checked: int = 0
    summaries: list[FileSummary] = field(default_factory=list)


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


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _excluded(path: Path, config: Config) -> bool:
    if not config.exclude:
        return False
    relative = _relative(path, config.base)
    return any(fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern)
               for pattern in config.exclude)


@lru_cache(maxsize=4096)
def _package_parts(directory: Path) -> tuple[tuple[str, ...], str]:
    """Dotted package parts of a directory and the sys.path root above it."""
    if (directory / "__init__.py").is_file() and directory.parent != directory:
        parts, root = _package_parts(directory.parent)
        return (*parts, directory.name), root
    return (), str(directory)


def module_name(path: Path) -> tuple[str, str, bool]:
    absolute = path.resolve()
    parts, root = _package_parts(absolute.parent)
    is_package = absolute.stem == "__init__"
    name = ".".join(parts if is_package else (*parts, absolute.stem.split(".")[0]))
    return name or absolute.stem, root, is_package


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _summarise_file(job: tuple[str, str, str, bool, tuple[str, ...]]) -> FileSummary:
    path, module, root, is_package, roots = job
    try:
        with open(path, "rb") as handle:
            source = decode(handle.read())
        return analyze(source, path, module, root, is_package, extra_roots=roots)
    except SourceError as exc:
        return FileSummary(path=path, module=module, root=root, error=str(exc))
    except OSError as exc:
        return FileSummary(path=path, module=module, root=root,
                           error=f"cannot read: {exc.strerror or exc}")
    except Exception as exc:  # a linter bug must not lose the other files
        return FileSummary(path=path, module=module, root=root,
                           error=f"internal error while linting: {type(exc).__name__}: {exc}")


def summarise(files: list[Path], config: Config, jobs: int | None = None) -> list[FileSummary]:
    roots = tuple(config.roots)
    work = []
    for path in files:
        module, root, is_package = module_name(path)
        work.append((display_path(path), module, root, is_package, roots))
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(work) >= PARALLEL_THRESHOLD:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(_summarise_file, work, chunksize=max(1, len(work) // (jobs * 8))))
    return [_summarise_file(job) for job in work]


def lint_paths(paths: list[str], config: Config, select=None, ignore=None,
               jobs: int | None = None) -> LintResult:
    enabled = expand_selectors(select or config.select) - expand_selectors(
        [*config.ignore, *(ignore or [])]
    )
    files, errors = discover(paths, config)
    summaries = summarise(files, config, jobs)
    result = LintResult(errors=errors, summaries=summaries)
    good = []
    for summary in summaries:
        if summary.error:
            result.errors.append((summary.path, summary.error))
        else:
            good.append(summary)
    result.files_checked = len(good)
    result.findings = findings_for(good, config, enabled)
    return result


def findings_for(summaries: list[FileSummary], config: Config, enabled: set[str]) -> list[Finding]:
    project = Project(summaries)
    reach = project.reach()
    rules = rules_by_code()
    findings = []
    for summary in summaries:
        ignored_here = _per_file_ignores(summary.path, config)
        for candidate in summary.candidates:
            if candidate.code not in enabled or candidate.code in ignored_here:
                continue
            suppressed = summary.suppressions.get(candidate.line, frozenset())
            if suppressed is None or candidate.code in suppressed:
                continue
            path = reach.paths.get((summary.path, candidate.scope))
            if path is None:
                continue  # not in any traced region
            chain = tuple(_describe(project, node) for node in path) if len(path) > 1 else ()
            message = candidate.message
            if chain:
                label = _LABEL.search(message)
                what = label.group(1) if label else rules[candidate.code].name
                message += f" (via {' → '.join(chain)} → {what} at {summary.path}:{candidate.line})"
            findings.append(Finding(summary.path, candidate.line, candidate.column, candidate.code,
                                    rules[candidate.code].name, message, chain,
                                    region=reach.root_reason.get(path[0], "")))
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return findings


def _describe(project: Project, node: tuple[str, str]) -> str:
    scope = project.files[node[0]].scopes[node[1]]
    return f"{scope.display} ({node[0]}:{scope.line})"


def _per_file_ignores(path: str, config: Config) -> set[str]:
    codes: set[str] = set()
    if not config.per_file_ignores:
        return codes
    relative = _relative(Path(path), config.base)
    for pattern, selectors in config.per_file_ignores.items():
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(Path(path).name, pattern):
            codes |= expand_selectors(selectors)
    return codes


def lint_sources(sources: dict[str, str], config: Config | None = None, select=None) -> list[Finding]:
    """Lint in-memory files ({path: source}) as one project; raises SourceError on bad input.

    Paths are used as given for module names (``pkg/utils.py`` -> ``pkg.utils`` when
    ``pkg/__init__.py`` is among the sources, else ``utils``).
    """
    config = config or Config()
    enabled = expand_selectors(select or config.select)
    summaries = []
    for path, source in sources.items():
        module, is_package = _module_from_names(path, sources)
        root = str(Path(path).parent) if "." not in module else ""
        summaries.append(analyze(source, path, module, root, is_package, extra_roots=tuple(config.roots)))
    return findings_for(summaries, config, enabled)


def _module_from_names(path: str, sources: dict[str, str]) -> tuple[str, bool]:
    pure = Path(path)
    parts = [] if pure.stem == "__init__" else [pure.stem]
    directory = pure.parent
    while str(directory) not in {".", ""} and (directory / "__init__.py").as_posix() in sources:
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts), pure.stem == "__init__"
