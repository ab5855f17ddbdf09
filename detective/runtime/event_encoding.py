"""Step and execution events as JSON lines, written by hand: this runs once per training step,
and json.dumps on every event was most of the tracer's per-step cost."""

from __future__ import annotations

import json


def encode_step(e: dict) -> str:
    """Same JSON as json.dumps(e), formatted by hand: this runs once per training step."""
    return (
        f'{{"event":"step","step":{e["step"]},"boundary":"{e["boundary"]}","complete":{_json_bool(e["complete"])},'
        f'"executions":{e["executions"]},"compiled":{e["compiled"]},"cached":{e["cached"]},'
        f'"new_programs":{e["new_programs"]},"unique_programs":{e["unique_programs"]},'
        f'"compile_seconds":{e["compile_seconds"]!r},"host_transfers":{e["host_transfers"]},'
        f'"fallback_ops":{e["fallback_ops"]},"fallback_counts":{json.dumps(e["fallback_counts"]) if e["fallback_counts"] else "{}"},'
        f'"time":{e["time"]!r},"duration_s":{e["duration_s"]!r},"pid":{e["pid"]},'
        f'"rank":{"null" if e["rank"] is None else e["rank"]},'
        + _extra_fields(e, _STEP_ENCODED)
    )[:-1] + "}"


def encode_execution(event: dict, block_fields) -> str:
    """JSON line of an execution event; the part that comes from the debug block (`block_fields(block)`)
    is encoded once per distinct block."""
    block = event["_block"]
    if block is None:
        fields = {k: v for k, v in event.items() if k != "_block"}
        return json.dumps({**fields, **block_fields(None)}, separators=(",", ":"))
    if block.encoded is None:
        block.encoded = json.dumps(block_fields(block), separators=(",", ":"))
    e = event  # formatted by hand: json.dumps on every execution is most of our per-step cost
    head = (
        f'{{"event":"execution","step":{e["step"]},"index":{e["index"]},'
        f'"compiled":{_json_bool(e["compiled"])},"new":{_json_bool(e["new"])},'
        f'"compile_seconds":{"null" if e["compile_seconds"] is None else repr(e["compile_seconds"])},'
        f'"pid":{e["pid"]},"rank":{"null" if e["rank"] is None else e["rank"]},'
    )
    return head + _extra_fields(e, _EXECUTION_ENCODED) + block.encoded[1:]


# Fields the encoders here write by hand; any other key of an event (ir_path, cache, ... added
# where the event is assembled, and listed in record.py's docstring) is appended as JSON.
_STEP_ENCODED = frozenset({"event", "step", "boundary", "complete", "executions", "compiled", "cached",
                           "new_programs", "unique_programs", "compile_seconds", "host_transfers", "fallback_ops",
                           "fallback_counts", "time", "duration_s", "pid", "rank"})
_EXECUTION_ENCODED = frozenset({"_block", "event", "step", "index", "compiled", "new", "compile_seconds", "pid",
                                "rank", "graph_hash"})  # graph_hash: with the debug block's fields


def _extra_fields(event: dict, encoded: frozenset) -> str:
    """ '"key":value,' for each key not written by hand (usually none: one set difference)."""
    extra = event.keys() - encoded
    if not extra:
        return ""
    return "".join(f'{json.dumps(k)}:{json.dumps(event[k], separators=(",", ":"))},' for k in sorted(extra))


def _json_bool(value: bool) -> str:
    return "true" if value else "false"
