"""Fixed: the per-document mask is always applied; no value leaves the device."""
import torch
from torch import nn


class DocAttention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, doc_ids):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        same_doc = doc_ids[..., :, None] == doc_ids[..., None, :]
        scores = (q @ k.transpose(-1, -2)).masked_fill(~same_doc, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
