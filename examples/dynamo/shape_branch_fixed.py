"""Batches have one size (the collator drops the short last batch): no size guard ever fails."""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x)
        if x.shape[0] > 8:  # big batches: normalise over the batch
            h = h - h.mean(dim=0, keepdim=True)
        return h


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, batch in enumerate([32, 32, 32, 32, 32]):  # drop_last=True, and one batch size
    loss = compiled(torch.randn(batch, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
