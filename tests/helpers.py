"""What the test folders share: the repository's paths and the `detective` command as a user runs it.

Importable as ``helpers`` from every test module (``pythonpath = ["tests"]``, with
``--import-mode=importlib``, so no test folder's conftest shadows another's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
STORMS = EXAMPLES / "storms"
MOE = EXAMPLES / "moe"
RUNTIME_SCRIPTS = REPO / "tests" / "runtime" / "scripts"
REPORT_SCRIPTS = REPO / "tests" / "report" / "scripts"
PAIRS = ["seq_len", "counter_slice", "item_in_step", "optional_key", "grad_accum"]  # examples/storms/<pair>_{broken,fixed}.py


def detective(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None,
              ) -> subprocess.CompletedProcess:
    """``python -m detective ARGS`` in a fresh process (from the repository root unless ``cwd``)."""
    return subprocess.run([sys.executable, "-m", "detective", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout, env=env)


def report_json(out: Path, *extra: str) -> dict:
    proc = detective("report", str(out), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


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


def record(out: Path, script: Path, mode: str, *options: str) -> Recorded:
    """``detective run --quiet --mode MODE --out OUT -- python SCRIPT``."""
    proc = detective("run", "--quiet", "--mode", mode, "--out", str(out), *options, "--", sys.executable, str(script))
    return Recorded(script, out, proc.returncode, proc.stderr)
