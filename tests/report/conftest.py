"""Record every storm example and the MoE pair once per session in diagnose mode (two at a
time), plus one count-mode run, and let the tests read the reports."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

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


def _record(out: Path, script: Path, mode: str) -> Recorded:
    proc = detective("run", "--quiet", "--mode", mode, "--out", str(out), "--", sys.executable, str(script))
    return Recorded(script, out, proc.returncode, proc.stderr)


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> dict[str, Recorded]:
    root = tmp_path_factory.mktemp("diagnosed")
    jobs = {"moe_broken": MOE / "moe_broken.py", "moe_fixed": MOE / "moe_fixed.py",
            "log_before_sync": SCRIPTS / "log_before_sync.py"}
    for pair in PAIRS:
        for variant in ("broken", "fixed"):
            jobs[f"{pair}_{variant}"] = STORMS / f"{pair}_{variant}.py"
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_record, root / name, script, "diagnose") for name, script in jobs.items()}
        futures["count_mode"] = pool.submit(_record, root / "count_mode", STORMS / "counter_slice_broken.py", "count")
        results = {name: future.result() for name, future in futures.items()}
    for name, result in results.items():
        assert result.returncode == 0, f"{name}: {result.stderr}"
    return results
