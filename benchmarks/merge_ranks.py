"""Merging many ranks: `detective merge` over generated events, against a plain file copy.

    .venv/bin/python benchmarks/merge_ranks.py [--ranks 64] [--steps 10000] [--hosts 8]

Writes one run directory per host (ranks split evenly, each rank one execution and one step
event per step, encoded by the tracer's own encoders), then times `detective merge` in a fresh
process, and a `cat` of the same files as the floor. Target: < 5 s for 64 ranks x 10,000 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from detective.runtime.event_encoding import encode_step

TARGET_S = 5.0


def write_host(run_dir: str, ranks: range, steps: int) -> int:
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"schema": 1, "mode": "count", "warmup": 2, "command": ["python", "train.py"],
                   "exit_code": 0, "status": "finished"}, f)
    pid = 1000
    frames = [{"file": "/srv/job/train.py", "line": 40 + i, "function": "train"} for i in range(4)]
    block = json.dumps({"graph_hash": "0" * 32, "cause": "user torch_xla.sync", "graph_name": None,
                        "frames": frames, "frames_truncated": False, "site": frames[0], "inputs": 12,
                        "outputs": 9, "unexpected": False}, separators=(",", ":"))
    size = 0
    with open(os.path.join(run_dir, "events.jsonl"), "w") as f:
        for rank in ranks:
            f.write(json.dumps({"event": "rank", "pid": pid, "host": os.path.basename(run_dir), "rank": rank,
                                "local_rank": rank % len(ranks), "world_size": 0, "threaded": False},
                               separators=(",", ":")) + "\n")
        for step in range(steps):
            lines = []
            for rank in ranks:
                lines.append(f'{{"event":"execution","step":{step},"index":0,"compiled":false,"new":false,'
                             f'"compile_seconds":null,"pid":{pid},"rank":{rank},' + block[1:])
                lines.append(encode_step({
                    "step": step, "boundary": "sync", "complete": True, "executions": 1, "compiled": 0,
                    "cached": 1, "new_programs": 0, "unique_programs": 1, "compile_seconds": 0.0,
                    "host_transfers": 0, "fallback_ops": 0, "fallback_counts": {}, "time": 1.7e9 + step,
                    "duration_s": 0.01, "pid": pid, "rank": rank}))
            text = "\n".join(lines) + "\n"
            size += len(text)
            f.write(text)
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=8)
    args = parser.parse_args()
    per_host = args.ranks // args.hosts
    with tempfile.TemporaryDirectory(prefix="detective-merge-") as tmp:
        dirs, total = [], 0
        for h in range(args.hosts):
            d = os.path.join(tmp, f"host{h}")
            total += write_host(d, range(h * per_host, (h + 1) * per_host), args.steps)
            dirs.append(d)
        start = time.perf_counter()
        subprocess.run(f"cat {' '.join(os.path.join(d, 'events.jsonl') for d in dirs)} > {tmp}/cat.jsonl",
                       shell=True, check=True)
        floor = time.perf_counter() - start
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "detective", "merge", *dirs, "--out", os.path.join(tmp, "merged")],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"merge failed: {proc.stderr}")
    print(proc.stderr.strip())
    print(f"merge of {args.ranks} ranks x {args.steps} steps ({args.hosts} hosts, {total / 1e6:.0f} MB of events): "
          f"{seconds:.2f} s (cat of the same files: {floor:.2f} s); target < {TARGET_S:g} s: "
          f"{'met' if seconds < TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
