"""Multi-rank runs on real torch_xla (PJRT CPU): thread ranks under xmp.spawn (fork and spawn
start methods, 2 and 4 devices), processes under plain multiprocessing, one rank per
`detective run` merged afterwards, SPMD, and detective.watch inside the spawned function.

Every scenario runs once per module, two at a time. XLA_ENABLE_PARAM_ALIASING=0 and "rank 0
compiles first" (in the scripts) keep CPU threads from hanging where a TPU would not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import REPO, detective
from helpers import RUNTIME_SCRIPTS as SCRIPTS

pytestmark = pytest.mark.slow

TRAIN = REPO / "examples" / "multirank" / "train.py"
RANKS = SCRIPTS / "ranks"
LINES = TRAIN.read_text().splitlines()
SHAPE_LINE = next(n for n, t in enumerate(LINES, 1) if "batch(rank, step, args.diverge_at).to(device)" in t)
SYNC_LINE = next(n for n, t in enumerate(LINES, 1) if t.strip() == "torch_xla.sync()")


def _env(devices: int, **extra) -> dict:
    return {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": str(devices), "XLA_ENABLE_PARAM_ALIASING": "0",
            **extra}


def _run(out: Path, script: Path, *args: str, options=(), devices=2, env_extra=None, direct=False):
    if direct:
        command = [sys.executable, str(script), *args]
    else:
        command = [sys.executable, "-m", "detective", "run", "--out", str(out), *options, "--",
                   sys.executable, str(script), *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=_env(devices, **(env_extra or {})))
    return {"out": out, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    jobs = {
        "diverge": (TRAIN, ["--diverge-at", "3", "--start-method", "spawn"], {"options": ["--mode", "diagnose"],
                                                                             "devices": 4}),
        # XLA warns about the waiting collective at 5 s (and would abort at 10 s); the stall timeout stops it at 7 s
        "hang": (TRAIN, ["--diverge-at", "3", "--all-reduce", "--start-method", "fork"],
                 {"options": ["--mode", "diagnose", "--stall-timeout", "7"]}),
        "killed": (RANKS / "procs_killed.py", [], {"devices": 1}),
        "spmd": (RANKS / "spmd.py", [], {}),
        "watch": (RANKS / "watch_in_spawn.py", [str(root / "watch")], {"direct": True}),
        "host0": (RANKS / "one_rank.py", [], {"devices": 1, "env_extra": {"RANK": "0", "WORLD_SIZE": "2"}}),
        "host1": (RANKS / "one_rank.py", [], {"devices": 1,
                                             "env_extra": {"RANK": "1", "WORLD_SIZE": "2", "DIVERGE_AT": "2"}}),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_run, root / name, script, *args, **kw) for name, (script, args, kw) in jobs.items()}
        done = {name: f.result() for name, f in futures.items()}
    done["watch"]["out"] = root / "watch"
    return done


def _report(run_dir: Path, *args: str) -> dict:
    proc = detective("report", str(run_dir), "--format", "json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]


def test_thread_ranks_are_recorded_each_on_its_own(runs):
    r = runs["diverge"]
    assert r["rc"] == 0, r["stderr"][-2000:]
    identities = {e["rank"]: e for e in _events(r["out"]) if e["event"] == "rank"}
    assert sorted(identities) == [0, 1, 2, 3]
    assert all(i["threaded"] and i["world_size"] == 4 and i["host"] for i in identities.values())
    assert sorted(i["local_rank"] for i in identities.values()) == [0, 1, 2, 3]
    assert len({i["thread"] for i in identities.values()}) == 4
    data = _report(r["out"], "--no-lint")
    assert [(x["rank"], len(x["steps"]), x["total_unique_programs"]) for x in data["ranks"]] == [
        (0, 6, 1), (1, 6, 2), (2, 6, 1), (3, 6, 1)]
    assert data["hang"]["detected"] is False


def test_divergent_shape_named_at_its_line(runs):
    r = runs["diverge"]
    assert r["rc"] == 0, r["stderr"][-2000:]
    data = _report(r["out"], "--no-lint")
    assert [x["rank"] for x in data["ranks"]] == [0, 1, 2, 3]
    (d,) = data["divergences"]
    assert (d["step"], d["ranks"], d["vs_rank"], d["kind"]) == (3, [1], 0, "shape")
    assert (d["before"], d["after"]) == ("f32[4,8]", "f32[4,11]")
    assert (Path(d["file"]).name, d["line"], d["function"]) == ("train.py", SHAPE_LINE, "train")
    assert d["hashes"]["0"] != d["hashes"]["1"] and set(d["hashes"]) == {"0", "1"}
    text = detective("report", str(r["out"]), "--no-lint").stdout
    assert text.startswith("CROSS-RANK DIVERGENCE: 1 rank ran different programs from rank 0\n"
                           f"  rank 1, step 3: shape f32[4,8] → f32[4,11] at examples/multirank/train.py:{SHAPE_LINE}")
    assert "ranks 0, 2, 3: 6 steps, 1 unique program" in text
    one = _report(r["out"], "--no-lint", "--rank", "1")
    assert one["total_unique_programs"] == 2 and one["steps"][3]["new_programs"] == 1
    gate = detective("gate", str(r["out"]), "--after-step", "4")
    assert gate.returncode == 1 and "ranks diverged: rank 1, step 3: shape" in gate.stdout
    assert detective("gate", str(r["out"]), "--after-step", "4", "--allow-rank-divergence").returncode == 0
    missing = detective("report", str(r["out"]), "--rank", "9")
    assert missing.returncode == 2 and "rank 9 recorded no steps" in missing.stderr


def test_divergence_before_all_reduce_is_a_hang_stopped_with_every_rank_stack(runs):
    r = runs["hang"]
    assert r["rc"] == 143, r["stderr"][-2000:]  # stopped with SIGTERM after the stall
    data = _report(r["out"], "--no-lint")
    hang = data["hang"]
    assert hang["detected"] and "--stall-timeout" in hang["reason"]
    assert "XLA reported a collective that never completed (all reduce" in hang["reason"]
    assert hang["message"] in r["stderr"]  # XLA's own warning, passed through to the user's terminal
    assert hang["last_step"] == {"0": 3, "1": 3}
    assert [w["rank"] for w in hang["waiting"]] == [0, 1]
    assert all((Path(w["frame"]["file"]).name, w["frame"]["line"]) == ("train.py", SYNC_LINE) for w in hang["waiting"])
    (d,) = data["divergences"]
    assert (d["step"], d["ranks"], d["kind"], d["line"]) == (3, [1], "shape", SHAPE_LINE)
    text = r["stderr"]
    assert "HANG: no rank completed a step for 7 s" in text
    assert "stalled after step 3: rank 0 waiting in sync (torch_xla.py:" in text
    assert f"from train at examples/multirank/train.py:{SYNC_LINE}, rank 1 waiting in" in text
    assert f"before it: rank 1, step 3: shape f32[4,8] → f32[4,11] at examples/multirank/train.py:{SHAPE_LINE}" in text


def test_one_rank_killed_loses_nothing_the_other_recorded(runs):
    r = runs["killed"]
    assert r["rc"] == 9
    data = _report(r["out"])
    assert [(x["rank"], len(x["steps"]), x["finished"]) for x in data["ranks"]] == [(0, 6, True), (1, 3, False)]
    assert data["warnings"] == []
    identities = [e for e in _events(r["out"]) if e["event"] == "rank"]
    assert sorted((i["rank"], i["world_size"], i["threaded"]) for i in identities) == [(0, 2, False), (1, 2, False)]
    gate = detective("gate", str(r["out"]), "--after-step", "4")
    assert gate.returncode == 2 and "rank 1: the run recorded steps 0..2 only: it never reached step 4" in gate.stdout


def test_spmd_is_one_rank_over_every_device(runs):
    r = runs["spmd"]
    assert r["rc"] == 0, r["stderr"][-2000:]
    (identity,) = [e for e in _events(r["out"]) if e["event"] == "rank"]
    assert identity["spmd"] is True and identity["devices"] == 2 and identity["rank"] == 0
    data = _report(r["out"])
    assert len(data["ranks"]) == 1 and len(data["steps"]) == 4 and data["total_unique_programs"] == 1


def test_watch_inside_spawned_function_records_every_rank(runs):
    r = runs["watch"]
    assert r["rc"] == 0, r["stderr"][-2000:]
    data = _report(r["out"])
    assert [(x["rank"], len(x["steps"]), x["finished"]) for x in data["ranks"]] == [(0, 4, True), (1, 4, True)]
    assert json.loads((r["out"] / "run.json").read_text())["status"] == "finished"
    assert "all 2 ranks alike: 4 steps, 1 unique program each" in detective("report", str(r["out"])).stdout
    assert detective("gate", str(r["out"]), "--after-step", "1").returncode == 0


def test_hosts_merged_by_rank_and_aligned_on_steps(runs, tmp_path):
    for name in ("host0", "host1"):
        assert runs[name]["rc"] == 0, runs[name]["stderr"][-2000:]
    merged = tmp_path / "merged"
    proc = detective("merge", str(runs["host0"]["out"]), str(runs["host1"]["out"]), "--out", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert "merged 2 runs (1 host): 2 ranks (0-1), steps 0..4" in proc.stderr
    data = _report(merged, "--no-lint")
    assert [(x["rank"], len(x["steps"])) for x in data["ranks"]] == [(0, 5), (1, 5)]
    (d,) = data["divergences"]
    assert (d["step"], d["ranks"], d["vs_rank"]) == (2, [1], 0)
    gate = detective("gate", str(merged), "--after-step", "3")
    assert gate.returncode == 1 and "ranks diverged" in gate.stdout
    again = detective("merge", str(runs["host0"]["out"]), "--out", str(merged))
    assert again.returncode == 2 and "already holds a run" in again.stderr
    missing = detective("merge", str(tmp_path / "nope"), "--out", str(tmp_path / "m2"))
    assert missing.returncode == 2 and "no such run directory" in missing.stderr
