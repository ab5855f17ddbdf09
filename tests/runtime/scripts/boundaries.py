"""Every kind of step boundary, two steps each, then a sync with an .item() inside the step."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

device = torch_xla.device()
lin = torch.nn.Linear(4, 4).to(device)


def train_step(x):
    return lin(x).sum()


compiled = torch_xla.compile(train_step, name="train_step")
for _ in range(2):  # steps 0, 1: pending work before the call runs in the clear-pending sync
    x = torch.randn(3, 4).to(device) * 2
    compiled(x)

for _ in range(2):  # steps 2, 3
    loss = lin(torch.randn(3, 4).to(device)).sum()
    xm.mark_step()

loader = pl.MpDeviceLoader(DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=2), device)
for (batch,) in loader:  # steps 4, 5
    loss = lin(batch).sum()

loss = lin(torch.randn(5, 4).to(device)).sum()  # step 6: two executions
print(loss.item())
print(torch.nonzero(lin.weight.detach()).shape)  # a CPU fallback on device data: no execution
loss = loss * 3
torch_xla.sync()
torch_xla.sync()  # nothing pending: not a step
xm.mark_step()  # nor a second boundary right after another
print("boundaries done")
