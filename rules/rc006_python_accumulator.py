"""RC006 python-accumulator: a running total that starts as a Python number and adds tensors in a step loop."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.rule import Invalid, Rule, Valid

LOADER_WORDS = ("loader",)  # a loop over a loader passed in (MpDeviceLoader syncs per batch)


class PythonAccumulator(Rule):
    code = "RC006"
    name = "python-accumulator"
    applies_to = "xla-code"  # the loop itself is checked: a step loop, or a loop over a loader
    summary = "Running total started as a Python number (total = 0) and added tensors in a step loop"
    doc = """
    ## What it does
    Flags `total += <tensor>` (and `total = total + <tensor>`) in a step loop — a loop that
    syncs every iteration, a loop over an `MpDeviceLoader`, or a loop over a loader passed
    in — when `total` was set to a Python number (`total = 0`) before the loop. Only in
    code that uses torch_xla.

    ## Why is this bad?
    The first step adds to a Python number, later steps to the tensor the first step made,
    so the first step's graph differs from the rest and the loop compiles two programs.
    With `0` or `1` the number is even a *special scalar*, baked into the graph as a
    constant. pytorch/xla's own MNIST example does this in its eval loop
    (`correct = 0`, then `correct += pred.eq(target.view_as(pred)).sum()`): its eval loop
    compiles a second program at its second batch.

    Measured on torch_xla 2.9 (CPU), an eval loop of 5 batches with one sync per batch
    (`benchmarks/accumulator_programs.py`): `correct = 0`, `torch.zeros((), device=d)`,
    `torch.zeros(()).to(d)` and `correct = 0` with `XLA_NO_SPECIAL_SCALARS=1` all compile
    **2** programs in the loop; the two fixes below compile **1** (plus one tiny program
    outside the loop, compiled once).

    ## Example
    ```python
    correct = 0
    for x, y in loader:                     # MpDeviceLoader: one graph per batch
        correct += model(x).argmax(1).eq(y).sum()
    ```

    ## Use instead
    Create the total on the device and materialise it before the loop, so every step
    adds to device data:
    ```python
    correct = torch.zeros((), dtype=torch.long, device=device)
    torch_xla.sync()
    for x, y in loader:
        correct += model(x).argmax(1).eq(y).sum()
    ```
    or keep each batch's value and add them up after the loop:
    ```python
    hits = []
    for x, y in loader:
        hits.append(model(x).argmax(1).eq(y).sum())
    correct = torch.stack(hits).sum()
    ```
    """

    VALID = [
        # A helper that returns a Python float (aws-neuron-samples' U-Net calc_accuracy).
        Valid("""
import torch
import torch_xla.distributed.parallel_loader as pl

def dice(output, target):
    score = (2 * (output * target).sum()) / (output + target).sum()
    return torch.mean(score).item()

def test_loop_fn(model, loader, device):
    accuracy = 0
    for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):
        accuracy += dice(model(data), target)
    return accuracy
"""),
        Valid(
            """
import torch
import torch_xla

def evaluate(model, loader, device):
    correct = torch.zeros((), dtype=torch.long, device=device)
    torch_xla.sync()
    for x, y in loader:
        correct += model(x).argmax(1).eq(y).sum()
    return correct
"""
        ),
        Valid(
            """
import torch
import torch_xla

def evaluate(model, loader):
    samples = 0
    for x, y in loader:
        samples += y.shape[0]      # a Python int on both sides: never in the graph
        torch_xla.sync()
    return samples
"""
        ),
        Valid(
            """
import torch

def cpu_total(batches):
    total = 0
    for x in batches:              # plain PyTorch, no torch_xla: no graph to recompile
        total += torch.as_tensor(x).sum()
    return total
"""
        ),
    ]
    INVALID = [
        Invalid("""
import torch
import torch_xla.distributed.parallel_loader as pl

def dice(output, target):
    score = (2 * (output * target).sum()) / (output + target).sum()
    return torch.mean(score)

