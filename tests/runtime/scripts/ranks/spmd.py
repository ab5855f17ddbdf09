"""SPMD: one process drives every device; the batch is sharded over a 1-D mesh."""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()
devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(devices), (devices,), ("data",))
w = torch.ones(8, 8).to(torch_xla.device())
for step in range(4):
    x = torch.ones(4 * devices, 8).to(torch_xla.device())
    xs.mark_sharding(x, mesh, ("data", None))
    w = w - 0.01 * (x @ w).mean()
    torch_xla.sync()
