"""Two worker processes (think: two hosts) that both write one cache directory.

The multi-host hazard: every process opens the same path with readonly=False. Give each host
its own path, or let one process warm the cache and open it with readonly=True everywhere else.
"""

import multiprocessing
import os


def worker(rank: int) -> None:
    import torch
    import torch_xla
    import torch_xla.runtime as xr

    xr.initialize_cache(os.environ.get("CACHE_DIR", "/tmp/xla_cache"))  # same path, every worker writes
    x = torch.ones(4, device=torch_xla.device()) * (rank + 2)
    torch_xla.sync()


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=worker, args=(rank,)) for rank in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    raise SystemExit(max(w.exitcode for w in workers))
