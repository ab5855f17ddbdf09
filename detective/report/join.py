"""Put each attributed recompile, and each value read that cut steps, next to the linter's findings.

A finding relates to a recompile when it is at the attributed line, on the ``if`` around a
structural change, at a line computing a Python number the line uses, in the same function, or
on a call chain that runs through that function.
(Value reads that cut steps have their own section of the report; a finding at one is not
counted for every recompile that happened in such a step.) A recompile with no related finding
is a gap in the linter, and is reported as one.

:func:`join` returns the :class:`~detective.report.model.Links`; the attribution is not modified.
"""

from __future__ import annotations

import os
from pathlib import Path

from detective.lint.config import ConfigError, load_config
from detective.lint.discovery import default_project
from detective.lint.engine import lint_paths
from detective.report.model import (
    AT_LINE, FEEDING, IN_CHAIN, IN_FUNCTION, ON_BRANCH, RELATIONS, SAME_NAME, Links, RunAttribution,
)
from detective.report.sources import innermost_scope


def _real(path: str) -> str:
    return os.path.realpath(path)


def lint_files(attribution, paths: list[str] | None = None, cwd: str | None = None):
    """Run the linter over ``paths`` or the user files the attribution names. (findings, errors)"""
    if not paths:
        files = set()
        sources = [src for item in attribution.items for src in [item.source, item.trigger, *item.split_by]]
        sources += [sync.source for sync in attribution.host_syncs]
        for src in sources:
            if src is not None and src.found and os.path.isfile(src.file):
                files.add(src.file)
        paths = sorted(files)
    if not paths:
        return [], []
    try:
        config = load_config(start=Path(cwd) if cwd and os.path.isdir(cwd) else None)
    except ConfigError as exc:
        return [], [("config", str(exc))]
    # Every severity: a read of a CPU-made tensor ("info") still explains a graph break. The
    # files' project is context, as for `detective lint` (chains from a step in another file).
    result = lint_paths(list(paths), config, min_severity="info", project=list(default_project(paths)) or None,
                        use_cache=True)
    return result.findings, result.errors


def _function_span(path: str, line: int) -> tuple[int, int, str] | None:
    node = innermost_scope(path, line, defs_only=True)
    if node is None:
        return None
    return node.lineno, node.end_lineno or node.lineno, node.name


def relate(item, findings) -> list[tuple[object, str]]:
    """Findings related to one attributed line (an Attribution or a HostSync: its ``source``,
    ``branch`` and ``feeds``), closest relation first."""
    src = item.source
    if src is None or not src.found:
        return []
    here = _real(src.file)
    span = _function_span(src.file, src.line)
    places = {(here, src.line): AT_LINE}
    if item.branch:
        places.setdefault((here, item.branch[0]), ON_BRANCH)
    for line, _ in item.feeds:
        places.setdefault((here, line), FEEDING)
    out = []
    for f in findings:
        where = (_real(f.path), f.line)
        relation = places.get(where)
        if relation is None and span and where[0] == here and span[0] <= f.line <= span[1]:
            subject = f.subject
            named = len(subject) > 2 and not subject.startswith(".")
            relation = SAME_NAME if named and subject in (src.code() or "") else IN_FUNCTION
        # Through this function: a chain link defined inside its lines (the function
        # itself, or a step loop in it); with no function known, anywhere in the file.
        if relation is None and any(_real(link.path) == here and (span is None or span[0] <= link.line <= span[1])
                                    for link in f.chain):
            relation = IN_CHAIN
        if relation is not None:
            out.append((f, relation))
    out.sort(key=lambda fr: (RELATIONS.index(fr[1]), fr[0].line))
    return out


def join(attribution: RunAttribution, findings) -> Links:
    """The findings related to every attributed program and every host-sync line."""
    return Links(
        by_item={item.key: relate(item, findings) for item in attribution.items},
        by_host_sync={sync.key: relate(sync, findings) for sync in attribution.host_syncs},
    )
