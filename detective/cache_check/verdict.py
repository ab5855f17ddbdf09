"""The verdict of a cold/warm pair: reuse proven, or every reason a program was not reused.

Proof is the warm restart itself: every program it needed came from the cache (torch_xla's
``PersistentCacheHit``), none was compiled. Files on disk are not proof. Reasons, in order:

- ``not-written``: the cold run left nothing a restart could load (no cache set up, cache
  set up after the first compile, read-only, directory not writable or not creatable);
- ``shared-writers``: several processes of one run could write the same directory;
- ``env-changed``: a variable or version that enters the key differs between the runs;
- ``graph-changed``: the warm run traced a program the cold run did not (its file is absent);
- ``deserialize-failure``: the file was there (the key matched) and the backend could not
  load it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from detective.runtime.cache_record import LOAD_FAILED, MISS, file_name, key_differences
from detective.runtime.cache_summary import run_cache

NOT_WRITTEN, SHARED_WRITERS, ENV_CHANGED, GRAPH_CHANGED, DESERIALIZE_FAILURE = (
    "not-written", "shared-writers", "env-changed", "graph-changed", "deserialize-failure")
REUSED, NOT_REUSED = "reused", "not-reused"
UPSTREAM_ISSUE = "https://github.com/pytorch/xla/issues/9094"


@dataclass
class Reason:
    kind: str
    detail: str
    file: str | None = None
    line: int | None = None
    count: int = 0
    explains_failure: bool = field(default=False, repr=False)  # why the cold run itself failed

    def to_json(self) -> dict:
        return {"kind": self.kind, "detail": self.detail, "file": self.file, "line": self.line, "count": self.count}


class CannotJudge(Exception):
    """The pair cannot be judged (exit 2): the command failed for a reason not about the cache."""


def run_stats(run, exit_code: int | None, files_before: set | None, files_after: set | None) -> dict:
    cache = run_cache(run) or {}
    totals = cache.get("totals")
    steps = run.step_events
    if not totals:  # the process never reached its end event: add up its steps
        totals = {"hits": 0, "misses": 0, "deserialize_failures": 0}
        for step in steps:
            for key in totals:
                totals[key] += (step.get("cache") or {}).get(key, 0)
    written = None
    if files_after is not None:
        written = len(files_after - (files_before or set()))
    return {
        "programs": totals["hits"] + sum(s["new_programs"] for s in steps),
        "hits": totals["hits"],
        "misses": totals["misses"],
        "deserialize_failures": totals["deserialize_failures"],
        "compile_seconds": round(sum(s["compile_seconds"] for s in steps), 3),
        "written": written,
        "exit_code": exit_code,
        "run": run.dir,
    }


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _site(record: dict | None) -> tuple[str | None, int | None]:
    site = (record or {}).get("site") or {}
    return site.get("file"), site.get("line")


def _not_written(pair, cache: dict | None, stats: dict) -> list[Reason]:
    """Why the cold run left nothing to load, if it did."""
    inits = (cache or {}).get("inits") or []
    late = [i for i in inits if i.get("too_late")]
    if late:
        file, line = _site(late[0])
        return [Reason(NOT_WRITTEN, "xr.initialize_cache was called after the first compile: torch_xla refuses "
                       "(\"Computation cache has already been initialized\") and nothing is cached; call it "
                       "before the first XLA tensor op", file, line, len(late), explains_failure=True)]
    if not cache or not cache.get("path"):
        return [Reason(NOT_WRITTEN, "the command set up no persistent cache: call "
                       "xr.initialize_cache(path) before the first compile (or set XLA_PERSISTENT_CACHE_PATH)",
                       count=stats["programs"])]
    if stats["written"] or not stats["programs"]:
        return []
    path = cache["path"]
    init = next((i for i in inits if not i.get("too_late")), None)
    file, line = _site(init)
    if cache.get("read_only"):
        detail = f"the cache {path} was opened read-only (readonly=True): {_n(stats['programs'], 'program')} compiled, none written"
    elif not os.path.isdir(path):
        return [Reason(NOT_WRITTEN, f"the cache directory {path} could not be created (a file in its path, or a "
                       "missing mount): torch_xla stops at the first compile", file, line, stats["programs"],
                       explains_failure=True)]
    elif not _writable(path):
        detail = f"the cache directory {path} is not writable: {_n(stats['programs'], 'program')} compiled, none written"
    else:
        detail = f"{_n(stats['programs'], 'program')} compiled and no file appeared in {path}"
    return [Reason(NOT_WRITTEN, detail, file, line, stats["programs"])]


def _writable(path: str) -> bool:
    probe = os.path.join(path, f".detective-probe-{os.getpid()}")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
        return True
    except OSError:
        return False


def _shared_writers(run, cache: dict | None, which: str) -> list[Reason]:
    writers = (cache or {}).get("writers") or []
    if len(writers) < 2:
        return []
    by_pid = {p["pid"]: p for p in cache.get("processes") or []}
    ranks = [by_pid.get(p, {}).get("rank") for p in writers]
    distinct = None not in ranks and len(set(ranks)) == len(ranks)
    who = ", ".join(f"rank {r}" for r in ranks) if distinct else ", ".join(f"pid {p}" for p in writers)
    inits = [i for i in cache.get("inits") or [] if i.get("pid") in writers]
    file, line = _site(inits[0] if inits else None)
    return [Reason(SHARED_WRITERS, f"{len(writers)} processes of the {which} run could write {cache['path']} "
                   f"({who}): give each process or host its own path, or let one writer warm the cache and "
                   "open it with readonly=True everywhere else", file, line, len(writers))]


def _programs(run, outcome: str) -> list[dict]:
    return [e for e in run.execution_events if e.get("cache") == outcome]


def judge(pair) -> tuple[str, dict, dict | None, list[Reason]]:
    """(verdict, cold stats, warm stats or None, reasons). Raises CannotJudge."""
    cold_cache = run_cache(pair.cold)
    cold = run_stats(pair.cold, pair.cold_exit, pair.files_before, pair.files_after_cold)
    reasons = _not_written(pair, cold_cache, cold)
    if pair.cold_exit != 0:
        if any(r.explains_failure for r in reasons):
            return NOT_REUSED, cold, None, reasons
        raise CannotJudge(f"the cold run failed (exit {pair.cold_exit}); see its output above ({pair.cold.dir})")
    if cold["programs"] == 0:
        raise CannotJudge("the cold run compiled no program: nothing for a restart to reuse")
    if pair.warm is None:  # the cache was empty after the cold run: no restart was tried
        return NOT_REUSED, cold, None, reasons or [
            Reason(NOT_WRITTEN, f"the cache {pair.cache_dir} is empty after the cold run", count=cold["programs"])]
    warm_cache = run_cache(pair.warm)
    warm = run_stats(pair.warm, pair.warm_exit, pair.files_after_cold, pair.files_after_warm)
    if pair.warm_exit != 0:
        raise CannotJudge(f"the warm run failed (exit {pair.warm_exit}); see its output above ({pair.warm.dir})")
    reasons += _shared_writers(pair.cold, cold_cache, "cold") or _shared_writers(pair.warm, warm_cache, "warm")
    missed = _programs(pair.warm, MISS)
    if warm["misses"] and not any(r.kind == NOT_WRITTEN for r in reasons):
        changed = key_differences((cold_cache or {}).get("compile_env") or {},
                                  (warm_cache or {}).get("compile_env") or {})
        for name, old, new in changed:
            reasons.append(Reason(ENV_CHANGED, f"{name}: {old!r} → {new!r} (enters the cache key)",
                                  count=warm["misses"]))
        if not changed:
            from detective.cache_check.graph_change import graph_changes

            reasons += graph_changes(pair.cold, pair.warm, missed or [], warm["misses"], pair.files_after_cold)
    if warm["deserialize_failures"]:
        reasons.append(_deserialize_reason(pair, warm_cache, warm))
    reused = warm["programs"] > 0 and warm["hits"] == warm["programs"] and not warm["misses"] \
        and not warm["deserialize_failures"]
    return (REUSED if reused else NOT_REUSED), cold, warm, reasons


def _deserialize_reason(pair, warm_cache: dict | None, warm: dict) -> Reason:
    messages = (warm_cache or {}).get("messages")
    failed = _programs(pair.warm, LOAD_FAILED)
    matched = sum(1 for e in failed if file_name(e.get("graph_hash")) in (pair.files_after_cold or set()))
    detail = "the file was there (the key matched) and torch_xla could not load it"
    if failed:
        detail += f" ({matched} of {len(failed)} written by the cold run)"
    if messages:
        detail += ": " + "; ".join(f"{m['text']}" for m in messages)
        if any("UNIMPLEMENTED" in m["text"] for m in messages):
            detail += f" — this backend cannot load serialized executables (PJRT CPU; on TPU see {UPSTREAM_ISSUE})"
    elif messages is None:
        detail += " (torch_xla's message was not captured: run under `detective run`)"
    return Reason(DESERIALIZE_FAILURE, detail, count=warm["deserialize_failures"])  # not about a line of code
