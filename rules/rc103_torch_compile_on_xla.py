"""RC103 torch-compile-on-xla: torch.compile stacked on torch_xla's own JIT."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint import tensors as T
from detective.lint.rule import Invalid, Rule, Valid

TORCH_COMPILE = frozenset({"torch.compile"})
# The Dynamo backends torch ships (torch._dynamo.list_backends(exclude_tags=()), torch 2.9),
# by whether they compile for XLA; tests/lint/test_precision_classes.py keeps the lists in step.
XLA_BACKENDS = frozenset({"openxla", "openxla_eval"})
NON_XLA_BACKENDS = frozenset({
    "inductor", "cudagraphs", "tvm", "ts", "aot_ts", "onnxrt", "eager", "eager_debug", "eager_noexcept",
    "pre_dispatch_eager", "aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
    "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner",
})


class TorchCompileOnXla(Rule):
    code = "RC103"
    name = "torch-compile-on-xla"
    summary = "torch.compile without backend=\"openxla\" in XLA code (let XLA's JIT own the model)"
    applies_to = "xla-code"

    doc = """
    ## What it does
    Flags `torch.compile(...)` calls and `@torch.compile` decorators in XLA code (a module
    that imports torch_xla, or a function called from one) that use the default backend or
    another backend torch ships that does not compile for XLA (`inductor`, `cudagraphs`,
    `eager`, `aot_eager`, ...). In XLA code the model lives on an XLA device, so the default
    inductor backend is the wrong compiler for it. Not flagged: `backend="openxla"`, a
    backend chosen at run time (a name, or keyword arguments passed on with `**`), and a
    backend torch does not ship: a vendor's plugin
    registered with `torch._dynamo.register_backend` (tt-xla's `"tt"`) is that vendor's own
    compiler for its XLA device.

    Not flagged either: a call on the side of a test of the project's own CUDA switch that
    runs only with CUDA (`if USE_CUDA:`, `if args.cuda:`, `if torch.cuda.is_available():`).

    ## Why is this bad?
    torch_xla already traces and compiles lazily; Dynamo on top adds guards, graph
    breaks and a second compiler. The seed lists `torch.compile()` on the model on TPU
    under "things that pretended to help and didn't": hangs, NaNs or duplicate compile
    work, and its stack keeps it explicitly off.

    ## Example
    ```python
    import torch_xla

    model = Net().to(torch_xla.device())
    model = torch.compile(model)
    ```

    ## Use instead
    Leave the model to torch_xla (wrap the step with `torch_xla.compile` if you want one
    program per step), or, when you do want Dynamo, pick the XLA backend:
    ```python
    model = Net().to(torch_xla.device())
    step = torch_xla.compile(train_step)
    # or: model = torch.compile(model, backend="openxla")
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
model = torch.compile(model, backend="openxla")
"""
        ),
        Valid(
            """
import torch

model = torch.compile(torch.nn.Linear(4, 4))   # no torch_xla in this program
"""
        ),
        Valid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
model = torch.compile(model, backend="tt")   # a vendor's backend for its XLA device
"""
        ),
        Valid(
            """
import torch
import torch_xla

def prepare(model, plugin):
    return torch.compile(model, **plugin.to_kwargs())   # the backend comes from the user's config
"""
        ),
        Valid(
            """
import os
import torch

USE_CUDA = os.environ.get("USE_CUDA", False)
if not USE_CUDA:
    import torch_xla

def prepare(model):
    if USE_CUDA:
        return torch.compile(model, fullgraph=True)   # the CUDA side: inductor is its compiler
    return torch.compile(model, backend="openxla")
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
model = torch.compile(model, backend="aot_eager")   # torch's own, not for XLA
""",
            line=6,
        ),
        Invalid(
            """
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
model = torch.compile(model)
""",
            line=6,
        ),
        Invalid(
            """
import torch
import torch_xla.core.xla_model as xm

@torch.compile(backend="inductor")
def step(x):
    return x * 2
""",
            line=5,
        ),
        Invalid(
            """
import torch
import torch_xla

@torch.compile
def step(x):
    return x * 2
""",
            line=5,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.resolve(node.func) not in TORCH_COMPILE or self.context.regions.cuda_depth:
            return  # not torch.compile, or on a side that runs only with CUDA: no XLA device there
        backend = P.keyword(node, "backend")
        if backend is None and any(a.star == "**" for a in node.args):
            return  # torch.compile(model, **plugin.to_kwargs()): the backend is chosen at run time
        if backend is not None:
            name = T.literal_string(backend.value)
            if name is None or name not in NON_XLA_BACKENDS:
                return  # openxla, a backend chosen at run time, or a vendor's registered backend
            subject = f'torch.compile(backend="{name}")'
            said = f"`{subject}`"
        else:
            subject = "torch.compile"
            said = "`torch.compile` (default backend inductor)"
        self.report(node, f"{said} on XLA code stacks Dynamo on torch_xla's JIT: leave it off, "
                    'or use backend="openxla"', subject=subject)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if isinstance(node.decorator, (cst.Name, cst.Attribute)) and \
                self.context.resolve(node.decorator) in TORCH_COMPILE:
            self.report(node.decorator, "`@torch.compile` (default backend inductor) on XLA code stacks "
                        "Dynamo on torch_xla's JIT: leave it off, or use backend=\"openxla\"",
                        subject="@torch.compile")
