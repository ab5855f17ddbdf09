"""The joined report as one HTML page: summary, a per-step SVG plot, the recompiles grouped by
source line with an excerpt of each line, and the linter's findings beside them.

It renders a :class:`detective.report.render.Report` (built by :func:`render.build`) and loads
nothing itself.
"""

from __future__ import annotations

import html
import os

from detective.paths import short_path as show_path
from detective.report.callsites import NEW_CALL_SITE, WARMUP
from detective.report.model import split_direct
from detective.report.render import GAP, Report, change_text, where
from detective.report.sources import excerpt
from detective.report.steps import count as _plural
from detective.report.steps import step_list, step_rows, summary_line


def _svg(rows: list[dict], warmup: int | None) -> str:
    """Unique programs (line) and compile seconds (bars) per step, one inline SVG."""
    if not rows:
        return "<p>No steps recorded.</p>"
    w, h, pad, right = 720, 220, 44, 52
    n = len(rows)
    xs = [pad + (w - pad - right) * (i + 0.5) / n for i in range(n)]
    programs = [r["unique_programs"] or 0 for r in rows]
    seconds = [r["compile_seconds"] or 0.0 for r in rows]
    pmax, smax = max(max(programs), 1), max(max(seconds), 1e-9)
    top, bottom = 16, h - 28
    bar = max(1.0, (w - pad - right) / n * 0.6)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" role="img" '
             f'aria-label="unique programs and compile seconds per step">',
             f'<line x1="{pad}" y1="{bottom}" x2="{w - right}" y2="{bottom}" stroke="#999"/>']
    if warmup:
        wx = pad + (w - pad - right) * min(warmup, n) / n
        parts.append(f'<rect x="{pad}" y="{top}" width="{wx - pad:.1f}" height="{bottom - top}" fill="#f2f2f2"/>'
                     f'<text x="{pad + 4}" y="{top + 12}" font-size="10" fill="#777">warm-up</text>')
    for x, s, r in zip(xs, seconds, rows):
        bh = (bottom - top) * s / smax
        color = "#d9534f" if (warmup is not None and r["step"] >= warmup and r["new_programs"]) else "#9ecae1"
        parts.append(f'<rect x="{x - bar / 2:.1f}" y="{bottom - bh:.1f}" width="{bar:.1f}" height="{bh:.1f}" '
                     f'fill="{color}"><title>step {r["step"]}: {s:.2f} s compiling, '
                     f'{r["new_programs"]} new</title></rect>')
    points = " ".join(f"{x:.1f},{bottom - (bottom - top) * p / pmax:.1f}" for x, p in zip(xs, programs))
    parts.append(f'<polyline points="{points}" fill="none" stroke="#08519c" stroke-width="2"/>')
    for x, p in zip(xs, programs):
        parts.append(f'<circle cx="{x:.1f}" cy="{bottom - (bottom - top) * p / pmax:.1f}" r="2.5" fill="#08519c"/>')
    parts.append(f'<text x="{pad - 6}" y="{top + 4}" font-size="10" text-anchor="end" fill="#08519c">{pmax}</text>'
                 f'<text x="{pad - 6}" y="{bottom}" font-size="10" text-anchor="end" fill="#08519c">0</text>'
                 f'<text x="{w - right + 6}" y="{top + 4}" font-size="10" fill="#9ecae1">{smax:.2f} s</text>'
                 f'<text x="{pad}" y="{h - 8}" font-size="10" fill="#555">step 0</text>'
                 f'<text x="{w - right}" y="{h - 8}" font-size="10" text-anchor="end" fill="#555">step {rows[-1]["step"]}</text>'
                 f'<text x="{(w) / 2:.0f}" y="{h - 8}" font-size="10" text-anchor="middle" fill="#555">'
                 f'line: unique programs · bars: compile seconds (red: new after warm-up)</text>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}code,pre{font:12.5px ui-monospace,Menlo,monospace}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;border-radius:4px}.hit{background:#ffe9a8;display:block}
.kind{display:inline-block;padding:0 .5em;border-radius:3px;background:#e8eef7;margin-right:.3em}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2em .6em;text-align:left}
.gap{color:#b35900}.muted{color:#777}"""


def _excerpt_html(path: str | None, line: int | None) -> str:
    if not path or line is None or not os.path.isfile(path):
        return ""
    body = []
    for n, text_line in excerpt(path, line, 3):
        cell = html.escape(f"{n:>5} | {text_line}")
        body.append(f'<span class="hit">{cell}</span>' if n == line else cell + "\n")
    return "<pre>" + "".join(body) + "</pre>"


def _html_static(linked: list, could_be_gap: bool = True) -> str:
    e = html.escape
    direct, nearby = split_direct(linked)
    out = []
    if not direct and could_be_gap:
        out.append(f"<p class='gap'>{e(GAP)}</p>")
    if nearby and not direct:
        out.append("<p class='muted'>nearby:</p>")
    if direct or nearby:
        out.append("<ul>" + "".join(f"<li><b>{e(f.code)}</b> {e(f.name)} at <code>{e(show_path(f.path))}:"
                                    f"{f.line}</code> ({e(rel)}): {e(f.message)}</li>"
                                    for f, rel in (direct or nearby)) + "</ul>")
    return "".join(out)


def html_page(report: Report) -> str:
    s, attr, run = report.summary, report.attribution, report.run
    rows = step_rows(run)
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'>",
           f"<title>detective report: {e(run.dir)}</title><style>{_CSS}</style></head><body>",
           f"<h1>Recompilation report <span class='muted'>{e(run.dir)}</span></h1>",
           f"<p>{e(summary_line(s))}; warm-up {s['warmup']} steps; "
           f"{s['programs_after_warmup']} new after warm-up.</p>",
           _svg(rows, s["warmup"])]
    if not attr.available:
        out.append(f"<p class='gap'>{e(attr.reason or '')}</p>")
    elif not report.counted():
        out.append("<h2>No recompiles</h2><p>No recompiles after warm-up: nothing to attribute.</p>")
    else:
        out.append(f"<h2>Recompiles after warm-up, by source line ({len(report.counted())})</h2>")
        for n, group in enumerate(report.groups, 1):
            kinds = "".join(f"<span class='kind'>{e(k)}</span>" for k in group.kinds)
            out.append(f"<h3>#{n} <code>{e(where(group))}</code> in <code>{e(group.function or '?')}</code> {kinds}"
                       f" <span class='muted'>{_plural(len(group.items), 'program')}, {group.seconds:.2f} s, "
                       f"step{'s' if len(group.steps) > 1 else ''} {step_list(group.steps, limit=None)}</span></h3>")
            out.append(_excerpt_html(group.file, group.line) or
                       (f"<pre>{e(group.code)}</pre>" if group.code else
                        "<p class='muted'>source not found (moved, or recorded elsewhere)</p>"))
            out.append("<table><tr><th>step</th><th>kind</th><th>before → after</th><th>triggered at</th></tr>")
            for item in group.items:
                trig = f"{show_path(item.trigger.file)}:{item.trigger.line}" if item.trigger else ""
                extra = f"<br><span class='muted'>under <code>{e(item.branch[1])}</code> (line {item.branch[0]})</span>" \
                    if item.branch else ""
                extra += "".join(f"<br><span class='muted'>the number comes from line {n}: <code>{e(c)}</code></span>"
                                 for n, c in item.feeds)
                out.append(f"<tr><td>{item.step}</td><td>{e(item.kind)}</td><td>{e(change_text(item))}{extra}</td>"
                           f"<td><code>{e(trig)}</code></td></tr>")
            out.append("</table>")
            out.append(_html_static(group.linked, group.recompiles_known))
    not_counted = [(i, report.verdict(i)) for i in report.of_kind(NEW_CALL_SITE) + report.of_kind(WARMUP, False)]
    if attr.available and not_counted:
        out.append("<h2>Not recompiles: new call sites and optimizer warm-up</h2><table>"
                   "<tr><th>step</th><th>kind</th><th>why</th></tr>")
        out += [f"<tr><td>{i.step}</td><td>{e(v.kind)}</td><td>{e(v.evidence)}</td></tr>" for i, v in not_counted if v]
        out.append("</table>")
    if attr.available and attr.host_syncs:
        out.append("<h2>Value reads that cut steps into several graphs</h2><ul>")
        for h in attr.host_syncs:
            out.append(f"<li><code>{e(show_path(h.source.file))}:{h.source.line}</code> in "
                       f"<code>{e(h.source.function)}</code>: {h.steps} of {h.of_steps} steps<br>"
                       f"<code>{e(h.source.code() or '')}</code>{_html_static(report.links.of_host_sync(h))}</li>")
        out.append("</ul>")
    out.append("</body></html>\n")
    return "\n".join(out)
