"""A small data-parallel loop on every device with xmp.spawn.

    PJRT_DEVICE=CPU CPU_NUM_DEVICES=2 XLA_ENABLE_PARAM_ALIASING=0 \
        detective run -- python examples/multirank/train.py --diverge-at 3

--diverge-at N: from step N on, rank 1's batch has 11 features instead of 8 (an uneven
shard), so rank 1 traces a different graph from rank 0.
--all-reduce: average the loss across ranks every step (a collective: divergent graphs hang).
"""

import argparse
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr


def batch(rank: int, step: int, diverge_at: int | None) -> torch.Tensor:
    features = 11 if diverge_at is not None and rank == 1 and step >= diverge_at else 8
    return torch.ones(4, features)


def train(index: int, args) -> None:
    device = torch_xla.device()
    rank = xr.global_ordinal()
    if rank != 0:
        time.sleep(args.stagger)  # let rank 0 compile each new graph first (see README)
    weight = torch.ones(4, 16, device=device)
    for step in range(args.steps):
        x = batch(rank, step, args.diverge_at).to(device)
        loss = (x.sum(dim=1, keepdim=True) * weight).mean()
        if args.all_reduce:
            loss = xm.all_reduce(xm.REDUCE_SUM, loss)
        weight = weight - 0.01 * loss
        torch_xla.sync()
    xm.wait_device_ops()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--diverge-at", type=int)
    parser.add_argument("--all-reduce", action="store_true")
    parser.add_argument("--stagger", type=float, default=0.5)
    parser.add_argument("--start-method", default="spawn")
    args = parser.parse_args()
    xmp.spawn(train, args=(args,), start_method=args.start_method)
