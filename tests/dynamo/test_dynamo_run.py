"""`detective run --backend dynamo` on real torch.compile (aot_eager/eager), checked against what
each script itself read from torch._dynamo.utils.get_compilation_metrics() in the same run."""

from __future__ import annotations

import json

from pathlib import Path

import pytest
from helpers import detective

from detective.runtime.dynamo_guards import CONSTANT, DTYPE, parse_failures
from detective.runtime.record import load_run

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def forward_compiles(own: dict) -> dict[int, dict]:
    """Per step, from the script's own get_compilation_metrics() records: frames compiled,
    recompiles and fallbacks to eager (backward entries are part of their forward's compile)."""
    steps: dict[int, dict] = {}
    for m in own["metrics"]:
        row = steps.setdefault(m["step"], {"frames": 0, "recompiles": 0, "fallbacks": 0})
        if m.get("is_forward") is False:
            continue
        if m.get("fail_type") == "RecompileLimitExceeded":
            row["fallbacks"] += 1
            continue
        row["frames"] += 1
        row["recompiles"] += bool(m.get("recompile_reason")) and not m.get("fail_type")
    return steps


def _line(script: str, text: str) -> int:
    """The line of a test script holding ``text`` (so editing a script does not break a test)."""
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def _steps(traced):
    return load_run(traced.out).step_events


def test_counts_match_compilation_metrics(dynamo_runs):
    for name in ("mixed", "reset_midrun"):
        traced = dynamo_runs[name]
        assert traced.returncode == 0, traced.stderr[-2000:]
        own = forward_compiles(traced.own)
        steps = _steps(traced)
        assert [s["step"] for s in steps] == list(range(len(steps)))
        for s in steps:
            expected = own.get(s["step"], {"frames": 0, "recompiles": 0, "fallbacks": 0})
            got = {"frames": s["frames_compiled"], "recompiles": s["recompiles"], "fallbacks": s["cache_limit_fallbacks"]}
            assert got == expected, (name, s["step"])
    mixed = dynamo_runs["mixed"]
    assert sum(s["graph_breaks"] for s in _steps(mixed)) == mixed.own["graph_breaks"] == 1


def test_each_recompile_has_its_guard_kind_and_line(dynamo_runs):
    run = load_run(dynamo_runs["mixed"].out)
    recompiles = [e for e in run.execution_events if e.get("recompile")]
    counter = [e for e in recompiles if e["graph_name"] == "forward"]
    assert [e["step"] for e in counter] == [1, 2, 3]
    assert {e["kind"] for e in counter} == {CONSTANT}
    counter_line = _line("mixed.py", "self.calls += 1")
    assert all(e["site"]["file"].endswith("tests/dynamo/scripts/mixed.py") and e["site"]["line"] == counter_line
               for e in counter)
    assert "self.calls == 2" in counter[-1]["guards"][0]
    cast = [e for e in recompiles if e["graph_name"] == "cast"]
    assert [(e["step"], e["kind"]) for e in cast] == [(3, DTYPE)]
    assert cast[0]["guards"] == ["tensor 'x' dtype mismatch. expected Float, actual Double"]
    assert cast[0]["trigger"]["line"] == _line("mixed.py", "cast(x).sum()")  # the call in the training loop
    fallback = [e for e in run.execution_events if e.get("fallback")]
    assert [(e["step"], e["graph_name"], e["new"]) for e in fallback] == [(4, "forward", False)]
    # the guard texts are torch's own, parsed back the same way
    assert parse_failures("0/2: " + counter[-1]["guards"][0])[0].location.line == counter_line


def test_table_and_fallback_headline(dynamo_runs):
    traced = dynamo_runs["mixed"]
    assert "frames compiled  recompiles  graph breaks" in traced.stderr
    assert "<- recompile limit: eager from here" in traced.stderr
    line = _line("mixed.py", "self.calls += 1")
    assert f"forward: fell back to eager after 3 recompiles, step 4, tests/dynamo/scripts/mixed.py:{line}" in traced.stderr
    # TORCH_LOGS set by the user is left alone: torch's own recompile log is still printed
    assert "Recompiling function forward" in traced.stderr


