"""How many programs does a greedy decoding loop compile, per way of keeping the ids?

    .venv/bin/python benchmarks/growing_programs.py [--steps 6]

Both variants run on real torch_xla (PJRT_DEVICE=CPU) in this process: a toy model (an
embedding lookup through one_hot and a matmul) decodes `--steps` tokens, one sync per step.
Printed: the programs compiled inside the loop (torch_xla's UncachedCompile counter) and the
steps that compiled. The numbers back RC007's advice (`detective rules RC007`).
"""

from __future__ import annotations

import argparse
import os

VARIANTS = {
    "growing-cat": "ids = torch.cat([ids, nxt], dim=-1) every step",
    "preallocated": "buf preallocated at its final length; buf.index_copy(1, pos, nxt) with pos on the device",
}


def decode(variant: str, steps: int) -> tuple[int, list[int]]:
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    d = torch_xla.device()
    torch.manual_seed(0)
    w = torch.randn(8, 8, device=d)
    prompt = 4
    if variant == "growing-cat":
        ids = torch.zeros(1, prompt, dtype=torch.long, device=d)
    else:
        ids = torch.zeros(1, prompt + steps, dtype=torch.long, device=d)
        pos = torch.tensor([prompt - 1], device=d)
    torch_xla.sync()

    def compiles() -> int:
        return met.counter_value("UncachedCompile") or 0

    before, compiled_at = compiles(), []
    for step in range(steps):
        h = torch.nn.functional.one_hot(ids % 8, 8).float() @ w
        if variant == "growing-cat":
            nxt = h[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=-1)
        else:
            nxt = h.index_select(1, pos).argmax(-1)
            pos = pos + 1
            ids = ids.index_copy(1, pos, nxt)
        start = compiles()
        torch_xla.sync()
        if compiles() > start:
            compiled_at.append(step)
    return compiles() - before, compiled_at


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    print(f"greedy decoding of {args.steps} tokens, one sync per step; programs compiled inside the loop")
    print(f"{'variant':<14} {'programs':>8}  {'compiled at steps':<20} what")
    for name, what in VARIANTS.items():
        programs, compiled_at = decode(name, args.steps)
        print(f"{name:<14} {programs:>8}  {str(compiled_at):<20} {what}")


if __name__ == "__main__":
    main()
