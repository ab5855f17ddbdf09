"""A small but complete torch_xla training script: train loop, eval loop, final metric.

    python examples/train_eval/train_eval.py [--optimizer sgd|adamw] [--steps 300] [--storm-after N]

Momentum SGD (or AdamW) on a synthetic 10-class problem, a train loop over MpDeviceLoader, an
eval loop after it, and the accuracy reduced over replicas with xm.mesh_reduce, as
pytorch/xla's own MNIST example does. The graphs it compiles are all expected: the first train
step, the optimizer's state at its first steps, the eval loop's forward, the final reduce.

``--storm-after N`` drops the samples of class 0 from every train batch from step N on
(boolean-mask indexing): each batch keeps a different number of rows, and each new number is a
new program — a compile storm for the gate to catch.
"""

import argparse

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset


class Classifier(torch.nn.Module):
    def __init__(self, features=32, hidden=64, classes=10):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes)
        )

    def forward(self, x):
        return self.net(x)


def make_data(samples, features=32, classes=10, seed=0):
    centers = torch.randn(classes, features, generator=torch.Generator().manual_seed(1234)) * 0.3
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (samples,), generator=g)
    inputs = centers[labels] + torch.randn(samples, features, generator=g)
    return TensorDataset(inputs, labels)


def train_loop(model, optimizer, loader, storm_after):
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        if storm_after is not None and step >= storm_after:
            keep = y != 0
            x, y = x[keep], y[keep]  # a different number of rows every batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        xm.optimizer_step(optimizer)


def eval_loop(model, loader, device):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    torch_xla.sync()  # materialise the zero: every eval step then compiles the same graph
    samples = 0
    with torch.no_grad():
        for x, y in loader:
            correct += model(x).argmax(1).eq(y).sum()
            samples += y.shape[0]
    accuracy = 100.0 * correct.item() / samples
    return xm.mesh_reduce("eval_accuracy", accuracy, np.mean)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--steps", type=int, default=300, help="train steps (batches of 32)")
    parser.add_argument("--eval-steps", type=int, default=40)
    parser.add_argument("--storm-after", type=int, default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch_xla.device()
    model = Classifier().to(device)
    xm.broadcast_master_param(model)  # replicas start from rank 0's weights
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, capturable=True)
    train = DataLoader(make_data(32 * args.steps, seed=0), batch_size=32, drop_last=True)
    test = DataLoader(make_data(32 * args.eval_steps, seed=1), batch_size=32, drop_last=True)

    train_loop(model, optimizer, pl.MpDeviceLoader(train, device), args.storm_after)
    accuracy = eval_loop(model, pl.MpDeviceLoader(test, device), device)
    print(f"{args.optimizer}: {args.steps} train steps, eval accuracy {accuracy:.1f}%")


if __name__ == "__main__":
    main()
