"""RC107 local-metric-before-reduce: a metric read on the host before it is reduced across replicas."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Rule, Valid

HOST_READS = {"item", "cpu", "tolist"}
METRIC_WORDS = ("loss", "acc", "metric", "correct", "total", "ppl", "perplexity", "score")


class LocalMetricBeforeReduce(Rule):
    code = "RC107"
    name = "local-metric-before-reduce"
    summary = "loss.item()/.cpu() of a value later all_reduce'd/mesh_reduce'd, or read in a distributed loop with no reduce"
    applies_to = "xla-code"
    doc = """
    ## What it does
    Flags `.item()`/`.cpu()`/`.tolist()` of a name that is later passed to
    `xm.all_reduce` or `xm.mesh_reduce` in the same function, and, in a distributed
    program (one that calls `xmp.spawn`, `torch_xla.launch`, `xr.world_size()`,
    `xm.get_ordinal()`, a reduce, ...), `.item()`/`.cpu()` of a metric-like name
    (`loss`, `acc`, `correct`, ...) inside a loop before any reduce in that loop, unless
    the value read is thrown away (`loss.item()` alone, `_ = ...`, a name never used again).

    ## Why is this bad?
    The value read is this replica's local one: the log shows one shard's loss as if it
    were the global loss, silently. The read also syncs the pending graph on every
    replica before the collective, cutting the step into extra programs (PJRT notes in
    the seed: a metric read with `loss.item()` before `xm.all_reduce`/`xm.mesh_reduce`
    reports a local value).

    ## Example
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        print(loss.item())
        loss = xm.all_reduce(xm.REDUCE_SUM, loss) / xr.world_size()
    ```

    ## Use instead
    Reduce first, read after (once per logging interval):
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        total = xm.all_reduce(xm.REDUCE_SUM, loss) / xr.world_size()
        xm.add_step_closure(lambda t: print(t.item()), args=(total,))
    ```
    """

    VALID = [
        Valid(
            """
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

def train(model, loader):
    for x in loader:
        loss = model(x).mean()
        total = xm.all_reduce(xm.REDUCE_SUM, loss) / xr.world_size()
        print(total.item())
"""
        ),
        Valid(
            """
import torch_xla

def train(model, loader):        # single device: the local value is the value
    for x in loader:
        loss = model(x).mean()
        torch_xla.sync()
        print(loss.item())
"""
        ),
        Valid(
            """
import torch_xla
import torch_xla.runtime as xr

def train(model, loader, fetch_often):
    for x in loader:
        loss = model(x).mean()
        torch_xla.sync()
        if fetch_often:
            loss_i = loss.item()  # fetched on purpose, never reported: no local value escapes
        print(xr.global_ordinal())
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch_xla.core.xla_model as xm

def evaluate(model, x):
    loss = model(x).mean()
    print(loss.item())
    return xm.mesh_reduce("loss", loss, lambda v: sum(v) / len(v))
""",
            line=6,
        ),
        Invalid(
            """
import torch_xla
import torch_xla.runtime as xr

def train(model, loader):
    for x in loader:
        loss = model(x).mean()
        torch_xla.sync()
        print(f"rank {xr.global_ordinal()} loss {loss.item()}")
""",
            line=9,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._reads: dict[str, list[tuple[str, cst.CSTNode]]] = {}  # scope -> (name, node)
        self._loops: list[dict] = []  # per open loop: {"reduced": bool}
        self._loop_reads: list[tuple[cst.CSTNode, str]] = []
        self._distributed = False
        self._reported: set[int] = set()
        self._discarded: set[int] = set()  # calls whose value is thrown away
        self._bound: dict[int, list[str]] = {}  # id(value) -> names an assignment binds it to
        self._uses: dict[tuple[str, str], int] = {}  # (scope, name) -> occurrences

    def visit_Expr(self, node: cst.Expr) -> None:
        self._discarded.add(id(node.value))  # loss.item() alone: a sync, but nothing reported

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        if all(isinstance(t, cst.Name) for t in targets):
            self._bound[id(node.value)] = [t.value for t in targets]

    def visit_Name(self, node: cst.Name) -> None:
        key = (self.context.scope.qualname, node.value)
        self._uses[key] = self._uses.get(key, 0) + 1

    def visit_For(self, node) -> None:
        self._loops.append({"reduced": False, "scope": self.context.scope.qualname})

    visit_While = visit_For

    def leave_For(self, node) -> None:
        self._loops.pop()

    leave_While = leave_For

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        dotted = context.resolve(node.func)
        if dotted in P.DISTRIBUTED_CALLS:
            self._distributed = True
        if dotted in P.REDUCE_CALLS:
            for loop in self._loops:
                loop["reduced"] = True
            reads = self._reads.get(context.scope.qualname, [])
            for name in _names_in(node):
                for read_name, read in reads:
                    if read_name == name and id(read) not in self._reported:
                        self._reported.add(id(read))
                        self.report(read, f"`{name}` is read on the host before it is reduced across "
                                    "replicas: the value is this replica's local one; reduce first",
                                    subject=name)
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in HOST_READS and not node.args \
                and isinstance(func.value, cst.Name):
            name = func.value.value
            self._reads.setdefault(context.scope.qualname, []).append((name, node))
            loop = self._loops[-1] if self._loops else None
            if loop is not None and loop["scope"] == context.scope.qualname and not loop["reduced"] \
                    and any(word in name.lower() for word in METRIC_WORDS) and id(node) not in self._discarded:
                self._loop_reads.append((node, name, context.scope.qualname, self._bound.get(id(node), [])))

    def leave_Module(self, node) -> None:
        if not self._distributed:
            return
        for read, name, scope, bound in self._loop_reads:
            # loss_i = loss.item() with loss_i never used again: no local value is reported.
            if bound and all(n == "_" or self._uses.get((scope, n), 0) <= 1 for n in bound):
                continue
            if id(read) not in self._reported:
                self._reported.add(id(read))
                self.report(read, f"`{name}` is read on the host in a distributed loop before any "
                            "all_reduce/mesh_reduce: it is this replica's local value; reduce first",
                            scope="<module>", subject=name)


def _names_in(node: cst.Call) -> set[str]:
    names = set()
    for arg in node.args:
        value = arg.value
        elements = value.elements if isinstance(value, (cst.List, cst.Tuple)) else [value]
        for element in elements:
            inner = element.value if isinstance(element, (cst.Element, cst.StarredElement)) else element
            if isinstance(inner, cst.Name):
                names.add(inner.value)
    return names
