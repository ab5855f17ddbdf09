"""Is this expression a tensor? Evidence from what the code shows, no type checker.

Evidence is conservative on purpose: a wrong "tensor" produces a false finding, a
missed one only silence. Sources: torch calls, forward parameters, names bound from
tensor expressions, tensor-only methods, and buffers/parameters of the class.
"""

from __future__ import annotations

import libcst as cst

# Torch functions whose result is a Python value, not a tensor.
NON_TENSOR_TORCH = frozenset(
    {
        "is_tensor", "is_floating_point", "is_complex", "is_storage", "numel", "get_default_dtype",
        "device", "dtype", "Size", "no_grad", "enable_grad", "inference_mode", "manual_seed",
        "seed", "initial_seed", "compile", "set_grad_enabled", "is_grad_enabled", "typename",
        "get_device", "equal", "allclose", "is_nonzero", "finfo", "iinfo", "promote_types",
        "result_type", "can_cast", "set_default_dtype", "use_deterministic_algorithms", "save",
        "load", "autocast", "Generator", "get_rng_state", "set_rng_state", "set_printoptions",
        "is_inference_mode_enabled", "is_autocast_enabled",
    }
)
# Subpackages of torch whose functions mostly do not return tensors.
NON_TENSOR_TORCH_PACKAGES = (
    "torch.cuda.", "torch.backends.", "torch.distributed.", "torch.utils.", "torch.optim.",
    "torch.jit.", "torch.compiler.", "torch._dynamo.", "torch.onnx.", "torch.fx.", "torch.nn.utils.",
    "torch.overrides.", "torch.autograd.profiler.", "torch.profiler.", "torch.testing.", "torch.hub.",
    "torch.library.", "torch.export.", "torch.package.",
)

# Tensor methods and attributes that give Python values (reading them is shape metadata
# or an explicit host read, flagged separately).
NON_TENSOR_METHODS = frozenset(
    {
        "item", "tolist", "numpy", "cpu", "size", "dim", "ndimension", "numel", "nelement",
        "element_size", "is_contiguous", "is_floating_point", "is_complex", "data_ptr", "stride",
        "storage_offset", "get_device", "equal", "allclose", "is_nonzero", "backward",
        "register_hook", "untyped_storage", "is_pinned", "is_shared", "has_names", "type",
        # layout and flag queries (torch 2.9's callable is_*, but is_nonzero, which reads a value)
        "is_coalesced", "is_conj", "is_distributed", "is_inference", "is_neg", "is_same_size",
        "is_set_to", "is_signed",
        "__len__", "keys", "values", "items", "get",
        # list/dict/ndarray methods torch.Tensor lacks: `mems.copy()` is no tensor, whatever
        # `mems` was taken for (x-transformers' `mems = mems.copy() if ... else [None] * n`)
        "copy", "index", "count",
    }
)
NON_TENSOR_ATTRIBUTES = frozenset(
    {
        "shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn", "is_leaf",
        "layout", "names", "is_sparse", "is_quantized", "is_meta", "itemsize", "nbytes",
    }
)
TENSOR_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})

# Methods that only tensors have (numpy aside) in model code: evidence even when the
# receiver is unknown. Names shared with lists, dicts, strings, sets or nn.Module
# (split, add, index, count, to, float, half, cuda, ...) are deliberately absent.
TENSOR_ONLY_METHODS = frozenset(
    {
        "softmax", "log_softmax", "view", "view_as", "masked_fill", "masked_fill_", "unsqueeze",
        "squeeze", "permute", "contiguous", "detach", "expand", "expand_as", "type_as", "new_zeros",
        "new_ones", "new_full", "new_empty", "new_tensor", "masked_select", "nonzero", "gather",
        "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select", "bmm", "matmul", "mm",
        "narrow", "sigmoid", "relu", "isnan", "isinf", "isfinite", "logical_and", "logical_or",
        "logical_not", "eq", "ne", "gt", "lt", "ge", "le", "clamp", "clamp_", "sum", "mean", "any",
        "all", "max", "min", "argmax", "argmin", "norm", "abs", "exp", "log", "sqrt", "rsqrt",
        "pow", "topk", "sort", "cumsum", "count_nonzero", "unique", "repeat_interleave", "flatten",
        "reshape", "transpose", "clone", "bool", "long", "masked_scatter", "float_power", "std",
        "var", "prod", "argsort", "kthvalue", "where", "tanh", "silu", "gelu",
    }
)
# Results that are boolean tensors: evidence for mask indexing.
BOOL_METHODS = frozenset(
    {"bool", "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_not", "any", "all",
     "logical_xor", "eq", "ne", "gt", "lt", "ge", "le", "isclose", "isin", "signbit"}
)
COMPARE_OPS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
               cst.GreaterThanEqual)
