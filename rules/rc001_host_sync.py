"""RC001 host-sync: reading a tensor's value on the host inside a traced region."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.rule import Rule
from detective.lint.syntax import reads_key
from detective.rules import _rc001_examples as examples

HOST_READ_METHODS = {"item", "tolist", "cpu", "numpy"}
BOOL_READS = {"equal", "allclose", "is_nonzero"}
CONVERSIONS = {"float", "int", "bool", "complex", "str", "repr"}
# The read of a host copy: free on torch_xla (the copy synced), a graph break under torch.compile.
COPY_READ = ("compile",)


class HostSync(Rule):
    code = "RC001"
    name = "host-sync"
    summary = "Host read of a tensor value (.item(), .cpu(), float(t), print(t)) inside a traced region"
    doc = """
    ## What it does
    Flags reads of a tensor's value on the host inside a compiled or traced region:
    `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `.to("cpu")`, `float(t)`/`int(t)`/`bool(t)`
    of a tensor, `not t` assigned or returned (in a branch test it is RC002),
    `torch.equal`/`allclose`, and printing or formatting a tensor.

    A read of a tensor made on the CPU in the same function (`torch.zeros(n)`,
    `torch.tensor(x.size())` with no `device=`), and `.numpy()` (which raises on a device
    tensor, so working code calls it on CPU tensors) are reported as `info` (hidden by default):
    it syncs no device on XLA, though under torch.compile it still breaks the graph; its
    `.cpu()` copies nothing and is not reported.

    A copy to the host (`.cpu()`, `.to("cpu")`, blocking or not) costs only on torch_xla,
    which runs the pending graph to hand the tensor over: torch.compile traces the copy
    without a graph break (`torch._dynamo.explain` of `.cpu()`, `.to("cpu")` and
    `.to(torch.device("cpu"), non_blocking=True)`: one graph, no break, torch 2.9). So in a
    project that only uses torch.compile a copy is `info`. Reading the copy in Python
    (`splits.tolist()`, `x.cpu().item()`, `int(host)`, and RC002's branches on it) is the
    reverse: free on torch_xla, where the copy already ran the graph, and a graph break
    under torch.compile; it is reported as costing only there.

    `torch._dynamo.config.capture_scalar_outputs = True` keeps `.item()`, `int(t)` and an
    integer `.tolist()` in the graph (measured: one graph, no break). The linter does not
    read it: which compile call a setting covers is not known (torchtitan sets it beside
    its block compile, ao only in one test, torchtune in its distributed recipes only).

    ## Why is this bad?
    torch_xla traces lazily. A host read forces the pending graph to be compiled and
    executed right there (torch_xla reports the cause as "most likely user code trying to
    access tensor value before torch_xla.sync"), so one step becomes several graph
    fragments, each with its own cache entry and a device-to-host transfer. In the seed
    model two one-line `.item()` checks cost about twenty syncs per step.

    ## Example
    ```python
    def forward(self, doc_ids):
        if (doc_ids == doc_ids[..., :1]).all().item():
            return self.fast_path(doc_ids)
    ```

    ## Use instead
    Keep the value on the device and branch with tensor ops, or read it after
    `torch_xla.sync()`:
    ```python
    def forward(self, doc_ids):
        uniform = (doc_ids - doc_ids[..., :1]).any()   # stays on device
        return torch.where(uniform, self.slow_path(doc_ids), self.fast_path(doc_ids))
    ```
    """

    VALID = examples.VALID
    INVALID = examples.INVALID

    def __init__(self, context):
        super().__init__(context)
        self._mapping_tests: set[int] = set()  # ids of `k in d` tests whose side reads d[k]

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        if context.after_sync():
            return  # right after the step's sync the value is already materialised
        func = node.func
        method = T.call_method_name(node)
        if isinstance(func, cst.Attribute) and context.on_host(func.value):
            # x.cpu().item(), toks.tolist() with toks from a .cpu() copy: on torch_xla the copy
            # ran the graph and this read is free; torch.compile traced the copy, and breaks here.
            if method in {"item", "tolist"} and not node.args and not context.through_numpy(func.value):
                self.report(node, f"`.{method}()` of a host copy reads its value in Python",
                            subject=f".{method}()", costs_on=COPY_READ)
            return
        if method in HOST_READ_METHODS and not node.args:
            # .numpy() raises on a device tensor: where the code works, the tensor is on the CPU.
            cpu = method == "numpy" or context.made_on_cpu(func.value)
            if cpu and method == "cpu":
                return  # a CPU tensor's .cpu() copies nothing
            # A receiver bound from NumPy or from a helper returning a Python value vetoes it.
            context.weigh_receiver(func.value)
            # torch.compile traces the copy (no graph break); torch_xla runs the pending graph.
            self._report(node, f"`.{method}()` reads a tensor value on the host", f".{method}()", cpu,
                         costs_on=("xla",) if method == "cpu" else ())
            return
        if method == "to" and any(T.is_cpu_device(a.value, context.resolve) for a in node.args):
            if not context.made_on_cpu(func.value):
                # torch.compile traces the copy, blocking or not (no graph break); torch_xla runs
                # the pending graph to hand the tensor over.
                blocking = not T.literal_keyword_true(node, "non_blocking")
                self.report(node, "`.to('cpu')` copies a tensor to the host" if blocking else
                            "`.to('cpu', non_blocking=True)` runs the pending graph to copy a tensor to the host",
                            subject=".to('cpu')", costs_on=("xla",))
            return
        dotted = context.resolve(func)
        if method in BOOL_READS and (
            (dotted and dotted.rsplit(".", 1)[0] == "torch") or context.is_tensor(func.value)
        ):
            self.report(node, f"`{method}` returns a Python bool, reading tensor values on the host",
                        subject=method)
            return
        if isinstance(func, cst.Name):
            if func.value in {"min", "max"} and len(node.args) > 1 and any(
                context.is_tensor(a.value) for a in node.args
            ):
                cpu = all(context.made_on_cpu(a.value) for a in node.args if context.is_tensor(a.value))
                self._report(node, f"`{func.value}()` with a tensor operand compares tensor values on the host",
                             f"{func.value}()", cpu)
            elif func.value in CONVERSIONS and len(node.args) == 1 and context.is_tensor(node.args[0].value):
                if context.on_host(node.args[0].value):
                    if not context.through_numpy(node.args[0].value):  # a NumPy read is NumPy's
                        self.report(node, f"`{func.value}()` of a host copy reads its value in Python",
                                    subject=f"{func.value}()", costs_on=COPY_READ)
                else:
                    context.model.infer.note_guesses(node.args[0].value, node)
                    self._report(node, f"`{func.value}()` of a tensor reads its value on the host",
                                 f"{func.value}()", context.made_on_cpu(node.args[0].value))
            elif func.value == "print":
                shown = [a.value for a in node.args
                         if not isinstance(a.value, cst.FormattedString) and context.is_tensor(a.value)]
                if shown:
                    self._report(node, "printing a tensor reads its value on the host", "",
                                 all(context.made_on_cpu(a) for a in shown))

    def _report(self, node: cst.CSTNode, message: str, subject: str, cpu: bool, costs_on=()) -> None:
        """A read of a tensor made on the CPU syncs no device on XLA: info, saying why."""
        if cpu:
            message += T.CPU_NOTE
        self.report(node, message, subject=subject, severity="info" if cpu else "warning", costs_on=costs_on)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._negation(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self._negation(node.value)

    def _negation(self, value: cst.BaseExpression) -> None:
        """``flag = not has_one_value(t)``: ``not`` calls ``Tensor.__bool__`` (in an ``if`` it is RC002's)."""
        context = self.context
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not) \
                and context.is_tensor(value.expression) and not context.after_sync():
            self._report(value, "`not` of a tensor reads its value on the host", "not",
                         context.made_on_cpu(value.expression))

    def visit_If(self, node: cst.If) -> None:
        self._note_mapping_test(node.test, node.body)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._note_mapping_test(node.test, node.body)

    def _note_mapping_test(self, test: cst.BaseExpression, body: cst.CSTNode) -> None:
        """``if k in feats: top = feats[k]``: read by the key it was tested for, ``feats`` is
        a mapping (a backbone's dict of features), not a tensor."""
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, cst.In) \
                and reads_key(body, test.comparisons[0].comparator, test.left):
            self._mapping_tests.add(id(test))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        context = self.context
        if id(node) in self._mapping_tests:
            return
        if context.reads_in_operator(node) and not context.after_sync():
            cpu = all(context.made_on_cpu(t.comparator) for t in node.comparisons
                      if isinstance(t.operator, (cst.In, cst.NotIn)))
            self._report(node, "`in` on a tensor (`Tensor.__contains__`) reads its values on the host", "in", cpu)

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        context = self.context
        if context.is_tensor(node.expression) and not context.after_sync():
            self._report(node, "formatting a tensor in an f-string reads its value on the host", "",
                         context.made_on_cpu(node.expression))
