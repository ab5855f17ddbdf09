"""RC105 flags-after-import: XLA/PJRT runtime flags set after torch_xla is imported."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Rule, Valid


# Read by torch_xla's own import (torch_xla/__init__.py): too late after it.
READ_AT_IMPORT = frozenset({
    "XLA_FLAGS", "LIBTPU_INIT_ARGS", "PT_XLA_DEBUG", "TPU_LIBRARY_PATH", "TPU_MEGACORE",
    "XLA_REGISTER_INSTALLED_PLUGINS", "XLA_USE_EAGER_DEBUG_MODE",
})
# Read again at every use: XLA_STABLEHLO_COMPILE at each compile (PJRT client),
# XLA_AUTO_SPMD_MESH at each graph hash (pytorch/xla's test_xla_auto_sharding asserts a change
# takes effect), the others by torch_xla's Python code at each call (dynamo bridge, debug file,
# all_reduce).
READ_PER_USE = frozenset({
    "XLA_STABLEHLO_COMPILE", "XLA_AUTO_SPMD_MESH", "XLA_DYNAMO_INPUT_SHARDING_CHECK_THRESHOLD",
    "PT_XLA_DEBUG_FILE", "XLA_ALWAYS_ALLREDUCE",
})


class FlagsAfterImport(Rule):
    code = "RC105"
    name = "flags-after-import"
    summary = "os.environ[\"XLA_*\"/\"PJRT_*\"/\"PT_XLA_*\"/\"LIBTPU_*\"] set after torch_xla is imported"
    applies_to = "xla-code"

    @classmethod
    def cross_check(cls, candidate, summary, project) -> bool:
        # torch_xla's own set-up functions (initialize_cache, the Neuron PJRT set-up) set
        # these before the runtime reads them: that is how the library is meant to work.
        return not (summary.module == "torch_xla" or summary.module.startswith("torch_xla."))
    doc = """
    ## What it does
    Flags writes of runtime flags (`XLA_*`, `PJRT_*`, `PT_XLA_*`, `LIBTPU_*`) through
    `os.environ[...] = ...`, `os.environ.setdefault`, `os.environ.update` or `os.putenv`
    that run after `torch_xla` is imported: at module level below the import, or in a
    function of a module that imports torch_xla (unless the module calls that function
    at module level before its torch_xla import). Flags read at import (`XLA_FLAGS`,
    `LIBTPU_INIT_ARGS`, `PT_XLA_DEBUG`, ...) are flagged after the import; flags read when
    the runtime starts (`PJRT_DEVICE`, `XLA_IR_DEBUG`, ...) only once a torch_xla call has
    run before the write; flags torch_xla reads at every use (`XLA_STABLEHLO_COMPILE`,
    `PT_XLA_DEBUG_FILE`, ...) never.

    ## Why is this bad?
    torch_xla and the PJRT runtime read these variables once, at import or at the first
    compile. A later write is silently ignored, so the run uses other flags than the
    code says, and the compilation environment (which is mixed into every graph hash)
    differs from the one you meant: persistent-cache entries written under the intended
    flags never match.

    ## Example
    ```python
    import torch_xla
    import os

    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    ```

    ## Use instead
    Set them before the first torch_xla import (or in the launching environment):
    ```python
    import os

    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    import torch_xla
    ```
    """

    VALID = [
        Valid(
            """
import os

os.environ["PJRT_DEVICE"] = "TPU"
os.environ.setdefault("XLA_FLAGS", "--xla_dump_to=/tmp/dump")

import torch_xla
"""
        ),
        Valid(
            """
import os

def configure():
    os.environ["PJRT_DEVICE"] = "TPU"

configure()

import torch_xla
"""
        ),
        Valid(
            """
import os
import torch_xla
import torch_xla.runtime as xr

# After the import but before the runtime starts: start-up flags still take effect.
os.environ["PJRT_DEVICE"] = "CPU"
os.environ["XLA_IR_DEBUG"] = "1"
print(xr.global_runtime_device_count())
os.environ["XLA_STABLEHLO_COMPILE"] = "1"  # read at every compile
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import os
import torch_xla

os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
""",
            line=5,
        ),
        Invalid(
            """
import os
import torch_xla.core.xla_model as xm

def main():
    device = xm.xla_device()  # the runtime has started: PJRT_DEVICE is read
    os.environ.update({"PJRT_DEVICE": "TPU"})

if __name__ == "__main__":
    main()
""",
            line=7,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._module_runtime = False  # a module-level torch_xla call has run (the runtime may be up)
        self._runtime_scopes: set[str] = set()  # functions that made a torch_xla call so far
        self._module_xla = False  # a module-level torch_xla import has run
        self._early_calls: set[str] = set()  # module-level calls before that import
        self._xla_scopes: set[str] = set()  # functions that imported torch_xla themselves
        self._pending: list[tuple[cst.CSTNode, str, str, str]] = []

    def _imported(self, dotted: str) -> None:
        if dotted == "torch_xla" or dotted.startswith("torch_xla."):
            if len(self.context.functions) == 1:
                self._module_xla = True
            else:
                self._xla_scopes.add(self.context.scope.qualname)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._imported(_dotted(alias.name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            self._imported(_dotted(node.module))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._write(node)

    def visit_Call(self, node: cst.Call) -> None:
        if len(self.context.functions) == 1 and not self._module_xla and isinstance(node.func, cst.Name):
            self._early_calls.add(node.func.value)
        self._write(node)
        dotted = self.context.resolve(node.func) or ""
        if dotted.startswith("torch_xla.") or P.xla_device_expr(node, self.context, set()):
            if len(self.context.functions) == 1:
                self._module_runtime = True
            else:
                self._runtime_scopes.add(self.context.scope.qualname)

    def _write(self, node) -> None:
        for key, _value, anchor in P.env_writes(node, self.context):
            if not P.is_runtime_flag(key) or key in READ_PER_USE:
                continue
            scope = self.context.scope.qualname
            at_module = len(self.context.functions) == 1
            if key not in READ_AT_IMPORT and not (
                    self._module_runtime or (not at_module and scope in self._runtime_scopes)):
                continue  # read when the runtime starts, and nothing has started it yet
            message = (f"`{key}` is set after torch_xla is imported: flags read at import or at runtime "
                       "start-up no longer take effect (and the compile environment differs from the one "
                       "the code states); set it before the first torch_xla import")
            if len(self.context.functions) == 1:
                if self._module_xla:
                    self.report(anchor, message, subject=key)
            elif scope in self._xla_scopes:
                self.report(anchor, message, subject=key)
            else:
                self._pending.append((anchor, message, scope, key))

    def leave_Module(self, node: cst.Module) -> None:
        if not self._module_xla:
            return
        for anchor, message, scope, key in self._pending:
            if scope.split(".", 1)[0] not in self._early_calls:
                self.report(anchor, message, scope=scope, subject=key)


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""
