"""Runs graphs (three .item() reads) but never reaches a step boundary."""

import torch
import torch_xla

device = torch_xla.device()
lin = torch.nn.Linear(4, 4).to(device)
for _ in range(3):
    print(lin(torch.randn(3, 4).to(device)).sum().item())
