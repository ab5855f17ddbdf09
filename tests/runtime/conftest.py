"""Run every traced scenario once per session (two at a time) and let tests read the records."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STORMS = REPO / "examples" / "storms"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class Traced:
    out: Path
    returncode: int
    stdout: str
    stderr: str


def detective(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "detective", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _trace(out: Path, script: Path, *options: str, script_args: tuple[str, ...] = ()) -> Traced:
    proc = detective("run", "--out", str(out), *options, "--", sys.executable, str(script), *script_args)
    return Traced(out, proc.returncode, proc.stdout, proc.stderr)


def _watch(out: Path) -> Traced:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "watch_loop.py"), str(out)], capture_output=True, text=True, timeout=300
    )
    return Traced(out, proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def traced(tmp_path_factory) -> dict[str, Traced]:
    root = tmp_path_factory.mktemp("traced")
    jobs = {path.stem: (_trace, root / path.stem, path) for path in sorted(STORMS.glob("*.py"))}
    for name in ("boundaries", "raises_at_step3", "never_syncs", "no_graph", "killed"):
        jobs[name] = (_trace, root / name, SCRIPTS / f"{name}.py")
    jobs["diagnose"] = (_trace, root / "diagnose", STORMS / "seq_len_broken.py", "--mode", "diagnose")
    jobs["watch"] = (_watch, root / "watch")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn, *args) for name, (fn, *args) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}
