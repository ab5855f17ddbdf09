"""`detective gate` on real recorded runs, and its verdict logic on the edges."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import REPO, detective

from detective.ci.gate import FAIL, PASS, UNUSABLE, Budget, budget_from_config, evaluate
from detective.runtime.record import Run

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("torch_xla")
    root = tmp_path_factory.mktemp("gate")
    storms = REPO / "examples" / "storms"
    scripts = {"storm": storms / "counter_slice_broken.py", "fixed": storms / "counter_slice_fixed.py",
               "crash": REPO / "tests" / "runtime" / "scripts" / "raises_at_step3.py"}

    def record(name):
        # Recorded with run-and-gate in one command, so that path is exercised too.
        out = root / name
        after = "1" if name == "crash" else "3"
        proc = detective("run", "--quiet", "--out", str(out), "--gate-after-step", after, "--",
                         sys.executable, str(scripts[name]))
        return out, proc

    with ThreadPoolExecutor(2) as pool:
        recorded = dict(zip(scripts, pool.map(record, scripts)))
    RUN_AND_GATE.update({name: proc for name, (_, proc) in recorded.items()})
    return {name: out for name, (out, _) in recorded.items()}


RUN_AND_GATE: dict[str, subprocess.CompletedProcess] = {}


def test_run_and_gate_in_one_command(runs):
    storm, fixed = RUN_AND_GATE["storm"], RUN_AND_GATE["fixed"]
    assert storm.returncode == 1, storm.stderr
    assert "gate FAILED: at most 0 recompile(s) from step 3 on" in storm.stdout
    assert "step 2 loss" in storm.stdout  # the script's own output still reaches the terminal
    assert fixed.returncode == 0, fixed.stderr
    assert "gate passed" in fixed.stdout


def test_storm_fails_the_gate_and_names_the_steps_and_line(runs):
    proc = detective("gate", str(runs["storm"]), "--after-step", "3")
    assert proc.returncode == 1, proc.stdout
    assert "gate FAILED: at most 0 recompile(s) from step 3 on" in proc.stdout
    assert "recompile(s) from step 3 on (allowed 0) in step(s) 3, 4, 5" in proc.stdout
    source = (REPO / "examples" / "storms" / "counter_slice_broken.py").read_text().splitlines()
    sync_line = next(i for i, line in enumerate(source, 1) if "torch_xla.sync()" in line)
    assert f"counter_slice_broken.py:{sync_line} in " in proc.stdout  # the sync that compiled


def test_fixed_run_passes_and_budget_knobs(runs):
    assert detective("gate", str(runs["fixed"]), "--after-step", "2").returncode == 0
    storm = str(runs["storm"])
    assert detective("gate", storm, "--after-step", "3", "--max-new-programs", "100").returncode == 0
    capped = detective("gate", storm, "--after-step", "3", "--max-new-programs", "100",
                       "--max-unique-programs", "2")
    assert capped.returncode == 1 and "unique programs (allowed 2)" in capped.stdout
    slow = detective("gate", storm, "--after-step", "3", "--max-new-programs", "100",
                     "--max-compile-seconds", "0.001")
    assert slow.returncode == 1 and "s compiling (allowed 0.001 s)" in slow.stdout


def test_unusable_runs_exit_two(runs, tmp_path):
    never = detective("gate", str(runs["fixed"]), "--after-step", "500")
    assert never.returncode == 2 and "never reached step 500" in never.stdout
    missing = detective("gate", str(tmp_path / "nope"), "--after-step", "1")
    assert missing.returncode == 2 and "no such run directory" in missing.stdout
    assert detective("gate", str(runs["fixed"])).returncode == 2  # no --after-step anywhere


def test_junit_and_github_formats(runs):
    junit = detective("gate", str(runs["storm"]), "--after-step", "3", "--format", "junit")
    suite = ET.fromstring(junit.stdout)
    assert suite.get("failures") == "1"
    failure = suite.find(".//testcase/failure")
    assert failure is not None and "allowed 0" in failure.get("message")
    github = detective("gate", str(runs["storm"]), "--after-step", "3", "--format", "github")
    lines = github.stdout.splitlines()
    annotations = [line for line in lines if line.startswith("::error file=")]
    assert annotations and "counter_slice_broken.py,line=" in annotations[0]
    assert "in step(s) 3, 4, 5" in annotations[0]
    assert lines[-1].startswith("::error title=detective gate::gate FAILED")


def test_config_option_names_the_budget_file(runs, tmp_path):
    config = tmp_path / "ci" / "pyproject.toml"
    config.parent.mkdir()
    config.write_text("[tool.detective.gate]\nafter-step = 2\nmax-new-programs = 50\n")
    assert detective("gate", str(runs["storm"]), cwd=tmp_path).returncode == 2  # no budget anywhere
    lenient = detective("gate", str(runs["storm"]), "--config", str(config), cwd=tmp_path)
    assert lenient.returncode == 0 and "at most 50 recompile(s) from step 2 on" in lenient.stdout
    strict = detective("gate", str(runs["storm"]), "--config", str(config), "--max-new-programs", "0", cwd=tmp_path)
    assert strict.returncode == 1  # the command line over the file
    missing = detective("gate", str(runs["storm"]), "--config", str(tmp_path / "absent.toml"), cwd=tmp_path)
    assert missing.returncode == 2


def test_budget_file_in_pyproject(runs, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.detective.gate]\nafter-step = 2\nmax-new-programs = 0\n\n"
        '[tool.detective.gate.scripts."counter_slice_broken.py"]\nmax-new-programs = 50\n'
    )
    assert detective("gate", str(runs["storm"]), cwd=tmp_path).returncode == 0  # per-script limit
    assert detective("gate", str(runs["fixed"]), cwd=tmp_path).returncode == 0
    strict = detective("gate", str(runs["storm"]), "--max-new-programs", "0", cwd=tmp_path)
    assert strict.returncode == 1  # the command line wins over the file


def test_crashed_run_is_gated_on_its_recorded_steps_and_keeps_its_exit_code(runs):
    crash = RUN_AND_GATE["crash"]
    # Steps 0-2 were recorded and stay quiet after step 1: the gate passes, so the
    # script's own failure (exit 1) is what the command returns.
    assert crash.returncode == 1, crash.stderr
    assert "data loader exploded at step 3" in crash.stderr
    assert "gate passed" in crash.stdout
    assert "the run ended early (exit code 1) after step 2; gating the steps it recorded" in crash.stdout
    again = detective("gate", str(runs["crash"]), "--after-step", "3")
    assert again.returncode == 2 and "never reached step 3" in again.stdout


def fake_run(steps, meta=None, executions=()):
    events = [{"event": "start", "pid": 1}]
    events += [{"event": "execution", "pid": 1, **e} for e in executions]
    events += [{"event": "step", "pid": 1, "rank": 0, "complete": True, "compile_seconds": 0.1, **s} for s in steps]
    return Run("/tmp/none", meta or {"status": "finished", "exit_code": 0}, events)


def test_crashed_run_is_gated_on_what_it_recorded():
    steps = [{"step": i, "new_programs": 1 if i < 2 else 0} for i in range(5)]
    verdict = evaluate(fake_run(steps, {"status": "failed", "exit_code": 3}), Budget(after_step=2))
    assert verdict.status == PASS
    assert any("ended early (exit code 3) after step 4" in n for n in verdict.notes)
    killed = evaluate(fake_run(steps, {"status": "running"}), Budget(after_step=2))
    assert any("process was killed" in n for n in killed.notes)


def test_zero_steps_and_unfinished_steps_never_pass():
    assert evaluate(fake_run([]), Budget(after_step=0)).status == UNUSABLE
    partial = fake_run([{"step": 0, "new_programs": 1}, {"step": 1, "new_programs": 1, "complete": False}])
    assert evaluate(partial, Budget(after_step=1)).status == UNUSABLE


def test_attributions_replace_trigger_sites():
    steps = [{"step": i, "new_programs": 1} for i in range(4)]
    attributions = {3: [{"file": "moe.py", "line": 88, "kind": "constant", "code": "self.total += 1"}]}
    verdict = evaluate(fake_run(steps), Budget(after_step=3), attributions)
    assert verdict.status == FAIL
    assert "constant at moe.py:88: self.total += 1" in verdict.message()


def test_budget_from_config_rejects_missing_after_step():
    with pytest.raises(ValueError, match="after-step"):
        budget_from_config({}, None, {})
    budget = budget_from_config({"after-step": 4, "scripts": {"train.py": {"after-step": 9}}},
                                "jobs/train.py", {"max_new_programs": 2})
    assert budget == Budget(after_step=9, max_new_programs=2)
