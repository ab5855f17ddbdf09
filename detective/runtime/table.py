"""The per-step table and its summary, built from a loaded run. Reused by every report format."""

from __future__ import annotations

STEP_COLUMNS = [
    "step",
    "executions",
    "new_programs",
    "unique_programs",
    "compile_seconds",
    "host_transfers",
    "fallback_ops",
    "complete",
    "boundary",
    "compiled",
    "cached",
    "duration_s",
]
EXECUTION_COLUMNS = [
    "step",
    "index",
    "graph_hash",
    "compiled",
    "new",
    "compile_seconds",
    "cause",
    "graph_name",
    "site",
    "frames",
    "ir_path",
    "inputs",
    "outputs",
    "pid",
    "rank",
]


def build_steps(run):
    import pandas as pd

    return pd.DataFrame(
        [{k: e.get(k) for k in STEP_COLUMNS} for e in run.step_events], columns=STEP_COLUMNS
    )


def summarize(run) -> dict:
    """Whole-run facts a reader wants next to the table."""
    steps = run.step_events
    warmup = run.meta.get("warmup")
    complete = [s for s in steps if s.get("complete", True)]
    late = [s for s in steps if warmup is not None and s["step"] >= warmup and s["new_programs"]]
    end = run.end
    return {
        "mode": run.meta.get("mode") or (run.start or {}).get("mode"),
        "warmup": warmup,
        "steps_completed": len(complete),
        "unfinished_step": next((s["step"] for s in steps if not s.get("complete", True)), None),
        "total_unique_programs": sum(s["new_programs"] for s in steps),
        "total_compile_seconds": sum(s["compile_seconds"] for s in steps),
        "programs_after_warmup": sum(s["new_programs"] for s in late),
        "late_steps": [s["step"] for s in late],
        "exit_code": run.meta.get("exit_code"),
        "status": run.meta.get("status"),
        "torch_xla_metrics": end["metrics"] if end else None,
        "imported_torch_xla": run.start is not None,
        "hashes": (run.start or {}).get("hashes"),
    }
