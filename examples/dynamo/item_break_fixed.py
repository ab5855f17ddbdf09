"""The bound stays a tensor: torch.clamp takes tensor bounds, so forward is one graph."""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x)
        limit = h.abs().max().detach()  # a 0-d tensor: stays in the graph
        return torch.clamp(h, -limit / 2, limit / 2)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    loss = compiled(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
