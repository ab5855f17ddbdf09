"""One run per Dynamo test script per session, two at a time; tests only read the records."""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import detective

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class Traced:
    out: Path
    returncode: int
    stdout: str
    stderr: str
    own: dict | None  # what the script itself recorded from torch (its argv[1] JSON), if any


def trace(root: Path, name: str, env_extra: dict | None = None, backend: str = "dynamo") -> Traced:
    out, own = root / name, root / f"{name}.json"
    env = {**os.environ, **(env_extra or {})}
    proc = detective("run", "--backend", backend, "--out", out, "--", sys.executable, SCRIPTS / f"{name}.py", own,
                     env=env)
    data = json.loads(own.read_text()) if own.exists() else None
    return Traced(out, proc.returncode, proc.stdout, proc.stderr, data)


@pytest.fixture(scope="session")
def dynamo_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dynamo")
    jobs = {
        "mixed": ({"TORCH_LOGS": "recompiles"}, "dynamo"),  # the user's own TORCH_LOGS stays in effect
        "reset_midrun": (None, "dynamo"),
        "crash_in_backend": (None, "dynamo"),
        "no_compile": (None, "auto"),  # auto without torch_xla: the Dynamo recorder
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(trace, root, name, env, backend) for name, (env, backend) in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture
def trace_script(tmp_path):
    """Run one more script under `detective run --backend dynamo` (for the slow tests)."""
    return lambda name: trace(tmp_path, name)
