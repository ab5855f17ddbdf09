"""Read and write a run's record: ``run.json`` (what ran) and ``events.jsonl`` (what happened).

Layout of a run directory::

    run.json        command, mode, warm-up, env subset, versions, times, exit code, status,
                    cache (the persistent cache: runtime/cache_summary.py)
    events.jsonl    start / execution / step / end events, one JSON object per line
    graphs/<h>.hlo.txt  diagnose mode: each new program as XLA compiled it (its HLO before
                    optimizations, with source_file/source_line metadata), after a header with
                    the graph hash and the function around each source line (runtime/compile_dumps.py)
    graphs/<h>.txt  thread ranks in diagnose mode, and runs recorded before: torch_xla's saved
                    record of the graph (frames, IR with location=func@file:line tags, Graph Hash)
    raw/            torch_xla's own debug files, emptied as the run goes; xla_dump.<pid>/ is
                    XLA's dump directory, emptied after each step that compiled

Events (every one has "event" and "pid"; steps and executions also "rank"):

    start       source (run|watch), ppid, mode, argv, python, versions, env, hashes (false when
                torch_xla's debug output was unavailable), baseline {UncachedCompile, CachedCompile}
    execution   step, index (order within the step), graph_hash, compiled (cache miss), new (first
                compile of this hash in the run), compile_seconds, cause (torch_xla's wording),
                graph_name, frames [{file, line, function}, innermost first], frames_truncated,
                site (innermost frame outside library code, see runtime/library.py), inputs, outputs,
                unexpected (full_graph violation), ir_path (diagnose, new graphs only),
                cache (persistent cache set up: loaded|miss|load-failed|null for a program
                compiled or loaded from disk; see runtime/cache_record.py)
    step        step, boundary (sync|mark_step|compile|loader|manual|exit), complete (false: the
                run ended before the boundary), executions, compiled, cached, new_programs,
                unique_programs, compile_seconds, host_transfers, fallback_ops, fallback_counts,
                time, duration_s, cache (persistent cache set up: {hits, misses,
                deserialize_failures, load_seconds} of this step)
    cache_init  an xr.initialize_cache call: path, requested_path, read_only, too_late, site
    end         reason, steps, unique_programs, metrics (torch_xla's totals for the process:
                UncachedCompile, CachedCompile, CompileTime_s, TransferFromDevice, MarkStep,
                fallback_ops), cache {config {path, read_only} | null, compile_env, totals}
    no_torch_xla  python (the direct child could not import torch_xla; nothing else ran)
    rank        rank, local_rank, world_size, host, thread, threaded (a device thread of
                xmp.spawn), spmd, devices: who the recorder is, written once it is known; a
                thread rank's start, steps, executions and end carry its rank (runtime/ranks.py)
    collective_timeout / collective_stuck  op, op_id, expected, arrived, message: XLA's
                rendezvous abort / warning, from the job's stderr (written by `detective run`)
    stall       timeout, stacks [{rank, pid, thread, frame, innermost, frames}] (--stall-timeout)
    segment     segment, dir, hosts: a merged run's next source (`detective merge`); the events
                after it carry "segment" when read back

torch.compile runs (``--backend dynamo``, detective/runtime/dynamo.py) use the same events, with
``backend: "dynamo"`` on start, execution, step and end. An execution is one Dynamo frame compile:
graph_hash and compile_id are Dynamo's compile id ("0/3"), compiled (false: refused at the recompile
limit), new (a program was installed), cause, graph_name (the function), frames and site (the
guard's user line, else the call site), trigger (the call site), function {file, line, function},
recompile, kind (shape|constant|dtype|device|identity|global|other), guards (failing guard texts),
guard_source, first_change, guard_line, resumes_after_break, fallback (the recompile limit was hit:
the function runs in eager from then on), compiles_of_function, failed (exception type),
dynamo_seconds, backend_seconds, restarts. Steps end at optimizer.step() (boundary "optimizer")
or detective.step() ("manual"); executions and cached are null; they add frames_compiled,
recompiles, graph_breaks, cache_limit_fallbacks, failed_compiles, dynamo_seconds, backend_seconds.
Also:

    graph_break      step, reason, file, line, function, code (the user line of the break)
    dynamo_compile   an execution recorded on a torch_xla run's steps (torch.compile with
                     backend="openxla"): same keys, step is the XLA tracer's

Execution events of a step come before its step event. Host transfers and fallback ops are
counted from the previous boundary to this one, so a value read right after a sync counts in
the next step. Hashes depend on the mode (XLA_IR_DEBUG/XLA_HLO_DEBUG): never compare across runs
of different modes.

Where they are made (runtime/tracer.py): a step event is assembled in ``Tracer._close_step``, an
execution event in ``Tracer._execution_event`` (per execution) and ``_block_fields`` (from its
debug block). A key added there is written as is (the encoders append keys they do not format
by hand); list it above.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

from detective.runtime.events import EVENTS_FILE
from detective.runtime.ranks import RankEvents, group_by_rank

RUN_FILE = "run.json"
SCHEMA = 1
# The public columns of ``Run.steps`` and ``Run.executions`` (keys of the step and execution events).
STEP_COLUMNS = [
    "step",
    "executions",
    "new_programs",
    "unique_programs",
    "compile_seconds",
    "host_transfers",
    "fallback_ops",
    "complete",
    "boundary",
    "compiled",
    "cached",
    "duration_s",
]
EXECUTION_COLUMNS = [
    "step",
    "index",
    "graph_hash",
    "compiled",
    "new",
    "compile_seconds",
    "cause",
    "graph_name",
    "site",
    "frames",
    "ir_path",
    "inputs",
    "outputs",
    "pid",
    "rank",
]


class RunNotFound(Exception):
    pass


def write_run_json(run_dir: str, data: dict) -> None:
    tmp = os.path.join(run_dir, RUN_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(run_dir, RUN_FILE))


def read_events(run_dir: str) -> tuple[list[dict], list[str]]:
    """Events in file order, and warnings about lines that could not be read."""
    path = os.path.join(run_dir, EVENTS_FILE)
    if not os.path.exists(path):
        return [], []
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").split("\n")
    events, warnings = [], []
    segment = 0  # a merged run: each source's events follow a "segment" event (pids repeat across hosts)
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number - 1 == last:
                warnings.append(
                    f"{EVENTS_FILE}: last line {number} is cut off (the run was killed mid-write); skipped it"
                )
            else:
                warnings.append(f"{EVENTS_FILE}: line {number} is not valid JSON; skipped it")
            continue
        if event.get("event") == "segment":
            segment = event.get("segment", segment)
        elif segment:
            event["segment"] = segment
        events.append(event)
    return events, warnings


def main_pid(events: list[dict], launcher_pid: int | None = None) -> int | None:
    """The process whose steps make the table: rank 0, else the launcher's direct child, else the first."""
    starts = [e for e in events if e.get("event") == "start"]
    for e in events:
        if e.get("event") == "step" and e.get("rank") == 0:
            return e["pid"]
    for e in starts:
        if launcher_pid is not None and e.get("ppid") == launcher_pid:
            return e["pid"]
    return starts[0]["pid"] if starts else None


