"""BROKEN: `.item()` inside forward decides a branch, so each step runs two graphs and the
branch taken picks the program.

    detective run -- python examples/storms/item_in_step_broken.py

Every step executes twice (the `.item()` graph, then the sync). Batches 4, 5 and 9 are loud and
take the clamp branch, compiled at step 4. Fixed version: item_in_step_fixed.py.
"""

import torch
import torch_xla

STEPS = 10
LOUD = {4, 5, 9}


class ClampedMLP(torch.nn.Module):
    def __init__(self, dim=32, hidden=32, classes=4, limit=4.0):
        super().__init__()
        self.limit = limit
        self.proj = torch.nn.Linear(dim, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        h = self.proj(x)
        if (h.abs().max() > self.limit).item():  # host sync in the middle of the step
            h = h.clamp(-self.limit, self.limit)
        return self.out(torch.relu(h))


def batches(batch=16, dim=32):
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        scale = 50.0 if step in LOUD else 1.0
        yield scale * torch.randn(batch, dim, generator=g), torch.randint(0, 4, (batch,), generator=g)


def main():
    device = torch_xla.device()
    model = ClampedMLP().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(batches()):
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
