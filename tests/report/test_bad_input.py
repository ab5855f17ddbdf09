"""`detective report` on runs it cannot fully attribute: count mode, a cut events file, source
files that moved away, and runs with nothing to attribute."""

from __future__ import annotations

import json
import shutil

from conftest import REPO, detective, report_json

from detective.runtime.record import load_run
from detective.runtime.report import text_report


def test_count_mode_run_says_diagnose_is_needed(recorded):
    run = recorded["count_mode"]
    proc = detective("report", str(run.out))
    assert proc.returncode == 0
    assert "line attribution needs `detective run --mode diagnose`" in proc.stderr
    assert proc.stdout.startswith(text_report(load_run(run.out)))  # the step table, unchanged
    assert "Recompiles" not in proc.stdout
    data = report_json(run.out)
    assert data["attribution"]["available"] is False and data["recompiles"] == []
    assert data["programs_after_warmup"] == 6 and data["late_steps"] == [2, 3, 4, 5, 6, 7]
    md = detective("report", str(run.out), "--format", "markdown").stdout
    assert "line attribution needs" in md


def test_truncated_events_file(recorded, tmp_path):
    copy = tmp_path / "cut"
    shutil.copytree(recorded["counter_slice_broken"].out, copy)
    events = copy / "events.jsonl"
    data = events.read_bytes()
    events.write_bytes(data[: len(data) - 30])  # the final event, cut mid-line
    proc = detective("report", str(copy), "--format", "json")
    assert proc.returncode == 0
    assert "cut off" in proc.stderr
    report = json.loads(proc.stdout)
    assert [r["step"] for r in report["recompiles"]] == [2, 3, 4, 5, 6, 7]


def test_sources_that_moved_keep_their_location(recorded, tmp_path):
    """A run recorded in another checkout: its paths do not exist here."""
    run = recorded["counter_slice_broken"]
    copy = tmp_path / "moved"
    shutil.copytree(run.out, copy)
    elsewhere = "/nonexistent/checkout"
    for path in [copy / "events.jsonl", copy / "run.json", *(copy / "graphs").glob("*.txt")]:
        path.write_text(path.read_text().replace(str(REPO), elsewhere))
    line = run.line_of("x[:, : self.step]")
    data = report_json(copy)
    assert [(r["file"], r["line"], r["code"]) for r in data["recompiles"]] == [
        (f"{elsewhere}/examples/storms/counter_slice_broken.py", line, None)] * 6
    assert all(r["kind"] == "constant" for r in data["recompiles"])
    text = detective("report", str(copy)).stdout
    assert f"#1 {elsewhere}/examples/storms/counter_slice_broken.py:{line} in forward · constant" in text
    assert "source not found" in text


def test_missing_graph_file_falls_back_to_the_trigger(recorded, tmp_path):
    run = recorded["optional_key_broken"]
    copy = tmp_path / "no-graph"
    shutil.copytree(run.out, copy)
    late = [e for e in load_run(copy).execution_events if e.get("new") and e["step"] == 3]
    (copy / late[0]["ir_path"]).unlink()
    data = report_json(copy)
    [r] = data["recompiles"]
    assert r["line"] == run.line_of("torch_xla.sync()") and r["note"].endswith("is missing")
    assert "IR of 1 graph is missing" in detective("report", str(copy)).stdout


def test_not_a_run_directory(tmp_path):
    proc = detective("report", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and proc.stderr.startswith("detective: no such run directory")
