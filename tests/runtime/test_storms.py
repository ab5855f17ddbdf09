"""Each storm example under `detective run`: the tracer's counts must agree with torch_xla's own
metrics (checked independently: counters the script notes after each sync, compile blocks
counted in the raw debug log), and new programs must appear at the steps measured and
explained in the examples."""

from __future__ import annotations

import json

import pytest
from helpers import STORMS, check_against_torch_xla, detective

from detective import load_run

# scenario -> step of every new program, in order (a step repeats when it compiled several)
NEW_PROGRAM_STEPS = {
    "stable": [0, 1],
    "seq_len_broken": [0, 1, 3, 6],
    "seq_len_fixed": [0, 1],
    "counter_slice_broken": [0, 1, 2, 3, 4, 5, 6, 7],
    "counter_slice_fixed": [0, 1],
    "item_in_step_broken": [0, 0, 1, 4],
    "item_in_step_fixed": [0, 1],
    "optional_key_broken": [0, 1, 3],
    "optional_key_fixed": [0, 1],
    "grad_accum_broken": [0, 1, 2],
    "grad_accum_fixed": [0, 1],
}
STEPS = {"seq_len": 12, "counter_slice": 8, "item_in_step": 10, "optional_key": 10, "grad_accum": 12, "stable": 10}


def test_every_example_is_covered():
    assert sorted(NEW_PROGRAM_STEPS) == sorted(p.stem for p in STORMS.glob("*.py"))


@pytest.mark.parametrize("name", sorted(NEW_PROGRAM_STEPS))
def test_unique_programs_match_torch_xla(traced, name):
    result = traced[name]
    assert result.returncode == 0, result.stderr
    run = load_run(result.out)
    metrics = run.meta["final_metrics"]
    steps = run.steps
    assert steps["new_programs"].sum() == metrics["UncachedCompile"] == len(NEW_PROGRAM_STEPS[name])
    assert steps["executions"].sum() == metrics["UncachedCompile"] + metrics["CachedCompile"]
    assert run.meta["unique_programs"] == metrics["UncachedCompile"]
    # every new program has its own hash: the count is of distinct programs, not of compiles
    assert run.new_programs["graph_hash"].nunique() == len(NEW_PROGRAM_STEPS[name])


@pytest.mark.parametrize("name", [*sorted(NEW_PROGRAM_STEPS), "diagnose"])
def test_counts_agree_with_what_the_script_saw(traced, name):
    """Not the tracer's own arithmetic: per step, the compiles torch_xla's counters showed the
    script at each sync; in all, the compile blocks in the raw log; every execution hashed."""
    check_against_torch_xla(traced[name].out)


@pytest.mark.parametrize("name", sorted(NEW_PROGRAM_STEPS))
def test_new_programs_appear_at_the_right_steps(traced, name):
    run = load_run(traced[name].out)
    assert run.new_programs["step"].tolist() == NEW_PROGRAM_STEPS[name]
    steps = run.steps
    expected_steps = STEPS["stable" if name == "stable" else name.rsplit("_", 1)[0]]
    if name == "grad_accum_fixed":
        expected_steps = 4  # one step per accumulation cycle of 3
    assert steps["step"].tolist() == list(range(expected_steps))
    assert steps["complete"].all()
    assert steps["unique_programs"].iloc[-1] == len(NEW_PROGRAM_STEPS[name])


def test_item_in_step_runs_two_graphs_per_step(traced):
    broken, fixed = load_run(traced["item_in_step_broken"].out), load_run(traced["item_in_step_fixed"].out)
    assert broken.steps["executions"].tolist() == [2] * 10
    assert fixed.steps["executions"].tolist() == [1] * 10
    first = broken.executions.iloc[0]
    assert first["cause"] == "most likely user code trying to access tensor value before torch_xla.sync"
    source = (STORMS / "item_in_step_broken.py").read_text().splitlines()
    assert first["site"]["function"] == "forward"
    assert ".item()" in source[first["site"]["line"] - 1]


def test_sync_executions_name_the_sync_line(traced):
    run = load_run(traced["seq_len_broken"].out)
    source = (STORMS / "seq_len_broken.py").read_text().splitlines()
    for _, row in run.new_programs.iterrows():
        assert row["cause"] == "user torch_xla.sync"
        assert source[row["site"]["line"] - 1].strip() == "torch_xla.sync()"
        assert row["frames"][0]["function"] == "sync"
        assert row["compile_seconds"] > 0


def test_run_json_records_the_run(traced):
    meta = load_run(traced["stable"].out).meta
    assert meta["status"] == "finished" and meta["exit_code"] == 0
    assert meta["mode"] == "count" and meta["warmup"] == 2
    assert meta["versions"]["torch_xla"] == "2.9.0"
    assert meta["command"][-1].endswith("stable.py")
    assert meta["env"]["PT_XLA_DEBUG_LEVEL"] == "2"
    assert meta["start_time"] < meta["end_time"]


def test_report_json_shape(traced):
    proc = detective("report", str(traced["seq_len_broken"].out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["total_unique_programs"] == 4
    assert [s["new_programs"] for s in data["steps"]] == [1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0]
    assert [s["unique_programs"] for s in data["steps"]][-1] == 4
    assert set(data["steps"][0]) >= {"step", "executions", "new_programs", "unique_programs", "compile_seconds"}
    assert data["late_steps"] == [3, 6] and data["programs_after_warmup"] == 2


def test_report_text_table(traced):
    proc = detective("report", str(traced["counter_slice_broken"].out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split() == ["step", "executions", "new", "programs", "unique", "programs",
                                "compile", "s", "host", "transfers", "fallback", "ops"]
    summary = next(line for line in lines if line.startswith("8 steps, 8 unique programs"))
    # count mode: the same call stack compiled each step's program again, told apart by stacks only
    assert summary.endswith("after warm-up: 6 recompiles (steps 2-7) (from call stacks: likely)")
    assert sum(line.endswith("<- recompile") for line in lines) == 6


def test_run_prints_the_table_and_passes_child_output_through(traced):
    result = traced["stable"]
    assert "step 9 loss" in result.stdout  # the script's own output, untouched
    assert "10 steps, 2 unique programs" in result.stderr
    assert f"record in {result.out}" in result.stderr
