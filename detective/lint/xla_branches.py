"""Which side of a branch runs on XLA: tests with a known value under torch_xla.

``xla_sense`` answers +1 (true whenever the code runs on XLA), -1 (false there) or 0 (unknown)
for a branch test: XLA/TPU switches (``self.xla``, ``cfg.tpu``), ``is_xla_tensor``, device-type
comparisons, ONNX/TorchScript-only tests, one-time set-up guards and names a TPU branch sets to
``None``. The region walk (:mod:`detective.lint.regions`) skips the side that never runs there.
"""

from __future__ import annotations

import re

import libcst as cst

from detective.lint import tensors as T
from detective.lint.syntax import bound_names
from detective.lint.walker import walk

# Branch tests with a known value under torch_xla: +1 true on XLA, -1 false on XLA.
XLA_FLAGS = frozenset({
    "xla", "is_xla", "use_xla", "on_xla", "_xla", "_is_xla", "_use_xla",
    # a repository's own TPU switch (fairseq's cfg.tpu -> self.tpu): true when it runs on XLA
    "tpu", "is_tpu", "use_tpu", "on_tpu", "_tpu", "_is_tpu", "_use_tpu",
})
FALSE_ON_XLA = frozenset({
    "torch.jit.is_scripting", "torch.jit.is_tracing", "torch.onnx.is_in_onnx_export",
    "torch.cuda.is_current_stream_capturing",
})


# The attention implementation an option names: transformers' `_attn_implementation ==
# "flash_attention_2"`, llm-foundry's `attn_impl == 'flash'`.
FLASH_IMPLEMENTATIONS = ("flash_attention", "flash_attn", "flash-attn", "flash-attention")
# Named whole: llm-foundry's `attn_impl == 'flash'`, Megatron's `attn_impl == "te"` (Transformer
# Engine's fused attention, CUDA-only like flash_attn).
CUDA_ONLY_IMPLEMENTATIONS = frozenset({"flash", "te", "transformer_engine"})
FLASH_OPTION = re.compile(r"(attn|attention)_?impl")


