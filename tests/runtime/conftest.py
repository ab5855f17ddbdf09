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
from helpers import STORMS


@dataclass
class Traced:
    out: Path
    returncode: int
    stdout: str
    stderr: str


def _trace(out: Path, script: Path, *options: str, env: dict | None = None) -> Traced:
    proc = subprocess.run(
        [sys.executable, "-m", "detective", "run", "--out", str(out), *options, "--", sys.executable, str(script)],
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
    jobs = {path.stem: (_trace, root / path.stem, path) for path in sorted(STORMS.glob("*.py"))}
    for name in ("boundaries", "raises_at_step3", "never_syncs", "killed"):
        jobs[name] = (_trace, root / name, SCRIPTS / f"{name}.py")
    jobs["no_graph"] = (partial(_trace, env=_with_user_sitecustomize(root)), root / "no_graph", SCRIPTS / "no_graph.py")
    jobs["diagnose"] = (_trace, root / "diagnose", STORMS / "seq_len_broken.py", "--mode", "diagnose")
    jobs["watch"] = (_watch, root / "watch")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn, *args) for name, (fn, *args) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}
