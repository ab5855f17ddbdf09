"""Documented options of `detective run` and `detective bisect-steps`, on real traced runs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from helpers import detective

from detective import load_run


def test_run_warmup_moves_the_late_marks(traced):
    result = traced["warmup_4"]
    assert result.returncode == 0, result.stderr
    assert load_run(result.out).meta["warmup"] == 4
    assert "warm-up=4 steps" in result.stderr
    marked = [line.split()[0] for line in result.stderr.splitlines() if line.rstrip().endswith("<- recompile")]
    assert marked == ["4", "5", "6", "7"]  # a new program in every step; from step 4 on they count
    assert "after warm-up: 4 recompiles (steps 4-7)" in result.stderr


def test_gate_after_step_sets_the_warmup_and_budget_options_apply(traced):
    result = traced["gated_junit"]
    assert load_run(result.out).meta["warmup"] == 3  # no --warmup given: the gate's step
    assert result.returncode == 1  # 5 new programs from step 3 on, 4 allowed
    root = ET.fromstring(result.stdout[result.stdout.index("<?xml"):])  # after the script's own output
    [failure] = root.findall(".//testcase/failure")
    assert "5 recompile(s) from step 3 on (allowed 4)" in failure.get("message")
    assert "<- recompile" not in result.stderr  # --quiet: no table


def test_gate_format_github_on_a_passing_run(traced):
    result = traced["gated_github"]
    assert result.returncode == 0, result.stdout + result.stderr  # 5 allowed: the command's own exit code
    verdict = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert verdict == [line for line in verdict if line.startswith("::notice title=detective gate::gate passed")]
    assert len(verdict) == 1


def test_a_sync_with_nothing_pending_is_not_a_step(traced):
    result = traced["boundaries"]
    assert "boundaries done" in result.stdout  # the empty sync and mark_step at the end ran
    steps = load_run(result.out).step_events
    assert len(steps) == 7 and steps[-1]["boundary"] == "sync" and steps[-1]["complete"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_bisect_steps_names_a_storm(traced, fmt):
    proc = detective("bisect-steps", traced["counter_slice_broken"].out, "--format", fmt)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    if fmt == "text":
        assert proc.stdout.startswith("storm: new programs keep coming from step 2 to the end of the run "
                                      "(6 programs in 6 compiling steps")
        assert "first recompile of the storm: step 2" in proc.stdout and "counter_slice_broken.py:" in proc.stdout
    else:
        data = json.loads(proc.stdout)
        assert (data["storming"], data["storm_start"], data["warmup"]) == (True, 2, 2)
        assert data["compile_steps"] == [2, 3, 4, 5, 6, 7] and data["programs_in_storm"] == 6
        assert data["first_recompile"]["step"] == 2 and data["first_recompile"]["new"]


def test_bisect_steps_quiet_steps_and_warmup(traced):
    """seq_len compiles at steps 0, 1, 3, 6 of 12: settled after 5 quiet steps, a storm from
    step 3 (not 0: warm-up programs do not count) when 6 quiet steps are asked for."""
    out = traced["seq_len_broken"].out
    settled = detective("bisect-steps", out)
    assert settled.returncode == 0 and "no storm: the program count settled after step 6" in settled.stdout
    strict = detective("bisect-steps", out, "--quiet-steps", "6", "--format", "json")
    assert strict.returncode == 1
    data = json.loads(strict.stdout)
    assert data["storm_start"] == 3 and data["compile_steps"] == [3, 6] and data["programs_in_storm"] == 2


def test_bisect_steps_without_a_storm_or_steps(traced, tmp_path):
    stable = detective("bisect-steps", traced["stable"].out)
    assert stable.returncode == 0 and stable.stdout.startswith("no new programs after warm-up (step 2 on) in 10 steps")
    nothing = detective("bisect-steps", traced["never_syncs"].out)
    assert nothing.returncode == 2 and "the run recorded no steps" in nothing.stdout
    missing = detective("bisect-steps", tmp_path / "absent")
    assert missing.returncode == 2 and "no such run directory" in missing.stderr
