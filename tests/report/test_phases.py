"""Real training scripts: train and eval phases, optimizer warm-up, a step table that stays short.

Four real runs on torch_xla (CPU), recorded once for the module, two at a time:
``examples/train_eval`` with momentum SGD (diagnose and count mode) and with AdamW (diagnose),
and a script with a late optimizer change and a shape storm in its eval loop (diagnose).
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import EXAMPLES, REPORT_SCRIPTS, detective, report_json

from detective.ci.gate import Budget, budget_from_config
from detective.report.compact import Span, compact, span_text

EXAMPLE = EXAMPLES / "train_eval" / "train_eval.py"
STORM = REPORT_SCRIPTS / "phases_storm.py"
TRAIN = ["--steps", "12", "--eval-steps", "4"]
RUNS = {
    "sgd": ("diagnose", EXAMPLE, TRAIN),
    "sgd-count": ("count", EXAMPLE, TRAIN),
    "adamw": ("diagnose", EXAMPLE, ["--optimizer", "adamw", "--steps", "6", "--eval-steps", "2"]),
    "storm": ("diagnose", STORM, []),
}
# examples/train_eval with TRAIN: step 0 broadcasts the weights, 1-12 train (2: momentum in use),
# 13 materialises the eval total, 14-17 eval, 18-19 the two syncs of xm.mesh_reduce.


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("torch_xla")
    root = tmp_path_factory.mktemp("phases")

    def record(name):
        mode, script, args = RUNS[name]
        out = root / name
        proc = detective("run", "--quiet", "--mode", mode, "--out", out, "--", sys.executable, script, *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return out

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(RUNS, pool.map(record, RUNS)))


def programs(data: dict) -> dict[int, dict]:
    return {p["step"]: p for p in data["programs"]}


@pytest.mark.slow
def test_eval_phase_after_step_n_passes_the_gate(runs):
    gate = detective("gate", runs["sgd"], "--after-step", "2")
    assert gate.returncode == 0, gate.stdout
    assert "not counted: 4 new call site(s)" in gate.stdout and "in step(s) 13, 14, 18, 19" in gate.stdout
    assert "not counted: step 2 optimizer warm-up: momentum_buffer created" in gate.stdout
    strict = detective("gate", runs["sgd"], "--after-step", "2", "--max-new-call-sites", "2")
    assert strict.returncode == 1
    assert "4 new call site(s) from step 2 on (allowed 2) in step(s) 13, 14, 18, 19" in strict.stdout
    # count mode: call stacks only. The eval loop and mesh_reduce are still new call sites...
    assert detective("gate", runs["sgd-count"], "--after-step", "3").returncode == 0
    # ... but the momentum step cannot be proven warm-up without the graphs: counted, and said so
    early = detective("gate", runs["sgd-count"], "--after-step", "2")
    assert early.returncode == 1
    assert "why: recompile (likely): the same call stack compiled a different program at step 1" in early.stdout


@pytest.mark.slow
def test_momentum_sgd_and_adamw_warmup_is_not_flagged(runs):
    for name, state in (("sgd", "momentum_buffer"), ("adamw", "exp_avg, exp_avg_sq created")):
        data = report_json(runs[name])
        warm = programs(data)[2]
        assert (warm["kind"], warm["confidence"]) == ("optimizer warm-up", "sure"), warm
        assert state in warm["evidence"] and ".py:" in warm["evidence"]
        assert data["linter"]["gaps"] == []
        assert all(r["kind"] != "optimizer warm-up" for r in data["recompiles"] if r["step"] != 2)
        assert {p["kind"] for s, p in programs(data).items() if s >= 13 or (name == "adamw" and s >= 7)} \
            == {"new call site"}
    text = detective("report", runs["sgd"]).stdout
    assert "Optimizer warm-up (not a recompile: " in text and "momentum_buffer created" in text
    assert "gap in the linter" not in text


@pytest.mark.slow
def test_storm_in_the_eval_loop_is_flagged(runs):
    gate = detective("gate", runs["storm"], "--after-step", "2")
    assert gate.returncode == 1
    assert "4 recompile(s) from step 2 on (allowed 0) in step(s) 6, 11, 12, 13" in gate.stdout
    line = next(n for n, text in enumerate(STORM.read_text().splitlines(), 1) if "hits.append" in text)
    assert f"shape at {STORM.relative_to(EXAMPLES.parent)}:{line}" in gate.stdout
    found = programs(report_json(runs["storm"]))
    assert found[10]["kind"] == "new call site"  # the eval loop's first graph
    assert [found[s]["kind"] for s in (11, 12, 13)] == ["recompile"] * 3


@pytest.mark.slow
def test_optimizer_change_that_recurs_later_is_flagged(runs):
    found = programs(report_json(runs["storm"]))
    assert found[1]["kind"] == "optimizer warm-up"  # the momentum buffer, at the first steps
    late = found[6]  # weight decay switched on: a change inside sgd.py, long after its state was made
    assert late["kind"] == "recompile" and "inside optimizer code" in late["evidence"], late


def table_rows(text: str) -> list[str]:
    """The step table's rows (after its header, up to the summary line)."""
    lines = text.splitlines()
    head = next(i for i, t in enumerate(lines) if t.split()[:2] == ["step", "executions"])
    end = next(i for i, t in enumerate(lines) if " steps, " in t and "compiling" in t)
    return lines[head + 1:end]


