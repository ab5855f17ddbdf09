"""`detective cache-check`, the cache recording and the restart-time gate on real torch_xla (CPU).

PJRT CPU writes cache files but cannot load them (`Failed to deserialize executable:
UNIMPLEMENTED`), so a `reused` verdict cannot happen here; everything around it is real. Each
scenario runs once per module, two at a time, and feeds several tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "cache"
TRAIN = EXAMPLES / "train.py"
MASK_LINE = next(n for n, line in enumerate(TRAIN.read_text().splitlines(), 1) if "x[:, MAX_LEN:] = 0" in line)
FAST_MIN_MAX = "--xla_cpu_enable_fast_min_max=true"


def detective(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = None if env is None else {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "detective", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)


def unwritable_dir(tmp: Path) -> str:
    if os.geteuid() != 0:
        path = tmp / "read-only"
        path.mkdir()
        path.chmod(0o555)
        return str(path)
    return "/sys/kernel"  # root writes anywhere but sysfs: a directory that exists and takes no file


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cache-check")
    py = sys.executable
    scenarios = {
        # a changed constant and an unchanged program in one pair (diagnose, the default)
        "changed": ["cache-check", "--keep", "--format", "json", "--warm-env", "MAX_LEN=20", "--", py, str(TRAIN)],
        "env": ["cache-check", "--mode", "count", "--format", "json", "--warm-env", f"XLA_FLAGS={FAST_MIN_MAX}",
                "--", py, str(TRAIN)],
        "unwritable": ["cache-check", "--cache", unwritable_dir(tmp), "--format", "json", "--", py, str(TRAIN)],
        "late": ["cache-check", "--", py, str(EXAMPLES / "init_too_late.py")],
        "readonly": ["cache-check", "--mode", "count", "--format", "json", "--", py, str(TRAIN)],
        "shared": ["cache-check", "--mode", "count", "--format", "json", "--", py, str(EXAMPLES / "shared_writers.py")],
    }
    with ThreadPoolExecutor(2) as pool:
        envs = {"readonly": {"CACHE_READONLY": "1"}}
        futures = {name: pool.submit(detective, *args, env=envs.get(name)) for name, args in scenarios.items()}
        return {name: f.result() for name, f in futures.items()}


def verdict(proc) -> dict:
    return json.loads(proc.stdout)


def reasons(proc, kind: str) -> list[dict]:
    return [r for r in verdict(proc)["reasons"] if r["kind"] == kind]


# -- deserialize-failure and graph-changed: one pair ----------------------------------------------

def test_deserialize_failure_names_torch_xlas_message(checks):
    proc = checks["changed"]
    assert proc.returncode == 1, proc.stderr
    data = verdict(proc)
    assert data["verdict"] == "not-reused"
    assert data["cold"]["programs"] == 2 and data["cold"]["misses"] == 2 and data["cold"]["written"] == 2
    assert data["warm"]["hits"] == 0 and data["warm"]["deserialize_failures"] == 1 and data["warm"]["misses"] == 1
    (failure,) = reasons(proc, "deserialize-failure")
    assert failure["count"] == 1
    assert "Failed to deserialize executable: UNIMPLEMENTED" in failure["detail"]
    assert "1 of 1 written by the cold run" in failure["detail"]
    # the child's stderr still reaches the user: torch_xla's own warning line, passed through
    assert "pjrt_computation_client.cpp" in proc.stderr and "Failed to deserialize executable" in proc.stderr


def test_graph_changed_points_at_the_line(checks):
    (changed,) = reasons(checks["changed"], "graph-changed")
    assert (changed["file"], changed["line"], changed["count"]) == (str(TRAIN), MASK_LINE, 1)
    assert "x[:, MAX_LEN:] = 0" in changed["detail"]
    assert not reasons(checks["changed"], "env-changed")


def test_run_json_records_the_cache(checks):
    data = verdict(checks["changed"])
    cold_dir, warm_dir = data["runs"]["cold"], data["runs"]["warm"]
    cold = json.loads(Path(cold_dir, "run.json").read_text())["cache"]
    warm = json.loads(Path(warm_dir, "run.json").read_text())["cache"]
    assert cold["path"] == warm["path"] == data["cache"] and cold["read_only"] is False
    (init,) = cold["inits"]
    assert init["requested_path"] == "/tmp/xla_cache" and init["path"] == data["cache"]  # sent to the cache under test
    assert init["too_late"] is False and init["site"]["file"] == str(TRAIN)
    env = cold["compile_env"]
    assert env["XLA_IR_DEBUG"] == "1" and env["device_type"] == "CPU" and len(env["torch_xla_gitrev"]) == 40
    assert set(env) == {"XLA_FLAGS", "LIBTPU_INIT_ARGS", "TPU_MEGACORE", "XLA_HLO_DEBUG", "XLA_IR_DEBUG",
                        "torch_gitrev", "torch_xla_gitrev", "device_type", "devices"}  # nothing else of the env
    assert cold["messages"] == []
    (message,) = warm["messages"]
    assert message["count"] == 1 and message["source"].endswith("pjrt_computation_client.cpp:694")
    assert warm["totals"]["deserialize_failures"] == 1


def test_each_program_says_what_the_cache_did(checks):
    from detective.runtime.record import load_run

    data = verdict(checks["changed"])
    cold, warm = load_run(data["runs"]["cold"]), load_run(data["runs"]["warm"])
    assert [e.get("cache") for e in cold.execution_events if e["compiled"]] == ["miss", "miss"]
    assert [e.get("cache") for e in warm.execution_events if e["compiled"]] == ["miss", "load-failed"]
    report = detective("report", "--no-lint", data["runs"]["warm"])
    assert "persistent cache" in report.stdout and "1 load failed" in report.stdout and "1 miss" in report.stdout
    assert "torch_xla: Failed to deserialize executable" in report.stdout
    programs = json.loads(detective("report", "--no-lint", "--format", "json", data["runs"]["warm"]).stdout)[
        "cache"]["programs"]
    assert [(p["cache"], p["message"] is not None) for p in programs] == [("miss", False), ("load-failed", True)]
    assert programs[1]["message"].startswith("Failed to deserialize executable: UNIMPLEMENTED")


def test_gate_holds_a_restart_budget(checks):
    warm = verdict(checks["changed"])["runs"]["warm"]
    failed = detective("gate", warm, "--min-cache-hit-rate", "0.9")
    assert failed.returncode == 1
    assert "hit rate 0.00" in failed.stdout and "1 missed, 1 failed to load" in failed.stdout
    assert "Failed to deserialize executable" in failed.stdout
    assert detective("gate", warm, "--min-cache-hit-rate", "0", "--max-compile-seconds", "600").returncode == 0
    assert detective("gate", warm, "--max-compile-seconds", "0.0001").returncode == 1


# -- env-changed, not-written, shared-writers ------------------------------------------------------

def test_env_changed_names_the_variable(checks):
    proc = checks["env"]
    assert proc.returncode == 1, proc.stderr
    (changed,) = reasons(proc, "env-changed")
    assert changed["detail"].startswith("XLA_FLAGS: ") and FAST_MIN_MAX in changed["detail"].split("→")[1]
    assert FAST_MIN_MAX not in changed["detail"].split("→")[0]
    assert changed["count"] == 2 and verdict(proc)["warm"]["misses"] == 2
    assert not reasons(proc, "graph-changed") and not reasons(proc, "deserialize-failure")


def test_unwritable_cache_is_not_written(checks):
    proc = checks["unwritable"]
    assert proc.returncode == 1, proc.stderr
    data = verdict(proc)
    assert data["warm"] is None and data["cold"]["written"] == 0
    (reason,) = reasons(proc, "not-written")
    assert "not writable" in reason["detail"] and reason["file"] == str(TRAIN)


def test_read_only_cache_is_not_written(checks):
    proc = checks["readonly"]
    assert proc.returncode == 1, proc.stderr
    (reason,) = reasons(proc, "not-written")
    assert "opened read-only (readonly=True)" in reason["detail"] and reason["file"] == str(TRAIN)
    assert verdict(proc)["cold"]["misses"] == 2 and verdict(proc)["warm"] is None


def test_cache_initialised_too_late(checks):
    proc = checks["late"]
    assert proc.returncode == 1, proc.stderr
    assert "not-written" in proc.stdout and "init_too_late.py:11" in proc.stdout
    assert "after the first compile" in proc.stdout
    assert "warm restart: not run" in proc.stdout
    assert "Computation cache has already been initialized" in proc.stderr  # the script's own traceback


def test_two_processes_writing_one_directory(checks):
    proc = checks["shared"]
    assert proc.returncode == 1, proc.stderr
    (shared,) = reasons(proc, "shared-writers")
    assert shared["count"] == 2 and shared["file"] == str(EXAMPLES / "shared_writers.py")
    assert shared["detail"].count("pid ") == 2 and "readonly=True" in shared["detail"]


# -- could not run ---------------------------------------------------------------------------------

def test_a_failing_command_cannot_be_judged(tmp_path):
    proc = detective("cache-check", "--format", "json", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["verdict"] is None and "cold run failed (exit 3)" in data["error"]
    missing = detective("cache-check", "--", "no-such-command-xyz")
    assert missing.returncode == 2 and "command not found: no-such-command-xyz" in missing.stderr


MARKED = '''
import os
import tempfile

import pytest
import torch
import torch_xla
import torch_xla.runtime as xr

xr.initialize_cache(tempfile.mkdtemp())  # before the first compile of this process: a cold cache


def steps(n, width):
    for _ in range(n):
        out = (torch.ones(4, width, device=torch_xla.device()) * 3).sum()
        torch_xla.sync()


@pytest.mark.compile_budget(min_cache_hit_rate=1.0)
def test_cold_cache_fails_the_restart_budget():
    steps(3, 8)


@pytest.mark.compile_budget(max_compile_seconds=600, min_cache_hit_rate=0.0)
def test_generous_budget_passes():
    steps(3, 16)
'''


def test_marker_holds_a_restart_budget(pytester):
    pytester.makepyfile(test_restart=MARKED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rA",
                                           "--basetemp", str(pytester.path / "tmp"))
    text = result.stdout.str()
    assert result.parseoutcomes().get("passed") == 1 and result.parseoutcomes().get("failed") == 1, text
    assert "FAILED test_restart.py::test_cold_cache_fails_the_restart_budget" in text
    assert "persistent-cache hit rate 0.00 (allowed at least 1): 0 loaded, 1 missed, 0 failed to load" in text
