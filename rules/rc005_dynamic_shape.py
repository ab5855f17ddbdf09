"""RC005 dynamic-shape: operations whose output shape depends on tensor values."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.model import HANDED_DEVICE
from detective.lint.project_facts import ABSENT
from detective.lint.rule import Rule
from detective.rules import _rc005_examples as examples
from detective.rules._bounded_dynamic import BOUNDED_OPS, FACT, BoundedDynamicOps

# (function or method name) -> always data-dependent output shape
ALWAYS_DYNAMIC = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"}


class DynamicShape(Rule):
    code = "RC005"
    name = "dynamic-shape"
    summary = "Data-dependent output shape (mask indexing, nonzero, unique, topk with a data k) in a traced region"
    facts = (BoundedDynamicOps,)  # ops the file runs with bounded dynamic shapes (XLA_EXPERIMENTAL)
    doc = """
    ## What it does
    Flags operations whose output shape depends on tensor values: boolean-mask indexing
    (`x[mask]`, `x[x > 0]`), `nonzero`/`argwhere`, one-argument `torch.where(cond)`,
    `masked_select`, `unique`, `topk`/`kthvalue` with a `k` read from tensor values, and
    `repeat_interleave` with tensor repeats (unless `output_size=` pins the length).
    A `k` or `num_classes` that is a plain parameter of a helper (`def _top_idx(s, k):
    return torch.topk(s, k)[1]`) is flagged where some call the project makes hands that
    parameter a tensor made on the device (DeepSpeed's gates pass a capacity read from the
    expert counts when `drop_tokens=False`); a Python number or a CPU tensor passed there
    is not.

    A bool-mask fill with a scalar (`x[pad] = 0`) costs only on torch_xla (`nonzero` on the
    host); under `torch.compile` it is one graph, so in a project that targets only
    torch.compile it is `info` (see Targets in the README).

    `nonzero` and `masked_select` in a file that sets `XLA_EXPERIMENTAL` naming them
    (`os.environ["XLA_EXPERIMENTAL"] = "nonzero:masked_select"`, `os.environ.setdefault`) or
    requires it (an `assert` on it, `skipIf`/`skipUnless` on it; naming no op covers both)
    are `info`: torch_xla 2.9 lowers exactly these two with a bounded dynamic shape under the
    flag. Measured on PJRT CPU (`benchmarks/target_costs.py --only bounded`), `nonzero` over
    four different counts: with the flag, programs for the first count only and none for the
    other three; without it, a new program and an `aten::nonzero` CPU fallback for each.
    Other ops stay warnings there.

    ## Why is this bad?
    A compiled program is keyed by input shapes. When a shape comes from data, every new
    value is a new program (or a slow dynamic-shape fallback on TPU). Shape polymorphism
    in torch_xla 2.9 does not cover mask-driven gathers, data-dependent top-k, varlen
    layouts or variable MoE capacity.

    ## Example
    ```python
    def forward(self, x, scores):
        keep = x[scores > 0.5]                 # length depends on the data
        k = int((scores > 0.5).sum())
        top = scores.topk(k)
    ```

    ## Use instead
    Keep shapes static: mask instead of gathering, pad to a fixed size, clamp k at
    configuration time.
    ```python
    def forward(self, x, scores):
        keep = x * (scores > 0.5)[..., None]   # same shape every step
        top = scores.topk(self.max_k)          # k fixed by config
        idx = torch.nonzero_static(scores > 0.5, size=self.max_k)
    ```
    """

    VALID = examples.VALID
    INVALID = examples.INVALID

    def __init__(self, context):
        super().__init__(context)
        self._fills: set[int] = set()  # ids of `x[...]` targets assigned a Python scalar
        # per function: names bound only to Python numbers so far (`bias = 1 - exp_bias + 127`,
        # `for i in range(n)`), which a fill value may be computed from
        self._numbers: list[set[str]] = [set()]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        self._numbers.append({p.name.value for p in params if _number_annotation(p.annotation)})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._numbers.pop()

    def visit_For(self, node: cst.For) -> None:
        if isinstance(node.target, cst.Name):
            numbers = self._numbers[-1]
            if isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) \
                    and node.iter.func.value == "range" and all(self._number(a.value) for a in node.iter.args):
                numbers.add(node.target.value)
            else:
                numbers.discard(node.target.value)

    def _number(self, node: cst.BaseExpression) -> bool:
        """A Python number: a scalar (see _is_scalar), a name bound to one, or arithmetic on them."""
        if isinstance(node, cst.BinaryOperation):
            return self._number(node.left) and self._number(node.right)
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return self._number(node.expression)
        if isinstance(node, cst.Name) and node.value in self._numbers[-1]:
            return True
        return _is_scalar(node, self.context)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._number(node.value):
            self._fills.update(id(t.target) for t in node.targets if isinstance(t.target, cst.Subscript))
        numbers = self._numbers[-1]
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                (numbers.add if len(node.targets) == 1 and self._number(node.value) else numbers.discard)(
                    target.target.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        context = self.context
        indices = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        for element in node.slice:
            index = element.slice
            if isinstance(index, cst.Index) and context.is_mask(index.value):
                if context.mask_by_name_only(index.value) and any(
                        other is not index.value and context.is_numeric_tensor(other) for other in indices):
                    continue  # grad[arange_1d, masked_target_1d]: a gather by two integer indices
                if context.is_tensor(node.value) or _unknown_receiver(node.value):
                    if id(node) in self._fills:
                        # Measured (README, Targets): nonzero on the host under torch_xla; one
                        # graph, no break, under torch.compile(fullgraph=True).
                        self._report(node, "boolean-mask assignment of a scalar: `index_put_` expands "
                                     "the mask through `nonzero` on XLA", _text(index.value),
                                     context.made_on_cpu(node.value), costs_on=("xla",))
                    else:
                        self._report(node, "boolean-mask indexing: the result's length depends on the "
                                     "mask's values", _text(index.value), context.made_on_cpu(node.value))
                return

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        dotted = context.resolve(node.func) or ""
        is_torch = dotted.startswith("torch.") and dotted.count(".") == 1
        method = None if context.library_function(node.func) else T.call_method_name(node)
        name = dotted.rsplit(".", 1)[-1] if is_torch else method
        if name is None:
            return
        args = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        # For torch.f(x, ...), the tensor is the first positional argument.
        offset = 1 if is_torch else 0
        if name in ALWAYS_DYNAMIC and (is_torch or method in T.TENSOR_ONLY_METHODS):
            operand = node.func.value if method else (args[0].value if args else None)
            self._report(node, f"`{name}` returns a tensor whose shape depends on the data", name,
                         operand is not None and context.made_on_cpu(operand),
                         needs=(ABSENT + FACT + name,) if name in BOUNDED_OPS else ())
        elif name == "where" and is_torch and len(node.args) == 1:
            self.report(node, "one-argument `torch.where(cond)` returns indices: data-dependent shape",
                        subject="torch.where(cond)")
        elif name in {"topk", "kthvalue"}:
            k = keywords.get("k", args[offset].value if len(args) > offset else None)
            if k is not None and _data_dependent(k, context):
                self.report(node, f"`{name}` with k read from tensor values: every new k is a new program",
                            subject=name)
            elif k is not None:
                self._from_parameter(node, k, f"`{name}` with k", "every new k is a new program", name)
        elif name == "one_hot" and (dotted.endswith("functional.one_hot") or is_torch):
            classes = keywords.get("num_classes", args[1].value if len(args) > 1 else None)
            if classes is not None and _data_dependent(classes, context):
                self.report(node, "`one_hot` with num_classes read from tensor values: every new value is a "
                            "new shape", subject="one_hot")
            elif classes is not None:
                self._from_parameter(node, classes, "`one_hot` with num_classes",
                                     "every new value is a new shape", "one_hot")
        elif name == "repeat_interleave":
            repeats = keywords.get("repeats", args[offset].value if len(args) > offset else None)
            if is_torch and len(args) == 1 and not keywords:
                repeats = args[0].value  # torch.repeat_interleave(repeats)
            if repeats is not None and context.is_tensor(repeats) and "output_size" not in keywords:
                # The output lives where the input does: on the CPU when both are made there.
                source = node.func.value if method else (args[0].value if args else repeats)
                self._report(node, "`repeat_interleave` with tensor repeats: output length depends on the data",
                             "repeat_interleave", context.made_on_cpu(source) and context.made_on_cpu(repeats))


    def _from_parameter(self, node, size, what: str, cost: str, subject: str) -> None:
        """``def _top_idx(scores, k): return torch.topk(scores, k)[1]``: the size is a plain
        parameter; the candidate stands where some call hands it a device tensor (a count
        read from the data), decided across files (``ArgFacts.handed_device_tensor``)."""
        function = self.context.function
        if not isinstance(size, cst.Name) or size.value not in function.params \
                or size.value in function.locals or size.value == "self":
            return
        assumed = self.context.model.infer.assumed
        mark = len(assumed)
        assumed.append(HANDED_DEVICE + size.value)
        self.report(node, f"{what} from parameter `{size.value}`, which a call hands a device tensor "
                    f"(a value read from the data): {cost}", subject=subject)
        del assumed[mark:]

    def _report(self, node: cst.CSTNode, message: str, subject: str, cpu: bool, costs_on=(), needs=()) -> None:
        """On a tensor made on the CPU the dynamic shape never reaches an XLA graph: info."""
        self.report(node, message + (T.CPU_NOTE if cpu else ""), subject=subject,
                    severity="info" if cpu else "warning", costs_on=costs_on, needs=needs)


def _is_scalar(node: cst.BaseExpression, context) -> bool:
    """A Python number: ``0``, ``-1.0``, ``float("-inf")``, ``math.inf``, ``torch.finfo(t).min``,
    ``True``, a number attribute of ``self``, an UPPER_CASE constant; or ``torch.tensor(0.0)``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    if T.is_number_literal(node):
        return True
    if isinstance(node, cst.Name):
        return node.value in {"True", "False"} or (node.value.isupper() and not context.is_tensor(node))
    if isinstance(node, cst.Call) and len(node.args) == 1 and isinstance(node.func, cst.Name) \
            and node.func.value in {"float", "int"}:
        return T.literal_string(node.args[0].value) is not None or T.is_number_literal(node.args[0].value)
    if isinstance(node, cst.Call) and context.resolve(node.func) == "torch.tensor" and node.args \
            and node.args[0].keyword is None and not node.args[0].star:
        # torch.tensor(float("nan"), device=d, dtype=t): a 0-dim tensor broadcasts like a number
        return _is_scalar(node.args[0].value, context)
    if isinstance(node, cst.Attribute):
        dotted = context.resolve(node) or ""
        if dotted in {"math.inf", "math.nan", "math.pi", "numpy.inf", "numpy.nan"}:
            return True
        value = node.value
        if isinstance(value, cst.Call) and (context.resolve(value.func) or "") in {"torch.finfo", "torch.iinfo"}:
            return True
        cls = context.cls
        return isinstance(value, cst.Name) and value.value == "self" and cls is not None \
            and node.attr.value in cls.number_attrs
    return False


def _number_annotation(annotation) -> bool:
    return annotation is not None and isinstance(annotation.annotation, cst.Name) \
        and annotation.annotation.value in {"int", "float", "bool"}


def _data_dependent(node: cst.BaseExpression, context) -> bool:
    return context.is_tensor(node) or context.is_host_value(node)


def _text(node: cst.BaseExpression) -> str:
    """``mask``, ``~self.keep``: what a finding on a mask is about, when it is a name."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        inner = _text(node.expression)
        return f"~{inner}" if inner else ""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _text(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def _unknown_receiver(node: cst.BaseExpression) -> bool:
    # x[x > 0] where x is untyped: indexing by a boolean tensor only works on tensors.
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript))
