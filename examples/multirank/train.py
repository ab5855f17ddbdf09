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


def wait_for_first_compile() -> None:
    """On CPU threads, two ranks compiling one new graph at once get executables whose
    collectives do not match (and hang): let rank 0 compile the step first."""
    while torch_xla._XLAC._xla_get_num_cached_compilation_graph() == 0:
        time.sleep(0.02)


def train(index: int, args) -> None:
    device = torch_xla.device()
    rank = xr.global_ordinal()
    weight = torch.ones(4, 16).to(device)
    for step in range(args.steps):
        if rank != 0 and step == 0:
            wait_for_first_compile()
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
    parser.add_argument("--start-method", default="spawn")
    args = parser.parse_args()
    xmp.spawn(train, args=(args,), start_method=args.start_method)
