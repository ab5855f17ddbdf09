"""`detective bisect` on a temporary git repository where one commit starts a storm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")

STABLE = """\
import torch
import torch_xla

device = torch_xla.device()
w = torch.ones(4, 8, device=device)
for step in range(5):
    x = torch.ones(4, 8, device=device) * 2.0
    out = (x[:, :{width}] * w[:, :{width}]).sum()
    torch_xla.sync()
"""


def sh(repo: Path, *args: str) -> str:
    return subprocess.run(args, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, message: str, **files: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", message)
    return sh(repo, "git", "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "model"
    repo.mkdir()
    sh(repo, "git", "init", "-q", "-b", "main")
    sh(repo, "git", "config", "user.email", "dev@example.com")
    sh(repo, "git", "config", "user.name", "Dev")
    shas = [commit(repo, "stable training loop", **{"train.py": STABLE.format(width=8)}),
            commit(repo, "add notes", **{"NOTES.md": "notes\n"}),
            commit(repo, "slice by the step counter", **{"train.py": STABLE.format(width="step + 2")}),
            commit(repo, "more notes", **{"NOTES.md": "more notes\n"}),
            commit(repo, "even more notes", **{"NOTES.md": "even more\n"})]
    return repo, shas


def bisect(repo: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "detective", "bisect", *args], cwd=repo,
                          capture_output=True, text=True, timeout=600, **kwargs)


def clean_state(repo: Path) -> None:
    assert sh(repo, "git", "symbolic-ref", "--short", "HEAD") == "main"
    assert not (repo / ".git" / "BISECT_LOG").exists()
    assert sh(repo, "git", "status", "--porcelain", "--untracked-files=no") == ""


def test_bisect_names_the_commit_that_started_the_storm(repo, tmp_path):
    repo, shas = repo
    proc = bisect(repo, "--good", shas[0], "--bad", shas[-1], "--after-step", "2", "--mode", "diagnose",
                  "--out", str(tmp_path / "runs"), "--", sys.executable, "train.py")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"first bad commit: {shas[2]} slice by the step counter"
    assert "gate FAILED" in proc.stdout and "train.py:9 in <module>" in proc.stdout
    first_bad = tmp_path / "runs" / shas[2]
    assert (first_bad / "events.jsonl").exists()
    # --mode diagnose: every commit's run recorded the IR of its new programs
    runs = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    assert len(runs) >= 3 and all(json.loads((d / "run.json").read_text())["mode"] == "diagnose" for d in runs)
    assert list((first_bad / "graphs").glob("*.txt"))
    clean_state(repo)


def test_a_commit_that_crashes_is_skipped(repo, tmp_path):
    """The test git bisect runs at each commit: a command that crashes is 'skip' (125), never 'bad'."""
    repo, shas = repo
    commit(repo, "crash after the loop", **{"train.py": STABLE.format(width=8) + "raise SystemExit(3)\n"})
    step = [sys.executable, "-m", "detective.ci.bisect_test_commit", "--out-root", str(tmp_path / "runs")]
    budget = json.dumps({"after_step": 2})
    proc = subprocess.run([*step, "--budget", budget, "--", sys.executable, "train.py"], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith(": skip")
    broken = subprocess.run([*step, "--budget", '{"no_such_field": 1}', "--", "true"], cwd=repo,
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode == 125 and "skipping this commit: TypeError" in broken.stderr


def test_swapped_endpoints_are_detected(repo):
    repo, shas = repo
    proc = bisect(repo, "--good", shas[-1], "--bad", shas[0], "--after-step", "2", "--", sys.executable, "train.py")
    assert proc.returncode == 2
    assert "already fails the gate: are --good and --bad swapped?" in proc.stderr
    clean_state(repo)


def test_command_failing_everywhere_is_reported(repo):
    repo, shas = repo
    proc = bisect(repo, "--good", shas[0], "--bad", shas[-1], "--after-step", "2", "--",
                  sys.executable, "no_such_script.py")
    assert proc.returncode == 2
    assert "the command did not run cleanly at the --good commit" in proc.stderr
    clean_state(repo)


def test_dirty_tree_and_non_git_directory_are_refused(repo, tmp_path):
    repo, shas = repo
    (repo / "train.py").write_text("# local edit\n")
    dirty = bisect(repo, "--good", shas[0], "--bad", shas[-1], "--after-step", "2", "--", "true")
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = bisect(plain, "--good", "a", "--bad", "b", "--after-step", "1", "--", "true")
    assert outside.returncode == 2 and "is not inside a git repository" in outside.stderr
    sh(repo, "git", "checkout", "--", "train.py")
    unknown = bisect(repo, "--good", "nope", "--bad", shas[-1], "--after-step", "2", "--", "true")
    assert unknown.returncode == 2 and "--good 'nope' is not a commit" in unknown.stderr


def test_ctrl_c_restores_the_repository(repo):
    repo, shas = repo
    proc = subprocess.Popen([sys.executable, "-m", "detective", "bisect", "--good", shas[0], "--bad", shas[-1],
                             "--after-step", "2", "--", sys.executable, "train.py"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while sh(repo, "git", "rev-parse", "HEAD") == shas[-1] and time.time() < deadline:
        time.sleep(0.2)  # wait until bisect has checked out another commit
    assert sh(repo, "git", "rev-parse", "HEAD") != shas[-1]
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted; the repository was restored" in stderr
    clean_state(repo)
