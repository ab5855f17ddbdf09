"""torch_xla's debug formats and a half-written events file, parsed without torch."""

from __future__ import annotations

from detective.runtime.debug_log import parse_blocks, parse_saved_graphs
from detective.runtime.record import read_events

DEBUG = """
Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   torch_xla.compile
Compilation Analysis: Graph Info: 
Compilation Analysis:   Graph Name: train_step
Compilation Analysis:   Graph Hash: 874978fec8f07d9cddcda20c91f8bbd2
Compilation Analysis:   Number of Graph Inputs: 3
Compilation Analysis:   Number of Graph Outputs: 2
Compilation Analysis: Python Frame Triggered Execution: 
Compilation Analysis:   sync (/venv/torch_xla/torch_xla.py:87)
Compilation Analysis:   <module> (/home/me/my (odd) dir/train.py:20)
Compilation Analysis:   ..........
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================

Computation hash: 856eddf75c95cd3b44e780558f3a4cb9

Post Compilation Analysis: ================================================================================
Post Compilation Analysis: Graph input size: 0.000000 GB
Post Compilation Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Execution Analysis: Graph Info: 
Execution Analysis:   Graph Hash: 2322db82114805bd8c74402242a21f59
Execution Analysis: Python Frame Triggered Execution: 
Execution Analysis:   forward (/home/me/model.py:10)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
"""


def test_parse_blocks():
    blocks = parse_blocks(DEBUG)
    assert [b.kind for b in blocks] == ["compilation", "execution"]  # the cut-off third is dropped
    first, second = blocks
    assert first.cause == "torch_xla.compile"
    assert first.graph_name == "train_step"
    assert first.graph_hash == "874978fec8f07d9cddcda20c91f8bbd2"
    assert (first.inputs, first.outputs) == (3, 2)
    assert first.frames == [
        {"file": "/venv/torch_xla/torch_xla.py", "line": 87, "function": "sync"},
        {"file": "/home/me/my (odd) dir/train.py", "line": 20, "function": "<module>"},
    ]
    assert first.frames_truncated
    assert second.cause.startswith("most likely user code")
    assert second.graph_name is None
    assert second.frames == [{"file": "/home/me/model.py", "line": 10, "function": "forward"}]


def test_parse_saved_graphs():
    record = (
        "[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n  <module> (/t.py:10)\n\nRoot Hashes: (68616a)\n\n"
        "## BEGIN_GRAPH\nIR {\n  %0 = f32[] prim::Constant(), location=f@t.py:3\n}\n\n"
        "Graph Hash: 2322db82114805bd8c74402242a21f59\n\n## END_GRAPH\n\n"
    )
    graphs = parse_saved_graphs(record + record.replace("2322", "9999") + "[ScheduleSyncTensorsGraph]\nTensorsGr")
    assert list(graphs) == ["2322db82114805bd8c74402242a21f59", "9999db82114805bd8c74402242a21f59"]
    assert graphs["2322db82114805bd8c74402242a21f59"] == record.rstrip("\n") + "\n"


def test_read_events_skips_a_cut_last_line(tmp_path):
    (tmp_path / "events.jsonl").write_text('{"event":"start","pid":1}\n{"event":"step","st')
    events, warnings = read_events(str(tmp_path))
    assert events == [{"event": "start", "pid": 1}]
    assert warnings == ["events.jsonl: last line 2 is cut off (the run was killed mid-write); skipped it"]


def test_appended_file_reads_only_the_new_tail_and_stays_small(tmp_path):
    from detective.runtime.appended import AppendedFile

    path = tmp_path / "debug.log"
    tail = AppendedFile(str(path), limit=5)
    assert tail.read_new() == ""  # torch_xla has not created it yet
    with open(path, "a") as f:
        f.write("block one\n")
    assert tail.read_new() == "block one\n"
    assert path.stat().st_size == 0  # past the limit: emptied
    with open(path, "a") as f:  # torch_xla opens in append mode, so it writes at the new end
        f.write("two\n")
    assert tail.read_new() == "two\n"
    assert tail.read_new() == ""


def test_progress_line(capsys):
    from detective.runtime.progress import Progress

    Progress(False, delay=0).update(3, 2)
    assert capsys.readouterr().err == ""  # not a terminal: silent
    Progress(True, delay=60).update(3, 2)
    assert capsys.readouterr().err == ""  # short runs never show it
    progress = Progress(True, delay=0, interval=60)
    progress.update(3, 2)
    progress.update(4, 2)  # within the interval: not redrawn
    progress.clear()
    assert capsys.readouterr().err == "\r\x1b[K[detective] step 3 · 2 programs\r\x1b[K"


def test_hand_encoded_step_event_is_the_json_of_the_event():
    import json

    from detective.runtime.event_encoding import encode_step

    event = {
        "event": "step", "step": 3, "boundary": "compile", "complete": False, "executions": 2, "compiled": 1,
        "cached": 1, "new_programs": 1, "unique_programs": 4, "compile_seconds": 0.25, "host_transfers": 1,
        "fallback_ops": 1, "fallback_counts": {"aten::nonzero": 1}, "time": 1795338465.171753,
        "duration_s": 0.5, "pid": 12, "rank": None,
    }
    assert json.loads(encode_step(event)) == event
    assert json.loads(encode_step({**event, "fallback_counts": {}, "rank": 0, "complete": True}))["rank"] == 0
