"""RC110 cache-setup: a persistent compilation cache that is set up too late, or shared by every writer."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Valid
from detective.rules.rc106_spmd_after_tensors import SpmdAfterTensors

INITIALIZE_CACHE = frozenset({"torch_xla.runtime.initialize_cache"})
# What compiles a program (and so sets torch_xla's computation cache up): a sync, or a read
# of a value. Creating XLA tensors or moving a model does not (checked on torch_xla 2.9:
# _xla_computation_cache_is_initialized() stays False until the first sync).
COMPILING_CALLS = frozenset({
    "torch_xla.sync", "torch_xla.torch_xla.sync", "torch_xla.core.xla_model.mark_step",
    "torch_xla.core.xla_model.wait_device_ops",
})
VALUE_READS = frozenset({"item", "tolist", "cpu", "numpy"})
COMPILES = "compiles-xla"

# Calls that run a function in several processes: what they are given is multi-process code.
LAUNCHERS = frozenset({
    "torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch", "torch_xla.torch_xla.launch",
    "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes", "multiprocessing.Process",
})
POOL_MAPS = frozenset({"map", "starmap", "imap", "imap_unordered", "map_async", "starmap_async"})
# Calls that say the script itself runs as one of several processes (torchrun, xmp children).
MULTI_PROCESS = (P.DISTRIBUTED_CALLS - LAUNCHERS) | frozenset(
    {"torch_xla.runtime.process_index", "torch_xla.runtime.host_index"}
)
# a path built from any of these names is one path per process or host
PER_PROCESS_WORDS = ("rank", "ordinal", "host", "process", "node", "worker", "index", "pid")


class CacheSetup(SpmdAfterTensors):
    """Reuses RC106's walk: what creates XLA tensors in a scope, and helpers that do (across files)."""

    code = "RC110"
    name = "cache-setup"
    summary = ("xr.initialize_cache() after the first compile (a sync or a value read), or one writable "
               "cache path for every process of a multi-process script")
    applies_to = "xla-code"
    doc = """
    ## What it does
    Flags `torch_xla.runtime.initialize_cache()` when, earlier in the same function (or
    module body), a program was compiled (`torch_xla.sync()`, `xm.mark_step()`, a value read
    such as `.item()`), or a function was called that does so (in any file of the project).
    Creating XLA tensors or moving a model to the device compiles nothing and is fine. In a script that starts several processes
    (`xmp.spawn`, `torch_xla.launch`, `multiprocessing`, `torch.distributed`), it also flags
    a cache opened for writing (`readonly` left out or `False`) at a path that names no
    rank, ordinal or host: at module level, in a function handed to a launcher (or one it
    calls), or anywhere in a script that is itself one of several processes
    (`init_process_group`, `xr.process_index()`). A single-process function that another
    test runs in a fresh process pool is not multi-process code.

    ## Why is this bad?
    torch_xla sets its compilation cache up at the first compile; a later
    `initialize_cache` fails its assertion ("Computation cache has already been
    initialized") and nothing is ever cached: every restart pays the whole compile bill.
    With many writers on one directory (a shared mount across hosts), processes race to
    write and erase the same files. The safe patterns are one path per process or host, or
    one writer that warms the cache while every other process opens it read-only.
    `detective cache-check` proves whether a restart really reuses the cache.

    ## Example
    ```python
    model = build_model().to(torch_xla.device())
    warm_up(model)            # runs a step and syncs: the first compile
    xr.initialize_cache("/mnt/shared/xla_cache")
    ```

    ## Use instead
    Set the cache up first, one path per host (or `readonly=True` on all but one writer):
    ```python
    xr.initialize_cache(f"/mnt/shared/xla_cache/host{xr.host_index()}")
    model = build_model().to(torch_xla.device())
    ```
    """

    VALID = [
        Valid(
            """
import torch
import torch_xla
import torch_xla.runtime as xr

xr.initialize_cache("/tmp/xla_cache")
model = torch.nn.Linear(4, 4).to(torch_xla.device())
"""
        ),
        Valid(
            """
import torch
import torch_xla
import torch_xla.runtime as xr

model = torch.nn.Linear(4, 4).to(torch_xla.device())  # moving a model compiles nothing
xr.initialize_cache("/tmp/xla_cache")
torch_xla.sync()
"""
        ),
        Valid(
            """
import torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.xla_multiprocessing as xmp

def worker(index):
    xr.initialize_cache(f"/mnt/cache/rank{xr.global_ordinal()}")
    device = torch_xla.device()

if __name__ == "__main__":
    xmp.spawn(worker)
"""
        ),
        Valid(
            """
import torch_xla
import torch_xla.runtime as xr

def worker(index):
    xr.initialize_cache("/mnt/cache", readonly=xr.global_ordinal() != 0)
    device = torch_xla.device()

if __name__ == "__main__":
    torch_xla.launch(worker)
"""
        ),
        Valid(
            """
import os
from concurrent.futures import ProcessPoolExecutor
import torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_test(rank, tmpdir):
    xr.initialize_cache(os.path.join(tmpdir, str(rank)))  # one path per rank

def _single_test(tmpdir):
    xr.initialize_cache(tmpdir)  # one process, run in a fresh pool: its own writer
    torch_xla.device()

def _spawn(fn, args):
    with ProcessPoolExecutor() as pool:
        pool.submit(fn, *args).result()

def run(tmpdir):
    xmp.spawn(_mp_test, args=(tmpdir,))
    _spawn(_single_test, (tmpdir,))
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch_xla
import torch_xla.runtime as xr

device = torch_xla.device()
weights = torch.zeros(8, device=device)
print(weights.sum().item())  # the first compile
xr.initialize_cache("/tmp/xla_cache")
""",
            line=9,
        ),
        Invalid(
            """
import torch
import torch_xla
import torch_xla.runtime as xr

def warm_up():
    model = torch.nn.Linear(4, 4).to(torch_xla.device())
    model(torch.ones(2, 4, device=torch_xla.device()))
    torch_xla.sync()
    return model

def main():
    model = warm_up()
    xr.initialize_cache("/tmp/xla_cache")
""",
            line=14,
        ),
        Invalid(
            """
import torch_xla
from torch_xla.runtime import initialize_cache
import torch_xla.distributed.xla_multiprocessing as xmp

CACHE = "/mnt/shared/xla_cache"

def worker(index):
    initialize_cache(CACHE)
    device = torch_xla.device()

if __name__ == "__main__":
    xmp.spawn(worker)
""",
            line=9,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._writers: list[tuple[cst.Call, str]] = []  # initialize_cache calls opened for writing
        self._multi_process = False  # the script itself is one of several processes
        self._launched: set[str] = set()  # functions handed to a multi-process launcher
        self._compiled: set[str] = set()  # scopes that have compiled a program so far
        self._calls: dict[str, set[str]] = {}  # top-level function -> functions it calls by name

    def _note_launch(self, node: cst.Call, dotted: str | None) -> None:
        context = self.context
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        names = [a.value.value for a in node.args if isinstance(a.value, cst.Name)]
        if dotted in LAUNCHERS or method in POOL_MAPS or method == "Process":  # ctx.Process(target=...)
            positional = [a.value for a in node.args if a.keyword is None]
            target = P.keyword(node, "target")
            fn = target.value if target is not None else (positional[0] if positional else None)
            if isinstance(fn, cst.Name):
                self._launched.add(fn.value)
        elif any(context.resolve(a.value) in LAUNCHERS for a in node.args):
            self._launched.update(names)  # run_test(xmp.spawn, worker): worker goes to the launcher
        if isinstance(node.func, cst.Name):
            self._calls.setdefault(context.scope.qualname.split(".", 1)[0], set()).add(node.func.value)

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        dotted = context.resolve(node.func)
        self._note_launch(node, dotted)
        if dotted in MULTI_PROCESS:
            self._multi_process = True
        if dotted in P.USE_SPMD:
            return  # RC106's own subject
        if dotted not in INITIALIZE_CACHE:
            super().visit_Call(node)
            method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
            if dotted in COMPILING_CALLS or (method in VALUE_READS and not node.args):
                self._compiled.add(context.scope.qualname)
                if COMPILES not in context.scope.tags:
                    context.scope.tags.append(COMPILES)
            return
        _, _, calls = self._scope_state()
        if context.scope.qualname in self._compiled:
            self.report(node, "`initialize_cache()` after a program was compiled earlier in this scope (a sync "
                        "or a value read): torch_xla refuses to set the cache up once it has compiled, and "
                        "nothing is cached; call it before the first sync", subject="initialize_cache()")
        elif calls:
            self.report(node, "`initialize_cache()` after a call that compiles (syncs or reads a value): "
                        "torch_xla refuses to set the cache up once it has compiled; call it before the "
                        "first sync", after_calls=tuple(calls), subject="initialize_cache()")
        if _writes(node) and not _per_process(node):
            self._writers.append((node, context.scope.qualname))

    @classmethod
    def cross_check(cls, candidate, summary, project) -> bool:
        return P.calls_reach(candidate, summary, project, COMPILES)

    def leave_Module(self, original_node: cst.Module) -> None:
        # Functions run by a launcher, and what they call in this file.
        launched, stack = set(), list(self._launched)
        while stack:
            name = stack.pop()
            if name not in launched:
                launched.add(name)
                stack.extend(self._calls.get(name, ()))
        for node, scope in self._writers:
            top = scope.split(".", 1)[0]
            # A module-level writer runs again in every spawned child that imports the script.
            if not (self._multi_process or top in launched or (top == "<module>" and self._launched)):
                continue
            self.report(node, "every process of this multi-process script writes the same cache path: give "
                        "each rank or host its own path, or open it with readonly=True on all but one writer",
                        scope, subject="initialize_cache()")


def _writes(call: cst.Call) -> bool:
    """readonly left out or a literal False: this process writes."""
    readonly = P.keyword(call, "readonly")
    if readonly is None:
        positional = [a for a in call.args if a.keyword is None]
        if len(positional) < 2:
            return True
        value = positional[1].value
    else:
        value = readonly.value
    return isinstance(value, cst.Name) and value.value == "False"


def _per_process(call: cst.Call) -> bool:
    """The path expression mentions a rank, ordinal, host or process (names, attributes, text)."""
    args = [a for a in call.args if a.keyword is None] or [a for a in call.args if a.keyword.value == "path"]
    if not args:
        return True  # cannot tell: stay quiet

    words: list[str] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            words.append(node.value)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            words.append(node.value)

        def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
            words.append(node.value)

    args[0].value.visit(Collect())
    return any(word in text.lower() for text in words for word in PER_PROCESS_WORDS)
