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


def collate(samples):
    """Only batches whose samples all carry a document id get `doc_ids`: key sets differ per batch."""
    batch = {"input_ids": torch.stack([s["input_ids"] for s in samples])}
    if all("doc_ids" in s for s in samples):
        batch["doc_ids"] = torch.stack([s["doc_ids"] for s in samples])
    return batch
