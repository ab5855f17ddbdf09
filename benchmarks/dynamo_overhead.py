"""Steady-state step time of a torch.compile'd model: bare vs `detective run --backend dynamo`.

    .venv/bin/python benchmarks/dynamo_overhead.py [--rounds 5] [--steps 200] [--hidden 256] [--backend aot_eager]

1. Processes: each round runs both variants back to back in fresh processes (interleaved, so
   drift hits both alike). A variant's step time is wall time over the timed steps after warm-up
   (compiles done); a step is forward, backward and optimizer.step() of a compiled MLP, so the
   recorder's per-step work (the optimizer hook, the compile-metrics check, one event write) is
   inside it. On a busy machine process-to-process noise is larger than the effect, so also:
2. One process, alternating blocks: the same compiled loop, blocks of steps with the recorder's
   step hook on (recording into a run directory) and off, interleaved; median per block.
3. The recorder's own cost: ``boundary()`` alone, per call.
Prints medians and ratios to bare (target: at most 1.05).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP_STEPS = 5


def worker(steps: int, hidden: int, batch: int, backend: str) -> None:
    import torch

    torch.set_num_threads(1)  # two variants never overlap, but other work on the box does: less noise
    model = torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10),
    )
    compiled = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(batch, hidden, generator=g), torch.randint(0, 10, (batch,), generator=g)) for _ in range(8)]

    def step(i: int) -> None:
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(compiled(x), y).backward()
        opt.step()

    for i in range(WARMUP_STEPS):
        step(i)
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    print(json.dumps({"step_ms": (time.perf_counter() - start) * 1000 / steps}))


def in_process(steps_per_block: int, blocks: int, hidden: int, batch: int, backend: str) -> None:
    """Alternate blocks with the recorder recording and with its hook removed, in one process."""
    import torch

    from detective.runtime import dynamo_watch

    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10),
    )
    compiled = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(batch, hidden, generator=g), torch.randint(0, 10, (batch,), generator=g)) for _ in range(8)]

    def block() -> float:
        start = time.perf_counter()
        for i in range(steps_per_block):
            x, y = data[i % len(data)]
            opt.zero_grad(set_to_none=False)
            torch.nn.functional.cross_entropy(compiled(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) * 1000 / steps_per_block

    with tempfile.TemporaryDirectory() as tmp, dynamo_watch.watch_compile(out=Path(tmp) / "run") as w:
        for _ in range(WARMUP_STEPS):
            block()
        on, off = [], []
        for _ in range(blocks):
            on.append(block())
            dynamo_watch._Process.hook.remove()
            dynamo_watch._Process.hook = None
            off.append(block())
            dynamo_watch._install_step_hook()
        recorder, n = w.recorder, 2000
        start = time.perf_counter()
        for _ in range(n):
            recorder.boundary("manual")
        per_call_us = (time.perf_counter() - start) * 1e6 / n
        steps = recorder.step
    print(json.dumps({"on_ms": statistics.median(on), "off_ms": statistics.median(off), "on_min_ms": min(on),
                      "off_min_ms": min(off), "boundary_us": per_call_us, "steps": steps}))


def measure(variant: str, args, tmp: Path, round_no: int) -> float:
    script = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--hidden", str(args.hidden),
              "--batch", str(args.batch), "--backend", args.backend]
    if variant == "bare":
        command = script
    else:
        out = tmp / f"run-{round_no}"
        command = [sys.executable, "-m", "detective", "run", "--backend", "dynamo", "--quiet", "--out", str(out),
                   "--", *script]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{variant} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("{"))
    return json.loads(line)["step_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend (inductor is slow to compile on CPU)")
    parser.add_argument("--blocks", type=int, default=80, help="alternating blocks in the one-process measure")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.hidden, args.batch, args.backend)
        return
    if args.in_process:
        in_process(10, args.blocks, args.hidden, args.batch, args.backend)
        return
    times: dict[str, list[float]] = {"bare": [], "dynamo": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="detective-dynamo-overhead-") as tmp:
        for r in range(args.rounds):
            for variant in times:
                times[variant].append(measure(variant, args, Path(tmp), r))
            print(f"round {r + 1}: " + ", ".join(f"{v} {t[-1]:.3f} ms" for v, t in times.items()), file=sys.stderr)
    bare_med, bare_min = statistics.median(times["bare"]), min(times["bare"])
    for variant, values in times.items():
        med, low = statistics.median(values), min(values)
        print(f"{variant:7s} median {med:7.3f} ms/step ({med / bare_med:.3f}x)   min {low:7.3f} ms ({low / bare_min:.3f}x)")
    print(f"({args.rounds} rounds x {args.steps} steps, hidden {args.hidden}, batch {args.batch}, "
          f"backend {args.backend}; {time.perf_counter() - started:.0f} s)")
    proc = subprocess.run([sys.executable, __file__, "--in-process", "--blocks", str(args.blocks), "--hidden",
                           str(args.hidden), "--batch", str(args.batch), "--backend", args.backend],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"in-process measure failed:\n{proc.stderr[-3000:]}")
    one = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
    print(f"one process, {args.blocks} alternating blocks of 10 steps: recording {one['on_ms']:.3f} ms/step, "
          f"hook removed {one['off_ms']:.3f} ms/step (median {one['on_ms'] / one['off_ms']:.3f}x, "
          f"min {one['on_min_ms'] / one['off_min_ms']:.3f}x); recorder boundary() {one['boundary_us']:.1f} us/call "
          f"({one['steps']} steps recorded)")


if __name__ == "__main__":
    main()
