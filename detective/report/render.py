"""Build the joined report and write it as text (terminal) or JSON; markdown_page.py and html_page.py
write the other two formats from the same :class:`Report`.

Every format starts from :func:`build`, which loads nothing itself: it takes a loaded run, its
attribution and the links to the linter's findings, and groups the recompiles by source line,
most expensive first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detective.paths import short_path as show_path
from detective.report.callsites import NEW_CALL_SITE, RECOMPILE, WARMUP, classify_run
from detective.report.model import NEW_SITE, SPLIT, Links, RunAttribution, findings_json, split_direct
from detective.report.steps import count as _plural
from detective.report.steps import json_report, step_list, step_rows, summarize

SPARKS = "▁▂▃▄▅▆▇█"
MAX_PROGRAMS = 12  # programs listed per section in text; JSON has them all
GAP = "no static finding at this line: a gap in the linter (worth a rule)"


@dataclass
class Group:
    file: str | None
    line: int | None
    function: str | None
    code: str | None
    items: list = field(default_factory=list)
    linked: list = field(default_factory=list)  # findings related to any of its items, once each

    @property
    def seconds(self) -> float:
        return sum(i.compile_seconds or 0.0 for i in self.items)

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(i.kind for i in self.items))

    @property
    def steps(self) -> list[int]:
        return sorted({i.step for i in self.items})

    @property
    def recompiles_known(self) -> bool:
        """Some of its programs are attributed recompiles (not only first graphs or missing IR)."""
        return any(item.is_recompile for item in self.items)

    @property
    def repeating(self) -> bool:
        """New programs from this line in three or more steps: it will not settle by itself."""
        return len(self.steps) >= 3

    def to_json(self) -> dict:
        return {
            "file": self.file, "line": self.line, "function": self.function, "code": self.code,
            "kinds": self.kinds, "programs": len(self.items), "compile_seconds": self.seconds,
            "steps": self.steps, "repeating": self.repeating,
            "findings": [{"code": f.code, "line": f.line, "path": f.path, "relation": rel} for f, rel in self.linked],
        }


@dataclass
class Report:
    run: object
    summary: dict
    attribution: RunAttribution
    links: Links
    groups: list[Group]
    lint_errors: list = field(default_factory=list)
    linted: list = field(default_factory=list)
    ranks: object = None  # report.rank_text.RankSections: divergences and hang come first
    classes: list = field(default_factory=list)  # ProgramClass per new program (detective.report.callsites)

    def verdict(self, item):
        """The ProgramClass of an attributed program, or None."""
        return _by_key(self.classes).get(item.key)

    def counted(self) -> list:
        """Attributed programs after warm-up that are recompiles (what the gate counts)."""
        return [i for i in self.attribution.recompiles if _kind(self, i) == RECOMPILE]

    def of_kind(self, kind: str, after_warmup: bool = True) -> list:
        items = self.attribution.recompiles if after_warmup else self.attribution.items
        return [i for i in items if _kind(self, i) == kind]


def _by_key(classes) -> dict:
    return {(c.step, c.index): c for c in classes}


def _kind(report: "Report", item) -> str:
    verdict = report.verdict(item)
    return verdict.kind if verdict is not None else (NEW_CALL_SITE if item.kind == NEW_SITE else RECOMPILE)


def _groups(attribution: RunAttribution, links: Links, counted=None) -> list[Group]:
    groups: dict = {}
    for item in (attribution.recompiles if counted is None else counted):
        src = item.source
        key = (src.file, src.line) if src else (None, None)
        if key not in groups:
            groups[key] = Group(key[0], key[1], src.function if src else None, src.code() if src else None)
        group = groups[key]
        group.items.append(item)
        seen = {(f.path, f.line, f.code) for f, _ in group.linked}
        for finding, relation in links.of(item):
            if (finding.path, finding.line, finding.code) not in seen:
                seen.add((finding.path, finding.line, finding.code))
                group.linked.append((finding, relation))
    return sorted(groups.values(), key=lambda g: (-g.seconds, -len(g.items), g.steps[0]))


def build(run, attribution: RunAttribution, links: Links | None = None, lint_errors=(), linted=(),
          ranks=None, classes=None) -> Report:
    """``classes``: :func:`detective.report.callsites.classify_run` of the run (computed when None)."""
    links = links or Links()
    if classes is None:
        classes = classify_run(run)
    report = Report(run, summarize(run), attribution, links, [], list(lint_errors), list(linted), ranks,
                    list(classes))
    report.groups = _groups(attribution, links, report.counted())
    return report


def where(item_or_group) -> str:
    line = item_or_group.line
    return f"{show_path(item_or_group.file)}:{line}" if line is not None else "(library code only)"


def sparkline(values: list[float], width: int = 64) -> str:
    if not values:
        return ""
    if len(values) > width:  # a bucket shows its largest value
        size = -(-len(values) // width)
        values = [max(values[i:i + size]) for i in range(0, len(values), size)]
    top = max(values)
    if top <= 0:
        return SPARKS[0] * len(values)
    return "".join(" " if v <= 0 else SPARKS[min(len(SPARKS) - 1, int(v / top * (len(SPARKS) - 1) + 0.5))]
                   for v in values)


def change_text(item) -> str:
    if item.kind == NEW_SITE:
        return "first graph from this call site"
    if item.before or item.after:
        text = f"{item.before or '?'} → {item.after or '?'}"
    else:
        text = item.note or ""
    if item.previous_step is not None:
        text += f" (vs the graph of step {item.previous_step})"
    return text


def _finding_line(finding, relation: str) -> str:
    return f"{finding.code} {finding.name} at {show_path(finding.path)}:{finding.line} ({relation}): {finding.message}"


# -- text -------------------------------------------------------------------------------------

def text(report: Report, all_steps: bool = False) -> str:
    from detective.report.dynamo_steps import run_text_report

    run, attr = report.run, report.attribution
    lines = [*(report.ranks.text_lines() if report.ranks else []), run_text_report(run, report.classes, all_steps)]
    if not attr.available:  # count mode: the table, and what the call stacks say about each new program
        lines += _text_by_stack(report)
        return "\n".join(lines)
    rows = step_rows(run)
    if rows:
        lines.append("")
        lines.append(f"new programs per step   {sparkline([r['new_programs'] or 0 for r in rows])}")
        lines.append(f"compile seconds         {sparkline([r['compile_seconds'] or 0.0 for r in rows])}"
                     f"  ({report.summary['total_compile_seconds']:.2f} s in all)")
    lines.append("")
    lines += _text_attribution(report)
    return "\n".join(lines)


def _text_by_stack(report: Report) -> list[str]:
    """Count mode: each new program after warm-up with its verdict from the call stacks."""
    warmup = report.attribution.warmup
    late = [c for c in report.classes if c.step >= warmup]
    if not late:
        return []
    events = {(e["step"], e.get("index", 0)): e for e in report.run.execution_events if e.get("new")}
    out = ["", f"New programs after warm-up (step {warmup} on), told apart by their call stacks "
               "(count mode: likely; `--mode diagnose` compares the graphs and names the line):"]
    for c in late[:MAX_PROGRAMS]:
        site = (events.get((c.step, c.index)) or {}).get("site")
        at = f" at {show_path(site['file'])}:{site['line']} in {site['function']}" if site else ""
        out.append(f"    step {c.step}: {c.kind}{at}: {c.evidence}")
    if len(late) > MAX_PROGRAMS:
        out.append(f"    … and {len(late) - MAX_PROGRAMS} more (--format json lists them all)")
    return out


def _text_not_recompiles(report: Report) -> list[str]:
    """New call sites after warm-up and optimizer warm-up: listed with their evidence, not counted."""
    out: list[str] = []
    fresh = report.of_kind(NEW_CALL_SITE)
    if fresh:
        out += ["", f"New call sites after warm-up (first programs of computations not run before; "
                    f"not recompiles): {_plural(len(fresh), 'program')}"]
        for item in fresh[:MAX_PROGRAMS]:
            verdict = report.verdict(item)
            trig = item.trigger or item.source
            at = f"{show_path(trig.file)}:{trig.line}" if trig else "?"
            out.append(f"    step {item.step}: at {at}" + (f" in {trig.function}" if trig else "")
                       + (f": {verdict.evidence}" if verdict else ""))
        if len(fresh) > MAX_PROGRAMS:
            out.append(f"    … and {len(fresh) - MAX_PROGRAMS} more")
    warm = report.of_kind(WARMUP, after_warmup=False)
    if warm:
        out += ["", "Optimizer warm-up (not a recompile: the optimizer's state at its first steps):"]
        for item in warm:
            verdict = report.verdict(item)
            out.append(f"    step {item.step}: {verdict.evidence}")
    return out


def _text_static(linked: list, indent: str = "    ") -> list[str]:
    """The static findings for one line: the direct ones, else the gap and what is nearby."""
    direct, nearby = split_direct(linked)
    out = [] if direct else [f"{indent}static: {GAP}" + ("; nearby:" if nearby else "")]
    for i, (finding, relation) in enumerate(direct[:4] if direct else nearby[:3]):
        lead = f"{indent}static: " if (i == 0 and direct) else indent + " " * len("static: ")
        out.append(lead + _finding_line(finding, relation))
    return out


def _text_attribution(report: Report) -> list[str]:
    attr = report.attribution
    out: list[str] = []
    recompiles = report.counted()
    if not attr.recompiles:
        out.append(f"No recompiles: no new programs after warm-up (step {attr.warmup} on). Nothing to attribute.")
    elif not recompiles:
        out.append(f"No recompiles after warm-up (step {attr.warmup} on): its new programs are new call sites "
                   "or optimizer warm-up (below). Nothing to attribute.")
    else:
        groups = report.groups
        seconds = sum(g.seconds for g in groups)
        steps = sorted({i.step for i in recompiles})
        out.append(f"Recompiles after warm-up (step {attr.warmup} on): {_plural(len(recompiles), 'new program')} "
                   f"in {_plural(len(steps), 'step')}, {seconds:.2f} s compiling, from "
                   f"{_plural(len(groups), 'source line')} (most expensive first)")
        for n, group in enumerate(groups, 1):
            out.append("")
            out.append(f"#{n} {where(group)}" + (f" in {group.function}" if group.function else "")
                       + f" · {', '.join(group.kinds)} · {_plural(len(group.items), 'program')}"
                       + f" · {group.seconds:.2f} s · step{'s' if len(group.steps) > 1 else ''} {step_list(group.steps, limit=None)}")
            if group.code:
                out.append(f"    {group.line} | {group.code}")
            elif group.file and group.line is not None:
                out.append("    (source not found: the file moved or the run was elsewhere)")
            if group.repeating:
                out.append(f"    keeps recompiling: new programs from this line in {len(group.steps)} steps, "
                           f"a value that changes call after call (it will not settle by itself)")
            for item in group.items[:3]:
                out.append(f"    step {item.step}: {item.kind}: {change_text(item)}")
                verdict = report.verdict(item)
                if verdict is not None:
                    out.append(f"      why a recompile ({verdict.confidence}): {verdict.evidence}")
                if item.branch:
                    out.append(f"      under `{item.branch[1]}` (line {item.branch[0]})")
                for n_line, code in item.feeds:
                    out.append(f"      the number comes from line {n_line}: `{code}`")
                if item.note and item.kind != NEW_SITE and (item.before or item.after):
                    out.append(f"      note: {item.note}")
                for cause in [c for c in item.causes[1:] if c.source is not None][:2]:
                    at = f"{show_path(cause.source.file)}:{cause.source.line}"
                    out.append(f"      also {cause.kind} at {at}: {cause.before} → {cause.after}")
            if len(group.items) > 3:
                out.append(f"    … and {len(group.items) - 3} more like these")
            if group.recompiles_known:  # else not a recompile: nothing for the linter to have caught
                out += _text_static(group.linked)
    out += _text_not_recompiles(report)
    if attr.host_syncs:
        out.append("")
        out.append("Value reads that cut steps into several graphs (host syncs):")
        for h in attr.host_syncs:
            code = h.source.code()
            out.append(f"    {show_path(h.source.file)}:{h.source.line} in {h.source.function}: "
                       f"{h.steps} of {h.of_steps} steps" + (f"  | {code}" if code else ""))
            out += _text_static(report.links.of_host_sync(h), "        ")
    first = [i for i in attr.first_programs if _kind(report, i) != WARMUP]
    if first:
        out.append("")
        out.append(f"Warm-up (steps 0-{attr.warmup - 1}): {_plural(len(first), 'program')}, expected:")
        for item in first:
            out.append(f"    step {item.step}: {item.kind} at {where(item)}")
    if attr.missing_graphs:
        out.append(f"note: the IR of {_plural(len(attr.missing_graphs), 'graph')} is missing; those were triggered-line only")
    if hasattr(attr, "graph_breaks"):  # torch.compile: fallbacks to eager and graph breaks
        from detective.report.dynamo import text_section

        section = text_section(attr, report.links, show_path)
        out += [""] + section if section else []
    for path, problem in report.lint_errors:
        out.append(f"note: linter: {path}: {problem}")
    return out


# -- json -------------------------------------------------------------------------------------

def as_json(report: Report) -> dict:
    data = json_report(report.run)
    attr = report.attribution
    data["attribution"] = {"available": attr.available, "reason": attr.reason, "warmup": attr.warmup}
    links = report.links

    counted = report.counted()
    counted_keys = {i.key for i in counted}

    def item_json(item) -> dict:
        verdict = report.verdict(item)
        return {**item.to_json(), "findings": findings_json(links.of(item)),
                "linter_gap": item.key in counted_keys and links.is_gap(item),
                "verdict": verdict.to_json() if verdict else None}

    data["programs"] = [c.to_json() for c in report.classes]  # every new program: kind, how sure, why
    data["recompiles"] = [item_json(i) for i in counted]  # after warm-up, counted by the gate
    data["new_call_sites"] = [item_json(i) for i in report.of_kind(NEW_CALL_SITE)]
    data["optimizer_warmup"] = [item_json(i) for i in report.of_kind(WARMUP, after_warmup=False)]
    data["by_line"] = [g.to_json() for g in report.groups]  # recompiles grouped, most expensive first
    data["first_programs"] = [item_json(i) for i in attr.first_programs]
    data["host_syncs"] = [{**h.to_json(), "findings": findings_json(links.of_host_sync(h)),
                           "linter_gap": links.host_sync_is_gap(h)} for h in attr.host_syncs]
    if hasattr(attr, "graph_breaks"):  # torch.compile
        from detective.report.dynamo import json_section
        from detective.report.dynamo_steps import dynamo_json

        data.update(dynamo_json(report.run))
        data["dynamo"].update(json_section(attr, links))
    if report.ranks is not None:
        data.update(report.ranks.to_json())
    data["linter"] = {
        "files": report.linted,
        "errors": [{"path": p, "problem": m} for p, m in report.lint_errors],
        "gaps": [{"step": i.step, "file": i.file, "line": i.line, "kind": i.kind}
                 for i in counted if links.is_gap(i)]
        + [{"step": h.first_step, "file": h.source.file, "line": h.source.line, "kind": SPLIT}
           for h in attr.host_syncs if links.host_sync_is_gap(h)],
    }
    return data
