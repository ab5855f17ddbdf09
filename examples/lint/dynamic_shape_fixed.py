"""Fixed: mask instead of gather, k fixed at configuration time."""
import torch
from torch import nn


class Router(nn.Module):
    def __init__(self, max_k: int):
        super().__init__()
        self.max_k = max_k

    def forward(self, tokens, scores):
        keep = tokens * (scores > 0.5)[..., None]
        top = torch.topk(scores, self.max_k)
        return keep, top
