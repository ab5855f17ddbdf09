"""Syncs steps 0-2, then fails in step 3 after one execution (.item())."""

import torch
import torch_xla

device = torch_xla.device()
lin = torch.nn.Linear(4, 4).to(device)
for step in range(6):
    loss = lin(torch.randn(3, 4).to(device)).sum()
    if step == 3:
        print(loss.item())
        raise RuntimeError("data loader exploded at step 3")
    torch_xla.sync()
