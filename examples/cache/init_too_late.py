"""initialize_cache after the first compile: torch_xla refuses, and nothing is ever cached."""

import os

import torch
import torch_xla
import torch_xla.runtime as xr

device = torch_xla.device()
warmup = (torch.ones(4, device=device) * 2).sum().item()  # the first compile
xr.initialize_cache(os.environ.get("CACHE_DIR", "/tmp/xla_cache"))
x = torch.ones(4, device=device) * 3
torch_xla.sync()
