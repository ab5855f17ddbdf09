"""BROKEN: a Python counter on the module slices the input, so every step has a new shape.

    detective run -- python examples/storms/counter_slice_broken.py

`x[:, :self.step]` bakes the counter's value into the graph: one new program per step, forever.
Fixed version: counter_slice_fixed.py (counter in a buffer, mask instead of slice).
"""

import torch
import torch_xla

STEPS = 8
POSITIONS = 16


class GrowingWindow(torch.nn.Module):
    """Averages the first `step` positions: a curriculum that widens the window every call."""

    def __init__(self, dim=8, classes=4):
        super().__init__()
        self.step = 0
        self.out = torch.nn.Linear(dim, classes)

    def forward(self, x):
        self.step += 1
        window = x[:, : self.step]
        return self.out(window.mean(dim=1))


def batches(batch=8, dim=8):
    g = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        yield torch.randn(batch, POSITIONS, dim, generator=g), torch.randint(0, 4, (batch,), generator=g)


def main():
    device = torch_xla.device()
    model = GrowingWindow().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
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