PY_BUILTINS_NOT_TENSOR = frozenset(
    {"len", "int", "float", "bool", "str", "repr", "isinstance", "hasattr", "getattr", "print",
     "range", "enumerate", "zip", "list", "tuple", "dict", "set", "type", "id", "round", "abs",
     "sorted", "reversed", "min", "max", "sum", "any", "all", "iter", "next", "callable", "super"}
)


# Conventional names of non-tensor libraries: ``np.max(y)`` is NumPy's even when ``np``
# came in through a star import.
MODULE_ALIASES = frozenset({"np", "numpy", "math", "pd", "pandas", "scipy", "jnp", "random", "statistics"})

# Why a finding on a tensor made on the CPU is "info" (said in its message).
CPU_NOTE = " (a CPU tensor: no device sync on XLA, but a graph break under torch.compile)"


def is_torch_name(dotted: str | None) -> bool:
    return bool(dotted) and (dotted == "torch" or dotted.startswith(("torch.", "torch_xla.")))


# Annotations of Python scalars (a dataclass field ``global_step: int = 0``).
PYTHON_SCALARS = frozenset({"int", "float", "bool", "str"})

# torch.float32, torch.long...: x.to(<one of these>) casts in place, it moves nothing.
DTYPE_NAMES = frozenset({
    "float", "float16", "float32", "float64", "bfloat16", "half", "double", "int", "int8", "int16",
    "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble",
    "float8_e4m3fn", "float8_e5m2",
})


def torch_call_returns_tensor(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    if last in NON_TENSOR_TORCH or not last[:1].islower():
        return False  # CapWords: classes (nn.Linear, Size, device)
    if last.startswith(("is_", "has_", "get_", "set_", "_")):
        return False  # predicates, getters and private helpers
    if dotted.startswith(NON_TENSOR_TORCH_PACKAGES) or dotted.startswith("torch_xla."):
        return False
    if any(part.startswith("__") for part in dotted.split(".")[1:-1]):
        return False  # torch.__version__.split("."): a method of a module's dunder string
    return dotted.startswith("torch.")


def call_method_name(node: cst.Call) -> str | None:
    func = node.func
    return func.attr.value if isinstance(func, cst.Attribute) else None


SHAPE_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "stride", "element_size"})


def is_shape_metadata(node: cst.BaseExpression) -> bool:
    """``x.size(1)``, ``x.shape[0]``, ``x.ndim``, ``len(x)``, ``x.size(1) * 2``: Python ints
    (static under XLA), whatever ``x`` is."""
    if isinstance(node, cst.Call):
        return call_method_name(node) in SHAPE_METHODS \
            or (isinstance(node.func, cst.Name) and node.func.value == "len")
    if isinstance(node, cst.Attribute):
        return node.attr.value in {"shape", "ndim"}
    if isinstance(node, cst.Subscript):
        return is_shape_metadata(node.value)
    if isinstance(node, cst.BinaryOperation):
        sides = (node.left, node.right)
        return any(is_shape_metadata(s) for s in sides) \
            and all(is_shape_metadata(s) or is_number_literal(s) for s in sides)
    return False


def self_attr(node: cst.BaseExpression) -> str | None:
    """``A`` of ``self.A``, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def is_number_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    return isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float))


def literal_string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_cpu_device(value: cst.BaseExpression, resolve) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``: a ``.to(...)`` argument that copies to the host
    (``resolve`` expands a name through the file's imports)."""
    if literal_string(value) == "cpu":
        return True
    return isinstance(value, cst.Call) and resolve(value.func) == "torch.device" and bool(value.args) \
        and literal_string(value.args[0].value) == "cpu"


def literal_keyword_true(call: cst.Call, name: str) -> bool:
    """Is keyword ``name`` passed the literal ``True`` (``non_blocking=True``)?"""
    return any(a.keyword is not None and a.keyword.value == name and isinstance(a.value, cst.Name)
               and a.value.value == "True" for a in call.args)