@pytest.mark.slow
def test_step_table_compacts_quiet_runs_and_all_steps_prints_every_step(runs):
    rows = table_rows(detective("report", runs["sgd-count"]).stdout)
    assert [r.split()[0] for r in rows] == ["0", "1", "2", "3–12", "13", "14", "15–17", "18", "19"], rows
    assert rows[3].strip() == "3–12  1 execution each, 0 new"
    assert rows[2].endswith("<- recompile") and rows[4].endswith("<- new call site")
    every = table_rows(detective("report", runs["sgd-count"], "--all-steps").stdout)
    assert [r.split()[0] for r in every] == [str(i) for i in range(20)]
    data = report_json(runs["sgd-count"])
    assert [s["step"] for s in data["steps"]] == list(range(20))  # JSON keeps every step
    assert {p["confidence"] for p in data["programs"]} == {"likely"}  # count mode says how sure
    html = detective("report", runs["sgd-count"], "--format", "html").stdout
    assert html.count("<circle ") == 20  # the plot keeps every step


def test_compact_keeps_news_and_collapses_quiet_runs():
    def row(step, new=0, executions=1, transfers=0, fallbacks=0, complete=True):
        return {"step": step, "new_programs": new, "executions": executions, "host_transfers": transfers,
                "fallback_ops": fallbacks, "complete": complete, "unique_programs": 1}

    rows = [row(0, 1), row(1), row(2), row(3), row(4, transfers=1), row(5), row(6), row(7, transfers=1),
            row(8, fallbacks=2), row(9), row(10), row(11, complete=False)]
    out = compact(rows)
    # 4: the first step with a host transfer; 7 has the same pattern again (not news); 8: first fallback
    assert [r["step"] if isinstance(r, dict) else (r.first, r.last) for r in out] == \
        [0, (1, 3), 4, (5, 7), 8, 9, 10, 11]
    assert out[3] == Span(5, 7, (1, 1), (0, 1), (0, 0))
    assert span_text(out[1]) == "1 execution each, 0 new"
    assert span_text(out[3]) == "1 execution each, 0 new, 0-1 host transfers"
    logging = [row(0, 1)] + [row(i, transfers=int(i % 20 == 0)) for i in range(1, 10_000)]
    assert len(compact(logging)) == 4  # step 0, 1-19, 20 (first transfer), 21-9999


def test_new_call_site_budget_in_config():
    budget = budget_from_config({"after-step": 3, "max-new-call-sites": 2}, None, {})
    assert budget == Budget(after_step=3, max_new_call_sites=2)
    assert "at most 2 new call site(s)" in budget.describe()
    from detective.ci.pytest_plugin import _budget

    marker = pytest.mark.compile_budget(after_step=3, max_new_call_sites=1).mark
    assert _budget(marker) == Budget(after_step=3, max_new_call_sites=1)
