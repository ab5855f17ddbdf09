"""RC003 python-counter: a Python number on ``self`` mutated inside a traced method."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.rule import Invalid, Rule, Valid


class PythonCounter(Rule):
    code = "RC003"
    name = "python-counter"
    summary = "Python counter on self (self.steps += 1) mutated inside a traced method"
    doc = """
    ## What it does
    Flags `self.<attr> += ...` (and `self.<attr> = self.<attr> + ...`) in a traced method when
    `<attr>` holds a Python number: it was initialised to a number, or the increment is a
    number or a host read (`int(...)`, `.item()`). Buffers and parameters
    (`register_buffer`, `nn.Parameter`, attributes assigned tensors) are not flagged.
    Counters bumped in a plain training loop (`self.global_step += 1` in `Trainer.fit`)
    are left alone unless the method itself is traced, and so are tallies in `__init__` and
    on objects that are not modules (a data structure built per call keeps no state
    across traced calls). A counter that restarts from a number at the top of the method
    (`self.n = 0` as a top-level statement before the increments) takes the same values
    every call and is not flagged. A counter that the class only ever bumps (never an
    operand, an argument or a branch test: a tally read from outside) costs only under
    torch.compile (`costs_on=("compile",)`: "info" in a project that only targets torch_xla),
    and so does one read only by Python branch tests with no tensor in them
    (`if self.counter % self.update_step == 0:`: on XLA a graph per outcome of the test) or
    as an operand of tensor arithmetic (`x * self.n`: torch_xla uploads Python numbers other
    than 0 and 1 as device data, so at most three graphs; measured in
    `tests/lint/test_counter_costs.py`). A counter that reaches a slice, a size or a call
    stays a cost on both.

    ## Why is this bad?
    A Python value that flows into the trace is a constant of the graph. Each new value
    is a new graph, so a counter that changes every call compiles a new program every
    call. torch.compile also guards on a module's int attributes that the method reads
    at entry, so even a counter that never reaches a tensor op makes a new graph per call
    (measured with torch 2.9, `tests/lint/test_counter_costs.py`: 5 graphs in 5 calls; one
    graph when the method first resets it to 0). The seed's MoE block kept
    `self._overflow_total += int(dropped.sum().item())` and saw up to 64 recompiles per
    step before the cache settled, then compile-storm hangs and NaNs on TPU.

    ## Example
    ```python
    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self._overflow_total = 0

        def forward(self, x):
            dropped = self.route(x)
            self._overflow_total += int(dropped.sum().item())
    ```

    ## Use instead
    Hold the counter in a buffer and update it with an in-place tensor op (the
    Megatron-Core pattern):
    ```python
    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("_overflow_total", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            dropped = self.route(x)
            self._overflow_total.add_(dropped.sum())
    ```
    """

    VALID = [
        Valid(
            """
import torch

class Spans:  # a plain object built per call: its tally is no graph state
    def __init__(self, seqs):
        self.total = 0
        for s in seqs:
            self.total += len(s)

    def add(self, s):
        self.total += len(s)

class Net(torch.nn.Module):
    def forward(self, x, seqs):
        spans = Spans(seqs)
        spans.add(seqs[0])
        return x
"""
        ),
        Valid(
            """
import torch

class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("overflow", torch.zeros((), dtype=torch.long))
        self.calls = torch.zeros(())

    def forward(self, x):
        self.overflow += (x > 3).sum()
        self.calls += 1
        return x
"""
        ),
        Valid(
            """
import torch

class Trainer:
    def __init__(self):
        self.global_step = 0

    def log(self):
        self.global_step += 1   # plain Python, never traced
"""
        ),
        Valid(
            """
import torch

class CountingNorm(torch.nn.BatchNorm1d):
    def forward(self, x):
        self.num_batches_tracked += 1  # a buffer registered by the torch base class
        return super().forward(x)
""",
        ),
        Valid(
            """
import torch

class FSDP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hooks_to_call = 0

    def forward(self, x):
        self.hooks_to_call = 0          # restarts every call: the same values each call
        for p in self.parameters():
            self.hooks_to_call += 1
        if self.hooks_to_call == 0:
            return x
        return x * 2
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch

class IntLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.counter = 0

    def forward(self, x):
        if self.counter % 100 == 0:   # read only by a test: a graph per outcome on XLA,
            self.scale = None         # a graph per value under torch.compile
        self.counter += 1
        return x * 2
""",
            line=12,
        ),
        Invalid(
            """
import torch

class Pipe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1   # only bumped (a tally read from outside): costs under torch.compile only
        return x * 2
""",
            line=10,
        ),
        Invalid(
            """
import torch

class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._overflow_total = 0

    def forward(self, x):
        dropped = x > 3
        self._overflow_total += int(dropped.sum().item())
        return x
""",
            line=11,
        ),
        Invalid(
            """
import torch

class Block(torch.nn.Module):
    def forward(self, x):
        self.step = self.step + 1
        return x[:, : self.step]
