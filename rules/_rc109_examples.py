"""RC109's VALID/INVALID example programs (run by tests/lint/test_rule_examples.py), kept
apart from the rule's logic in :mod:`detective.rules.rc109_python_constant_slice` for length."""

from detective.lint.rule import Invalid, Valid

CPU_SLICE = """
import torch

class Encoder(torch.nn.Module):
    def forward(self, x, lengths):
        n = lengths.max().item()                 # the sync: RC001
        mask = torch.zeros(64, 64)               # made on the CPU
        mask[:, n:] = 1                          # a bound read from a tensor
        return x + mask.to(x.device)
"""

# The loop body before `with xp.StepTrace()` is traced into that step's graph (torch_xla's
# test_profile_mp_mnist.py shrinks each batch by the step counter this way).
STEP_TRACE_LOOP = """
import torch_xla.core.xla_model as xm
import torch_xla.debug.profiler as xp

def train_loop(loader, model, optimizer, batch_size):
    for step, (data, target) in enumerate(loader):
        index = max(-step, -batch_size + 1)
        data = data[:-index]
        with xp.StepTrace("train", step_num=step):
            loss = model(data, target)
            loss.backward()
            xm.optimizer_step(optimizer)
"""

# A size varying only through a value set under a flag no call passes true: dead here, info.
GUARDED = """
import math
import torch

class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs, threshold, sigmoid):
        if sigmoid:
            threshold = torch.sigmoid(threshold).item()
        _, idx = inputs.flatten().sort(descending=True)
        j = math.ceil(threshold * inputs.numel())
        return inputs.flatten()[idx[:j]]

class Pruned(torch.nn.Module):
    def __init__(self, ratio):
        super().__init__()
        self.ratio = ratio

    def forward(self, w):
        return TopK.apply(w, self.ratio, False)
"""

VALID = [
    Valid(GUARDED),  # info only: the bound varies only under `if sigmoid:`, which no call runs
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.width = 16          # set once: a real constant

    def forward(self, x):
        n = x.shape[1]
        return x[:, : self.width] + torch.arange(n)
"""
    ),
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        out = x
        for i in range(4):       # unrolled the same way every call
            out = out + x[:, :i]
        return out
"""
    ),
    Valid(CPU_SLICE),  # info only: the sliced tensor is made on the CPU, moved to the device at the end
    Valid(STEP_TRACE_LOOP.replace("data = data[:-index]", "pass")),
    # After the step block: the next step's input is already on the host side of the sync.
    Valid(STEP_TRACE_LOOP.replace("        data = data[:-index]\n", "").replace(
        "xm.optimizer_step(optimizer)", "xm.optimizer_step(optimizer)\n        history = data[:index]")),
]
INVALID = [
    Invalid(CPU_SLICE, line=8, severity="info"),  # the CPU slice, shown at info
    # The same mask made on the device: each new bound is a new graph.
    Invalid(CPU_SLICE.replace("zeros(64, 64)               # made on the CPU",
                                  "zeros(64, 64, device=x.device)  # on the device"), line=8),
    Invalid(
        """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x[:, : self.step]
""",
        line=11,
    ),
    Invalid(
        """
import torch
import torch_xla

@torch_xla.compile
def positions(x, batch_list):
    return x + torch.arange(len(batch_list))
""",
        line=7,
    ),
    Invalid(
        """
import torch
import torch_xla

x = torch.randn(64, device=torch_xla.device())
for step in range(10):
    y = x[: step + 1].sum()
    torch_xla.sync()
""",
        line=7,
    ),
    # Only the three sizes of a literal list: three programs, each compiled once.
    Invalid(
        """
import torch
import torch_xla

x = torch.randn(512, device=torch_xla.device())
sizes = [128, 256, 512]
for n in sizes:
    y = x[:n].sum()
    torch_xla.sync()
""",
        line=8,
        severity="info",
    ),
    # The list grows in the loop's set-up: no longer the literal.
    Invalid(
        """
import torch
import torch_xla

x = torch.randn(512, device=torch_xla.device())
sizes = [128, 256]
sizes.append(len(x) // 3)
for n in sizes:
    y = x[:n].sum()
    torch_xla.sync()
""",
        line=9,
    ),
    Invalid(
        """
import math
import torch

class MoE(torch.nn.Module):
    def forward(self, tokens, batch):
        cap = math.ceil(1.25 * batch["ntokens"] / 8)  # from a batch field
        return tokens.new_zeros(8 * cap, tokens.shape[-1])
""",
        line=8,
    ),
    Invalid(STEP_TRACE_LOOP, line=8),  # before the step block: part of that step's graph
    Invalid(GUARDED, line=12, severity="info"),
    # One call passing True: the bound varies in this repository.
    Invalid(GUARDED.replace("TopK.apply(w, self.ratio, False)", "TopK.apply(w, self.ratio, True)"), line=12),
]

