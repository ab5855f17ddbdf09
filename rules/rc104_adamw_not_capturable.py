"""RC104 adamw-not-capturable: Adam/AdamW built in XLA code without capturable=True."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Rule, Valid


class AdamWNotCapturable(Rule):
    code = "RC104"
    name = "adamw-not-capturable"
    summary = "torch.optim.AdamW/Adam in XLA code without capturable=True"
    applies_to = "xla-code"
    fixable = True
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
    It depends on the version: on torch 2.9 / torch_xla 2.9 (PJRT CPU) we measured no
    effect (AdamW, a sync per step: 2 programs over 20 steps and no device-to-host
    transfer with `capturable=False` or `True`), so on 2.9 this is a guard for upgrades.

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
"""
        ),
        Valid(
            """
import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(model.parameters())   # not XLA code
"""
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
                        replace=(node, fixed), fix_title="add capturable=True", subject=name)
        elif P.is_literal(arg.value, "False"):
            self.report(node, f"`{name}(capturable=False)` in XLA code: the step counter is read on "
                        "the host each step and the optimizer step recompiles; use capturable=True",
                        subject=f"{name}(capturable=False)")
