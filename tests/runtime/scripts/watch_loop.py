"""detective.watch in-process: automatic steps, then manual steps. Prints both records as JSON."""

import json
import sys

import torch
import torch_xla

import detective

out = sys.argv[1]
device = torch_xla.device()
lin = torch.nn.Linear(4, 4).to(device)

with detective.watch(out=out + "/auto") as auto:
    for step in range(5):
        rows = 3 if step < 3 else 5  # new shape at step 3
        loss = lin(torch.randn(rows, 4).to(device)).sum()
        torch_xla.sync()

with detective.watch(out=out + "/manual", auto_step=False) as manual:
    for step in range(4):
        loss = lin(torch.randn(7, 4).to(device)).sum()  # new shape at step 0
        torch_xla.sync()
        if step % 2:
            manual.step()  # two syncs per step

print(json.dumps({
    "auto": auto.run.steps[["step", "executions", "new_programs"]].to_dict("records"),
    "manual": manual.run.steps[["step", "executions", "new_programs"]].to_dict("records"),
}))
