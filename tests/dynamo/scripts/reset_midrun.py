"""torch._dynamo.reset() at step 2: every cache (and every compile callback) is dropped, so the
function compiles again from scratch, as compile id 0/0 once more. Writes get_compilation_metrics()
per step to argv[1], as mixed.py does."""

import json
import sys

import torch
import torch._dynamo.utils as du

model = torch.nn.Linear(4, 4)
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
records = []
for step in range(5):
    if step == 2:
        torch._dynamo.reset()
    compiled(torch.randn(2, 4)).sum().backward()
    opt.step()
    records += [{"step": step, "compile_id": m.compile_id, "is_forward": m.is_forward}
                for m in du.get_compilation_metrics()]
    du.clear_compilation_metrics()
with open(sys.argv[1], "w") as f:
    json.dump({"metrics": records}, f)
