"""The compiler backend raises on its third compile (step 2): the script dies mid-compile."""

import torch

calls = []


def flaky_backend(gm, example_inputs):
    calls.append(1)
    if len(calls) == 3:
        raise RuntimeError("backend exploded")
    return gm.forward


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


model = Counter()
compiled = torch.compile(model, backend=flaky_backend)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    compiled(torch.randn(2, 4)).sum().backward()
    opt.step()
