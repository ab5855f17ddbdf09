"""Paths and the CLI runner shared by the runtime tests (not named conftest: several test
directories have one, and `from conftest import` would find whichever was imported last)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STORMS = REPO / "examples" / "storms"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def detective(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "detective", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
