"""The default backend (inductor, a real C++ compile on the CPU); steps end at detective.step().
A float64 input at step 1 recompiles. Writes its own get_compilation_metrics() per step to argv[1]."""

import json
import sys

import torch
import torch._dynamo.utils as du

import detective


@torch.compile
def scale(x):
    return torch.nn.functional.gelu(x) * 2


records = []
for step in range(3):
    scale(torch.randn(16, dtype=torch.float64 if step == 1 else torch.float32))
    detective.step()
    records += [{"step": step, "compile_id": m.compile_id, "is_forward": m.is_forward,
                 "fail_type": m.fail_type, "recompile_reason": m.recompile_reason}
                for m in du.get_compilation_metrics()]
    du.clear_compilation_metrics()
with open(sys.argv[1], "w") as f:
    json.dump({"metrics": records}, f)
