"""The pytest plugin on real torch_xla, driven through pytester in a fresh process."""

from __future__ import annotations

import pytest

pytest.importorskip("torch_xla")

TESTS = '''
import pytest
import torch
import torch_xla


def run_steps(n, storm, cols=8):
    device = torch_xla.device()
    w = torch.ones(4, cols, device=device)
    for step in range(n):
        x = torch.ones(4, cols, device=device) * 3.0
        width = 2 + step if storm else cols     # the storm: a Python int in a slice
        out = (x[:, :width] * w[:, :width]).sum()
        torch_xla.sync()


@pytest.mark.compile_budget(after_step=2, max_new_programs=0)
def test_stable_loop_passes():
    run_steps(6, storm=False)


@pytest.mark.compile_budget(after_step=2, max_new_programs=0)
def test_storm_fails():
    run_steps(6, storm=True)


@pytest.mark.compile_budget(after_step=2)
def test_no_steps_cannot_pass():
    pass


def test_fixture_gives_the_numbers(detective_watch):
    run_steps(4, storm=True, cols=16)  # its own shapes: the process-wide cache is cold for them
    steps = detective_watch.run.steps
    assert list(steps["step"]) == [0, 1, 2, 3]
    assert list(steps["new_programs"]) == [1, 1, 1, 1]
'''


def test_compile_budget_marker_and_fixture(pytester):
    pytester.makepyfile(test_budget=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rA",
                                           "--basetemp", str(pytester.path / "tmp"))
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and outcomes.get("failed") == 2, result.stdout.str()
    text = result.stdout.str()
    assert "PASSED test_budget.py::test_stable_loop_passes" in text
    assert "PASSED test_budget.py::test_fixture_gives_the_numbers" in text
    assert "FAILED test_budget.py::test_storm_fails" in text
    # The gate's own message is the failure: the steps and the line that triggered them.
    assert "gate FAILED: at most 0 recompile(s) from step 2 on" in text
    assert "4 recompile(s) from step 2 on (allowed 0) in step(s) 2, 3, 4, 5" in text
    assert "at test_budget.py:13 in run_steps" in text  # the torch_xla.sync() that compiled
    assert "FAILED test_budget.py::test_no_steps_cannot_pass" in text
    assert "the run recorded no steps" in text
    # Each marked test recorded into its own tmp_path (under --basetemp), none elsewhere.
    records = sorted(p.parent.parent.name for p in (pytester.path / "tmp").rglob("detective-run/run.json"))
    assert records == ["test_fixture_gives_the_numbers0", "test_no_steps_cannot_pass0", "test_stable_loop_passes0",
                       "test_storm_fails0"], records
