"""The cache-check verdict as text or JSON (the schema is in README: "Does my compilation cache work?")."""

from __future__ import annotations

import os

from detective.cache_check.verdict import REUSED

RUN_KEYS = ("programs", "hits", "misses", "deserialize_failures", "compile_seconds")


def _run_json(stats: dict | None) -> dict | None:
    if stats is None:
        return None
    return {k: stats[k] for k in RUN_KEYS + ("written", "exit_code")}


def as_json(pair, verdict: str, cold: dict, warm: dict | None, reasons: list, keep: bool) -> dict:
    return {
        "verdict": verdict,
        "cache": pair.cache_dir,
        "cold": _run_json(cold),
        "warm": _run_json(warm),
        "reasons": [r.to_json() for r in reasons],
        "warm_env": pair.warm_env,
        "runs": {"cold": pair.cold.dir, "warm": pair.warm.dir if pair.warm else None} if keep else None,
    }


def error_json(message: str, pair) -> dict:
    return {"verdict": None, "error": message, "cache": pair.cache_dir if pair else None,
            "cold": None, "warm": None, "reasons": []}


def _short(path: str) -> str:
    """Relative to the working directory when inside it (as the gate prints lines)."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def as_text(pair, verdict: str, cold: dict, warm: dict | None, reasons: list, keep: bool) -> str:
    lines = [f"cache {pair.cache_dir}" + (f"  (warm run with {', '.join(f'{k}={v}' for k, v in pair.warm_env.items())})"
                                          if pair.warm_env else "")]
    written = "?" if cold["written"] is None else str(cold["written"])
    lines.append(f"cold run:     {_plural(cold['programs'], 'program')} compiled, {written} cache file{'' if written == '1' else 's'} written, "
                 f"compile time {cold['compile_seconds']:.2f} s")
    if warm is not None:
        compiled = warm["programs"] - warm["hits"]
        lines.append(f"warm restart: {warm['hits']} of {_plural(warm['programs'], 'program')} loaded, "
                     f"{compiled} compiled, compile time {cold['compile_seconds']:.2f} s → {warm['compile_seconds']:.2f} s")
    else:
        lines.append("warm restart: not run (" + ("the cold run failed)" if cold["exit_code"] else
                                                   "the cold run left nothing to load)"))
    if verdict == REUSED:
        lines.append("reuse proven: the warm restart loaded every program from the cache")
    else:
        lines.append("not reused:")
    for r in reasons:
        where = f" {_short(r.file)}:{r.line}" if r.file else ""
        lines.append(f"  {r.kind} ({_plural(r.count, 'program') if r.kind != 'shared-writers' else _plural(r.count, 'writer')})"
                     f"{where}: {r.detail}")
    if verdict != REUSED and not reasons:
        lines.append("  no reason found: the counters show programs compiled in the warm run")
    if keep:
        lines.append(f"kept: cache {pair.cache_dir}; runs {pair.cold.dir}"
                     + (f" and {pair.warm.dir}" if pair.warm else ""))
    return "\n".join(lines)
