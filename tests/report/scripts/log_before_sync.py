"""Reads the loss with .item() before the sync every fourth step: those steps are cut in two."""

import torch
import torch_xla

STEPS = 8


def main():
    device = torch_xla.device()
    model = torch.nn.Linear(16, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randint(0, 4, (8,), generator=g).to(device)
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if step % 4 == 3:
            print(f"step {step} loss {loss.item():.3f}")  # a value read before the sync
        opt.step()
        torch_xla.sync()


if __name__ == "__main__":
    main()
