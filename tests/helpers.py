"""What the test folders share: the repository's paths and the `detective` command as a user runs it.

Importable as ``helpers`` from every test module (``pythonpath = ["tests"]``, with
``--import-mode=importlib``, so no test folder's conftest shadows another's).
"""

from __future__ import annotations

import json
import os
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


def target_costs(tmp_path: Path, *args: str) -> dict:
    """``benchmarks/target_costs.py ARGS --json``, run for real on PJRT CPU: the measured costs."""
    out = tmp_path / "target_costs.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "target_costs.py"), *args, "--json", str(out)],
                   check=True, env={**os.environ, "PJRT_DEVICE": "CPU"}, capture_output=True, timeout=300)
    return json.loads(out.read_text())


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


COUNT_COMPILES = RUNTIME_SCRIPTS / "count_compiles.py"
COUNTS_FILE = "compile-counts.json"  # written next to the run directory by count_compiles.py


def counted(out: Path, script: Path) -> list[str]:
    """``python count_compiles.py OUT.compile-counts.json SCRIPT``: the script, with torch_xla's own
    counters written after every sync (see :func:`check_against_torch_xla`)."""
    return [sys.executable, str(COUNT_COMPILES), str(counts_path(out)), str(script)]


def counts_path(out: Path) -> Path:
    return out.parent / f"{out.name}.{COUNTS_FILE}"


def record(out: Path, script: Path, mode: str, *options: str, env: dict | None = None) -> Recorded:
    """``detective run --quiet --mode MODE --out OUT -- python count_compiles.py ... SCRIPT``."""
    proc = detective("run", "--quiet", "--mode", mode, "--out", str(out), *options, "--", *counted(out, script),
                     env=env)
    return Recorded(script, out, proc.returncode, proc.stderr)


def check_against_torch_xla(out: Path) -> None:
    """The tracer's per-step new programs, derived from torch_xla's debug log, against records it
    had no part in: the compile counters the script noted after each sync, and the compile
    blocks counted in the raw debug log."""
    from detective import load_run

    records = json.loads(counts_path(out).read_text())
    compiled_per_step, last = [], [0, 0]
    for now in records:
        if now != last:  # a sync with nothing pending is not a step
            compiled_per_step.append(now[0] - last[0])
            last = now
    run = load_run(out)
    steps = [s for s in run.step_events if s["complete"]]
    assert [s["new_programs"] for s in steps] == compiled_per_step, out
    executions = run.execution_events
    assert executions and all(e["graph_hash"] for e in executions), "an execution without a graph hash"
    assert sum(e["new"] for e in executions) == last[0] == run.meta["final_metrics"]["UncachedCompile"]
    [log] = (out / "raw").glob("debug.*.log")
    assert log.stat().st_size < 1 << 20, "the raw log was emptied mid-run: use a shorter script"
    assert log.read_text().count("Compilation Analysis: Compilation Cause\n") == last[0]
    if run.meta["mode"] == "diagnose":
        assert all(e.get("ir_path") for e in executions if e["new"]), "a new program without its IR"
