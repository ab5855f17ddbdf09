"""The report's records: what a new program was attributed to, and the names of how a static
finding relates to it. Every other report module imports its vocabulary from here.

Pipeline (one way): :mod:`attribution` builds a :class:`RunAttribution` from a loaded run;
:mod:`join` returns the :class:`Links` between it and the linter's findings (the attribution
is never modified); :mod:`render` formats the three together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detective.report.sources import Source

# What changed between a new program and the closest earlier graph of its call site.
SHAPE, CONSTANT, STRUCTURE, SPLIT, NEW_SITE = "shape", "constant", "structure", "host-sync split", "new call site"
UNKNOWN = "unknown"  # its IR is missing: only the line that triggered execution is known

# How a static finding relates to an attributed line, closest first.
AT_LINE = "at this line"
ON_BRANCH = "on the branch around it"
FEEDING = "at a line computing a number this line uses"
SAME_NAME = "in the same function, on a name this line uses"
IN_FUNCTION = "in the same function"
IN_CHAIN = "on a call chain through it"
RELATIONS = (AT_LINE, ON_BRANCH, FEEDING, SAME_NAME, IN_FUNCTION, IN_CHAIN)
DIRECT = (AT_LINE, ON_BRANCH, FEEDING, SAME_NAME)  # without one of these, the line is a gap in the linter


def source_fields(src: Source | None) -> dict:
    return {
        "file": src.file if src else None,
        "line": src.line if src else None,
        "function": src.function if src else None,
        "code": src.code() if src else None,
    }


def change_fields(kind: str, before, after, src: Source | None) -> dict:
    """The JSON keys a cause and a recompile share: what changed, and where."""
    return {"kind": kind, "before": before, "after": after, **source_fields(src)}


@dataclass
class Cause:
    kind: str
    before: str | None
    after: str | None
    source: Source | None  # None: only library code, nothing of the user's
    via: str | None = None  # how the line was found when not from the node itself

    def to_json(self) -> dict:
        return {**change_fields(self.kind, self.before, self.after, self.source), "via": self.via}


@dataclass
class Attribution:
    """One new program: what changed against the closest earlier graph, and the line behind it."""

    step: int
    index: int
    graph_hash: str | None
    previous_hash: str | None
    previous_step: int | None
    kind: str
    before: str | None
    after: str | None
    source: Source | None
    trigger: Source | None
    cause_text: str | None
    compile_seconds: float | None
    causes: list[Cause] = field(default_factory=list)
    branch: tuple[int, str] | None = None  # the if around a structural change
    feeds: list[tuple[int, str]] = field(default_factory=list)  # host numbers flowing into a constant
    split_by: list[Source] = field(default_factory=list)  # value reads earlier in the step
    note: str | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.step, self.index

    @property
    def file(self) -> str | None:
        return self.source.file if self.source else None

    @property
    def line(self) -> int | None:
        return self.source.line if self.source else None

    @property
    def is_recompile(self) -> bool:
        """A change the linter could have seen (a first graph or a missing IR is not one)."""
        return self.kind not in (NEW_SITE, UNKNOWN)

    def to_json(self) -> dict:
        src, trig = self.source, self.trigger
        return {
            "step": self.step,
            "graph_hash": self.graph_hash,
            "previous_hash": self.previous_hash,
            "previous_step": self.previous_step,
            **change_fields(self.kind, self.before, self.after, src),
            "trigger": {"file": trig.file, "line": trig.line, "function": trig.function} if trig else None,
            "compile_seconds": self.compile_seconds,
            "cause": self.cause_text,
            "causes": [c.to_json() for c in self.causes],
            "branch": {"line": self.branch[0], "code": self.branch[1]} if self.branch else None,
            "feeds": [{"line": n, "code": code} for n, code in self.feeds],
            "split_by": [{"file": s.file, "line": s.line, "function": s.function} for s in self.split_by],
            "note": self.note,
        }


@dataclass
class HostSync:
    """A value read (``.item()``, ``.cpu()``, printing a tensor) that cut steps into several graphs."""

    source: Source
    steps: int  # steps it cut
    of_steps: int
    executions: int
    first_step: int  # the first step it cut
    branch: tuple[int, str] | None = None  # the if around the read
    feeds: list[tuple[int, str]] = field(default_factory=list)  # lines computing what it reads

    @property
    def key(self) -> tuple[str, int]:
        return self.source.file, self.source.line

    def to_json(self) -> dict:
        return {**source_fields(self.source), "steps": self.steps, "of_steps": self.of_steps,
                "executions": self.executions}


@dataclass
class RunAttribution:
    available: bool
    reason: str | None
    warmup: int
    items: list[Attribution] = field(default_factory=list)
    missing_graphs: list[str] = field(default_factory=list)
    host_syncs: list[HostSync] = field(default_factory=list)  # most executions first

    @property
    def recompiles(self) -> list[Attribution]:
        return [a for a in self.items if a.step >= self.warmup]

    @property
    def first_programs(self) -> list[Attribution]:
        return [a for a in self.items if a.step < self.warmup]


Link = tuple  # (finding, relation)


@dataclass
class Links:
    """The static findings related to each attributed program and each host sync, closest first.

    Returned by :func:`detective.report.join.join`; the attribution itself is not modified.
    """

    by_item: dict[tuple[int, int], list[Link]] = field(default_factory=dict)
    by_host_sync: dict[tuple[str, int], list[Link]] = field(default_factory=dict)

    def of(self, item: Attribution) -> list[Link]:
        return self.by_item.get(item.key, [])

    def of_host_sync(self, sync: HostSync) -> list[Link]:
        return self.by_host_sync.get(sync.key, [])

    def is_gap(self, item: Attribution) -> bool:
        """A recompile no static finding points at directly."""
        return item.is_recompile and not any(rel in DIRECT for _, rel in self.of(item))

    def host_sync_is_gap(self, sync: HostSync) -> bool:
        return not any(rel in DIRECT for _, rel in self.of_host_sync(sync))


def split_direct(links: list[Link]) -> tuple[list[Link], list[Link]]:
    """(direct, nearby): findings that explain the line, and ones only near it."""
    return [fr for fr in links if fr[1] in DIRECT], [fr for fr in links if fr[1] not in DIRECT]


def findings_json(links: list[Link]) -> list[dict]:
    return [{"code": f.code, "line": f.line, "path": f.path, "name": f.name, "relation": rel} for f, rel in links]
