"""FIXED: every batch is padded to one length and a mask keeps padding out of the mean.

    detective run -- python examples/storms/seq_len_fixed.py

Two programs (steps 0 and 1), then none: the shapes never change.
"""

import torch
import torch_xla

LENGTHS = [8, 8, 8, 12, 12, 12, 16, 16, 16, 8, 8, 8]
MAX_LEN = 16


class TokenClassifier(torch.nn.Module):
    def __init__(self, vocab=100, dim=16, classes=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, classes)

    def forward(self, tokens, mask):
        summed = (self.embed(tokens) * mask.unsqueeze(-1)).sum(dim=1)
        return self.out(summed / mask.sum(dim=1, keepdim=True))


def batches(batch=8):
    """The collator pads on the host, so the device only ever sees [batch, MAX_LEN]."""
    g = torch.Generator().manual_seed(0)
    for length in LENGTHS:
        tokens = torch.zeros(batch, MAX_LEN, dtype=torch.long)
        tokens[:, :length] = torch.randint(0, 100, (batch, length), generator=g)
        mask = torch.zeros(batch, MAX_LEN)
        mask[:, :length] = 1.0
        yield tokens, mask, torch.randint(0, 4, (batch,), generator=g)


def main():
    device = torch_xla.device()
    model = TokenClassifier().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (tokens, mask, labels) in enumerate(batches()):
        tokens, mask, labels = tokens.to(device), mask.to(device), labels.to(device)
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(tokens, mask), labels)
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