def cuda_sense(test: cst.BaseExpression, resolve) -> int:
    """+1 when ``test`` is true only where the CUDA ``flash_attn`` package works, -1 when it is
    false only there, 0 otherwise: ``self.config._attn_implementation == "flash_attention_2"``,
    ``attn_impl == "flash"``, ``attn_impl == "te"``,
    ``is_flash_attn_2_available()``, ``is_flash_attn_greater_or_equal_2_10()``. The side it
    guards never runs on an XLA host (see :mod:`detective.lint.cuda_only`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -cuda_sense(test.expression, resolve)
    if isinstance(test, cst.BooleanOperation):
        left, right = cuda_sense(test.left, resolve), cuda_sense(test.right, resolve)
        if isinstance(test.operator, cst.And):
            return 1 if 1 in (left, right) else 0  # `is_flash_attn_2_available() and ...`
        return -1 if -1 in (left, right) else 0  # `not is_flash_attn... or ...`
    if isinstance(test, cst.Call) and isinstance(test.func, (cst.Name, cst.Attribute)):
        name = (resolve(test.func) or dotted_tail(test.func)).rsplit(".", 1)[-1]
        return 1 if name.startswith("is_flash_attn") else 0
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        sides = (test.left, target.comparator)
        texts = [T.literal_string(side) for side in sides]
        names = [dotted_tail(side) for side in sides if isinstance(side, (cst.Name, cst.Attribute))]
        if any(t and (t in CUDA_ONLY_IMPLEMENTATIONS or t.startswith(FLASH_IMPLEMENTATIONS)) for t in texts) \
                and any(FLASH_OPTION.search(n) for n in names):
            if isinstance(target.operator, (cst.Equal, cst.Is)):
                return 1
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
                return -1
    return 0


FLASH_BRANCH = ("in a branch for a CUDA-only attention implementation (flash_attn, Transformer Engine), "
                "which needs CUDA")
CUDA_BRANCH = "in a branch taken only where CUDA is in use"
CUDA_TEST = "in a test that reads tensors only where CUDA is in use"
# A repository's own CUDA switch (``USE_CUDA = os.environ.get("USE_CUDA")``, ``args.cuda``,
# ``self.use_cuda``), compared lower-cased without leading underscores: false on an XLA host.
CUDA_FLAGS = frozenset({"cuda", "use_cuda", "on_cuda", "with_cuda", "using_cuda"})
CUDA_AVAILABLE = frozenset({"torch.cuda.is_available"})


# True while Dynamo traces (torch.compile), false in eager code and under torch_xla's lazy tensor.
COMPILING_CALLS = frozenset({
    "torch.compiler.is_compiling", "torch.compiler.is_dynamo_compiling", "torch._dynamo.is_compiling",
    "torch._utils.is_compiling",
})


def compile_sense(test: cst.BaseExpression, resolve, helpers=frozenset()) -> int:
    """+1 when ``test`` is true only while torch.compile traces (``torch.compiler.is_compiling()``,
    or a call of one of ``helpers``, this file's functions that return it), -1 when it is false
    only then, 0 otherwise."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -compile_sense(test.expression, resolve, helpers)
    if isinstance(test, cst.BooleanOperation):
        left, right = compile_sense(test.left, resolve, helpers), compile_sense(test.right, resolve, helpers)
        if isinstance(test.operator, cst.And):
            return 1 if 1 in (left, right) else 0
        return -1 if -1 in (left, right) else 0
    if isinstance(test, cst.Call) and isinstance(test.func, (cst.Name, cst.Attribute)) and not test.args:
        if isinstance(test.func, cst.Name) and test.func.value in helpers:
            return 1
        return 1 if resolve(test.func) in COMPILING_CALLS else 0
    return 0


def cuda_flag_sense(test: cst.BaseExpression, resolve) -> int:
    """+1 when ``test`` is true only where CUDA is in use (``if USE_CUDA:``, ``if args.cuda:``,
    ``if torch.cuda.is_available():``), -1 when it is false only there, 0 otherwise. A tensor's
    own ``x.is_cuda`` is :func:`xla_sense`'s: never true for an XLA tensor."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -cuda_flag_sense(test.expression, resolve)
    if isinstance(test, cst.BooleanOperation):
        left, right = cuda_flag_sense(test.left, resolve), cuda_flag_sense(test.right, resolve)
        if isinstance(test.operator, cst.And):
            return 1 if 1 in (left, right) else 0
        return -1 if -1 in (left, right) else 0
    if isinstance(test, cst.Call) and isinstance(test.func, (cst.Name, cst.Attribute)) and not test.args:
        return 1 if resolve(test.func) in CUDA_AVAILABLE else 0
    if isinstance(test, (cst.Name, cst.Attribute)):
        return 1 if dotted_tail(test).lower().lstrip("_") in CUDA_FLAGS else 0
    return 0
GENERATOR_BLOCK = ("in a block that builds a torch.Generator on a tensor's device, which torch_xla "
                   "does not support (\"XLA device type not an accelerator\")")


def device_generator(call: cst.Call, resolve) -> bool:
    """``torch.Generator(device=x.device)``: a generator on a device other than the CPU, which
    raises on an XLA device (torch_xla 2.9), so the block that builds it runs elsewhere."""
    # Named Generator before asking: resolving early would settle names the block imports later.
    if not isinstance(call.func, (cst.Name, cst.Attribute)) or dotted_tail(call.func) != "Generator" \
            or resolve(call.func) != "torch.Generator":
        return False
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"),
                  call.args[0].value if call.args and call.args[0].keyword is None else None)
    return device is not None and T.literal_string(device) not in ("cpu",) \
        and not (isinstance(device, cst.Name) and device.value == "None")


def block_calls(block: cst.BaseSuite) -> list[cst.Call]:
    """The calls a block's own simple statements make directly (``g = f(...)``, ``f(...)``)."""
    found = []
    for statement in getattr(block, "body", ()):
        for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
            value = getattr(small, "value", None)
            if isinstance(value, cst.Call):
                found.append(value)
    return found


def lazy_init_test(test: cst.BaseExpression) -> bool:
    """``not self._initialized``, ``not Status.initialized``, ``not _inited``: one-time set-up."""
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    inner = test.expression
    name = inner.attr.value if isinstance(inner, cst.Attribute) else (
        inner.value if isinstance(inner, cst.Name) else "")
    return "init" in name.lower()


def xla_sense(test: cst.BaseExpression, resolve, names=None, nones=frozenset()) -> int:
    """+1 when ``test`` is true whenever the code runs on XLA, -1 when false, 0 unknown.

    ``names``: local names bound from such tests, with their sense; ``nones``: local names
    that are None whenever the code runs on XLA."""
    names = names or {}
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        if lazy_init_test(test):
            return -1  # if not self._initialized: one-time set-up, not traced every step
        return -xla_sense(test.expression, resolve, names, nones)
    if isinstance(test, cst.BooleanOperation):
        left, right = xla_sense(test.left, resolve, names, nones), xla_sense(test.right, resolve, names, nones)
        if isinstance(test.operator, cst.And):
            return -1 if -1 in (left, right) else (1 if left == right == 1 else 0)
        return 1 if 1 in (left, right) else (-1 if left == right == -1 else 0)
    if isinstance(test, cst.Call):
        dotted = resolve(test.func) or ""
        if dotted in {"torch.tensor", "torch.as_tensor", "bool"} and len(test.args) == 1:
            # torch.tensor(x.device.type == "xla"): the test's truth, as a (CPU) tensor
            return xla_sense(test.args[0].value, resolve, names, nones)
        if dotted.endswith("is_xla_tensor") or dotted == "torch.is_tensor" or (
            dotted == "isinstance" and len(test.args) == 2
            and (resolve(test.args[1].value) or "").endswith("Tensor")
        ):
            return 1  # is_tensor(x) / isinstance(x, Tensor): true for the XLA tensor the code is about
        return -1 if dotted in FALSE_ON_XLA else 0
    if isinstance(test, cst.Attribute):
        if test.attr.value in XLA_FLAGS:
            return 1
        if "onnx" in test.attr.value.lower():
            return -1  # self.onnx_trace: set only while exporting to ONNX
        return -1 if test.attr.value in {"is_cuda", "is_cpu", "is_mps"} else 0
    if isinstance(test, cst.Name):
        if test.value in nones:
            return -1
        return 1 if test.value in XLA_FLAGS else names.get(test.value, 0)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(test.left, cst.Name) and test.left.value in nones \
                and isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            if isinstance(target.operator, cst.Is):
                return 1
            if isinstance(target.operator, cst.IsNot):
                return -1
        sides = (test.left, target.comparator)
        kinds = {_device_literal(side) for side in sides} - {None}
        if len(kinds) == 1 and any(_mentions_device(side) for side in sides):
            on_xla = kinds.pop() == "xla"  # x.device.type == "xla" / == "cpu"
            if isinstance(target.operator, (cst.Equal, cst.Is)):
                return 1 if on_xla else -1
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
                return -1 if on_xla else 1
    return 0


def _device_literal(node: cst.BaseExpression) -> str | None:
    """"xla", "cpu", "cuda", "mps" from a string or ``torch.device("cpu")``."""
    if isinstance(node, cst.Call) and node.args and isinstance(node.func, (cst.Name, cst.Attribute)) \
            and dotted_tail(node.func) == "device":
        node = node.args[0].value
    text = T.literal_string(node)
    if text is None:
        return None
    head = text.split(":", 1)[0]
    return head if head in {"xla", "cpu", "cuda", "mps"} else None


def bindings(nodes) -> dict[str, list[cst.BaseExpression | None]]:
    """Names bound in ``nodes`` (statements; a nested def's bindings are its own) -> the values
    bound (None where the value is not known: unpacking, ``+=``, loop targets, ``:=``).
    Walked with the linter's walker: libcst's visitor re-validates every node."""
    values: dict[str, list[cst.BaseExpression | None]] = {}

    def on_visit(node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is cst.FunctionDef:
            return False
        if kind is cst.Assign:
            for target in node.targets:
                for name in bound_names(target.target):
                    values.setdefault(name, []).append(node.value if isinstance(target.target, cst.Name) else None)
        elif kind is cst.AnnAssign:
            for name in bound_names(node.target):
                values.setdefault(name, []).append(node.value)
        elif kind in (cst.AugAssign, cst.For, cst.NamedExpr):
            for name in bound_names(node.target):
                values.setdefault(name, []).append(None)
        return True

    for node in nodes:
        walk(node, on_visit, _leave_nothing)
    return values


def _leave_nothing(node: cst.CSTNode) -> None:
    return None


def set_to_none(body: cst.BaseSuite) -> list[str]:
    """Names this branch binds to ``None`` and to nothing else (``if self.tpu: mask = None``)."""
    return [name for name, values in bindings([body]).items()
            if all(isinstance(v, cst.Name) and v.value == "None" for v in values)]


def dotted_tail(node: cst.BaseExpression) -> str:
    return node.attr.value if isinstance(node, cst.Attribute) else getattr(node, "value", "")


def _mentions_device(node: cst.BaseExpression) -> bool:
    """``x.device.type``, ``device.type``, ``str(x.device)``, ``self.device_type``."""
    if isinstance(node, cst.Call) and node.args:
        node = node.args[0].value
    while isinstance(node, cst.Attribute):
        if "device" in node.attr.value or node.attr.value == "type":
            return True
        node = node.value
    return isinstance(node, cst.Name) and "device" in node.value
