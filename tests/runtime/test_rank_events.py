"""Many writers, one record: 8 processes appending at once lose nothing and tear nothing;
faulthandler's real dump parsed back into per-thread stacks; the stall clock."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections import Counter

from detective.runtime.events import EventWriter
from detective.runtime.hang import Watchdog, parse_stacks
from detective.runtime.record import read_events

WRITERS, BATCHES = 8, 200


def _append(path: str, writer: int, start) -> None:
    events = EventWriter(path)
    start.wait()
    for batch in range(BATCHES):
        # batches from 1 to ~200 KiB: far past PIPE_BUF, so only the writer's locking keeps them whole
        size = 1 + (batch * 37 + writer * 11) % 60
        pad = "x" * (batch % 7) * 500
        events.write(*({"event": "step", "writer": writer, "batch": batch, "n": n, "pad": pad} for n in range(size)))
    events.close()


def test_eight_processes_appending_lose_and_tear_nothing(tmp_path):
    path = str(tmp_path / "events.jsonl")
    ctx = mp.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_append, args=(path, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    events, warnings = read_events(str(tmp_path))
    assert warnings == []
    seen = Counter((e["writer"], e["batch"], e["n"]) for e in events)
    expected = {(w, b, n) for w in range(WRITERS) for b in range(BATCHES) for n in range(1 + (b * 37 + w * 11) % 60)}
    assert set(seen) == expected and set(seen.values()) == {1}
    # each batch stayed together: a writer's events of one batch are contiguous in the file
    order = [(e["writer"], e["batch"]) for e in events]
    runs = [key for i, key in enumerate(order) if i == 0 or order[i - 1] != key]
    assert len(runs) == WRITERS * BATCHES


def test_faulthandler_dump_parsed_per_thread(tmp_path):
    script = tmp_path / "stacks.py"
    script.write_text(
        "import faulthandler, sys, threading, time\n"
        "def waiting_rank(e):\n"
        "    e.wait()\n"
        "e = threading.Event()\n"
        "t = threading.Thread(target=waiting_rank, args=(e,)); t.start()\n"
        "time.sleep(0.2)\n"
        "print(t.ident, threading.get_ident(), flush=True)\n"
        "faulthandler.dump_traceback(all_threads=True)\n"
        "e.set(); t.join()\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    worker, main = map(int, proc.stdout.split())
    stacks = parse_stacks(proc.stderr)
    assert list(stacks)[0] == main  # the current thread first
    frames = stacks[worker]
    assert frames[0]["function"] == "wait"  # innermost first: threading's Event.wait
    assert {"file": str(script), "line": 3, "function": "waiting_rank"} in frames
    assert stacks[main][0]["file"] == str(script) and stacks[main][0]["line"] == 8


def test_stall_clock_starts_at_the_first_start_event(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("")
    dog = Watchdog(str(path), 0.2)
    time.sleep(0.3)
    assert not dog.stalled()  # still importing: nothing started yet
    with open(path, "a") as f:
        f.write(json.dumps({"event": "start", "pid": os.getpid()}, separators=(",", ":")) + "\n")
    assert not dog.stalled()
    time.sleep(0.3)
    with open(path, "a") as f:
        f.write('{"event":"collective_stuck","op":"all reduce"}\n')  # not progress
    assert dog.stalled()
