"""Bad input: one clear line, a documented exit code, and whatever was recorded stays readable."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from helpers import detective

from detective import load_run


def test_command_not_found(tmp_path):
    proc = detective("run", "--out", str(tmp_path / "run"), "--", "no-such-command-xyz", "train.py")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "detective: command not found: no-such-command-xyz"
    assert not (tmp_path / "run").exists()


def test_missing_command_is_a_usage_error():
    proc = detective("run")
    assert proc.returncode == 2
    assert "Missing argument" in proc.stderr


def test_unwritable_output_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = detective("run", "--out", str(blocker / "run"), "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"detective: cannot write to output directory {blocker / 'run'}: ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_output_dir_holding_a_run_is_refused(traced):
    proc = detective("run", "--out", str(traced["stable"].out), "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert "already holds a run" in proc.stderr


def test_torch_xla_not_installed(tmp_path):
    # A fresh venv has the interpreter but none of our venv's packages.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    python = tmp_path / "bare" / "bin" / "python"
    proc = detective("run", "--out", str(tmp_path / "run"), "--", str(python), "-c", "print('user code ran')")
    assert proc.returncode == 2
    assert "user code ran" not in proc.stdout  # stopped before the script
    assert proc.stderr.strip() == (
        f"detective: torch_xla is not installed for {python}: install the xla extra, "
        "pip install 'recompile-detective[xla]'"
    )
    assert load_run(tmp_path / "run").meta["status"] == "no_torch_xla"


def test_script_raising_at_step_3(traced):
    result = traced["raises_at_step3"]
    assert result.returncode == 1  # the script's own exit code
    assert "RuntimeError: data loader exploded at step 3" in result.stderr
    run = load_run(result.out)
    steps = run.steps
    assert steps["step"].tolist() == [0, 1, 2, 3]
    assert steps["complete"].tolist() == [True, True, True, False]
    assert steps["executions"].tolist() == [1, 1, 1, 1]  # step 3: the .item() before the raise
    assert run.meta["status"] == "failed" and run.meta["exit_code"] == 1
    proc = detective("report", str(result.out))
    assert proc.returncode == 0
    assert "the run ended early: exit code 1 during step 3" in proc.stdout
    assert "* step 3 never reached a step boundary" in proc.stdout


def test_script_that_never_syncs(traced):
    result = traced["never_syncs"]
    assert result.returncode == 0
    steps = load_run(result.out).steps
    assert steps["complete"].tolist() == [False] and steps["executions"].tolist() == [3]
    assert "0 steps completed: the script never reached a step boundary" in detective("report", str(result.out)).stdout


def test_script_that_runs_no_graph(traced):
    result = traced["no_graph"]
    assert result.returncode == 0
    assert result.stdout.startswith("user sitecustomize ran\n")  # chained, not shadowed
    assert load_run(result.out).start is not None  # and the tracer still started
    assert load_run(result.out).steps.empty
    assert "0 steps: no graph ran and no step boundary was reached" in detective("report", str(result.out)).stdout


def test_killed_script_keeps_earlier_events(traced):
    result = traced["killed"]
    assert result.returncode == 128 + 9
    run = load_run(result.out)
    assert run.steps["new_programs"].tolist() == [1, 1, 1]
    assert run.end is None  # no atexit after kill -9
    assert "killed by signal 9 after 3 steps" in detective("report", str(result.out)).stdout


def test_truncated_events_file(traced, tmp_path):
    copy = tmp_path / "cut"
    shutil.copytree(traced["stable"].out, copy)
    events = copy / "events.jsonl"
    data = events.read_bytes()
    events.write_bytes(data[: len(data) - 40])  # cut inside the final event
    proc = detective("report", str(copy), "--format", "json")
    assert proc.returncode == 0
    assert "last line" in proc.stderr and "cut off" in proc.stderr
    assert json.loads(proc.stdout)["total_unique_programs"] == 2


@pytest.mark.parametrize("target", ["missing", "empty"])
def test_report_on_a_non_run(tmp_path, target):
    path = tmp_path / target
    if target == "empty":
        path.mkdir()
    proc = detective("report", str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("detective: ")
    assert str(path) in proc.stderr
