"""BROKEN: forward branches on an optional batch key, so batches with and without it trace
different graphs.

    detective run -- python examples/storms/optional_key_broken.py

Batches 3, 4 and 8 carry a "mask"; the masked graph is compiled at step 3.
Fixed version: optional_key_fixed.py (the collator always provides the key).
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
        if "mask" in batch:
            h = h * batch["mask"].unsqueeze(-1)
        return self.out(h)


def batches(batch=8, dim=16):
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        item = {"x": torch.randn(batch, dim, generator=g), "y": torch.randint(0, 4, (batch,), generator=g)}
        if step in MASKED:
            item["mask"] = (torch.rand(batch, generator=g) > 0.25).float()
        yield item


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
