"""One rank of a job whose ranks run as separate `detective run`s (one per host): RANK and
WORLD_SIZE come from the environment, as torchrun sets them. DIVERGE_AT: from that step on
this rank's batch is wider."""

import os

import torch
import torch_xla

rank = int(os.environ["RANK"])
diverge_at = int(os.environ.get("DIVERGE_AT", "-1"))
device = torch_xla.device()
w = torch.ones(4, 4).to(device)
for step in range(5):
    width = 6 if 0 <= diverge_at <= step else 4
    x = torch.ones(2, width).to(device)
    w = w - 0.01 * x.sum()
    torch_xla.sync()