@dataclass
class Run:
    dir: str
    meta: dict
    events: list[dict]
    warnings: list[str] = field(default_factory=list)
    rank: int | None = None  # the rank whose steps make the table; None: the lowest recorded
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def ranks(self) -> dict[int, RankEvents]:
        """Every rank that recorded steps, by global rank (one entry for a single-process run)."""
        if "ranks" not in self._cache:
            self._cache["ranks"], warnings = group_by_rank(self.events)
            self.warnings.extend(warnings)
        return self._cache["ranks"]

    def for_rank(self, rank: int) -> "Run":
        """The same run, its table and attribution taken from ``rank`` (KeyError if it never recorded a step)."""
        if rank not in self.ranks:
            raise KeyError(rank)
        return dataclasses.replace(self, rank=rank)

    @property
    def _main(self) -> RankEvents | None:
        ranks = self.ranks
        if not ranks:
            return None
        return ranks[self.rank] if self.rank is not None else next(iter(ranks.values()))

    @property
    def pid(self) -> int | None:
        main = self._main
        return main.key[1] if main is not None else main_pid(self.events, self.meta.get("launcher_pid"))

    def _of_main(self, kind: str) -> list[dict]:
        """The main process's events of one kind, grouped in one pass over the events and kept
        until the event list changes length (a report asks for them many times)."""
        cache = self.__dict__.get("_by_kind")
        if cache is None or cache[0] != len(self.events):
            pid = self.pid
            grouped: dict[str, list[dict]] = {}
            for e in self.events:
                if e.get("pid") == pid:
                    grouped.setdefault(e.get("event"), []).append(e)
            cache = (len(self.events), grouped)
            self.__dict__["_by_kind"] = cache
        return list(cache[1].get(kind, ()))

    @property
    def start(self) -> dict | None:
        main = self._main
        if main is not None and main.start is not None:
            return main.start
        starts = self._of_main("start")
        return starts[0] if starts else None

    @property
    def end(self) -> dict | None:
        main = self._main
        if main is not None:
            return main.end
        ends = self._of_main("end")
        return ends[-1] if ends else None

    @property
    def step_events(self) -> list[dict]:
        main = self._main
        return sorted(main.steps, key=lambda e: e["step"]) if main is not None else []

    @property
    def execution_events(self) -> list[dict]:
        main = self._main
        return main.executions if main is not None else []

    @property
    def steps(self):
        """Per-step table (pandas DataFrame), one row per step."""
        import pandas as pd  # only for this table: the traced process never loads it

        return pd.DataFrame([{k: e.get(k) for k in STEP_COLUMNS} for e in self.step_events], columns=STEP_COLUMNS)

    @property
    def executions(self):
        """One row per graph execution (pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame(self.execution_events, columns=EXECUTION_COLUMNS)

    @property
    def new_programs(self):
        """Executions that compiled a graph for the first time in this run."""
        df = self.executions
        return df[df["new"] == True].reset_index(drop=True)  # noqa: E712 (NaN-safe)


def load_run(run_dir: str | os.PathLike) -> Run:
    run_dir = os.fspath(run_dir)
    meta_path = os.path.join(run_dir, RUN_FILE)
    if not os.path.isdir(run_dir):
        raise RunNotFound(f"no such run directory: {run_dir}")
    if not os.path.exists(meta_path) and not os.path.exists(os.path.join(run_dir, EVENTS_FILE)):
        raise RunNotFound(f"not a detective run (no {RUN_FILE} or {EVENTS_FILE}): {run_dir}")
    warnings = []
    meta: dict = {}
    if os.path.exists(meta_path):
        try:
            with open(meta_path) as f:
                meta = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            warnings.append(f"{RUN_FILE}: unreadable ({exc}); using events only")
    events, event_warnings = read_events(run_dir)
    return Run(run_dir, meta, events, warnings + event_warnings)
