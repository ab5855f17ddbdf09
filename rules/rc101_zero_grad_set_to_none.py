"""RC101 zero-grad-set-to-none: gradients set to None inside a gradient-accumulation loop."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.project_facts import ABSENT, ZERO_GRAD_KEEPS
from detective.lint.rule import Invalid, Rule, Valid
from detective.rules._accumulation import Accumulation
from detective.rules._optimizer_facts import OptimizerBuilds

# Optimizers whose zero_grad keeps the gradients by default (set_to_none=False).
KEEPS_GRADS = frozenset({"torch_xla.distributed.zero_redundancy_optimizer.ZeroRedundancyOptimizer"})
# Where optimizers that set gradients to None by default come from (torch's default).
LIBRARY_OPTIMIZERS = ("torch.", "transformers.", "apex.", "timm.", "bitsandbytes.", "torch_optimizer.")


class ZeroGradSetToNone(Rule):
    code = "RC101"
    name = "zero-grad-set-to-none"
    summary = "zero_grad() (set_to_none=True, the default) inside a gradient-accumulation loop in XLA code"
    applies_to = "xla-code"
    facts = (Accumulation, OptimizerBuilds)
    fixable = True
    doc = """
    ## What it does
    Flags `optimizer.zero_grad()` and `zero_grad(set_to_none=True)` (`True` is the default
    since torch 2.0) in a gradient-accumulation loop of XLA code: a loop that calls
    `backward()` every iteration and steps the optimizer under an accumulation condition
    (`if (i + 1) % accum == 0:`), or a cycle that runs an inner backward loop and then steps.
    `--fix` rewrites the call to `zero_grad(set_to_none=False)`, which keeps the numbers
    the same (the gradients are zero either way). Not flagged: torch_xla's
    `ZeroRedundancyOptimizer`, whose `zero_grad` keeps the gradients by default. `info`: an
    optimizer not built here from a torch or library class (a parameter, a project factory)
    in a project that defines its own `zero_grad(self, set_to_none=False)`, which it may be.

    ## Why is this bad?
    torch_xla traces what it sees. With no gradient tensors the first micro-step traces a
    grad-create graph (`p.grad = g`); with gradients present it traces grad-accumulate
    (`p.grad.add_(g)`). Setting gradients to None between cycles flips back to the
    create shape every cycle, so the micro-step and the optimizer step alternate between
    two compiled programs forever. The seed made `set_to_none=False` inside accumulation
    loops a hard requirement.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        loss_fn(model(x), y).backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
    ```

    ## Use instead
    Zero the gradients in place so they always exist:
    ```python
    for i, (x, y) in enumerate(loader):
        loss_fn(model(x), y).backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
    ```
    """

    VALID = [
        Valid(
            """
import torch_xla
from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer

def train(model, loader, accum):
    opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW)  # keeps grads by default
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
"""
        ),
        Valid(
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
"""
        ),
        Valid(
            """
import torch
import torch_xla

def train(model, opt, loader):
    for x in loader:          # no accumulation: one step per backward
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        torch_xla.sync()
"""
        ),
        Valid(
            """
import torch

def train(model, opt, loader, accum):   # not XLA code
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla
from transformers import AdamW

class ShardedOptimizer:
    def zero_grad(self, set_to_none=False):
        self.inner.zero_grad(set_to_none=set_to_none)

def train(model, loader, accum, use_lamb):
    if use_lamb:
        optimizer = Lamb(model.parameters())
    else:
        optimizer = AdamW(model.parameters())   # transformers' AdamW: torch's zero_grad

    def train_loop(model, optimizer):            # handed the optimizer built above
        for i, x in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                torch_xla.sync()

    train_loop(model, optimizer)
""",
            line=21,
        ),
        Invalid(
            """
import torch
import torch_xla

class ShardedOptimizer:
    def zero_grad(self, set_to_none=False):   # the project's own: keeps the gradients
        self.inner.zero_grad(set_to_none=set_to_none)

def train(model, loader, accum, make_optimizer):
    opt = make_optimizer(model)                # may be a ShardedOptimizer
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
""",
            line=15,
            severity="info",
        ),
        Invalid(
            """
import torch
import torch_xla

class ShardedOptimizer:
    def zero_grad(self, set_to_none=False):
        self.inner.zero_grad(set_to_none=set_to_none)

def train(model, loader, accum):
    opt = torch.optim.AdamW(model.parameters())   # torch's: sets the gradients to None
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
""",
            line=15,
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
            opt.zero_grad(set_to_none=True)
            torch_xla.sync()
""",
            line=10,
        ),
        Invalid(
            """
import torch
import torch_xla

def train(model, opt, cycles):
    for micro_batches in cycles:
        for x in micro_batches:
            model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
""",
            line=10,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._done: set[int] = set()

    def _check(self, node) -> None:
        frame = self.context.facts[Accumulation].frame
        events = list(frame.events) if frame.is_flat_accumulation else []
        micro = frame.micro_children()
        if micro:
            events += frame.events
            for child in micro:
                events += child.events
        for event in events:
            if event.kind != "zero_grad" or id(event.node) in self._done:
                continue
            self._done.add(id(event.node))
            self._flag(event.node, event.scope)

    leave_For = leave_While = leave_FunctionDef = leave_Module = _check

    def _flag(self, call: cst.Call, scope: str) -> None:
        arg = P.keyword(call, "set_to_none")
        if arg is None:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            arg = positional[0] if positional else None
        if arg is not None and not P.is_literal(arg.value, "True"):
            return  # set_to_none=False, or a value we cannot judge
        if P.has_star_kwargs(call):
            return
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        built = self.context.facts[OptimizerBuilds].built_from(receiver.value) \
            if isinstance(receiver, cst.Name) else frozenset()
        if arg is None and built and built <= KEEPS_GRADS:
            return  # ZeroRedundancyOptimizer(...).zero_grad() keeps the gradients
        # An optimizer a torch or library class may build here sets them to None; any other (a
        # parameter, a project factory) may be the project's own, if it defines one that keeps them.
        needs = () if arg is not None or any(b.startswith(LIBRARY_OPTIMIZERS) for b in built) \
            else (ABSENT + ZERO_GRAD_KEEPS,)
        if arg is None:
            fixed = P.append_argument(call, P.plain_keyword("set_to_none", "False"))
            said = "`zero_grad()` sets gradients to None (the default since torch 2.0)"
        else:
            fixed = call.with_changes(args=[a.with_changes(value=cst.Name("False")) if a is arg else a
                                            for a in call.args])
            said = "`zero_grad(set_to_none=True)` sets gradients to None"
        self.report(
            call,
            f"{said} inside a gradient-accumulation loop: each cycle flips between grad-create "
            "and grad-accumulate graphs; use zero_grad(set_to_none=False)",
            scope=scope, replace=(call, fixed), fix_title="use zero_grad(set_to_none=False)",
            subject="zero_grad()" if arg is None else "zero_grad(set_to_none=True)", needs=needs,
        )
