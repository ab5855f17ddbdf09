"""The restart-time part of the gate: how many persistent-cache lookups loaded a program.

A warm restart whose cache works loads every program (hit rate 1.0). The rate counts torch_xla's
lookups of the recorded steps: hits / (hits + misses + failed loads).
"""

from __future__ import annotations


def cache_counts(steps: list[dict]) -> dict:
    totals = {"hits": 0, "misses": 0, "deserialize_failures": 0}
    for step in steps:
        for key in totals:
            totals[key] += (step.get("cache") or {}).get(key, 0)
    return totals


def cache_problem(run, steps: list[dict], min_rate: float) -> str | None:
    """Why the run misses the hit-rate budget, or None."""
    from detective.runtime.cache_summary import run_cache

    totals = cache_counts(steps)
    lookups = sum(totals.values())
    if lookups == 0:
        configured = any("cache" in s for s in steps)
        return ("no persistent-cache lookup in the recorded steps: "
                + ("every program was already in memory" if configured else
                   "the run set up no cache (xr.initialize_cache before the first compile)")
                + f" (required hit rate {min_rate:g})")
    rate = totals["hits"] / lookups
    if rate >= min_rate:
        return None
    text = (f"persistent-cache hit rate {rate:.2f} (allowed at least {min_rate:g}): {totals['hits']} loaded, "
            f"{totals['misses']} missed, {totals['deserialize_failures']} failed to load")
    messages = (run_cache(run) or {}).get("messages") or []
    if totals["deserialize_failures"] and messages:
        text += f" (torch_xla: {messages[0]['text']})"
    return text
