"""Pad every batch to the longest length the data has: one shape, one graph, for every step."""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
MAX_LENGTH = 32


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 16)
        self.lin = torch.nn.Linear(16, 64)

    def forward(self, tokens):
        return self.lin(self.emb(tokens)).logsumexp(-1).mean()


def pad(tokens: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(tokens, (0, MAX_LENGTH - tokens.shape[1]))


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND, dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(12):
    length = 8 + step
    loss = compiled(pad(torch.randint(0, 64, (4, length))))
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
