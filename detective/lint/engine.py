"""Lint a set of paths: discover files, summarise each (in parallel), join across files.

Data flows one way: source -> FileSummary (per file) -> Project reach (all files) ->
Findings filtered by selection, per-file ignores and suppression comments.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from detective.lint.cache import CACHE_DIR, SummaryCache, content_hash
from detective.lint.callgraph import Project
from detective.lint.config import Config
from detective.lint.discovery import absolute_path, discover, file_facts, is_project_dir, package_parts, relative_path
from detective.lint.eager_backward import EagerBackwards
from detective.lint.entrances import EagerRoots
from detective.lint.environment import Environment
from detective.lint.export_code import EXPORT_NOTE, export_checked
from detective.lint.importable import cuda_only_imports, generation_sources, unimportable_files
from detective.lint.model import HANDED_DEVICE, ChainLink, FileSummary, Finding, at_least, only_through
from detective.lint.project_facts import TARGETS, project_facts
from detective.lint.rule import expand_selectors, rules_by_code
from detective.lint.arg_facts import ArgFacts
from detective.lint.xla_params import none_on_xla

PARALLEL_THRESHOLD = 24  # below this a process pool costs more than it saves
NOTICE_FILES = 300  # parsing this many files takes seconds: a run that reads a project for context says so


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line problem)
    files_checked: int = 0
    summaries: list[FileSummary] = field(default_factory=list)
    hidden: int = 0  # findings below the minimum severity, left out of ``findings``


def _summarise_file(job: tuple) -> FileSummary:
    # libcst and the rules are imported only when a file is analysed: a run answered from
    # the cache never pays for them.
    from detective.lint.analyze import SourceError, analyze, decode

    path, module, root, is_package, roots, raw = job
    try:
        if raw is None:
            with open(path, "rb") as handle:
                raw = handle.read()
        source = decode(raw)
        summary = analyze(source, path, module, root, is_package, extra_roots=roots)
    except SourceError as exc:
        summary = FileSummary(path=path, module=module, root=root, error=str(exc))
    except OSError as exc:
        return FileSummary(path=path, module=module, root=root,
                           error=f"cannot read: {exc.strerror or exc}")
    except Exception as exc:  # a linter bug must not lose the other files
        return FileSummary(path=path, module=module, root=root,
                           error=f"internal error while linting: {type(exc).__name__}: {exc}")
    summary.content_hash = content_hash(raw)
    return summary


def _size(job: tuple) -> int:
    raw = job[5]
    if raw is not None:
        return len(raw)
    try:
        return os.path.getsize(job[0])
    except OSError:
        return 0


def _run_jobs(work: list[tuple], jobs: int) -> list[FileSummary]:
    if jobs > 1 and len(work) >= PARALLEL_THRESHOLD:
        from concurrent.futures import ProcessPoolExecutor  # not imported on warm runs

        # Largest files first so no worker is left with a big one at the end; small
        # chunks keep both workers busy, and each result is one pickled summary.
        order = sorted(range(len(work)), key=lambda i: -_size(work[i]))
        results: list[FileSummary | None] = [None] * len(work)
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            chunk = max(1, min(8, len(work) // (jobs * 16)))
            for index, summary in zip(order, pool.map(_summarise_file, [work[i] for i in order],
                                                      chunksize=chunk)):
                results[index] = summary
        return results  # type: ignore[return-value]
    return [_summarise_file(job) for job in work]


def summarise(files: list[Path], config: Config, jobs: int | None = None,
              cache: SummaryCache | None = None, read: dict[Path, tuple] | None = None,
              notice=None) -> list[FileSummary]:
    """One summary per file, in order: from the cache when the content is unchanged.
    ``read``: what :func:`_result_key` already knows of a file (bytes, hash, ``file_facts``);
    ``notice(to_parse, total)``: called before parsing, when many files must be parsed."""
    roots = tuple(config.roots)
    summaries: list[FileSummary | None] = [None] * len(files)
    work, slots, keys = [], [], []
    read = read or {}
    for index, path in enumerate(files):
        raw, digest, facts = read.get(path) or (None, None, file_facts(path))
        absolute, module, root, is_package, shown = facts
        if cache is not None:
            try:
                raw = raw if raw is not None else path.read_bytes()
            except OSError:
                raw = None
            if raw is not None:
                # Keyed by the absolute path: the same file run from another directory
                # is the same entry; only the path it is shown as differs.
                key = SummaryCache.entry_key(absolute, module, root, is_package)
                cached = cache.get(key, digest or content_hash(raw))
                if cached is not None:
                    if cached.path != shown:
                        cached = replace(cached, path=shown)
                    summaries[index] = cached
                    continue
                keys.append(key)
            else:
                keys.append(None)
        work.append((shown, module, root, is_package, roots, raw))
        slots.append(index)
    if notice is not None and len(work) >= NOTICE_FILES:
        notice(len(work), len(files))
    results = _run_jobs(work, jobs or os.cpu_count() or 1)
    for position, (index, summary) in enumerate(zip(slots, results)):
        summaries[index] = summary
        if cache is not None and keys[position] is not None and summary.content_hash \
                and not (summary.error or "").startswith("internal error"):
            cache.put(keys[position], summary.content_hash, summary)
    if cache is not None:
        cache.save()
    return summaries  # type: ignore[return-value]


def cache_for(config: Config) -> SummaryCache:
    directory = (config.base if config.source is not None else Path.cwd()) / CACHE_DIR
    override = os.environ.get("DETECTIVE_CACHE_DIR")
    return SummaryCache(Path(override) if override else directory, roots=config.roots)


def lint_paths(paths: list[str], config: Config, select=None, ignore=None,
               jobs: int | None = None, use_cache: bool = False,
               project: list[str] | None = None, min_severity: str | None = None, notice=None) -> LintResult:
    """Lint ``paths``. With ``project``, files there (not reported on) are context for the
    cross-file pass too: chains and XLA reachability are those of the whole project.
    Findings below ``min_severity`` (default: the config's, "warning") are counted in
    ``hidden`` and left out. ``notice``: see :func:`summarise`.
    """
    result = _lint_paths(paths, config, select, ignore, jobs, use_cache, project, notice)
    minimum = min_severity or config.min_severity
    shown = [f for f in result.findings if at_least(f.severity, minimum)]
    result.hidden = len(result.findings) - len(shown)
    result.findings = shown
    return result


def _lint_paths(paths, config, select, ignore, jobs, use_cache, project, notice=None) -> LintResult:
    cache = cache_for(config) if use_cache else None
    codes = cache.rule_codes() if cache is not None else None
    if codes is None:
        codes = sorted(rules_by_code())
        if cache is not None:
            cache.save_rule_codes(codes)
    enabled = expand_selectors(select or config.select, codes) - expand_selectors(
        [*config.ignore, *(ignore or [])], codes
    )
    files, errors = discover(paths, config)
    whole = any(is_project_dir(p) for p in [*paths, *(project or [])])
    context_files: list[Path] = []
    if project:
        named = {absolute_path(f) for f in files}
        extra, _ = discover(project, config)
        context_files = [f for f in extra if absolute_path(f) not in named]
    read: dict[Path, tuple] | None = None
    result_key = None
    if cache is not None:
        read, result_key = _result_key(files, context_files, config, enabled, cache, whole)
        hit = cache.get_result(result_key)
        # Findings also rest on installed packages' classes: used only if those are unchanged.
        if hit is not None and len(hit) == 5 and Environment().valid(hit[4]):
            findings, file_errors, checked, hashes, _lookups = hit
            light = [FileSummary(path=p, module="", root="", content_hash=h) for p, h in hashes]
            return LintResult(findings=list(findings), errors=errors + list(file_errors),
                              files_checked=checked, summaries=light)
    summaries = summarise(files + context_files, config, jobs, cache, read=read, notice=notice)
    result = LintResult(errors=errors, summaries=summaries[:len(files)])
    good = []
    for position, summary in enumerate(summaries):
        if summary.error:
            if position < len(files):
                result.errors.append((summary.path, summary.error))
        else:
            good.append(summary)
    result.files_checked = sum(1 for s in summaries[:len(files)] if not s.error)
    reported = {s.path for s in summaries[:len(files)]}
    environment = Environment(store=cache.environment, answers=cache.environment_answers()) \
        if cache is not None else Environment()
    result.findings = findings_for(good, config, enabled,
                                   report=reported if context_files else None, environment=environment,
                                   whole=whole)
    if cache is not None and environment.dirty:
        cache.save_environment(environment.store)
    if cache is not None and environment.answered:
        cache.save_environment_answers(environment.answers())
    # Not when a file could not be read or hit a linter bug: that may pass next time.
    if cache is not None and not any(s.error and not s.content_hash for s in summaries):
        cache.put_result(result_key, (
            result.findings, result.errors[len(errors):], result.files_checked,
            [(s.path, s.content_hash) for s in summaries[:len(files)]], environment.lookups,
        ))
    return result


def _result_key(files, context_files, config: Config, enabled: set[str], cache: SummaryCache, whole: bool):
    """Everything a run's findings depend on, hashed; and what was read on the way, per file:
    (bytes, content hash, ``file_facts``), so that nothing is read, hashed or resolved twice."""
    read: dict[Path, tuple] = {}
    digest = hashlib.blake2b(digest_size=16)
    settings = (cache.file.name, sorted(enabled), sorted(config.per_file_ignores.items()),
                str(config.base), os.getcwd(), len(files), config.guess_modules, config.targets, whole,
                config.torch_version)
    digest.update(repr(settings).encode())
    for path in [*files, *context_files]:
        facts = file_facts(path)
        try:
            raw = path.read_bytes()
            content = content_hash(raw)
            read[path] = (raw, content, facts)
        except OSError:
            content = "unreadable"
            read[path] = (None, None, facts)
        absolute, module, root, is_package, _shown = facts
        digest.update(f"{absolute}\0{module}\0{root}\0{is_package}\0{content}\n".encode())
    return read, digest.hexdigest()


def findings_for(summaries: list[FileSummary], config: Config, enabled: set[str],
                 report: set[str] | None = None, environment: Environment | None = None,
                 whole: bool = True) -> list[Finding]:
    """``environment`` resolves base classes the project does not define (a fresh one,
    without an on-disk cache, when not given); ``whole``: the summaries are the whole
    project, not a few of its files (see :mod:`detective.lint.project_facts`)."""
    project = Project(summaries, environment if environment is not None else Environment(),
                      guess_modules=config.guess_modules)
    rules = rules_by_code()
    installed = "" if config.torch_version else project.environment.installed_version("torch")
    facts = project_facts(summaries, config.targets, whole,
                          (config.torch_version, "configured") if config.torch_version
                          else (installed, "installed") if installed else ("", ""))
    reach = xla_nones = eager = None
    args: ArgFacts | None = None
    unimportable = unimportable_files(summaries) if whole else {}  # lint/importable.py
    unimportable.update(generation_sources(summaries))
    unimportable.update({p: why for p, why in cuda_only_imports(summaries).items() if p not in unimportable})

    def arg_facts() -> ArgFacts:
        nonlocal args
        args = args or ArgFacts(project)
        return args

    backwards = EagerBackwards(project)
    project.guard_dead = lambda summary, scope, guard: bool(arg_facts().dead_entry(summary, scope, guard))
    findings = []
    for summary in summaries:
        if report is not None and summary.path not in report:
            continue
        ignored_here = _per_file_ignores(summary.path, config)
        for candidate in summary.candidates:
            if candidate.code not in enabled or candidate.code in ignored_here:
                continue
            suppressed = summary.suppressions.get(candidate.line, frozenset())
            if suppressed is None or candidate.code in suppressed:
                continue
            rule = rules[candidate.code]
            if candidate.assumes and not _assumptions_hold(project, summary, candidate, arg_facts):
                continue
            dead = ""  # what the project's calls pass says the match never runs or reads no tensor
            if candidate.guarded_by or candidate.rests_on:
                if candidate.guarded_by:  # under `if P is not None:` with P None on XLA across calls
                    if xla_nones is None:
                        xla_nones = none_on_xla(project)
                    if xla_nones.intersection(g.rstrip("+") for g in candidate.guarded_by):
                        continue
                dead = (arg_facts().dead_guard(summary, candidate) if candidate.guarded_by else "") \
                    or arg_facts().python_valued(summary, candidate)
            chain: tuple[ChainLink, ...] = ()
            candidate, eager_note = backwards.weigh(summary, candidate)  # lint/eager_backward.py
            severity, note = facts.weigh(candidate, rule.measured_below, summary.facts)  # project, file facts
            message = candidate.message + note + (eager_note if severity != "warning" else "") + dead
            if dead:
                severity = "info"
            elif severity == "warning" and summary.path in unimportable:
                severity = "info"
                message += f" ({unimportable[summary.path]})"
            if rule.applies_to == "region":
                reach = reach or project.reach()
                path = reach.paths.get((summary.path, candidate.scope))
                if path is None:
                    continue  # not in any traced region
                chain = tuple(_describe(project, node) for node in path) if len(path) > 1 else ()
                if chain:
                    what = candidate.subject or rule.name
                    message += (f" (via {' → '.join(map(str, chain))} → {what} "
                                f"at {summary.path}:{candidate.line})")
                region = reach.root_reason.get(path[0], "")
                via = project.cuda_only_via(path)
                if via is not None:  # flash-attention kernels, .cuda(): never on an XLA host
                    severity = "info"
                    message += f" ({only_through(_describe(project, via).function)})"
                elif severity == "warning":  # roots entered only from eager code (lint/entrances.py)
                    eager = eager or EagerRoots(project, facts.targets, whole, arg_facts)
                    why = eager.via(path)
                    if why is None and eager.guards is not None:
                        why = eager.guards.dead_candidate(summary, candidate) or None
                    if why is not None:
                        severity = "info"
                        message += f" ({why})"
                if severity == "warning" and candidate.code == "RC001" and "xla" not in facts.targets:
                    where = export_checked(summary, candidate.scope)
                    if where:
                        severity = "info"
                        message += f" ({EXPORT_NOTE.format(where=where)})"
            elif rule.applies_to == "xla-code":
                if not project.is_xla_code(summary.path, candidate.scope):
                    continue
                region = "XLA code"
            else:
                region = ""
            if not rule.cross_check(candidate, summary, project):
                continue
            findings.append(Finding(summary.path, candidate.line, candidate.column, candidate.code,
                                    rule.name, message, chain, region=region,
                                    fix=candidate.fix, fix_title=candidate.fix_title,
                                    subject=candidate.subject, severity=severity,
                                    costs_on=candidate.costs_on or TARGETS))
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return findings


def _assumptions_hold(project: Project, summary: FileSummary, candidate, arg_facts) -> bool:
    """A call's result taken for a tensor returns one; or a parameter taken for a device
    tensor (``%k``, see :data:`detective.lint.model.HANDED_DEVICE`) is handed one."""
    scope = summary.scopes.get(candidate.scope)
    class_name = scope.class_name if scope is not None else None
    return any(arg_facts().handed_device_tensor(summary, candidate.scope, t[len(HANDED_DEVICE):])
               if t.startswith(HANDED_DEVICE) else project.returns_tensor(t, summary, class_name)
               for t in candidate.assumes)


def _describe(project: Project, node: tuple[str, str]) -> ChainLink:
    scope = project.files[node[0]].scopes[node[1]]
    return ChainLink(node[0], scope.display, scope.line)


def _per_file_ignores(path: str, config: Config) -> set[str]:
    codes: set[str] = set()
    if not config.per_file_ignores:
        return codes
    relative = relative_path(Path(path), config.base)
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
    return findings_for(summarise_sources(sources, config), config, enabled)


def summarise_sources(sources: dict[str, str], config: Config | None = None) -> list[FileSummary]:
    config = config or Config()
    from detective.lint.analyze import analyze

    summaries = []
    for path, source in sources.items():
        module, is_package = _module_from_names(path, sources)
        root = str(Path(path).parent) if "." not in module else ""
        summaries.append(analyze(source, path, module, root, is_package, extra_roots=tuple(config.roots)))
    return summaries


def _module_from_names(path: str, sources: dict[str, str]) -> tuple[str, bool]:
    pure = PurePosixPath(path)
    parts, _ = package_parts(pure.parent, lambda d: (d / "__init__.py").as_posix() in sources)
    return ".".join(parts if pure.stem == "__init__" else (*parts, pure.stem)), pure.stem == "__init__"
