"""RC007 growing-tensor: a tensor grown by torch.cat in a loop whose every iteration is its own graph."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.rule import Invalid, Rule, Valid
from detective.lint.syntax import dotted_name
from detective.rules.rc001_host_sync import HOST_READ_METHODS
from detective.rules.rc006_python_accumulator import _is_loader

GROWING_CALLS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.vstack",
                           "torch.column_stack", "torch.dstack"})


CPU_NOTE = " (a tensor made on the CPU: no XLA program)"


class GrowingTensor(Rule):
    code = "RC007"
    name = "growing-tensor"
    applies_to = "xla-code"  # like RC006: the loop decides, and only where torch_xla runs it
    summary = "Tensor grown by torch.cat every iteration of a loop that syncs per iteration (a new program per step)"
    doc = """
    ## What it does
    Flags `x = torch.cat([x, y])` (also `torch.concat`, `torch.hstack`/`vstack`, ...) that
    grows `x` in a loop whose iterations are separate graphs: a step loop (it syncs every
    iteration), a loop over a loader (an `MpDeviceLoader` syncs per batch), or a loop that
    reads a tensor value on the host every iteration (`.item()`, `.tolist()`, `.cpu()`:
    greedy decoding's end-of-sequence test). Only in code that uses torch_xla. Growth of a
    tensor made on the CPU is `info`. Not a tensor made afresh earlier in the same iteration
    (`x = f(row)` then `x = torch.cat([pad, x])`): it does not grow from one step to the next.

    ## Why is this bad?
    Every iteration hands XLA a tensor one step longer, so every iteration is a new shape
    and a new program: a decoding loop of 512 tokens compiles 512 times. Measured on
    torch_xla 2.9 (CPU) by `benchmarks/growing_programs.py`, a loop of 6 steps with one sync
    per step: growing the ids with `torch.cat` compiled **6** programs, one per step; writing
    into a preallocated buffer at a position kept on the device compiled **1**.

    ## Example
    ```python
    for step in range(max_new_tokens):
        logits = model(ids)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=-1)          # a new length every step
        if nxt.item() == eos_id:
            break
    ```

    ## Use instead
    Preallocate at the final length and write each step at a position held on the device
    (the model masks what is not written yet, or uses a static KV cache):
    ```python
    buf = torch.full((1, max_len), pad_id, device=device)
    buf[:, :n] = ids
    pos = torch.tensor([n - 1], device=device)
    for step in range(max_new_tokens):
        logits = model(buf)
        nxt = logits.index_select(1, pos).argmax(-1)
        pos = pos + 1
        buf = buf.index_copy(1, pos, nxt)
        torch_xla.sync()
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla

def decode(model, buf, pos, steps):
    for _ in range(steps):
        nxt = model(buf).index_select(1, pos).argmax(-1)
        pos = pos + 1
        buf = buf.index_copy(1, pos, nxt)   # a fixed shape: one program
        torch_xla.sync()
    return buf
"""
        ),
        Valid(
            """
import torch
import torch_xla

def embed(parts, extra):
    out = []
    for p in parts:
        out.append(torch.cat([p, extra], dim=-1))   # a new tensor each time, nothing grows
    return torch.cat(out)                            # once, after the loop
"""
        ),
        Valid(
            """
import torch

def decode(model, ids, steps):
    for _ in range(steps):                 # no torch_xla here: nothing compiles per shape
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=-1)
        if nxt.item() == 0:
            break
    return ids
"""
        ),
        Valid(
            """
import torch
import torch_xla

def pad_rows(rows, width, pad_id):
    out = []
    for row in rows:
        wrap = torch.tensor(row)
        if wrap.shape[0] < width:
            wrap = torch.cat([torch.full((width - wrap.shape[0],), pad_id), wrap])   # made afresh above
        out.append(wrap.tolist())
    return out
"""
        ),
        Valid(
            """
import torch
import torch_xla

def denoise(unet, controlnet, latents, timesteps):
    for t in timesteps:
        down, mid = controlnet(latents, t)   # both made afresh this iteration
        mid = torch.cat([torch.zeros_like(mid), mid])
        latents = unet(latents, t, mid)
        torch_xla.sync()
    return latents
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla

def generate(model, ids, steps, eos_id):
    for _ in range(steps):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=-1)
        if nxt.item() == eos_id:           # a host read: every iteration is its own graph
            break
    return ids
""",
            line=8,
        ),
        Invalid(
            """
import torch
import torch_xla

def evaluate(model, loader):
    preds = torch.zeros(0, dtype=torch.long, device=torch_xla.device())
    for x, y in loader:                    # MpDeviceLoader: one graph per batch
        preds = torch.cat((preds, model(x).argmax(-1)))
    return preds
""",
            line=8,
        ),
        Invalid(
            """
import torch
import torch_xla

def collect(model, loader):
    kept = torch.zeros(0)
    for x in loader:
        kept = torch.cat([kept, model(x).cpu()])   # grown on the host: no XLA program
    return kept
""",
            line=8,
            severity="info",
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        # [loop node, over a loader, reads on the host, pending, names bound so far in the body]
        self._loops: list[list] = []
        self._outer: list[list] = []

    def visit_FunctionDef(self, node) -> None:
        self._outer.append(self._loops)
        self._loops = []

    def leave_FunctionDef(self, node) -> None:
        self._loops = self._outer.pop()

    def visit_For(self, node: cst.For) -> None:
        self._loops.append([node, _is_loader(node.iter), False, [], set()])

    def visit_While(self, node: cst.While) -> None:
        self._loops.append([node, False, False, [], set()])

    def visit_Call(self, node: cst.Call) -> None:
        if self._loops and T.call_method_name(node) in HOST_READ_METHODS and not node.args:
            for loop in self._loops:  # a read in an inner loop ends the outer iterations' graphs too
                loop[2] = True

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._loops or len(node.targets) != 1:
            return
        target, value = node.targets[0].target, node.value
        bound = self._loops[-1][4]
        if not isinstance(value, cst.Call) or self.context.resolve(value.func) not in GROWING_CALLS \
                or not value.args or value.args[0].keyword is not None:
            bound.update(_bound_names(target))
            return
        parts = value.args[0].value
        if not isinstance(parts, (cst.List, cst.Tuple)) or not any(
                isinstance(e, cst.Element) and e.value.deep_equals(target) for e in parts.elements):
            bound.update(_bound_names(target))
            return
        if _text(target) in bound:
            return  # made afresh earlier in this iteration (`x = f(row); x = cat([pad, x])`): no growth
        region = self.context.current_region()
        index = region.current if region is not None else None
        self._loops[-1][3].append((node, _text(target), self.context.made_on_cpu(value), index))

    def leave_For(self, node) -> None:
        loop, over_loader, reads, pending, _bound = self._loops.pop()
        if not pending:
            return
        region = self.context.current_region()
        steps = region is not None and region.node is loop and self.context.region_is_step(region)
        if not (steps or over_loader or reads):
            return  # no sync per iteration: one graph for the whole loop
        seen = set()
        for target, name, cpu, index in pending:
            if name in seen:
                continue
            seen.add(name)
            message = (f"`{name}` grows by concatenation every iteration of a loop that syncs per iteration: "
                       "a new shape and a new program each step; preallocate it and write at a position "
                       "kept on the device")
            self.report(target, message + (CPU_NOTE if cpu else ""), subject=name,
                        severity="info" if cpu else "warning", costs_on=("xla",),
                        at_index=index if steps else None)

    leave_While = leave_For


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """``down, mid = controlnet(x)`` binds both names afresh."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return [_text(target)]


def _text(node: cst.BaseExpression) -> str:
    return dotted_name(node) or "the tensor"