""",
            line=6,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._pending: list[tuple[cst.CSTNode, str, bool, str, object]] = []
        self._resets: dict[int, str] = {}  # id of a `self.a = <number>` heading a method -> a
        self._reset_in: set[tuple[str, str]] = set()  # (scope, attr): reset earlier in this call
        self._bookkeeping: set[int] = set()  # ids of self.<attr> nodes that only bump the counter
        # (id of the class frame, attr) read anywhere else: in an operand or an argument
        self._flows: set[tuple[int, str]] = set()
        # ... or only in a Python branch test (`if self.n % k == 0:`: a graph per outcome on
        # XLA, the number never enters an op) or as an operand of tensor arithmetic (`x * self.n`:
        # torch_xla uploads numbers other than 0 and 1 as device data); dynamo guards on both
        self._bounded: set[tuple[int, str]] = set()
        self._bounded_reads: set[int] = set()  # ids of such self.<attr> nodes

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)) \
                and self.context.is_tensor(node):
            for side in (node.left, node.right):
                if T.self_attr(side) is not None and not self.context.is_tensor(side):
                    self._bounded_reads.add(id(side))

    def visit_If(self, node: cst.If) -> None:
        self._branch_test(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._branch_test(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._branch_test(node.test)

    def _branch_test(self, test: cst.BaseExpression) -> None:
        """``self.<attr>`` read in a test made only of Python arithmetic and comparisons (no
        tensor in it): the number decides which side is traced, and never enters an op."""
        if self.context.is_tensor(test):
            return
        stack = [test]
        while stack:
            expr = stack.pop()
            if T.self_attr(expr) is not None:
                self._bounded_reads.add(id(expr))
            elif isinstance(expr, cst.Comparison):
                stack.append(expr.left)
                stack.extend(c.comparator for c in expr.comparisons)
            elif isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
                stack.extend((expr.left, expr.right))
            elif isinstance(expr, cst.UnaryOperation):
                stack.append(expr.expression)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A top-level `self.a = 0` runs on every call before anything below it: the counter
        # restarts from the same value each call (same values per call, the same graphs).
        if isinstance(node.body, cst.IndentedBlock):
            for statement in node.body.body:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if (isinstance(small, cst.Assign) and len(small.targets) == 1
                                and T.is_number_literal(small.value)
                                and (attr := T.self_attr(small.targets[0].target)) is not None):
                            self._resets[id(small)] = attr

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = T.self_attr(node)
        if attr is not None and id(node) not in self._bookkeeping and self.context.cls is not None:
            (self._bounded if id(node) in self._bounded_reads else self._flows).add((id(self.context.cls), attr))

    @classmethod
    def cross_check(cls, candidate, summary, project) -> bool:
        """Not a counter when a base class (in the project, torch or an installed package)
        registers the attribute as a buffer or parameter (``num_batches_tracked``)."""
        scope = summary.scopes.get(candidate.scope)
        if scope is None or scope.class_name not in summary.classes:
            return True
        cls = (summary.path, scope.class_name)
        # State kept across traced calls lives on a module; a tally on a plain object
        # (built anew per call, a data structure) never reaches a graph.
        kind = project.class_kind(cls)
        if kind != "module" and not (kind is None and project.find_method(cls, "forward") is not None):
            return False
        attr = candidate.subject.removeprefix("self.")
        return attr not in project.tensor_attrs(cls)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        attr = T.self_attr(node.target)
        if attr is not None:
            self._bookkeeping.add(id(node.target))
            numeric = T.is_number_literal(node.value) or self.context.is_host_value(node.value)
            self._remember(node, attr, numeric)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        attr = T.self_attr(node.targets[0].target)
        value = node.value
        if attr is not None:
            self._bookkeeping.add(id(node.targets[0].target))
            if id(node) in self._resets:
                self._reset_in.add((self.context.scope.qualname, attr))
        if attr is None or not isinstance(value, cst.BinaryOperation):
            return
        if T.self_attr(value.left) == attr or T.self_attr(value.right) == attr:
            other = value.right if T.self_attr(value.left) == attr else value.left
            self._bookkeeping.add(id(value.left if other is value.right else value.right))
            self._remember(node, attr, T.is_number_literal(other) or self.context.is_host_value(other))

    def _remember(self, node, attr: str, numeric: bool) -> None:
        cls = self.context.cls
        # In a constructor the object is new: a tally there is set-up, not a per-call counter.
        scope = self.context.scope.qualname
        if (scope, attr) in self._reset_in:
            return  # restarts from the same number every call: same values, same graphs
        if cls is not None and scope.rsplit(".", 1)[-1] not in {"__init__", "__post_init__"}:
            self._pending.append((node, attr, numeric, scope, cls))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        # Decided at the end of the class: __init__ may come after forward.
        cls = self.context.class_stack[-1]
        keep = []
        for pending in self._pending:
            target, attr, numeric, scope, owner = pending
            if owner is not cls:
                keep.append(pending)
                continue
            if attr in cls.tensor_attrs:
                continue
            if not (numeric or attr in cls.number_attrs):
                continue
            if (id(cls), attr) in self._flows:
                self.report(
                    target,
                    f"`self.{attr}` is a Python counter mutated in a traced method: each new value "
                    "is a new graph constant; keep it in a register_buffer and update it in place",
                    scope=scope, subject=f"self.{attr}",
                )
            elif (id(cls), attr) in self._bounded:
                self.report(
                    target,
                    f"`self.{attr}` is a Python counter mutated in a traced method: only Python "
                    "branch tests and tensor arithmetic read it (on XLA a graph per branch outcome, "
                    "and numbers other than 0 and 1 are uploaded as data: no new graph per value), "
                    "but torch.compile guards on its value and compiles a new graph for each one; "
                    "keep it outside the compiled method or in a buffer",
                    scope=scope, subject=f"self.{attr}", costs_on=("compile",),
                )
            else:
                # Only ever bumped: no graph on XLA holds it, but dynamo guards on a module's
                # int attributes (measured: a new graph per call).
                self.report(
                    target,
                    f"`self.{attr}` is a Python counter mutated in a traced method: nothing traced "
                    "reads it (no new XLA graph), but torch.compile guards on its value and compiles "
                    "a new graph for each one; keep it outside the compiled method or in a buffer",
                    scope=scope, subject=f"self.{attr}", costs_on=("compile",),
                )
        self._pending = keep

