"""BROKEN: the sequence length changes every few steps, so every new length is a new program.

    detective run -- python examples/storms/seq_len_broken.py

Lengths 8, 12, 16 compile at steps 0 (and 1, gradients now exist), 3 and 6; step 9 is back to
length 8 and reuses the cached program. Fixed version: seq_len_fixed.py (pad to one length).
"""

import torch
import torch_xla

LENGTHS = [8, 8, 8, 12, 12, 12, 16, 16, 16, 8, 8, 8]


class TokenClassifier(torch.nn.Module):
    def __init__(self, vocab=100, dim=16, classes=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.out(self.embed(tokens).mean(dim=1))


def batches(batch=8):
    g = torch.Generator().manual_seed(0)
    for length in LENGTHS:
        yield torch.randint(0, 100, (batch, length), generator=g), torch.randint(0, 4, (batch,), generator=g)


def main():
    device = torch_xla.device()
    model = TokenClassifier().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (tokens, labels) in enumerate(batches()):
        tokens, labels = tokens.to(device), labels.to(device)
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(tokens), labels)
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} len {tokens.shape[1]} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
