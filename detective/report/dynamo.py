"""Why did step N recompile under torch.compile? Attribution for Dynamo runs.

Dynamo says it itself: each recompile in the record carries the failing guard, its kind and the
user line the guard came from (see detective.runtime.dynamo). This module turns those events into
the same ``Attribution`` items the XLA report groups, renders and joins with the linter, adds
the failing guard texts (``guards``), and lists graph breaks and fallbacks to eager on their own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from detective.report.dynamo_steps import compile_events, fallback_headline, fallbacks, graph_breaks
from detective.report.model import NEW_SITE, Attribution, Links, RunAttribution, findings_json, source_fields
from detective.report.sources import Source
from detective.runtime.dynamo_guards import AUTO_DYNAMIC, can_become_dynamic


@dataclass
class DynamoAttribution(Attribution):
    guards: list[str] = field(default_factory=list)
    compile_id: str | None = None

    def to_json(self) -> dict:
        data = super().to_json()
        data["guards"] = self.guards
        data["compile_id"] = self.compile_id
        return data


@dataclass
class GraphBreak:
    """A graph break, shaped like an attributed line for the linter join (``relate``)."""

    step: int
    index: int
    reason: str | None
    source: Source | None
    branch: tuple | None = None
    feeds: list = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return "graph break", self.index

    def to_json(self) -> dict:
        return {"step": self.step, "reason": self.reason, **source_fields(self.source)}


@dataclass
class DynamoLinks(Links):
    """The XLA links plus the findings related to each graph break."""

    by_graph_break: dict[tuple[str, int], list] = field(default_factory=dict)

    def of_graph_break(self, gb: GraphBreak) -> list:
        return self.by_graph_break.get(gb.key, [])


@dataclass
class DynamoAttributionResult(RunAttribution):
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    fallbacks: list[dict] = field(default_factory=list)


def _source(site: dict | None, cwd: str | None) -> Source | None:
    if not site or not site.get("file") or site.get("line") is None:
        return None
    path = site["file"]
    if not os.path.isabs(path) and cwd:
        path = os.path.join(cwd, path)
    found = os.path.isfile(path)
    return Source(path if found else site["file"], int(site["line"]), site.get("function") or "?", found)


def _guard_note(text: str) -> str:
    from detective.runtime.dynamo_guards import short

    head = short(text)
    return head if head.startswith(("tensor ", "GLOBAL_STATE")) else f"guard `{head}` failed"


def _widened(events: list[dict]) -> set[int]:
    """Recompiles that made a size or int argument dynamic ("automatic dynamic"): the first change
    of such a guard when no later recompile of that function fails on the same source again
    (with ``dynamic=False`` or automatic_dynamic_shapes off, every new value recompiles)."""
    out = set()
    for i, event in enumerate(events):
        if not event.get("first_change"):
            continue
        key = ((event.get("function") or {}).get("file"), (event.get("function") or {}).get("line"),
               event.get("guard_source"))
        # a later failure of the same static guard (a size or value ``==``) means it never became
        # dynamic; a symbolic guard on it (``x.size()[0] > 8``) means it did
        again = any(((e.get("function") or {}).get("file"), (e.get("function") or {}).get("line"),
                     e.get("guard_source")) == key and e.get("recompile") and e.get("guards")
                    and can_become_dynamic(e["guards"][0]) for e in events[i + 1:])
        if not again:
            out.add(id(event))
    return out


def attribute_dynamo(run) -> DynamoAttributionResult:
    warmup = run.meta.get("warmup")
    warmup = 2 if warmup is None else warmup
    cwd = run.meta.get("cwd")
    result = DynamoAttributionResult(True, None, warmup)
    events = compile_events(run)
    widened = _widened(events)
    for event in events:
        if event.get("fallback") or not event.get("new"):
            continue  # not a program: a fallback headline, or a compile that produced nothing
        guards = event.get("guards") or []
        item = DynamoAttribution(
            step=event["step"], index=event.get("index", 0), graph_hash=event.get("compile_id"),
            previous_hash=None, previous_step=None,
            kind=(AUTO_DYNAMIC if id(event) in widened else event.get("kind") or NEW_SITE)
            if event.get("recompile") else NEW_SITE,
            before=None, after=None, source=_source(event.get("site"), cwd),
            trigger=_source(event.get("trigger"), cwd), cause_text=event.get("cause"),
            compile_seconds=event.get("compile_seconds"), guards=guards, compile_id=event.get("compile_id"),
        )
        item.note = _guard_note(guards[0]) if guards else None
        resumed = event.get("resumes_after_break")
        if resumed and item.note and not event.get("guard_line"):
            item.note += f" (a value carried across the graph break at line {resumed['line']})"
        if item.kind == NEW_SITE:
            item.note = f"first compile of {event.get('graph_name') or 'this function'}"
        result.items.append(item)
    for e in graph_breaks(run):
        site = {"file": e.get("file"), "line": e.get("line"), "function": e.get("function")}
        result.graph_breaks.append(GraphBreak(e["step"], len(result.graph_breaks), e.get("reason"), _source(site, cwd)))
    result.fallbacks = fallbacks(run)
    return result


def files_to_lint(result: DynamoAttributionResult) -> list[str]:
    files = set()
    for item in [*result.items, *result.graph_breaks]:
        for src in (item.source, getattr(item, "trigger", None)):
            if src is not None and src.found:
                files.add(src.file)
    return sorted(files)


def join_graph_breaks(result: DynamoAttributionResult, findings, links: Links) -> DynamoLinks:
    from detective.report.join import relate

    return DynamoLinks(links.by_item, links.by_host_sync,
                       {gb.key: relate(gb, findings) for gb in result.graph_breaks})


def text_section(result: DynamoAttributionResult, links: Links, show=lambda p: p) -> list[str]:
    """Graph breaks with their findings (the fallback headlines are in the table's summary)."""
    out: list[str] = []
    if not result.graph_breaks:
        return out
    of = getattr(links, "of_graph_break", lambda gb: [])
    out.append(f"Graph breaks: {len(result.graph_breaks)} (each splits a compiled function; "
               "Dynamo runs the code between the pieces in Python)")
    for gb in result.graph_breaks:
        src = gb.source
        where = f"{show(src.file)}:{src.line}" if src else "(no user frame)"
        out.append(f"    step {gb.step}: {where}" + (f" in {src.function}" if src else "") + f": {gb.reason or '?'}")
        code = src.code() if src else None
        if code:
            out.append(f"      {src.line} | {code}")
        for finding, relation in of(gb)[:3]:
            out.append(f"      static: {finding.code} {finding.name} at {show(finding.path)}:{finding.line} "
                       f"({relation}): {finding.message}")
    return out


def json_section(result: DynamoAttributionResult, links: Links) -> dict:
    of = getattr(links, "of_graph_break", lambda gb: [])
    return {"graph_breaks": [{**gb.to_json(), "findings": findings_json(of(gb))} for gb in result.graph_breaks],
            "fallbacks": [dict(item, headline=fallback_headline(item)) for item in result.fallbacks]}
