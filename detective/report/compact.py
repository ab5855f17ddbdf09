"""Compact the per-step table: runs of steps where nothing happened become one row.

A step keeps its own row when it compiled a new program, ran a CPU fallback, did not reach its
boundary, or its executions or host transfers differ from the step before (a change is news;
the same number again is not). Every other step joins the quiet run it is in; a run shorter
than ``MIN_SPAN`` steps is printed step by step. Pure: rows in, rows and spans out, so the
text table can use it while the HTML plot and the JSON keep every step.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SPAN = 3


@dataclass(frozen=True)
class Span:
    """Steps first..last, each with ``executions`` executions, ``host_transfers`` transfers, 0 new."""

    first: int
    last: int
    executions: int
    host_transfers: int
    unique_programs: int

    @property
    def steps(self) -> int:
        return self.last - self.first + 1


def keeps_row(row: dict, previous: dict | None) -> bool:
    if row.get("new_programs") or row.get("fallback_ops") or not row.get("complete", True):
        return True
    if previous is None:
        return True
    return (row.get("executions") != previous.get("executions")
            or row.get("host_transfers") != previous.get("host_transfers"))


def compact(rows: list[dict], min_span: int = MIN_SPAN) -> list[dict | Span]:
    """The rows to print: step rows that carry news, and a :class:`Span` for each quiet run."""
    out: list[dict | Span] = []
    quiet: list[dict] = []

    def flush() -> None:
        if len(quiet) >= min_span:
            first, last = quiet[0], quiet[-1]
            out.append(Span(first["step"], last["step"], first.get("executions") or 0,
                            first.get("host_transfers") or 0, last.get("unique_programs") or 0))
        else:
            out.extend(quiet)
        quiet.clear()

    previous = None
    for row in rows:
        contiguous = previous is not None and row["step"] == previous["step"] + 1
        if keeps_row(row, previous) or not contiguous:
            flush()
            out.append(row)
        else:
            quiet.append(row)
        previous = row
    flush()
    return out


def span_text(span: Span) -> str:
    each = "execution" if span.executions == 1 else "executions"
    text = f"{span.executions} {each} each, 0 new"
    if span.host_transfers:
        text += f", {span.host_transfers} host transfer{'s' if span.host_transfers != 1 else ''} each"
    return text
