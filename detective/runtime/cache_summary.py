"""A run's persistent-cache facts, from its events: what run.json's ``cache`` holds.

``cache`` in run.json (None when no process of the run had a persistent cache)::

    path, read_only     the main process's cache (torch_xla's XLA_PERSISTENT_CACHE_* at its exit)
    compile_env         what enters the key: XLA_FLAGS, LIBTPU_INIT_ARGS, TPU_MEGACORE,
                        XLA_HLO_DEBUG, XLA_IR_DEBUG, torch/torch_xla git revisions, device type
                        and count (nothing else of the environment)
    totals              hits, misses, deserialize_failures, load_seconds (torch_xla's counters)
    inits               each xr.initialize_cache call: pid, path, requested_path, read_only,
                        too_late (after the first compile: torch_xla refuses), site
    processes           pid, rank, path, read_only of every process that had a cache
    writers             pids of processes that could write to the main process's cache path
    messages            torch_xla's "Failed to deserialize executable" warnings from the run's
                        stderr: text (after torch_xla's log prefix), source (file:line), count
"""

from __future__ import annotations

import os
import re

from detective.runtime.record import main_pid

# "2026-11-23 01:17:20.072263: W torch_xla/csrc/runtime/pjrt_computation_client.cpp:694] text"
_LOG_PREFIX = re.compile(r"^.*?\b[IWEF] (?P<source>[\w./-]+:\d+)\] (?P<text>.*)$")


def parse_messages(lines: list[str]) -> list[dict]:
    """Distinct warnings with how often each appeared, in first-seen order."""
    out: dict[tuple, dict] = {}
    for line in lines:
        m = _LOG_PREFIX.match(line)
        source, text = (m["source"], m["text"]) if m else (None, line.strip())
        entry = out.setdefault((source, text), {"text": text, "source": source, "count": 0})
        entry["count"] += 1
    return list(out.values())


def summarize_cache(events: list[dict], launcher_pid: int | None, stderr_lines: list[str] | None) -> dict | None:
    pid = main_pid(events, launcher_pid)
    processes: dict[int, dict] = {}
    inits = [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "cache_init"]
    ranks = {e["pid"]: e.get("rank") for e in events if e.get("event") == "step"}
    for e in events:
        kind = e.get("event")
        config = None
        if kind == "start":
            config = e.get("cache")
        elif kind == "cache_init" and not e.get("too_late"):
            config = {"path": e["path"], "read_only": e["read_only"]}
        elif kind == "end":
            config = (e.get("cache") or {}).get("config")
        if config:
            processes[e["pid"]] = {"pid": e["pid"], "rank": ranks.get(e["pid"]), **config}
    if not processes and not inits:
        return None
    ends = [e for e in events if e.get("event") == "end" and e.get("pid") == pid]
    end_cache = (ends[-1].get("cache") or {}) if ends else {}
    main = processes.get(pid) or next(iter(processes.values()), None) or {}
    path = main.get("path")
    writers = sorted(p["pid"] for p in processes.values() if p["path"] == path and not p["read_only"])
    return {
        "path": path,
        "read_only": main.get("read_only"),
        "compile_env": end_cache.get("compile_env"),
        "totals": end_cache.get("totals"),
        "inits": inits,
        "processes": sorted(processes.values(), key=lambda p: p["pid"]),
        "writers": writers,
        "messages": parse_messages(stderr_lines) if stderr_lines is not None else None,
    }


def run_cache(run) -> dict | None:
    """run.json's ``cache``, or the same built from the events (runs recorded by ``watch``)."""
    if "cache" in run.meta:
        return run.meta["cache"]
    return summarize_cache(run.events, run.meta.get("launcher_pid"), None)


def cache_files(path: str | None) -> set[str] | None:
    if not path:
        return None
    try:
        return {name for name in os.listdir(path) if name.isdigit()}
    except OSError:
        return None
