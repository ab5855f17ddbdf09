"""Helpers for the report tests (a module of its own: `from conftest import` would pick up
whichever tests/*/conftest.py pytest imported last when the whole suite runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STORMS = REPO / "examples" / "storms"
MOE = REPO / "examples" / "moe"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
PAIRS = ["seq_len", "counter_slice", "item_in_step", "optional_key", "grad_accum"]


@dataclass
class Recorded:
    script: Path
    out: Path
    returncode: int
    stderr: str

    def source(self) -> list[str]:
        return self.script.read_text().splitlines()

    def line_of(self, snippet: str) -> int:
        """1-based number of the only line of the script containing ``snippet``."""
        hits = [n for n, line in enumerate(self.source(), 1) if snippet in line]
        assert len(hits) == 1, f"{snippet!r} is on lines {hits} of {self.script.name}"
        return hits[0]


def detective(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "detective", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=300)


def report_json(out: Path, *extra: str) -> dict:
    proc = detective("report", str(out), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def record(out: Path, script: Path, mode: str) -> Recorded:
    proc = detective("run", "--quiet", "--mode", mode, "--out", str(out), "--", sys.executable, str(script))
    return Recorded(script, out, proc.returncode, proc.stderr)
