"""FIXED: the whole accumulation cycle is one graph (one sync per cycle) and gradients are
zeroed in place (set_to_none=False), so they always exist.

    detective run -- python examples/storms/grad_accum_fixed.py

Two programs (cycle 0 creates the gradients, cycle 1 accumulates into zeroed ones), one
execution per cycle.
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


def cycles(batch=8, dim=16):
    g = torch.Generator().manual_seed(0)
    for _ in range(CYCLES):
        yield [(torch.randn(batch, dim, generator=g), torch.randn(batch, generator=g)) for _ in range(ACCUM)]


def main():
    device = torch_xla.device()
    model = Regressor().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for cycle, micro_batches in enumerate(cycles()):
        total = torch.zeros((), device=device)
        for x, y in micro_batches:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y) / ACCUM
            loss.backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=False)
        torch_xla.sync()  # one graph per accumulation cycle
        print(f"cycle {cycle} loss {total.item():.3f}")


if __name__ == "__main__":
    main()
