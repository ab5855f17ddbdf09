"""RC105 flags-after-import: XLA/PJRT runtime flags set after torch_xla is imported."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint import tensors as T
from detective.lint.rule import Invalid, Rule, Valid
from detective.lint.syntax import dotted_name


# Read by torch_xla's own import (torch_xla/__init__.py): too late after it.
READ_AT_IMPORT = frozenset({
    "XLA_FLAGS", "LIBTPU_INIT_ARGS", "PT_XLA_DEBUG", "TPU_LIBRARY_PATH", "TPU_MEGACORE",
    "XLA_REGISTER_INSTALLED_PLUGINS", "XLA_USE_EAGER_DEBUG_MODE",
})
# Read again at every use: XLA_STABLEHLO_COMPILE at each compile (PJRT client),
# XLA_AUTO_SPMD_MESH at each graph hash (pytorch/xla's test_xla_auto_sharding asserts a change
# takes effect), XLA_DISABLE_FUNCTIONALIZATION at each tensor wrap and view op (getenv in
# torch_util.cpp MaybeWrapTensorToFunctional, aten_xla_type.cpp, tensor_methods.cpp; only the
# FSDP module keeps the value it saw at its own import), the others by torch_xla's Python
# code at each call (dynamo bridge, debug file, all_reduce).
READ_PER_USE = frozenset({
    "XLA_STABLEHLO_COMPILE", "XLA_AUTO_SPMD_MESH", "XLA_DYNAMO_INPUT_SHARDING_CHECK_THRESHOLD",
    "PT_XLA_DEBUG_FILE", "XLA_ALWAYS_ALLREDUCE", "XLA_DISABLE_FUNCTIONALIZATION",
})


# Calls that start a child process. A new interpreter (subprocess) or a `spawn`/`forkserver`
# child imports torch_xla itself, after the parent's write: the flag takes effect there.
SUBPROCESS_STARTS = frozenset(f"subprocess.{name}" for name in (
    "run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"))
# -> position of start_method when given positionally (-1: keyword only). xmp.spawn passes
# start_method (default "spawn") to torch.multiprocessing.get_context for its
# ProcessPoolExecutor (torch_xla 2.9, _internal/pjrt.py run_multiprocess).
SPAWNS = {
    "torch_xla.distributed.xla_multiprocessing.spawn": 5,
    "torch.multiprocessing.spawn": 5,
    "torch.multiprocessing.start_processes": 5,
}
PROCESS_CLASSES = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process",
                             "multiprocessing.context.Process"})
GET_CONTEXT = frozenset({"multiprocessing.get_context", "torch.multiprocessing.get_context"})
SET_START_METHOD = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})
SET_UPS = frozenset({"setUp", "setUpClass"})


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

    A write that is for a child process is not flagged: the same function (or a unittest
    `setUp`/`setUpClass` whose class's tests start it) then starts a new interpreter
    (`subprocess.run`/`Popen`/...) or a `spawn`/`forkserver` child (`xmp.spawn` and
    `torch.multiprocessing.spawn`, which use `spawn` unless given `start_method="fork"`:
    torch_xla 2.9's `xmp.spawn` hands the method to `torch.multiprocessing.get_context` for
    its process pool; `get_context("spawn").Process(...)`; `multiprocessing.Process` after
    `set_start_method("spawn")`; a `.Process` on a context object the file does not show
    being made). That child imports torch_xla after the write, so the flag takes effect
    there. A forked child (`start_method="fork"`, `get_context("fork")`, a plain
    `multiprocessing.Process` on Linux) inherits the parent's torch_xla import: still flagged.

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
os.environ["XLA_DISABLE_FUNCTIONALIZATION"] = "0"  # read at every tensor wrap
"""
        ),
        Valid(
            """
import multiprocessing
import os
import unittest
import torch_xla

context = multiprocessing.get_context("spawn")

class ProfilerTest(unittest.TestCase):
    def setUp(self):
        # For the training child the test starts: it imports torch_xla after this.
        os.environ["PT_XLA_DEBUG"] = "1"

    def test_trace(self):
        p = context.Process(target=train_worker)
        p.start()
        p.join()
"""
        ),
        Valid(
            """
import os
import subprocess
import torch_xla.distributed.xla_multiprocessing as xmp

def launch(script):
    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    subprocess.run(["python", script], check=True)

def main():
    os.environ["LIBTPU_INIT_ARGS"] = "--xla_tpu_enable_latency_hiding_scheduler=true"
    xmp.spawn(train)  # start_method="spawn": each child imports torch_xla afresh
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import os
import torch_xla.distributed.xla_multiprocessing as xmp

def main():
    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    # A forked child inherits the parent's torch_xla import: the write is still too late.
    xmp.spawn(train, start_method="fork")
""",
            line=6,
        ),
        Invalid(
            """
import multiprocessing
import os
import unittest
import torch_xla

class ProfilerTest(unittest.TestCase):
    def setUp(self):
        os.environ["PT_XLA_DEBUG"] = "1"

    def test_trace(self):
        p = multiprocessing.Process(target=train_worker)  # fork: the Linux default
        p.start()
""",
            line=9,
        ),
        Invalid(
            """
import os
import subprocess
import torch_xla

def run_twice(script):
    subprocess.run(["python", script])
    os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"  # after the child: for this process
""",
            line=8,
        ),
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
        self._pending: list[tuple[cst.CSTNode, str, str, str, int, bool]] = []
        # Fresh child processes started so far: (scope qualname, class qualname, walk order).
        self._children: list[tuple[str, str | None, int]] = []
        self._contexts: dict[str, str] = {}  # name -> start method of `name = get_context(m)`
        self._default_method = "fork"  # multiprocessing's default on Linux (Python < 3.14)
        self._order = 0

    def _imported(self, dotted: str) -> None:
        if dotted == "torch_xla" or dotted.startswith("torch_xla."):
            if len(self.context.functions) == 1:
                self._module_xla = True
            else:
                self._xla_scopes.add(self.context.scope.qualname)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._imported(dotted_name(alias.name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            self._imported(dotted_name(node.module))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._write(node)
        if (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and isinstance(node.value, cst.Call)
                and self.context.resolve(node.value.func) in GET_CONTEXT):
            self._contexts[node.targets[0].target.value] = _start_method(node.value, 0) or "default"

    def visit_Call(self, node: cst.Call) -> None:
        if len(self.context.functions) == 1 and not self._module_xla and isinstance(node.func, cst.Name):
            self._early_calls.add(node.func.value)
        self._write(node)
        dotted = self.context.resolve(node.func) or ""
        if dotted in SET_START_METHOD:
            self._default_method = _start_method(node, 0) or self._default_method
        if self._starts_fresh_child(node, dotted):
            self._order += 1
            scope = self.context.scope
            self._children.append((scope.qualname, scope.class_name, self._order))
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
            self._order += 1
            if at_module and not self._module_xla:
                continue  # torch_xla is not imported yet
            # After an import this walk has seen, or (a function's write) after the module's.
            imported = at_module or scope in self._xla_scopes
            self._pending.append((anchor, message, scope, key, self._order, imported))

    def _starts_fresh_child(self, node: cst.Call, dotted: str) -> bool:
        """A new Python process that imports torch_xla itself after this point (not a fork,
        which inherits the parent's torch_xla import and runtime)."""
        if dotted in SUBPROCESS_STARTS:
            return True  # a new interpreter
        if dotted in SPAWNS:
            return (_start_method(node, SPAWNS[dotted]) or "spawn") != "fork"
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "Process") and dotted not in PROCESS_CLASSES:
            return False
        if dotted in PROCESS_CLASSES:  # multiprocessing.Process: the platform's default method
            return self._default_method != "fork"
        receiver = func.value
        if isinstance(receiver, cst.Call) and self.context.resolve(receiver.func) in GET_CONTEXT:
            method = _start_method(receiver, 0) or self._default_method
        elif isinstance(receiver, cst.Name) and not self.context.model.is_import_alias(receiver):
            # A context object: `get_context("fork")` when the file says so, else (a context the
            # file does not show being made) one chosen to differ from the fork default.
            method = self._contexts.get(receiver.value, "spawn")
            method = self._default_method if method == "default" else method
        else:
            return False  # psutil.Process(pid) and the like: no child
        return method != "fork"

    def _for_a_child(self, scope: str, order: int) -> bool:
        """The write's function (or a unittest ``setUp``/``setUpClass`` whose class's tests do
        it) then starts a fresh child process: the flag is for the child, which imports
        torch_xla after it is set."""
        info = self.context.model.scopes.get(scope)
        set_up = info is not None and info.class_name and scope.rsplit(".", 1)[-1] in SET_UPS
        return any(child_scope == scope and child_order > order
                   or set_up and child_class == info.class_name
                   for child_scope, child_class, child_order in self._children)

    def leave_Module(self, node: cst.Module) -> None:
        for anchor, message, scope, key, order, imported in self._pending:
            if self._for_a_child(scope, order):
                continue
            if imported or (self._module_xla and scope.split(".", 1)[0] not in self._early_calls):
                self.report(anchor, message, scope=scope, subject=key)


def _start_method(call: cst.Call, position: int) -> str | None:
    """The literal start method a call names (``start_method=``/``method=`` or positional)."""
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value in ("start_method", "method")
                or arg.keyword is None and index == position and position >= 0):
            return T.literal_string(arg.value)
    return None
