"""A compiled step whose host sync hides two calls deep in another file."""
import torch
import torch_xla

from losses import compute_loss


def train(model, loader, optimizer):
    step_fn = torch_xla.compile(train_step)
    for batch in loader:
        step_fn(model, batch, optimizer)


def train_step(model, batch, optimizer):
    optimizer.zero_grad()
    loss = compute_loss(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
