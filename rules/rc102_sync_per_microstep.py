"""RC102 sync-per-microstep: a sync or torch_xla.compile per micro-step of gradient accumulation."""

from __future__ import annotations

from detective.lint.rule import Invalid, Rule, Valid
from detective.rules._accumulation import Accumulation

WHAT = {
    "sync": "`{}` syncs every micro-step",
    "compile": "`{}` compiles and syncs every micro-step",
    "compiled_call": "calling the torch_xla.compile'd `{}` syncs every micro-step",
}


class SyncPerMicrostep(Rule):
    code = "RC102"
    name = "sync-per-microstep"
    summary = "torch_xla.sync()/mark_step()/torch_xla.compile per micro-step of an accumulation loop"
    applies_to = "xla-code"
    facts = (Accumulation,)
    doc = """
    ## What it does
    Flags `torch_xla.sync()`, `xm.mark_step()`, `with torch_xla.step()`/`torch_xla.compile()`
    blocks and calls of a function wrapped by `torch_xla.compile(...)` that run once per
    micro-step of a gradient-accumulation loop (every iteration, not only under the
    accumulation condition) in XLA code. A sync on a side of an `if` that then leaves the
    loop (`xm.mark_step(); break`) runs once and is not flagged.

    ## Why is this bad?
    Each sync cuts the trace. With accumulation, micro-step 0 of a cycle traces a
    grad-create graph and the others grad-accumulate, and the optimizer step is a third
    program: three compile bills at start-up and several executions per cycle where
    one would do. The seed's fix is a single `torch_xla.compile()` (one sync) around the
    whole accumulation cycle, so create and accumulate land in one program.

    ## Example
    ```python
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
        torch_xla.sync()
    ```

    ## Use instead
    Sync once per cycle:
    ```python
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
            torch_xla.sync()
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla.core.xla_model as xm

def train(model, opt, loader, accum, max_steps):
    for i, x in enumerate(loader):
        if i >= max_steps:
            xm.mark_step()     # once, as the loop stops
            break
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
            xm.mark_step()
"""
        ),
        Valid(
            """
import torch
import torch_xla

def train(model, opt, cycles):
    for micro_batches in cycles:
        for x in micro_batches:
            model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        torch_xla.sync()      # once per accumulation cycle
"""
        ),
        Valid(
            """
import torch
import torch_xla.core.xla_model as xm

def train(model, opt, loader):
    for x in loader:            # no accumulation: a sync per step is right
        model(x).sum().backward()
        opt.step()
        xm.mark_step()
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla.core.xla_model as xm

def train(model, opt, loader, accum, max_steps):
    for i, x in enumerate(loader):
        if i >= max_steps:
            break
        else:
            xm.mark_step()     # the side that stays in the loop: every micro-step
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
""",
            line=10,
        ),
        Invalid(
            """
import torch
import torch_xla

def train(model, opt, loader, accum):
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
        torch_xla.sync()
""",
            line=11,
        ),
        Invalid(
            """
import torch
import torch_xla
import torch_xla.core.xla_model as xm

def train(model, opt, cycles):
    for micro_batches in cycles:
        for x in micro_batches:
            model(x).sum().backward()
            xm.mark_step()
        opt.step()
        opt.zero_grad(set_to_none=False)
""",
            line=10,
        ),
        Invalid(
            """
import torch
import torch_xla

def micro_step(model, x):
    model(x).sum().backward()

step_fn = torch_xla.compile(micro_step)

def train(model, opt, loader, accum):
    for i, x in enumerate(loader):
        step_fn(model, x)
        if (i + 1) % accum == 0:
            opt.step()
""",
            line=12,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._done: set[int] = set()

    def _check(self, node) -> None:
        frame = self.context.facts[Accumulation].frame
        events = list(frame.events) if frame.is_flat_accumulation else []
        for child in frame.micro_children():
            events += child.events
        for event in events:
            if event.kind not in WHAT or event.accum or event.once or id(event.node) in self._done:
                continue
            self._done.add(id(event.node))
            call = event.node
            label = self.context.resolve(call.func) or "the call"
            label = label.replace("torch_xla.core.xla_model.", "xm.")
            self.report(call, WHAT[event.kind].format(label) + " of a gradient-accumulation loop: "
                        "one program per micro-step (grad-create, grad-accumulate, step); "
                        "sync once per accumulation cycle", scope=event.scope, subject=label)

    leave_For = leave_While = leave_FunctionDef = leave_Module = _check
