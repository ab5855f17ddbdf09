"""Two ranks as plain multiprocessing processes (RANK / WORLD_SIZE as torchrun sets them); rank 1
is killed with SIGKILL during step 3 while rank 0 runs on to step 5."""

import multiprocessing as mp
import os
import signal


def rank_main(rank: int, world: int) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    import torch
    import torch_xla

    device = torch_xla.device()
    w = torch.ones(4, 4).to(device)
    for step in range(6):
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        w = w * 0.5 + 1
        torch_xla.sync()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, 2)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    raise SystemExit(max(abs(p.exitcode or 0) for p in procs))
