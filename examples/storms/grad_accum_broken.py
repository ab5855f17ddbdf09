"""BROKEN: gradient accumulation with a sync per micro-step and zero_grad(set_to_none=True)
between cycles.

    detective run -- python examples/storms/grad_accum_broken.py

Each cycle starts with no gradients, so it runs a grad-create program, then grad-accumulate,
then accumulate + optimizer: three programs (steps 0, 1, 2) and three executions per cycle.
Fixed version: grad_accum_fixed.py (one graph per cycle, set_to_none=False).
"""

import torch
import torch_xla

ACCUM = 3
CYCLES = 4


class Regressor(torch.nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.hidden = torch.nn.Linear(dim, hidden)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x))).squeeze(-1)


def batches(batch=8, dim=16):
    g = torch.Generator().manual_seed(0)
    for _ in range(ACCUM * CYCLES):
        yield torch.randn(batch, dim, generator=g), torch.randn(batch, generator=g)


def main():
    device = torch_xla.device()
    model = Regressor().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for micro, (x, y) in enumerate(batches()):
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
        if (micro + 1) % ACCUM == 0:
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch_xla.sync()  # one graph per micro-step
        print(f"micro-step {micro} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
