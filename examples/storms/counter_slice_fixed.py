"""FIXED: the counter lives in a buffer, updated in place, and a mask replaces the slice.

    detective run -- python examples/storms/counter_slice_fixed.py

Same growing window, constant shapes: two programs (steps 0 and 1), then none.
"""

import torch
import torch_xla

STEPS = 8
POSITIONS = 16


class GrowingWindow(torch.nn.Module):
    def __init__(self, dim=8, classes=4):
        super().__init__()
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
        self.register_buffer("positions", torch.arange(POSITIONS))
        self.out = torch.nn.Linear(dim, classes)

    def forward(self, x):
        self.step.add_(1)
        mask = (self.positions < self.step).to(x.dtype)
        window_sum = (x * mask[None, :, None]).sum(dim=1)
        return self.out(window_sum / mask.sum())


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
