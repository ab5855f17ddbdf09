"""A Python step counter on the module, read in forward: every new value is a new graph.

torch.compile treats int attributes of an nn.Module as constants, so `self.updates` is guarded
with `== value` and each step recompiles (until the recompile limit turns compiling off).
"""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.updates = 0  # a Python int: a constant to Dynamo

    def forward(self, x):
        self.updates += 1
        warm = min(1.0, self.updates / 100)  # ramps a residual in over the first 100 updates
        return x + warm * self.lin(x)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    loss = compiled(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"done: {model.updates} updates")
