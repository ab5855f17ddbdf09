"""Seed policies broken at once: a gradient-accumulation trainer on XLA (RC101-RC108)."""
import os

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"  # RC105: read at import, ignored now
os.environ["XLA_USE_BF16"] = "1"  # RC108: env-driven bf16 breaks Pallas kernels (read at runtime start-up: not too late yet)


def train(model, loader, accum=4):
    device = torch_xla.device()
    model = model.to(device)
    xr.use_spmd()  # RC106: SPMD after the model is on the device
    model = torch.compile(model)  # RC103: Dynamo on top of XLA's JIT
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)  # RC104: step counter read on the host
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()  # RC101: grad-create vs grad-accumulate every cycle
        torch_xla.sync()  # RC102: one program per micro-step
        print(f"step {i} loss {loss.item()}")  # RC107: this replica's loss, reduced below
        total = xm.all_reduce(xm.REDUCE_SUM, loss)
    return total
