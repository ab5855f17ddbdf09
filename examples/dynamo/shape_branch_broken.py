"""A Python `if` on a tensor's size: Dynamo guards on it, so the batch that takes the other branch
(the last, partial batch) compiles a new graph. The first size change only makes the size dynamic;
the branch then adds the guard `x.size()[0] > 8` that the short batch fails."""

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
for step, batch in enumerate([32, 32, 24, 32, 32, 4]):  # the epoch's last batch is short
    loss = compiled(torch.randn(batch, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
