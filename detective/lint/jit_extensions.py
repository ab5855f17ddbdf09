"""CUDA kernels built at import time with ``torch.utils.cpp_extension.load``.

Research code compiles its kernels on the fly: ``wkv_cuda = load(name="wkv",
sources=["cuda/wkv_op.cpp", "cuda/wkv_cuda.cu"])`` then ``wkv_cuda.forward(...)``
(RWKV-v4), or ``load(name="rwkv7_cmix", sources=[...".cu"], is_python_module=False)`` then
``torch.ops.rwkv7_cmix.forward(...)`` (RWKV-v7), or ``load_inline(..., cuda_sources=...)``.
A build with a ``.cu`` source (or ``cuda_sources``) needs nvcc and a CUDA device: the calls
into it need CUDA like a kernel package's (see :mod:`detective.lint.cuda_only`). A build
from C++ sources alone runs on the CPU, and on XLA tensors fails like any CPU kernel, but it
is not recorded here (a CPU host can run it).

Per file: the names bound to such a build, the ``torch.ops`` namespaces it registers, and
names bound to those namespaces (``OP = torch.ops.rwkv7_clampw``, which may come before the
``load``). Calls are decided when the module is left.
"""

from __future__ import annotations

import libcst as cst

LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})


class JitExtensions:
    def __init__(self):
        self.modules: set[str] = set()  # names bound to a CUDA build
        self.namespaces: set[str] = set()  # torch.ops namespaces a CUDA build registers
        self.aliases: dict[str, str] = {}  # OP = torch.ops.ns -> "OP": "ns"
        self.calls: list[tuple[int, str, str, str]] = []  # (id(call), scope, kind, name)

    def note_assign(self, node: cst.Assign, resolve) -> None:
        value = node.value
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
        loader = resolve(value.func) if isinstance(value, cst.Call) else None
        if loader in LOADERS:
            if cuda_build(value, loader):
                self.modules.update(names)
            return
        dotted = resolve(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if dotted and dotted.startswith("torch.ops.") and dotted.count(".") == 2:
            for name in names:
                self.aliases[name] = dotted.split(".")[2]

    def note_call(self, node: cst.Call, dotted: str | None, scope: str) -> None:
        """Every call: a build (its namespace), or a call that may go into one."""
        if dotted in LOADERS:
            namespace = _literal_name(node)
            if namespace and cuda_build(node, dotted):
                self.namespaces.add(namespace)
            return
        if not dotted or "." not in dotted:
            return
        parts = dotted.split(".")
        if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
            self.calls.append((id(node), scope, "ns", parts[2]))
        elif len(parts) >= 2:
            self.calls.append((id(node), scope, "name", parts[0]))

    def kernel_calls(self) -> list[tuple[int, str]]:
        """(id(call), scope) of the calls into a CUDA build of this file."""
        found = []
        for call, scope, kind, name in self.calls:
            if (kind == "ns" and name in self.namespaces) or (kind == "name" and (
                    name in self.modules or self.aliases.get(name, "") in self.namespaces)):
                found.append((call, scope))
        return found


def cuda_build(call: cst.Call, loader: str) -> bool:
    """Does this ``load(name, sources)``/``load_inline(name, cpp_sources, cuda_sources)``
    compile CUDA code?"""
    inline = loader.endswith("load_inline")
    for index, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        if inline and (keyword == "cuda_sources" or (keyword is None and index == 2)):
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
        if not inline and (keyword == "sources" or (keyword is None and index == 1)):
            return _names_cuda_file(arg.value)
    return False


def _names_cuda_file(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.List, cst.Tuple)):
        return any(_names_cuda_file(e.value) for e in value.elements)
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        return isinstance(text, str) and text.endswith((".cu", ".cuh"))
    if isinstance(value, cst.FormattedString) and value.parts \
            and isinstance(value.parts[-1], cst.FormattedStringText):
        return value.parts[-1].value.endswith((".cu", ".cuh"))
    if isinstance(value, cst.BinaryOperation):  # os.path.join(...) + ".cu", dir + "/k.cu"
        return _names_cuda_file(value.right)
    if isinstance(value, cst.Call) and value.args:  # os.path.join(d, "wkv.cu")
        return _names_cuda_file(value.args[-1].value)
    return False


def _literal_name(call: cst.Call) -> str | None:
    for arg in call.args:
        if (arg.keyword is not None and arg.keyword.value == "name") or (arg.keyword is None and arg is call.args[0]):
            value = arg.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                return value.evaluated_value
            return None
    return None
