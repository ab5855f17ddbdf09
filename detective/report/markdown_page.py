"""The joined report as Markdown, for a PR comment or a CI job summary (GitHub-flavoured)."""

from __future__ import annotations

from detective.paths import short_path as show_path
from detective.report.callsites import NEW_CALL_SITE, WARMUP
from detective.report.model import split_direct
from detective.report.render import GAP, Report, change_text, sparkline, where
from detective.report.steps import count as _plural
from detective.report.steps import step_list, step_rows, summary_line


def _md(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def markdown(report: Report) -> str:
    s, attr = report.summary, report.attribution
    rows = step_rows(report.run)
    late = report.counted() if attr.available else []
    title = (f"{_plural(len(late), 'recompile')} after warm-up" if attr.available
             else f"{s['programs_after_warmup']} new programs after warm-up")
    out = [f"### detective: {title}", ""]
    head = report.ranks.headline_lines() if report.ranks else []
    if head:
        out += ["```", *head, "```", ""]
    out.append(f"{summary_line(s)}; warm-up {s['warmup']} steps.")
    if rows:
        out += ["", f"New programs per step: `{sparkline([r['new_programs'] or 0 for r in rows])}`"]
    if not attr.available:
        out += ["", f"> {attr.reason}"]
        return "\n".join(out) + "\n"
    if not late:
        out += ["", "No recompiles after warm-up. :white_check_mark:"]
    fresh, warm = report.of_kind(NEW_CALL_SITE), report.of_kind(WARMUP, after_warmup=False)
    if fresh or warm:
        out += ["", "Not recompiles (not counted): " + "; ".join(
            [f"{_plural(len(fresh), 'new call site')} (step{'s' if len(fresh) > 1 else ''} "
             f"{step_list(sorted({i.step for i in fresh}))})"] * bool(fresh)
            + [f"optimizer warm-up at step {i.step}: {_md(report.verdict(i).evidence)}" for i in warm])]
    for group in report.groups:
        out += ["", f"#### `{where(group)}` in `{group.function}` — {', '.join(group.kinds)}, "
                    f"{_plural(len(group.items), 'program')}, {group.seconds:.2f} s, "
                    f"step{'s' if len(group.steps) > 1 else ''} {step_list(group.steps, limit=None)}"]
        if group.code:
            out += ["", "```python", group.code, "```"]
        feeds = dict(f for item in group.items for f in item.feeds)
        if feeds:
            out += [""] + [f"The number comes from line {n}: `{c}`" for n, c in sorted(feeds.items())]
        out += ["", "| step | kind | before → after | triggered at |", "|---|---|---|---|"]
        for item in group.items:
            trig = f"{show_path(item.trigger.file)}:{item.trigger.line}" if item.trigger else ""
            out.append(f"| {item.step} | {item.kind} | {_md(change_text(item))} | `{trig}` |")
        out.append("")
        out += _md_static(group.linked, group.recompiles_known)
    if attr.host_syncs:
        out += ["", "Value reads that cut steps into several graphs:", ""]
        for h in attr.host_syncs:
            out.append(f"- `{show_path(h.source.file)}:{h.source.line}` in `{h.source.function}`: {h.steps} of "
                       f"{h.of_steps} steps — `{_md(h.source.code())}`")
            out += ["  " + line for line in _md_static(report.links.of_host_sync(h))]
    return "\n".join(out) + "\n"


def _md_static(linked: list, could_be_gap: bool = True) -> list[str]:
    direct, nearby = split_direct(linked)
    out, indent = [], ""
    if not direct and could_be_gap:
        out.append(f"- {GAP}" + ("; nearby:" if nearby else ""))
        indent = "  "
    for finding, relation in direct or nearby:
        out.append(f"{indent}- **{finding.code}** {finding.name} at `{show_path(finding.path)}:{finding.line}` "
                   f"({relation}): {_md(finding.message)}")
    return out
