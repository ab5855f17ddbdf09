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
SYNC_CALLS = frozenset(
    {"torch_xla.sync", "torch_xla.torch_xla.sync", "torch_xla.core.xla_model.mark_step"}
)
STEP_CONTEXTS = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})
STEP_TRACES = frozenset({"torch_xla.debug.profiler.StepTrace"})  # syncs when the block exits
# Calls that drive an XLA program (a step, its loader, its launch), as opposed to helpers that
# merely touch torch_xla when it is there (xm.set_rng_state, xm.is_xla_tensor).
XLA_PROGRAM_CALLS = SYNC_CALLS | STEP_CONTEXTS | STEP_TRACES | SYNCING_LOADERS | XLA_COMPILE_CALLS | frozenset({
    "torch_xla.core.xla_model.optimizer_step", "torch_xla.distributed.xla_multiprocessing.spawn",
    "torch_xla.launch", "torch_xla.torch_xla.launch",
})

# Packages whose kernels run on CPU or CUDA memory only (they read data_ptr): they install
# and import anywhere, but calling them on XLA tensors fails. flashlight/wav2letter's ASG and
# CTC criteria; k2's FSA and RNN-T losses and its siblings (icefall's transducers).
CPU_CUDA_PACKAGES = ("flashlight", "wav2letter", "k2", "fast_rnnt", "optimized_transducer",
                     "warp_rnnt", "warprnnt_pytorch")
# Packages whose kernels have no XLA backend (importing may work elsewhere; calling not):
# CUDA-only ones and the above. See detective.lint.cuda_only.
CUDA_PACKAGES = ("flash_attn", "flash_attn_2_cuda", "flash_attn_interface", "mamba_ssm",
                 "causal_conv1d", "selective_scan_cuda", "deep_ep", "transformer_engine",
                 "grouped_gemm", "megablocks", "cupy", "cupyx", "pynvrtc", "pycuda", *CPU_CUDA_PACKAGES)
# Of those, the ones that install and import only with CUDA: a file importing one at module
# level cannot be imported on an XLA host (see detective.lint.importable).
IMPORT_NEEDS_CUDA = tuple(p for p in CUDA_PACKAGES if p not in CPU_CUDA_PACKAGES)
