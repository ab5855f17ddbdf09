"""Seed pattern: optional enriched-batch fields tested with `key in batch` in the model."""
import torch
from torch import nn


class Embed(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.doc = nn.Embedding(64, dim)

    def forward(self, batch):
        x = self.tok(batch["input_ids"])
        if "doc_ids" in batch:  # RC004: each subset of keys traces its own graph
            x = x + self.doc(batch["doc_ids"])
        return x
