"""FIXED: the clamp is branch-free (a no-op when values are in range), so nothing reads a
device value before the sync; the loss is read after it.

    detective run -- python examples/storms/item_in_step_fixed.py

One execution per step; two programs (steps 0 and 1), then none.
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
        h = self.proj(x).clamp(-self.limit, self.limit)
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
