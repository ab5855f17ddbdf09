"""RC002 tensor-branch: Python control flow on a tensor value inside a traced region."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.rule import Rule
from detective.rules import _rc002_examples as examples

HOST_COPY_NOTE = " (a host copy: torch_xla ran the graph at the copy; torch.compile traces the copy and breaks here)"


class TensorBranch(Rule):
    code = "RC002"
    name = "tensor-branch"
    summary = "if/while/assert/ternary whose condition reads a tensor value inside a traced region"
    doc = """
    ## What it does
    Flags `if`, `elif`, `while`, `assert` and conditional expressions whose condition is a
    tensor (`if mask.any():`, `while err > tol:`, `assert not torch.isnan(loss)`). An `assert`
    costs only on torch_xla: torch.compile turns `assert <tensor>` into `torch._assert_async`,
    so in a project that only compiles it is `info`. A branch on a host copy (`host =
    lengths.cpu()`, then `if host.max() > 8:`) is the reverse: torch_xla ran the graph at
    the copy (RC001) and the branch costs nothing more there, while torch.compile traces the
    copy and breaks at the branch, so it is `info` in a project that only uses torch_xla.

    ## Why is this bad?
    Python needs a real `bool`, so the condition is computed on the device and copied to
    the host: the trace is cut (a host sync, like `.item()`), and the branch taken is baked
    into the next graph. When the value changes between steps, so does the graph, and
    torch_xla compiles another program.

    ## Example
    ```python
    def forward(self, x, mask):
        if mask.any():
            x = x.masked_fill(mask, 0.0)
        return x
    ```

    ## Use instead
    Compute both sides and select on the device, so one graph covers every case:
    ```python
    def forward(self, x, mask):
        return x.masked_fill(mask, 0.0)          # a no-op where mask is all False
        # or: torch.where(mask.any(), a, b)
    ```
    """

    VALID = examples.VALID
    INVALID = examples.INVALID

    def _check(self, node: cst.CSTNode, test: cst.BaseExpression, what: str) -> None:
        if self.context.reads_tensor_value(test) and not self.context.after_sync():
            message = f"`{what}` on a tensor value syncs to the host and bakes the branch into the graph"
            # has_pads = torch.tensor(x.device.type == "xla") or m.any(): on XLA the value is
            # the device test's CPU constant; the device read happens elsewhere only.
            # if (ids.cpu() != -1).any(): on torch_xla the copy ran the graph and the branch is
            # free; torch.compile traced the copy, and breaks here.
            copy = self._every_read(test, lambda t: self.context.on_host(t) and not self.context.through_numpy(t))
            cpu = not copy and (self._every_read(test, self.context.made_on_cpu)
                                or self.context.regions.sense(test) != 0)
            # `if right_to_left and not pad[:, -1].any():` reads the tensor only when the flag is on
            guards = self.context.guards.short_circuit(test)
            if guards and self.context.reads_tensor_value(test.left):
                guards = ()
            # torch.compile rewrites `assert <tensor>` into torch._assert_async (Dynamo's
            # rewrite_assert_with_torch_assert): no graph break, no host read. XLA still syncs.
            if what == "assert" and copy:
                return  # torch.compile rewrites the assert (below), and torch_xla synced at the copy
            costs_on = ("xla",) if what == "assert" else ("compile",) if copy else ()
            self.report(node, message + (T.CPU_NOTE if cpu else HOST_COPY_NOTE if copy else ""), subject=what,
                        severity="info" if cpu else "warning", guarded_by=guards, costs_on=costs_on)

    def _every_read(self, test: cst.BaseExpression, where) -> bool:
        """Every tensor the test reads passes ``where`` (made on the CPU in this function, a host copy)."""
        if isinstance(test, cst.BooleanOperation):
            sides = [s for s in (test.left, test.right) if self.context.reads_tensor_value(s)]
            return bool(sides) and all(self._every_read(s, where) for s in sides)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._every_read(test.expression, where)
        return where(test)

    def visit_If(self, node: cst.If) -> None:
        if _fills_container(node) or _rejects_argument(node, self.context.scope.none_params):
            return
        self._check(node.test, node.test, "if")

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, node.test, "while")

    def visit_Assert(self, node: cst.Assert) -> None:
        self._check(node.test, node.test, "assert")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, node.test, "x if cond else y")


def _fills_container(node: cst.If) -> bool:
    """``if not kv_caches: kv_caches = [None for _ in layers]``: the name is a list or tuple
    (or None) that the branch fills when empty, so the test asks for its length, not a
    tensor's value."""
    test = node.test
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)) or node.orelse is not None:
        return False
    name = test.expression.value
    first = node.body.body[0] if isinstance(node.body, cst.IndentedBlock) and node.body.body else None
    small = first.body[0] if isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1 else None
    return isinstance(small, cst.Assign) and len(small.targets) == 1 \
        and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name \
        and isinstance(small.value, (cst.List, cst.Tuple, cst.Dict, cst.ListComp, cst.DictComp))


def _rejects_argument(node: cst.If, none_params: dict[str, int]) -> bool:
    """``if cache_leftpad: raise NotImplementedError(...)`` on a parameter that defaults to
    None: a guard against an unsupported argument. A program that works passes None (no
    read) and never takes the side; one that passes a tensor stops there."""
    test, body = node.test, node.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else ()
    return node.orelse is None and isinstance(test, cst.Name) and test.value in none_params \
        and len(statements) == 1 and isinstance(statements[0], cst.SimpleStatementLine) \
        and isinstance(statements[0].body[-1], cst.Raise)
