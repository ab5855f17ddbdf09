"""Seed pattern: `.item()` in an attention fast path (one host sync per call)."""
import torch
from torch import nn


class DocAttention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, doc_ids):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if (doc_ids == doc_ids[..., :1]).all().item():  # RC001: host sync every call
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        same_doc = doc_ids[..., :, None] == doc_ids[..., None, :]
        scores = (q @ k.transpose(-1, -2)).masked_fill(~same_doc, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
