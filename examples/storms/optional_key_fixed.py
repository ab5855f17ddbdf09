"""FIXED: the collator canonicalises every batch (the mask is always there, all ones when the
data had none), and forward always applies it.

    detective run -- python examples/storms/optional_key_fixed.py

Two programs (steps 0 and 1), then none.
"""

import torch
import torch_xla

STEPS = 10
MASKED = {3, 4, 8}


class Scorer(torch.nn.Module):
    def __init__(self, dim=16, hidden=32, classes=4):
        super().__init__()
        self.hidden = torch.nn.Linear(dim, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, batch):
        h = torch.relu(self.hidden(batch["x"]))
        return self.out(h * batch["mask"].unsqueeze(-1))


def batches(batch=8, dim=16):
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        x, y = torch.randn(batch, dim, generator=g), torch.randint(0, 4, (batch,), generator=g)
        mask = (torch.rand(batch, generator=g) > 0.25).float() if step in MASKED else torch.ones(batch)
        yield {"x": x, "y": y, "mask": mask}


def main():
    device = torch_xla.device()
    model = Scorer().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, batch in enumerate(batches()):
        batch = {k: v.to(device) for k, v in batch.items()}
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(batch), batch["y"])
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
