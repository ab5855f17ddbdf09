"""One batch arrives as float64 (a NumPy array the loader never cast). forward casts it, so the
step runs, but the input's dtype is guarded: that step compiles a second graph."""

import sys

import numpy as np
import torch

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x.to(self.lin.weight.dtype))


def load_batch(step: int) -> torch.Tensor:
    rows = np.random.default_rng(step).standard_normal((8, 16))  # NumPy's default: float64
    if step == 3:
        return torch.from_numpy(rows)  # the augmentation path forgot the cast
    return torch.from_numpy(rows).float()


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    loss = compiled(load_batch(step)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
