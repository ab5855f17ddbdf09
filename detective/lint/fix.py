"""Apply the behaviour-keeping fixes findings carry (``detective lint --fix`` / ``--diff``).

Fixes are text edits on the decoded source, computed in the per-file pass (so they
survive the process pool and the cache as plain data). They are applied only when the
file on disk still has the content hash the summary was made from, and only when the
result parses; overlapping edits are left for the next round.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from detective.lint.analyze import SourceError, decode
from detective.lint.cache import content_hash
from detective.lint.model import FileSummary, Finding

BOM = b"\xef\xbb\xbf"


@dataclass
class FileFix:
    path: str
    before: str
    after: str
    fixed: list[Finding]
    bom: bool = False

    def diff(self) -> str:
        lines = difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                     fromfile=f"a/{self.path}", tofile=f"b/{self.path}")
        out = []
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(out)

    def write(self) -> None:
        data = self.after.encode("utf-8")
        Path(self.path).write_bytes(BOM + data if self.bom else data)


def apply_edits(text: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """``text`` with the non-overlapping edits of ``findings`` applied, and which were applied."""
    chosen: list[tuple[int, int, str, Finding]] = []
    taken: list[tuple[int, int]] = []
    for finding in sorted(findings, key=lambda f: f.fix[0][0] if f.fix else 0):
        edits = finding.fix
        if not edits or any(not (0 <= s <= e <= len(text)) for s, e, _ in edits):
            continue
        if any(s < t_end and t_start < e or (s == e == t_start) for s, e, _ in edits for t_start, t_end in taken):
            continue  # overlaps an edit already chosen: next round
        for start, end, new in edits:
            chosen.append((start, end, new, finding))
            taken.append((start, end))
    applied: list[Finding] = []
    for start, end, new, finding in sorted(chosen, key=lambda c: c[0], reverse=True):
        text = text[:start] + new + text[end:]
        if finding not in applied:
            applied.append(finding)
    return text, applied


def fix_text(text: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """Apply, but only if the result still parses (otherwise nothing)."""
    after, applied = apply_edits(text, findings)
    if not applied:
        return text, []
    try:
        cst.parse_module(after)
    except (cst.ParserSyntaxError, RecursionError):
        return text, []
    return after, applied


def plan_fixes(findings: list[Finding], summaries: list[FileSummary]) -> list[FileFix]:
    """One FileFix per file whose fixable findings apply cleanly to its current content."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.fix:
            by_path.setdefault(finding.path, []).append(finding)
    hashes = {s.path: s.content_hash for s in summaries}
    plans = []
    for path, fixable in sorted(by_path.items()):
        try:
            raw = Path(path).read_bytes()
            if hashes.get(path) and content_hash(raw) != hashes[path]:
                continue  # changed since it was linted
            text = decode(raw)
        except (OSError, SourceError):
            continue
        after, applied = fix_text(text, fixable)
        if applied and after != text:
            plans.append(FileFix(path, text, after, applied, bom=raw.startswith(BOM)))
    return plans
