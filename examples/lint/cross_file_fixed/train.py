"""Fixed: metrics stay on the device inside the step and are read after it."""
import torch
import torch_xla

from losses import compute_loss


def train(model, loader, optimizer):
    step_fn = torch_xla.compile(train_step)
    for batch in loader:
        accuracy = step_fn(model, batch, optimizer)
        print("accuracy", accuracy.item())  # after the compiled step has run


def train_step(model, batch, optimizer):
    optimizer.zero_grad()
    loss, accuracy = compute_loss(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
    return accuracy
