"""Run every traced scenario once per session (two at a time) and let tests read the records."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from helpers import RUNTIME_SCRIPTS as SCRIPTS
from helpers import STORMS, counted


@dataclass
class Traced:
    out: Path
    returncode: int
    stdout: str
    stderr: str


def _trace(out: Path, script: Path, *options: str, env: dict | None = None, count: bool = False) -> Traced:
    """``detective run`` on a script; with ``count``, torch_xla's counters are also written after
    every sync by the script itself (helpers.check_against_torch_xla)."""
    command = counted(out, script) if count else [sys.executable, str(script)]
    proc = subprocess.run(
        [sys.executable, "-m", "detective", "run", "--out", str(out), *options, "--", *command],
        capture_output=True, text=True, timeout=300, env=env,
    )
    return Traced(out, proc.returncode, proc.stdout, proc.stderr)


def _with_user_sitecustomize(root: Path) -> dict:
    """The user's own sitecustomize must still run under our bootstrap."""
    site = root / "user-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('user sitecustomize ran')\n")
    return {**os.environ, "PYTHONPATH": str(site)}


def _watch(out: Path) -> Traced:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "watch_loop.py"), str(out)], capture_output=True, text=True, timeout=300
    )
    return Traced(out, proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def traced(tmp_path_factory) -> dict[str, Traced]:
    root = tmp_path_factory.mktemp("traced")
    counting = partial(_trace, count=True)
    jobs = {path.stem: (counting, root / path.stem, path) for path in sorted(STORMS.glob("*.py"))}
    for name in ("boundaries", "raises_at_step3", "never_syncs", "killed"):
        jobs[name] = (_trace, root / name, SCRIPTS / f"{name}.py")
    jobs["no_graph"] = (partial(_trace, env=_with_user_sitecustomize(root)), root / "no_graph", SCRIPTS / "no_graph.py")
    jobs["diagnose"] = (counting, root / "diagnose", STORMS / "seq_len_broken.py", "--mode", "diagnose")
    jobs["watch"] = (_watch, root / "watch")
    # documented `run` options: the warm-up, and the gate run in the same command
    storm = STORMS / "counter_slice_broken.py"  # a new program in each of its 8 steps
    jobs["warmup_4"] = (_trace, root / "warmup_4", storm, "--warmup", "4")
    jobs["gated_junit"] = (_trace, root / "gated_junit", storm, "--quiet", "--gate-after-step", "3",
                           "--max-new-programs", "4", "--max-unique-programs", "100",
                           "--max-compile-seconds", "1000", "--gate-format", "junit")
    jobs["gated_github"] = (_trace, root / "gated_github", storm, "--quiet", "--gate-after-step", "3",
                            "--max-new-programs", "5", "--gate-format", "github")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn, *args) for name, (fn, *args) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}
