"""Step boundaries: torch_xla.compile, xm.mark_step, MpDeviceLoader and plain sync."""

from __future__ import annotations

from helpers import RUNTIME_SCRIPTS as SCRIPTS

from detective import load_run


def test_each_boundary_kind_ends_a_step(traced):
    result = traced["boundaries"]
    assert result.returncode == 0, result.stderr
    run = load_run(result.out)
    steps = run.steps
    assert steps["boundary"].tolist() == ["compile", "compile", "mark_step", "mark_step", "loader", "loader", "sync"]
    assert steps["executions"].tolist() == [2, 2, 1, 1, 1, 1, 2]
    assert run.meta["unique_programs"] == run.meta["final_metrics"]["UncachedCompile"] == 5


def test_compile_clear_pending_sync_stays_inside_the_step(traced):
    run = load_run(traced["boundaries"].out)
    step0 = run.executions[run.executions["step"] == 0]
    assert step0["graph_name"].tolist() == ["train_step_clear_pending", "train_step"]
    assert step0["cause"].tolist() == [
        "torch_xla.compile clear the pending graph prior calling the target function",
        "torch_xla.compile",
    ]
    # the causes torch_xla derives from its callers' frames survive our hook
    loader = run.executions[run.executions["step"] == 4]
    assert loader["cause"].tolist() == ["torch_xla.sync in parallel loader at step end"]


def test_item_inside_a_step_is_a_separate_execution_of_that_step(traced):
    run = load_run(traced["boundaries"].out)
    last = run.executions[run.executions["step"] == 6]
    source = (SCRIPTS / "boundaries.py").read_text().splitlines()
    assert last["compiled"].tolist() == [True, True]
    assert "loss.item()" in source[last.iloc[0]["site"]["line"] - 1]
    assert source[last.iloc[1]["site"]["line"] - 1] == "torch_xla.sync()"


def test_fallback_ops_and_host_transfers(traced):
    steps = load_run(traced["boundaries"].out).step_events
    assert [s["fallback_counts"] for s in steps] == [{}] * 6 + [{"aten::nonzero": 1}]
    assert steps[-1]["fallback_ops"] == 1  # .item() is a host transfer, not a fallback
    assert steps[-1]["host_transfers"] == 2  # .item() and nonzero's copy to the CPU
