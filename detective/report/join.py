"""Put each attributed recompile next to the linter's static findings.

A finding relates to a recompile when it is at the attributed line, on the ``if`` around a
structural change, at a line computing a Python number the line uses, in the same function, or
on a call chain that runs through that function.
(Value reads that cut steps have their own section of the report; a finding at one is not
counted for every recompile that happened in such a step.) A recompile with no related finding
is a gap in the linter, and is reported as one.
"""

from __future__ import annotations

import os
from pathlib import Path

from detective.report.sources import source_tree

AT_LINE, ON_BRANCH, FEEDING, SAME_NAME, IN_FUNCTION, IN_CHAIN = (
    "at this line", "on the branch around it", "at a line computing a number this line uses",
    "in the same function, on a name this line uses", "in the same function", "on a call chain through it",
)
_ORDER = [AT_LINE, ON_BRANCH, FEEDING, SAME_NAME, IN_FUNCTION, IN_CHAIN]
DIRECT = (AT_LINE, ON_BRANCH, FEEDING, SAME_NAME)  # without one of these, the recompile is a gap in the linter


def _real(path: str) -> str:
    return os.path.realpath(path)


def lint_files(attribution, paths: list[str] | None = None, cwd: str | None = None):
    """Run the linter over ``paths`` or the user files the attributions name. (findings, errors)"""
    from detective.lint.config import ConfigError, load_config
    from detective.lint.engine import lint_paths

    if not paths:
        files = set()
        for item in attribution.items:
            for src in [item.source, item.trigger, *item.split_by]:
                if src is not None and src.found and os.path.isfile(src.file):
                    files.add(src.file)
        paths = sorted(files)
    if not paths:
        return [], []
    try:
        config = load_config(start=Path(cwd) if cwd and os.path.isdir(cwd) else None)
    except ConfigError as exc:
        return [], [("config", str(exc))]
    result = lint_paths(list(paths), config)
    return result.findings, result.errors


def _function_span(path: str, line: int) -> tuple[int, int, str] | None:
    import ast

    tree = source_tree(path)
    if tree is None:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start, end = node.lineno, node.end_lineno or node.lineno
            if start <= line <= end and (best is None or end - start < best[1] - best[0]):
                best = (start, end, node.name)
    return best


def relate(item, findings) -> list[tuple[object, str]]:
    """Findings related to one attribution, closest relation first."""
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
    out.sort(key=lambda fr: (_ORDER.index(fr[1]), fr[0].line))
    return out


def join(attribution, findings) -> None:
    for item in attribution.items:
        item.linked = relate(item, findings)
        item.findings = [f for f, _ in item.linked]
