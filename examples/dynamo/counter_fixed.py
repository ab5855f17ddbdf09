"""The counter lives in a buffer and is updated in place: one graph for every step."""

import sys

import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))  # a tensor: data, not a constant

    def forward(self, x):
        self.updates.add_(1)
        warm = torch.clamp(self.updates / 100, max=1.0)
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
print(f"done: {int(model.updates)} updates")