def test_report_json_joins_the_linter(dynamo_runs):
    proc = detective("report", str(dynamo_runs["mixed"].out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["backend"] == "dynamo"
    entry = next(r for r in data["recompiles"] if r["kind"] == CONSTANT)
    assert {"step", "kind", "file", "line", "function", "code", "trigger", "findings", "guards"} <= set(entry)
    assert entry["line"] == _line("mixed.py", "self.calls += 1") and entry["code"] == "self.calls += 1"
    assert any(f["code"] == "RC003" and f["relation"] == "at this line" for f in entry["findings"])
    assert data["dynamo"]["fallbacks"][0]["headline"].startswith("forward: fell back to eager after 3 recompiles, step 4")
    breaks = data["dynamo"]["graph_breaks"]
    assert [(b["step"], b["line"]) for b in breaks] == [(0, _line("mixed.py", ".item()"))]
    assert any(f["code"] == "RC001" for f in breaks[0]["findings"])


def test_gate_on_a_dynamo_run(dynamo_runs):
    out = str(dynamo_runs["mixed"].out)
    failed = detective("gate", out, "--after-step", "2")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"mixed.py:{_line('mixed.py', 'self.calls += 1')}" in failed.stdout
    assert "step 3: 2 recompile(s)" in failed.stdout
    assert "forward: fell back to eager after 3 recompiles, step 4" in failed.stdout  # a problem, after step 2
    assert detective("gate", out, "--after-step", "5").returncode == 0


def test_reset_mid_run_compiles_again_as_new(dynamo_runs):
    run = load_run(dynamo_runs["reset_midrun"].out)
    ids = [e["compile_id"] for e in run.execution_events]
    assert ids == ["0/0", "0/0"]  # torch._dynamo.reset() restarts the frame counter
    step2 = run.step_events[2]
    assert (step2["frames_compiled"], step2["recompiles"], step2["new_programs"]) == (1, 0, 1)


def test_script_without_torch_compile(dynamo_runs):
    traced = dynamo_runs["no_compile"]
    assert traced.returncode == 0 and "eager done" in traced.stdout
    run = load_run(traced.out)
    assert run.meta["backend"] == "auto" and (run.start or {}).get("backend") == "dynamo"
    assert [s["frames_compiled"] for s in run.step_events] == [0, 0, 0]
    assert "nothing compiled: the command never ran a torch.compile'd function" in traced.stderr


def test_crash_mid_compile_keeps_the_steps_before(dynamo_runs):
    traced = dynamo_runs["crash_in_backend"]
    assert traced.returncode == 1 and "backend exploded" in traced.stderr
    run = load_run(traced.out)
    assert run.meta["status"] == "failed"
    steps = run.step_events
    assert [(s["step"], s["complete"]) for s in steps] == [(0, True), (1, True), (2, False)]
    assert steps[2]["failed_compiles"] == 1 and steps[2]["new_programs"] == 0
    assert "the run ended early: exit code 1 during step 2" in traced.stderr
    gate = detective("gate", str(traced.out), "--after-step", "1")  # step 1 recompiled: fails, and says why it stopped
    assert gate.returncode == 1 and "the run ended early (exit code 1) after step 1" in gate.stdout


@pytest.mark.slow
def test_inductor_counts_match_compilation_metrics(trace_script):
    traced = trace_script("inductor_steps")
    assert traced.returncode == 0, traced.stderr[-2000:]
    own = forward_compiles(traced.own)
    run = load_run(traced.out)
    got = {s["step"]: (s["frames_compiled"], s["recompiles"], s["boundary"]) for s in run.step_events}
    none = {"frames": 0, "recompiles": 0}
    assert got == {step: (own.get(step, none)["frames"], own.get(step, none)["recompiles"], "manual")
                   for step in range(3)}
    assert got[1][:2] == (1, 1)
    recompile = next(e for e in run.execution_events if e.get("recompile"))
    assert recompile["kind"] == "dtype" and recompile["backend_seconds"] > 0
