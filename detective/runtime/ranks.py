"""Which rank is recording: one recorder per rank, whether ranks are processes or threads.

A rank is a process (TPU, torchrun, one device per process) or a thread: on PJRT CPU (and
multi-device hosts) ``xmp.spawn`` runs one worker process with one thread per device, and the
threads share torch_xla's metrics and compile cache. So every step boundary is routed to the
recorder of the thread that reached it: the process recorder, or the thread rank's own
(:mod:`detective.runtime.rank_tracer`), which reads the graph hashes that thread executed.

Each recorder writes a ``rank`` event once its identity is known; events are read back per
rank by :func:`group_by_rank`.
"""

from __future__ import annotations

import os
import socket
import threading

HOST = socket.gethostname()


def identity(threaded: bool = False) -> dict:
    """This thread's rank: global rank, local rank, world size, host (from torch_xla, then torchrun's env)."""
    fields: dict = {"event": "rank", "pid": os.getpid(), "host": HOST, "thread": threading.get_ident(),
                    "threaded": threaded}
    try:
        import torch_xla.runtime as xr

        fields["world_size"] = xr.world_size()
        fields["rank"] = xr.global_ordinal()
        fields["local_rank"] = xr.local_ordinal()
        fields["spmd"] = bool(xr.is_spmd())
        fields["devices"] = xr.global_runtime_device_count() if fields["spmd"] else xr.addressable_device_count()
    except Exception:
        fields.update(rank=None, local_rank=None, world_size=None)
    env_world = _env_int("WORLD_SIZE")
    if (fields.get("world_size") or 1) == 1 and env_world and env_world > 1:
        # torchrun / plain multiprocessing without XLA replication: trust the launcher's env.
        fields.update(world_size=env_world, rank=_env_int("RANK"), local_rank=_env_int("LOCAL_RANK"))
    return fields


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


# -- reading: events back into ranks --

def recorder_key(event: dict) -> tuple:
    """Who wrote an event: (segment of a merged run, pid, rank) — thread ranks share a pid."""
    return (event.get("segment", 0), event.get("pid"), event.get("rank"))


class RankEvents:
    """One rank's events, as recorded by one recorder."""

    __slots__ = ("rank", "key", "identity", "start", "end", "steps", "executions")

    def __init__(self, key: tuple):
        self.key = key
        self.rank: int | None = key[2]
        self.identity: dict = {}
        self.start: dict | None = None
        self.end: dict | None = None
        self.steps: list[dict] = []
        self.executions: list[dict] = []

    @property
    def host(self) -> str | None:
        return self.identity.get("host")


def group_by_rank(events: list[dict]) -> tuple[dict[int, RankEvents], list[str]]:
    """Ranks that recorded steps, keyed by global rank; and warnings (two recorders claiming one rank)."""
    recorders: dict[tuple, RankEvents] = {}
    starts: dict[tuple, dict] = {}  # (segment, pid) -> the process's start event
    for e in events:
        kind = e.get("event")
        if kind == "step" or kind == "execution" or kind == "rank" or kind == "end":
            key = recorder_key(e)
            rec = recorders.get(key)
            if rec is None:
                rec = recorders[key] = RankEvents(key)
            if kind == "step":
                rec.steps.append(e)
            elif kind == "execution":
                rec.executions.append(e)
            elif kind == "rank":
                rec.identity = e
            else:
                rec.end = e
        elif kind == "start":
            pid_key = (e.get("segment", 0), e.get("pid"))
            if e.get("rank") is not None:  # a thread rank's own start
                recorders.setdefault(recorder_key(e), RankEvents(recorder_key(e))).start = e
            else:
                starts.setdefault(pid_key, e)
    ranks: dict[int, RankEvents] = {}
    warnings: list[str] = []
    with_steps = [r for r in recorders.values() if r.steps]
    for rec in sorted(with_steps, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.key)):
        rec.start = rec.start or starts.get(rec.key[:2])
        rank = rec.rank if rec.rank is not None else 0
        if rank in ranks:
            free = max(ranks) + 1
            warnings.append(f"processes {ranks[rank].key[1]} and {rec.key[1]} both recorded rank {rank} "
                            f"(not one replicated job?); showing the second as rank {free}")
            rank = free
        rec.rank = rank
        ranks[rank] = rec
    return dict(sorted(ranks.items())), warnings
