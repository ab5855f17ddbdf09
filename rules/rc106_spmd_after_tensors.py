"""RC106 spmd-after-tensors: xr.use_spmd() after XLA tensors or models exist."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Rule, Valid

TAG = "creates-xla-tensors"


class SpmdAfterTensors(Rule):
    code = "RC106"
    name = "spmd-after-tensors"
    summary = "xr.use_spmd() after XLA tensors or models were created (or after a helper that creates them)"
    applies_to = "xla-code"
    doc = """
    ## What it does
    Flags `torch_xla.runtime.use_spmd()` when, earlier in the same function (or module
    body), a tensor or model was put on an XLA device (`.to(xla_device)`,
    `torch.zeros(..., device=xla_device)`), or a function was called that does so,
    directly or through its own calls, in any file of the project.

    ## Why is this bad?
    SPMD mode changes how tensors are placed and how programs are partitioned; it must
    be switched on before any XLA tensor exists. Tensors created before live on a single
    device's layout, so the first SPMD step has to move and re-trace them: extra
    programs, extra transfers, and on some versions a hard error.

    ## Example
    ```python
    model = build_model().to(xm.xla_device())
    xr.use_spmd()
    ```

    ## Use instead
    Turn SPMD on first:
    ```python
    xr.use_spmd()
    model = build_model().to(xm.xla_device())
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla.runtime as xr
import torch_xla.core.xla_model as xm

def main():
    xr.use_spmd()
    device = xm.xla_device()
    model = torch.nn.Linear(4, 4).to(device)
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla.runtime as xr
import torch_xla.core.xla_model as xm

def main():
    device = xm.xla_device()
    model = torch.nn.Linear(4, 4).to(device)
    xr.use_spmd()
""",
            line=9,
        ),
        Invalid(
            """
import torch
import torch_xla
import torch_xla.runtime as xr

def build():
    return torch.zeros(8, device=torch_xla.device())

def main():
    weights = build()
    xr.use_spmd()
""",
            line=11,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._state: dict[str, tuple[set[str], list, list[str]]] = {}

    def _scope_state(self):
        return self._state.setdefault(self.context.scope.qualname, (set(), [], []))

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Call) and P.xla_device_expr(value, self.context, set()):
            devices, _, _ = self._scope_state()
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    devices.add(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        devices, created, calls = self._scope_state()
        dotted = context.resolve(node.func)
        if dotted in P.USE_SPMD:
            if created:
                self.report(node, "`use_spmd()` after XLA tensors or models were created earlier in this "
                            "scope: switch SPMD on before any XLA tensor exists", subject="use_spmd()")
            elif calls:
                self.report(node, "`use_spmd()` after a call that creates XLA tensors: switch SPMD on "
                            "before any XLA tensor exists", after_calls=tuple(calls), subject="use_spmd()")
            return
        if self._creates_xla(node, devices):
            if not created:
                created.append(node)
            if TAG not in context.scope.tags:
                context.scope.tags.append(TAG)
            return
        target = context.call_target(node.func)
        if target is not None and not target.startswith(("self.", "super.")):
            calls.append(target)

    def _creates_xla(self, node: cst.Call, devices: set[str]) -> bool:
        context = self.context
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            return any(P.xla_device_expr(a.value, context, devices) for a in node.args)
        dotted = context.resolve(func) or ""
        if dotted.startswith("torch.") and dotted.rsplit(".", 1)[-1] in P.TENSOR_FACTORIES:
            device = P.keyword(node, "device")
            return device is not None and P.xla_device_expr(device.value, context, devices)
        return False

    @classmethod
    def cross_check(cls, candidate, summary, project) -> bool:
        return P.calls_reach(candidate, summary, project, TAG)
