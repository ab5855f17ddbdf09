"""Fixed: the counter is a buffer updated in place (the Megatron-Core pattern)."""
import torch
from torch import nn


class MoE(nn.Module):
    def __init__(self, dim: int, experts: int, capacity: int):
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.capacity = capacity
        self.register_buffer("_overflow_total", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        load = torch.nn.functional.one_hot(self.router(x).argmax(-1), self.router.out_features).sum(0)
        dropped = torch.clamp(load - self.capacity, min=0)
        self._overflow_total.add_(dropped.sum())
        return x
