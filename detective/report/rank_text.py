"""Text for multi-rank runs: the divergence and hang headline, and the ranks collapsed when alike."""

from __future__ import annotations

from dataclasses import dataclass

from detective.paths import short_path

from detective.report.ranks import alike_groups, rank_rows, stall_text


def _where(d) -> str:
    src = d.source
    if src is None:
        return ""
    return f" at {short_path(src.file)}:{src.line}" + (f" in {src.function}" if src.function else "")


def _ranks(ranks: list[int]) -> str:
    """`rank 1`, `ranks 0, 2, 3`, `ranks 0-63`: runs of three or more consecutive ranks as a range."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts += [f"{ranks[i]}-{ranks[j]}"] if j - i >= 2 else [str(r) for r in ranks[i:j + 1]]
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def divergence_line(d) -> str:
    """`rank 1, step 3: shape f32[4,8] → f32[4,11] at train.py:13 in batch, vs rank 0`"""
    what = f"{d.kind} {d.before or '?'} → {d.after or '?'}" if (d.before or d.after) else d.kind
    return f"{_ranks(d.ranks)}, step {d.step}: {what}{_where(d)}, vs rank {d.vs_rank}"


def headline(divergences: list, hang: dict) -> list[str]:
    lines: list[str] = []
    if divergences:
        count = sum(len(d.ranks) for d in divergences)
        lines.append(f"CROSS-RANK DIVERGENCE: {count} rank{'s' if count > 1 else ''} ran different programs "
                     f"from rank {divergences[0].vs_rank}")
        for d in divergences:
            lines.append(f"  {divergence_line(d)}")
            code = d.source.code() if d.source is not None else None
            if code:
                lines.append(f"      {d.source.line} | {code.strip()}")
            hashes = ", ".join(f"rank {r} {h[:12] if h else '(none)'}" for r, h in sorted(d.hashes.items()))
            lines.append(f"      graphs: {hashes}")
            if len(d.steps) > 1:
                lines.append(f"      differs in {len(d.steps)} steps from step {d.step} on")
            for finding, relation in d.linked:
                lines.append(f"      {finding.code} {finding.name} at {short_path(finding.path)}:{finding.line} "
                             f"({relation}): {finding.message}")
            if d.note:
                lines.append(f"      note: {d.note}")
    if hang.get("detected"):
        lines.append(f"HANG: {hang['reason']}")
        last = ", ".join(f"rank {r}: {'none' if s is None else s}" for r, s in hang["last_step"].items())
        if last:
            lines.append(f"  last step completed: {last}")
        waiting = stall_text(hang)
        if waiting:
            steps = [s for s in hang["last_step"].values() if s is not None]
            lines.append(f"  stalled after step {min(steps) if steps else 'none'}: {waiting}")
        if divergences:
            lines.append(f"  before it: {divergence_line(divergences[0])}")
    return lines


def ranks_summary(run, shown_rank: int | None) -> list[str]:
    rows = rank_rows(run)
    if len(rows) < 2:
        return []
    hosts = sorted({r["host"] for r in rows if r["host"]})
    where = f" on {len(hosts)} hosts" if len(hosts) > 1 else ""
    groups = alike_groups(run)
    if len(groups) == 1:
        r = rows[0]
        return [f"all {len(rows)} ranks{where} alike: {len(r['steps'])} steps, "
                f"{r['total_unique_programs']} unique program{'' if r['total_unique_programs'] == 1 else 's'} each (the table shows rank {rows[0]['rank']})"]
    by_rank = {r["rank"]: r for r in rows}
    lines = [f"{len(rows)} ranks{where}, {len(groups)} different:"]
    for group in groups:
        r = by_rank[group[0]]
        label = _ranks(group)
        finished = "" if all(by_rank[g]["finished"] for g in group) else " (did not finish)"
        programs = r["total_unique_programs"]
        lines.append(f"  {label}: {len(r['steps'])} steps, {programs} unique program{'' if programs == 1 else 's'}{finished}")
    shown = shown_rank if shown_rank is not None else rows[0]["rank"]
    lines.append(f"the table shows rank {shown} (detective report RUN --rank N for another)")
    return lines


@dataclass
class RankSections:
    divergences: list
    hang: dict
    run: object

    def headline_lines(self) -> list[str]:
        return headline(self.divergences, self.hang)

    def text_lines(self) -> list[str]:
        return [*headline(self.divergences, self.hang), *ranks_summary(self.run, self.run.rank)]

    def to_json(self) -> dict:
        return {"ranks": rank_rows(self.run), "divergences": [d.to_json() for d in self.divergences],
                "hang": self.hang}


def rank_sections(run, lint: bool = False, lint_paths: list[str] | None = None) -> RankSections:
    """Divergences (attributed; joined with the linter's findings when ``lint``) and hang of a loaded run."""
    from detective.report.ranks import attribute_divergences, find_divergences, find_hang, join_findings

    divergences = find_divergences(run)
    attribute_divergences(run, divergences)
    if lint and divergences:
        files = lint_paths or sorted({d.source.file for d in divergences if d.source is not None and d.source.found})
        if files:
            from detective.report.join import lint_files

            try:
                findings, _ = lint_files(None, list(files), run.meta.get("cwd"))
            except Exception:  # the divergence stands on its own
                findings = []
            join_findings(divergences, findings)
    return RankSections(divergences, find_hang(run), run)


def run_text(run) -> str:
    """What `detective run` prints: the cross-rank headline first, then the step table."""
    from detective.report.dynamo_steps import run_text_report

    return "\n".join([*rank_sections(run).text_lines(), run_text_report(run)])
