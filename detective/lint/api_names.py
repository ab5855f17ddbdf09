"""torch / torch_xla entry points the semantic model and the region walk recognise by name."""

from __future__ import annotations

# Libraries whose functions return no tensors (np.unique is NumPy's, not Tensor.unique).
NON_TENSOR_LIBRARIES = frozenset({
    "numpy", "math", "random", "pandas", "scipy", "sklearn", "json", "os", "re", "time",
    "itertools", "collections", "functools", "string", "statistics", "decimal", "fractions",
})
COMPILE_CALLS = frozenset({"torch.compile", "torch_xla.compile", "torch_xla.torch_xla.compile"})
XLA_COMPILE_CALLS = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
COMPILER_MODULES = ("torch._dynamo.", "torch.compiler.")
SYNCING_LOADERS = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
    }
)
