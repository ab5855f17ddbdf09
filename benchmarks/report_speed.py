"""`detective report` on a long run: a real 10,000-step record, reported in under 2 s?

    .venv/bin/python benchmarks/report_speed.py [--steps 10000] [--rounds 3] [--keep DIR]

Records a real run on torch_xla (PJRT_DEVICE=CPU: a small MLP's forward, one sync per step, a
train-then-eval shape so the table has phases), then times, in fresh processes, the minimum of
``--rounds``:

- floor: reading events.jsonl with ``json.loads`` per line (what any report must do);
- ``detective report RUN`` (the compacted text table), ``--all-steps``, ``--format json``.

Prints each time, its ratio to the floor, and the target (text report < 2 s).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

WORKLOAD = r'''
import sys, torch, torch_xla
steps = int(sys.argv[1])
d = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(d)
x = torch.randn(8, 16).to(d)
with torch.no_grad():
    for step in range(steps):
        y = model(x if step < steps - 100 else x[:4])  # the last 100 steps: an "eval" shape
        torch_xla.sync()
'''

FLOOR = r'''
import json, sys, time
start = time.perf_counter()
with open(sys.argv[1] + "/events.jsonl", "rb") as f:
    events = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
print(time.perf_counter() - start)
'''


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", help="record (or reuse) the run in this directory")
    args = parser.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="detective-report-speed-")
    os.makedirs(root, exist_ok=True)
    run_dir = os.path.join(root, "run")
    if not os.path.exists(os.path.join(run_dir, "events.jsonl")):
        script = os.path.join(root, "workload.py")
        with open(script, "w") as f:
            f.write(WORKLOAD)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "detective", "run", "--quiet", "--out", run_dir, "--",
                        sys.executable, script, str(args.steps)], check=True, capture_output=True,
                       env=dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU")))
        print(f"recorded {args.steps} steps in {time.perf_counter() - start:.1f} s: {run_dir}")
    size = os.path.getsize(os.path.join(run_dir, "events.jsonl"))
    print(f"events.jsonl: {size / 1e6:.1f} MB")
    cli = [sys.executable, "-m", "detective", "report", run_dir]
    variants = {
        "floor: json.loads of events.jsonl (in process)": None,
        "python -c pass (interpreter start)": [sys.executable, "-c", "pass"],
        "detective report (text, compacted)": cli,
        "detective report --all-steps": cli + ["--all-steps"],
        "detective report --format json": cli + ["--format", "json"],
    }
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, command in variants.items():
            if command is None:
                out = subprocess.run([sys.executable, "-c", FLOOR, run_dir], capture_output=True, text=True, check=True)
                seconds = float(out.stdout.strip())
            else:
                try:
                    seconds = timed(command)
                except subprocess.CalledProcessError as exc:
                    print(f"{name}: failed ({exc.returncode}): {exc.stderr.decode()[-300:]}")
                    seconds = float("nan")
            best[name] = min(best.get(name, float("inf")), seconds)
    floor = best["floor: json.loads of events.jsonl (in process)"]
    for name, seconds in best.items():
        print(f"{name:<50} {seconds:6.2f} s  {seconds / floor:5.1f}x the floor")
    text = best["detective report (text, compacted)"]
    print(f"target: text report of {args.steps} steps < 2 s: {'met' if text < 2 else 'MISSED'} ({text:.2f} s)")


if __name__ == "__main__":
    main()
