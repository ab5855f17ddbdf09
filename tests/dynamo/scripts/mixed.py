"""Recompiles of several kinds, a graph break and the recompile limit, with aot_eager.

Independently of the detective, the script writes what torch's get_compilation_metrics() and
graph-break counter hold after every optimizer step to the JSON file named by argv[1].
"""

import json
import sys

import torch
import torch._dynamo.utils as du

torch._dynamo.config.recompile_limit = 4  # reach the limit in a few steps


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


@torch.compile(backend="aot_eager")
def head(h):
    h.detach().abs().max().item()  # a host read in a compiled function: a graph break
    return h * 2


@torch.compile(backend="aot_eager")
def cast(x):
    return x.float() * 3


torch.manual_seed(0)
model = Counter()
counter = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
records = []
for step in range(7):
    x = torch.randn(4, 8, dtype=torch.float64 if step == 3 else torch.float32)
    loss = counter(torch.randn(4, 8)).sum() + head(torch.randn(4, 8, requires_grad=True)).sum() + cast(x).sum()
    loss.backward()
    opt.step()
    for m in du.get_compilation_metrics():
        records.append({"step": step, "compile_id": m.compile_id, "is_forward": m.is_forward,
                        "fail_type": m.fail_type, "has_guarded_code": m.has_guarded_code,
                        "recompile_reason": m.recompile_reason, "co_name": m.co_name})
    du.clear_compilation_metrics()  # the detective must not depend on the deque keeping its entries
    opt.zero_grad()
with open(sys.argv[1], "w") as f:
    json.dump({"metrics": records, "graph_breaks": len(du.graph_break_reasons),
               "counter_graph_breaks": sum(du.counters["graph_break"].values())}, f)
