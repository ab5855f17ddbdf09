"""detective.watch(): the same record from inside the training script."""

from __future__ import annotations

import json

from detective import load_run


def test_watch_records_steps_in_process(traced):
    result = traced["watch"]
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed["auto"] == [
        {"step": 0, "executions": 1, "new_programs": 1},
        {"step": 1, "executions": 1, "new_programs": 0},
        {"step": 2, "executions": 1, "new_programs": 0},
        {"step": 3, "executions": 1, "new_programs": 1},
        {"step": 4, "executions": 1, "new_programs": 0},
    ]
    # auto_step=False: only w.step() ends a step, each holding two syncs' executions
    assert printed["manual"] == [
        {"step": 0, "executions": 2, "new_programs": 1},
        {"step": 1, "executions": 2, "new_programs": 0},
    ]


def test_watch_writes_a_complete_record(traced):
    run = load_run(traced["watch"].out / "auto")
    assert run.meta["status"] == "finished" and run.meta["source"] == "watch"
    assert run.meta["unique_programs"] == 2
    assert run.new_programs["graph_hash"].nunique() == 2
    assert run.start["baseline"] == {"UncachedCompile": 0, "CachedCompile": 0}
    manual = load_run(traced["watch"].out / "manual")
    # programs compiled while this watch was active = torch_xla's counter minus its baseline
    assert manual.meta["final_metrics"]["UncachedCompile"] - manual.start["baseline"]["UncachedCompile"] == 1
    assert manual.steps["boundary"].tolist() == ["manual", "manual"]
