"""Variable-length batches with dynamic=False: every new length is a new graph, and after
torch._dynamo.config.recompile_limit (8) graphs Dynamo stops compiling this function. Training
goes on in eager mode, silently slower."""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 16)
        self.lin = torch.nn.Linear(16, 64)

    def forward(self, tokens):
        return self.lin(self.emb(tokens)).logsumexp(-1).mean()


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND, dynamic=False)  # "static shapes are faster"
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(12):
    length = 8 + step  # the collator packs to the longest sequence of the batch
    loss = compiled(torch.randint(0, 64, (4, length)))
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
