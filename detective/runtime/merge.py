"""`detective merge DIR... --out DIR`: one run from the records of several hosts (or jobs).

Each host runs `detective run --out DIR` for its own processes; merging keys everything by
global rank and aligns ranks on step numbers (hosts' clocks differ, so wall times are never
compared). The sources' events are copied as they are, each source behind a ``segment`` event,
so process ids that repeat across hosts stay apart; their saved graphs are pooled by hash.

Exit codes: 0 merged; 2 nothing to merge, a source that is not a run, modes that differ
(graph hashes are only comparable within one mode), or an unwritable output.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field

import click

from detective.runtime.events import EVENTS_FILE
from detective.runtime.record import RUN_FILE, SCHEMA, write_run_json
from detective.runtime.tracer import GRAPHS_DIR

_RANK_EVENT = b'{"event":"rank"'


class MergeError(Exception):
    pass


@dataclass
class Source:
    dir: str
    meta: dict
    path: str  # its events.jsonl
    length: int = 0  # bytes to copy: up to the last whole line
    last_step: dict[int, int] = field(default_factory=dict)  # rank -> last step recorded
    hosts: set = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def _step_of(data, at: int) -> int | None:
    """The step number of the step line that ends at ``at`` (our encoding: step first)."""
    start = data.rfind(b"\n", 0, at) + 1
    head = b'{"event":"step","step":'
    if data[start:start + len(head)] != head:
        return None
    end = data.find(b",", start + len(head))
    try:
        return int(data[start + len(head):end])
    except ValueError:
        return None


def _scan(source: Source, data) -> None:
    """Ranks (from their "rank" events), each rank's last step (its last step line, found from the
    end of the file: a step line ends with the rank), hosts; a cut-off last line is left out."""
    source.length = data.rfind(b"\n") + 1
    if source.length < len(data):
        source.warnings.append(f"{source.dir}/{EVENTS_FILE}: last line is cut off (killed mid-write); skipped it")
    ranks: set = set()
    at = data.find(_RANK_EVENT)
    while at >= 0:
        end = data.find(b"\n", at)
        try:
            event = json.loads(data[at:end if end >= 0 else len(data)])
        except json.JSONDecodeError:
            event = {}
        if event.get("host"):
            source.hosts.add(event["host"])
        ranks.add(event.get("rank"))
        at = data.find(_RANK_EVENT, end if end >= 0 else len(data))
    for rank in ranks:
        tail = b'"rank":' + (b"null" if rank is None else str(rank).encode()) + b"}\n"
        at = data.rfind(tail, 0, source.length)
        while at >= 0:
            step = _step_of(data, at)
            if step is not None:
                source.last_step[0 if rank is None else rank] = step
                break
            at = data.rfind(tail, 0, at)


def read_source(run_dir: str) -> Source:
    import mmap

    events = os.path.join(run_dir, EVENTS_FILE)
    if not os.path.isdir(run_dir):
        raise MergeError(f"no such run directory: {run_dir}")
    if not os.path.exists(events):
        raise MergeError(f"not a detective run (no {EVENTS_FILE}): {run_dir}")
    meta: dict = {}
    try:
        with open(os.path.join(run_dir, RUN_FILE)) as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError):
        pass
    source = Source(run_dir, meta, events)
    with open(events, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return source
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            _scan(source, data)
    return source


def merge(dirs: list[str], out_dir: str) -> tuple[dict, list[str], dict[int, int]]:
    """Write the merged run; returns (its run.json, warnings, last step per rank)."""
    if not dirs:
        raise MergeError("nothing to merge: give the run directories of every host")
    sources = [read_source(d) for d in dirs]
    modes = {s.meta.get("mode") for s in sources if s.meta.get("mode")}
    if len(modes) > 1:
        raise MergeError(f"the runs were recorded in different modes ({', '.join(sorted(modes))}): "
                         "graph hashes are only comparable within one mode")
    if os.path.exists(os.path.join(out_dir, EVENTS_FILE)):
        raise MergeError(f"output directory already holds a run: {out_dir} (pick another --out)")
    warnings = [w for s in sources for w in s.warnings]
    owner: dict[int, str] = {}
    for s in sources:
        for rank in s.last_step:
            if rank in owner:
                warnings.append(f"rank {rank} is recorded in both {owner[rank]} and {s.dir} "
                                "(not one job?); the report numbers the second one apart")
            owner.setdefault(rank, s.dir)
    try:
        os.makedirs(os.path.join(out_dir, GRAPHS_DIR), exist_ok=True)
        fd = os.open(os.path.join(out_dir, EVENTS_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for n, s in enumerate(sources):
                marker = {"event": "segment", "segment": n, "dir": os.path.abspath(s.dir), "hosts": sorted(s.hosts)}
                os.write(fd, json.dumps(marker).encode() + b"\n")
                with open(s.path, "rb") as src:
                    _copy(src.fileno(), fd, s.length)
        finally:
            os.close(fd)
        for s in sources:
            _pool_graphs(s.dir, out_dir)
        meta = _merged_meta(sources, dirs)
        write_run_json(out_dir, meta)
    except OSError as exc:
        raise MergeError(f"cannot write to output directory {out_dir}: {exc.strerror or exc}") from None
    last: dict[int, int] = {}
    for s in sources:
        for rank, step in s.last_step.items():
            last[rank] = max(step, last.get(rank, -1))
    return meta, warnings, last


def _copy(src: int, dst: int, length: int) -> None:
    sent = 0
    while sent < length:
        n = os.sendfile(dst, src, sent, length - sent)
        if n == 0:
            break
        sent += n


def _pool_graphs(src_dir: str, out_dir: str) -> None:
    graphs = os.path.join(src_dir, GRAPHS_DIR)
    if not os.path.isdir(graphs):
        return
    for name in os.listdir(graphs):
        target = os.path.join(out_dir, GRAPHS_DIR, name)
        if not os.path.exists(target):  # one hash, one graph
            shutil.copyfile(os.path.join(graphs, name), target)


def _merged_meta(sources: list[Source], dirs: list[str]) -> dict:
    first = sources[0].meta
    codes = [s.meta.get("exit_code") for s in sources]
    statuses = [s.meta.get("status") for s in sources]
    status = next((st for st in ("running", "failed") if st in statuses), "finished")
    return {
        "schema": SCHEMA,
        "command": first.get("command"),
        "cwd": first.get("cwd"),
        "mode": first.get("mode"),
        "warmup": first.get("warmup"),
        "versions": first.get("versions", {}),
        "start_time": min((s.meta.get("start_time") for s in sources if s.meta.get("start_time")), default=None),
        "end_time": max((s.meta.get("end_time") for s in sources if s.meta.get("end_time")), default=None),
        "exit_code": next((c for c in codes if c not in (None, 0)), codes[0] if codes else None),
        "status": status,
        "merged_from": [{"dir": os.path.abspath(d), "hosts": sorted(s.hosts), "ranks": sorted(s.last_step),
                         "exit_code": s.meta.get("exit_code"), "status": s.meta.get("status")}
                        for d, s in zip(dirs, sources)],
    }


def alignment(last_step: dict[int, int]) -> str:
    """One line: which ranks reached which step (aligned on step numbers)."""
    if not last_step:
        return "no rank recorded a step"
    final = max(last_step.values())
    behind = {r: s for r, s in sorted(last_step.items()) if s < final}
    ranks = sorted(last_step)
    text = f"{len(ranks)} ranks ({ranks[0]}-{ranks[-1]}), steps 0..{final}"
    if behind:
        text += "; stopped early: " + ", ".join(f"rank {r} after step {s}" for r, s in list(behind.items())[:8])
        if len(behind) > 8:
            text += f" and {len(behind) - 8} more"
    return text


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path())
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Merged run directory.")
def merge_command(run_dirs, out_dir):
    """Merge the runs of several hosts (RUN_DIRS) into one run keyed by global rank.

    \b
    Exit status: 0 merged; 2 a source is missing or not a run, the sources
    were recorded in different modes, or OUT cannot be written.
    """
    try:
        meta, warnings, last = merge(list(run_dirs), out_dir)
    except MergeError as exc:
        click.echo(f"detective: {exc}", err=True)
        sys.exit(2)
    for warning in warnings:
        click.echo(f"detective: warning: {warning}", err=True)
    hosts = sorted({h for source in meta["merged_from"] for h in source["hosts"]})
    click.echo(f"detective: merged {len(run_dirs)} runs ({len(hosts)} host{'s' if len(hosts) != 1 else ''}): "
               f"{alignment(last)}", err=True)
    click.echo(f"detective: record in {out_dir} (detective report {out_dir})", err=True)
