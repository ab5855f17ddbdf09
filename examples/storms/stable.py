"""Stable loop: fixed shapes, values read after the sync. Programs stop growing after warm-up.

    detective run -- python examples/storms/stable.py

Step 0 compiles the graph that creates the gradients, step 1 the one that accumulates into the
zeroed gradients; every later step reuses step 1's program.
"""

import torch
import torch_xla

STEPS = 10


class Classifier(torch.nn.Module):
    def __init__(self, dim=32, hidden=64, classes=4):
        super().__init__()
        self.hidden = torch.nn.Linear(dim, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def batches(steps, batch=16, dim=32):
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        yield torch.randn(batch, dim, generator=g), torch.randint(0, 4, (batch,), generator=g)


def main():
    device = torch_xla.device()
    model = Classifier().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(batches(STEPS)):
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.3f}")  # after the sync: already on the host


if __name__ == "__main__":
    main()
