"""Seed pattern: the MoE overflow accumulator kept as a Python int on the module."""
import torch
from torch import nn


class MoE(nn.Module):
    def __init__(self, dim: int, experts: int, capacity: int):
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.capacity = capacity
        self._overflow_total = 0

    def forward(self, x):
        load = torch.nn.functional.one_hot(self.router(x).argmax(-1), self.router.out_features).sum(0)
        dropped = torch.clamp(load - self.capacity, min=0)
        self._overflow_total += int(dropped.sum().item())  # RC003 (and RC001): new constant every step
        return x
