"""A small training loop that sets up torch_xla's persistent compilation cache.

`detective cache-check -- python examples/cache/train.py` runs it cold, then as a warm restart,
and says whether the restart loaded its programs from the cache (README: "Does my compilation
cache work?"). CACHE_DIR, CACHE_READONLY and MAX_LEN change what it does.
"""

import os

import torch
import torch_xla
import torch_xla.runtime as xr

CACHE_DIR = os.environ.get("CACHE_DIR", "/tmp/xla_cache")
xr.initialize_cache(CACHE_DIR, readonly=os.environ.get("CACHE_READONLY") == "1")  # before the first compile

MAX_LEN = int(os.environ.get("MAX_LEN", "24"))  # features kept per row: baked into the graph


def main():
    device = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(3, 8, 32)
    for step in range(3):
        x = data[step].to(device)
        x[:, MAX_LEN:] = 0
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
    with torch.no_grad():  # a second program, the same whatever MAX_LEN is
        score = model(data[0].to(device)).abs().mean()
    torch_xla.sync()
    print(f"loss {loss.item():.4f} score {score.item():.4f}")


if __name__ == "__main__":
    main()
