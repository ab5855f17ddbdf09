"""Compact the per-step table: runs of steps where nothing new happened become one row.

A step keeps its own row when it compiled a new program, did not reach its boundary, looked up
the persistent cache, or shows a
pattern of executions, host transfers and CPU fallback ops that no earlier step showed (the
first step that logs a value, the first with a fallback). A pattern seen before is not news:
a loss logged every 20 steps does not print 500 rows in a 10,000-step run. Every other step
joins the quiet run it is in; a run shorter than ``MIN_SPAN`` steps is printed step by step.
Pure: rows in, rows and spans out, so the text table uses it while the HTML plot and the JSON
keep every step.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SPAN = 3


@dataclass(frozen=True)
class Span:
    """Steps first..last, none with a new program; each field is its (min, max) over the span."""

    first: int
    last: int
    executions: tuple[int, int]
    host_transfers: tuple[int, int]
    fallback_ops: tuple[int, int]

    @property
    def steps(self) -> int:
        return self.last - self.first + 1


def _pattern(row: dict) -> tuple:
    return row.get("executions"), row.get("host_transfers"), row.get("fallback_ops")


def compact(rows: list[dict], min_span: int = MIN_SPAN) -> list[dict | Span]:
    """The rows to print: step rows that carry news, and a :class:`Span` for each quiet run."""
    out: list[dict | Span] = []
    quiet: list[dict] = []
    seen: set[tuple] = set()

    def flush() -> None:
        if len(quiet) >= min_span:
            def bounds(key: str) -> tuple[int, int]:
                values = [r.get(key) or 0 for r in quiet]
                return min(values), max(values)

            out.append(Span(quiet[0]["step"], quiet[-1]["step"], bounds("executions"), bounds("host_transfers"),
                            bounds("fallback_ops")))
        else:
            out.extend(quiet)
        quiet.clear()

    previous = None
    for row in rows:
        pattern = _pattern(row)
        cache = row.get("cache") or {}
        news = (bool(row.get("new_programs")) or not row.get("complete", True) or pattern not in seen
                or any(cache.get(k) for k in ("hits", "misses", "deserialize_failures")))
        seen.add(pattern)
        if news or previous is None or row["step"] != previous["step"] + 1:
            flush()
            out.append(row)
        else:
            quiet.append(row)
        previous = row
    flush()
    return out


def _amount(bounds: tuple[int, int], noun: str, plural: str) -> str:
    low, high = bounds
    if low == high:
        return f"{low} {noun if low == 1 else plural} each"
    return f"{low}-{high} {plural}"


def span_text(span: Span) -> str:
    """"1 execution each, 0 new" (+ host transfers and fallback ops when there were any)."""
    parts = [_amount(span.executions, "execution", "executions"), "0 new"]
    if span.host_transfers != (0, 0):
        parts.append(_amount(span.host_transfers, "host transfer", "host transfers"))
    if span.fallback_ops != (0, 0):
        parts.append(_amount(span.fallback_ops, "fallback op", "fallback ops"))
    return ", ".join(parts)
