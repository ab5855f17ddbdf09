"""How many programs does an eval loop compile, per way of keeping its running total?

    .venv/bin/python benchmarks/accumulator_programs.py [--steps 5]

Each variant runs in a fresh process (XLA_NO_SPECIAL_SCALARS is read once), on real torch_xla
(PJRT_DEVICE=CPU): a small model's eval loop over `--steps` batches, one sync per batch, the
accumulator updated every batch. Printed: the unique programs compiled inside the loop (torch_xla's
own UncachedCompile counter, the loop's steps only), the steps that compiled, and the programs
compiled to set the accumulator up before the loop and to finish it after. The numbers back
RC006's advice (`detective rules RC006`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

VARIANTS = {
    "python-zero": "correct = 0, then correct += pred.eq(y).sum()",
    "zeros-on-device": "correct = torch.zeros((), device=d), then correct += ...",
    "zeros-to-device": "correct = torch.zeros(()).to(d), then correct += ...",
    "zeros-synced": "correct = torch.zeros((), dtype=torch.long, device=d); torch_xla.sync(); then correct += ...",
    "zeros-to-device-long": "correct = torch.zeros((), dtype=torch.long).to(d), then correct += ...",
    "zeros-synced-float": "correct = torch.zeros((), device=d); torch_xla.sync(); then correct += ...",
    "list-then-sum": "hits.append(pred.eq(y).sum()) per batch, torch.stack(hits).sum() after the loop",
    "no-special-scalars": "correct = 0, then correct += ..., with XLA_NO_SPECIAL_SCALARS=1",
}


def worker(variant: str, steps: int) -> None:
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    d = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(d)
    batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(steps)]
    torch_xla.sync()

    def compiles() -> int:
        return met.counter_value("UncachedCompile") or 0

    hits = []
    setup_start = compiles()
    if variant in ("python-zero", "no-special-scalars"):
        correct = 0
    elif variant == "zeros-on-device":
        correct = torch.zeros((), device=d)
    elif variant == "zeros-to-device":
        correct = torch.zeros(()).to(d)
    elif variant == "zeros-to-device-long":
        correct = torch.zeros((), dtype=torch.long).to(d)
    elif variant == "zeros-synced-float":
        correct = torch.zeros((), device=d)
        torch_xla.sync()
    elif variant == "zeros-synced":
        correct = torch.zeros((), dtype=torch.long, device=d)
        torch_xla.sync()
    before, compiled_at = compiles(), []
    with torch.no_grad():
        for step, (x, y) in enumerate(batches):
            x, y = x.to(d), y.to(d)
            pred = model(x).argmax(1)
            if variant == "list-then-sum":
                hits.append(pred.eq(y).sum())
            else:
                correct += pred.eq(y).sum()
            start = compiles()
            torch_xla.sync()
            if compiles() > start:
                compiled_at.append(step)
    in_loop = compiles() - before
    if variant == "list-then-sum":
        correct = torch.stack(hits).sum()
    total = int(correct.item())
    print(json.dumps({"setup": before - setup_start, "programs": in_loop, "compiled_at": compiled_at, "after_loop": compiles() - before - in_loop,
                      "correct": total}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--worker")
    parser.add_argument("--only", nargs="*", help="run these variants only")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps)
        return
    print(f"eval loop of {args.steps} batches, one sync per batch; programs compiled inside the loop")
    print(f"{'variant':<20} {'programs':>8}  {'compiled at steps':<18} {'setup':>5} {'after':>5}  what")
    for name, what in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"))
        if name == "no-special-scalars":
            env["XLA_NO_SPECIAL_SCALARS"] = "1"
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--steps", str(args.steps)],
                             env=env, capture_output=True, text=True, check=True).stdout
        data = json.loads(out.strip().splitlines()[-1])
        print(f"{name:<20} {data['programs']:>8}  {str(data['compiled_at']):<18} {data['setup']:>5} {data['after_loop']:>5}  {what}")


if __name__ == "__main__":
    main()
