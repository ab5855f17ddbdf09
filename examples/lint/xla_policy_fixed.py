"""The seed's fixes for xla_policy_broken.py: flags before import, SPMD first, no
torch.compile, capturable AdamW, one sync per accumulation cycle, in-place zeroing."""
import os

os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
os.environ["XLA_USE_BF16"] = "0"

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def train(model, loader, accum=4):
    xr.use_spmd()
    device = torch_xla.device()
    model = model.to(device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=True)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
            total = xm.all_reduce(xm.REDUCE_SUM, loss)
            torch_xla.sync()
    return total.item()  # the reduced value, once the loop is done
