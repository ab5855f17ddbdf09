"""The pre-commit hook as a user gets it: `pre-commit try-repo` from a temporary repository."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

BROKEN = "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x.item()\n"
CLEAN = "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def test_try_repo_runs_the_hook(tmp_path):
    pre_commit = shutil.which("pre-commit") or str(Path(os.sys.executable).parent / "pre-commit")
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed (dev extra)")
    user = tmp_path / "user-repo"
    user.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}

    def git(*args):
        subprocess.run(["git", *args], cwd=user, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (user / "net.py").write_text(BROKEN)
    (user / "notes.txt").write_text("net.py has .item() in forward\n")
    git("add", "-A")

    def try_repo():
        return subprocess.run([pre_commit, "try-repo", str(REPO), "detective-lint", "--all-files"],
                              cwd=user, env=env, capture_output=True, text=True, timeout=600)

    failing = try_repo()
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "net.py:5:16: RC001 [host-sync] `.item()` reads a tensor value on the host" in failing.stdout
    assert "notes.txt" not in failing.stdout.split("Found")[0].split("Failed")[-1]  # python files only

    (user / "net.py").write_text(CLEAN)
    git("add", "-A")
    passing = try_repo()
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "Passed" in passing.stdout
