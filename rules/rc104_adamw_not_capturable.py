"""RC104 adamw-not-capturable: Adam/AdamW built in XLA code without capturable=True."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.config import Config
from detective.lint.rule import Invalid, Rule, Valid

RECORDED_FROM = "torch>=2.12"  # the seed's breakage matrix: torch 2.12 on TPU
ON_2_12 = Config(torch_version="2.12")
ON_2_9 = Config(torch_version="2.9")


class AdamWNotCapturable(Rule):
    code = "RC104"
    name = "adamw-not-capturable"
    summary = "torch.optim.AdamW/Adam in XLA code without capturable=True"
    applies_to = "xla-code"
    fixable = True
    measured_below = ("on torch 2.9 / torch_xla 2.9 (PJRT CPU) AdamW with capturable=False measured 2 programs "
                      "over 20 steps and no device-to-host transfer")
    doc = """
    ## What it does
    Flags `torch.optim.AdamW(...)` and `torch.optim.Adam(...)` constructed in XLA code
    without `capturable=True`. `--fix` adds `capturable=True` when the argument is absent
    (the update is the same; only where the step counter lives changes). An explicit
    `capturable=False` is reported but left for you to change.

    ## Why is this bad?
    Without `capturable`, Adam keeps its step count as a host scalar and extracts it in
    every `step()`: on XLA that value becomes part of the traced graph, so the optimizer
    step's graph hash changes with the step number and the step recompiles. The seed's
    breakage matrix (torch 2.12 on TPU) records that XLA AdamW needs `capturable=True`.

    It depends on the version, like Ruff's `target-version`: the finding is a warning on
    torch 2.12 and later, or when the torch version is unknown, and `info` on an earlier
    torch. The version is `torch-version` in `[tool.detective]`, else the installed torch's
    (read from its metadata, never imported). On torch 2.9 / torch_xla 2.9 (PJRT CPU) we
    measured no effect: AdamW with a sync per step compiles 2 programs over 20 steps with no
    device-to-host transfer, `capturable=False` or `True` (`benchmarks/target_costs.py`;
    `tests/lint/test_rc104_runtime.py` re-measures it, so an upgrade that brings the
    recompile back fails there). Why, in torch 2.9's `torch/optim/adam.py`: without
    `capturable` the step is deliberately kept as a CPU tensor, `_get_value` reads it with
    `.item()` on the host (no device sync), and the bias corrections it feeds are Python
    floats that torch_xla passes to the graph as device data, not as constants, so the
    optimizer graph does not change with the step.

    ## Example
    ```python
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ```

    ## Use instead
    ```python
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=True)
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
""",
            config=ON_2_12,
        ),
        Valid(
            """
import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(model.parameters())   # not XLA code
""",
            config=ON_2_12,
        ),
        Valid(  # below the torch where the recompile is recorded: info only
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
""",
            config=ON_2_9,
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
""",
            line=6,
            config=ON_2_12,
        ),
        Invalid(
            """
import torch_xla
from torch.optim import Adam

def build(model):
    return Adam(
        model.parameters(),
        lr=1e-3,
    )
""",
            line=6,
            config=ON_2_12,
        ),
        Invalid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
opt = torch.optim.Adam(model.parameters(), capturable=False)
""",
            line=6,
            severity="info",
            config=ON_2_9,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        dotted = self.context.resolve(node.func)
        if dotted not in P.ADAM_CLASSES or P.has_star_kwargs(node):
            return
        name = dotted.rsplit(".", 1)[-1]
        arg = P.keyword(node, "capturable")
        if arg is None:
            fixed = P.append_argument(node, P.plain_keyword("capturable", "True"))
            self.report(node, f"`{name}` without `capturable=True` in XLA code: the step counter is "
                        "read on the host each step and the optimizer step recompiles",
                        replace=(node, fixed), fix_title="add capturable=True", subject=name,
                        needs=(RECORDED_FROM,))
        elif P.is_literal(arg.value, "False"):
            self.report(node, f"`{name}(capturable=False)` in XLA code: the step counter is read on "
                        "the host each step and the optimizer step recompiles; use capturable=True",
                        subject=f"{name}(capturable=False)", needs=(RECORDED_FROM,))