def test_loop_fn(model, loader, device):
    accuracy = 0
    for step, (data, target) in enumerate(pl.MpDeviceLoader(loader, device)):
        accuracy += dice(model(data), target)
    return accuracy
""", line=12),
        Invalid(
            """
import torch
import torch_xla

def test_loop_fn(model, loader):
    correct = 0
    for data, target in loader:
        output = model(data)
        pred = output.max(1, keepdim=True)[1]
        correct += pred.eq(target.view_as(pred)).sum()
    return correct
""",
            line=10,
        ),
        Invalid(
            """
import torch
import torch_xla

total = 0.0
x = torch.randn(8, device=torch_xla.device())
for step in range(10):
    total = total + (x * step).sum()
    torch_xla.sync()
""",
            line=8,
        ),
        Invalid(  # accumulated in an inner loop of a step loop: the outer loop decides
            """
import torch
import torch_xla

x = torch.randn(8, device=torch_xla.device())
for step in range(10):
    total = 0
    for chunk in x.split(2):
        total += chunk.sum()
    torch_xla.sync()
""",
            line=9,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._numbers: list[dict[str, int]] = [{}]  # per function: name -> loop depth where set to a number
        self._loops: list[tuple[bool, list]] = []  # (iterates a loader, pending reports)
        self._outer: list[list] = []

    # ---------------------------------------------------------------- scopes and loops
    def visit_FunctionDef(self, node) -> None:
        self._numbers.append({})
        self._outer.append(self._loops)
        self._loops = []

    def leave_FunctionDef(self, node) -> None:
        self._numbers.pop()
        self._loops = self._outer.pop()

    def visit_For(self, node: cst.For) -> None:
        self._loops.append((_is_loader(node.iter), []))

    def visit_While(self, node: cst.While) -> None:
        self._loops.append((False, []))

    def leave_For(self, node) -> None:
        over_loader, pending = self._loops.pop()
        if not pending:
            return
        region = self.context.current_region()
        steps = region is not None and region.node is node and self.context.region_is_step(region)
        if steps or over_loader:
            for target, message, index, name, assumes in pending:
                self.report(target, message, at_index=index if steps else None, subject=name, assumes=assumes)
        elif self._loops:  # an inner loop of a step loop: the outer one decides
            regions = self.context.regions.frames[-1]  # this function's open loop regions
            index = regions[-2].current if len(regions) > 1 else -1
            self._loops[-1][1].extend((target, message, index, name, assumes)
                                      for target, message, _, name, assumes in pending)

    leave_While = leave_For

    # ---------------------------------------------------------------- the pattern
    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        value = node.value
        if T.is_number_literal(value):
            self._numbers[-1][name] = len(self._loops)
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) and (
                _is_name(value.left, name) or _is_name(value.right, name)):
            other = value.right if _is_name(value.left, name) else value.left
            self._check(node, name, other)
        else:
            self._numbers[-1].pop(name, None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and isinstance(node.operator, cst.AddAssign):
            self._check(node, node.target.value, node.value)

    def _check(self, node, name: str, value) -> None:
        depth = self._numbers[-1].get(name)
        if depth is None or depth >= len(self._loops) or not self.context.is_tensor(value):
            return  # not a number set before this loop, or not adding a tensor
        assumes = self.context.assumptions()  # reported at the loop's end, when they are gone
        region = self.context.current_region()
        index = region.current if region is not None else -1
        message = (f"`{name}` starts as a Python number and adds tensors in a step loop: the first step's graph "
                   "differs from the rest (two programs); create it on the device and torch_xla.sync() before "
                   "the loop, or sum per-batch values after the loop")
        self._loops[-1][1].append((node, message, index, name, assumes))


def _is_name(node, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_loader(node) -> bool:
    """A loop over a loader-named value: `loader`, `test_loader`, `self.eval_loader`, `loader(...)`."""
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        node = node.attr
    return isinstance(node, cst.Name) and any(w in node.value.lower() for w in LOADER_WORDS)
