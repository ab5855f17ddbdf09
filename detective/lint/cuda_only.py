"""Functions that cannot run on an XLA host: every path through them needs CUDA or a
kernel package with no XLA backend.

A function needs CUDA when each way through its body calls something that only works
with a CUDA device, or only on CPU and CUDA tensors: a kernel package with no XLA backend
(``flash_attn``, ``mamba_ssm``, flashlight/wav2letter's ASG and CTC criteria...) or an
attribute of its class built by one (``self.asg = ASGLoss(...)`` in any method, then
``self.asg.forward(...)``), ``.cuda()``, CUDA streams and events, or (within the file)
another function that needs CUDA. A call under ``if`` counts only when both sides make
one; a loop body, a ``try`` body or code after a conditional ``return`` does not (it may
not run). Such functions are tagged ``needs-cuda``; a finding reached only through them
(see :meth:`detective.lint.callgraph.Project.cuda_only_via`) is real under
``torch.compile`` but never on an XLA host, and is reported as ``info``.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.model import NEEDS_CUDA
from detective.lint.walker import syntax_children

# Packages whose kernels have no XLA backend (importing may work elsewhere; calling not):
# CUDA-only ones, and flashlight/wav2letter, whose criteria run on CPU or CUDA memory
# (they read data_ptr).
CUDA_PACKAGES = ("flash_attn", "flash_attn_2_cuda", "flash_attn_interface", "mamba_ssm",
                 "causal_conv1d", "selective_scan_cuda", "flashlight", "wav2letter")
CUDA_CALLS = frozenset({
    "torch.cuda.synchronize", "torch.cuda.current_stream", "torch.cuda.default_stream",
    "torch.cuda.Stream", "torch.cuda.Event", "torch.cuda.stream", "torch.cuda.current_device",
    "torch.cuda.set_device",
})
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def is_cuda_call(dotted: str | None, method: str | None) -> bool:
    if method == "cuda":
        return True
    if not dotted:
        return False
    return dotted in CUDA_CALLS or dotted.split(".", 1)[0] in CUDA_PACKAGES


class CudaScopes:
    """Per-file recorder: calls that need CUDA and in-file calls, per function; decided
    when the module is left."""

    def __init__(self, model):
        self.model = model
        self.direct: set[int] = set()  # ids of calls that need CUDA
        self.direct_in: set[str] = set()  # scopes making such calls
        self.local_calls: list[tuple[int, str, str]] = []  # (id(call), caller scope, callee qualname)
        self.functions: dict[str, cst.FunctionDef] = {}
        # self.<attr> built by such a package, per class; calls on self.<attr>, decided at
        # the end (the method that builds it may come after the one that calls it).
        self.kernel_attrs: set[tuple[str, str]] = set()
        self.attr_calls: list[tuple[int, str, str, str]] = []  # (id(call), scope, class, attr)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions[self.model.scope.qualname] = node  # the model entered it already

    def visit_Assign(self, node: cst.Assign) -> None:
        value, class_name = node.value, self.model.scope.class_name
        if class_name and isinstance(value, cst.Call) and is_cuda_call(self.model.resolve(value.func), None):
            for target in node.targets:
                attr = _self_attr(target.target)
                if attr:
                    self.kernel_attrs.add((class_name, attr))

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if is_cuda_call(model.resolve(func), method):
            self.direct.add(id(node))
            self.direct_in.add(model.scope.qualname)
            return
        target = model.call_target(func)
        scope = model.scope
        if target and target.startswith("self.") and scope.class_name:
            # self.asg(...), self.asg.forward(...): a kernel attribute, if the class builds one
            self.attr_calls.append((id(node), scope.qualname, scope.class_name, target.split(".")[1]))
        if target and target.startswith("self.") and target.count(".") == 1 and scope.class_name:
            self.local_calls.append((id(node), scope.qualname, f"{scope.class_name}.{target[5:]}"))
        elif target and target.startswith("local:") and "." not in target:
            self.local_calls.append((id(node), scope.qualname, target[6:]))

    def leave_Module(self, node: cst.Module) -> None:
        for call, caller, class_name, attr in self.attr_calls:
            if (class_name, attr) in self.kernel_attrs:
                self.direct.add(call)
                self.direct_in.add(caller)
        if not self.direct:
            return
        scopes = self.model.scopes
        needs: set[str] = set()
        hits, callers = set(self.direct), set(self.direct_in)
        while callers:  # a function that must call one that needs CUDA needs it too
            found = {q for q in callers - needs if q in self.functions
                     and _must_run(_statements(self.functions[q].body), hits)}
            needs |= found
            calls = [(call, caller) for call, caller, callee in self.local_calls if callee in found]
            hits.update(call for call, _ in calls)
            callers = {caller for _, caller in calls} - needs
        for qualname in needs:
            scopes[qualname].tags.append(NEEDS_CUDA)


def _self_attr(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def _statements(body) -> tuple:
    return body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


def _contains(node: cst.CSTNode, ids: set[int]) -> bool:
    if id(node) in ids:
        return True
    return any(_contains(child, ids) for child in syntax_children(node) if not isinstance(child, _NESTED))


def _exits(node: cst.CSTNode) -> bool:
    """Could this statement leave the block early (return, break, continue)? A ``raise`` is
    an error path, not a way around the call."""
    if isinstance(node, (cst.Return, cst.Break, cst.Continue)):
        return True
    return any(_exits(child) for child in syntax_children(node) if not isinstance(child, _NESTED))


def _must_run(statements, hits: set[int]) -> bool:
    """Does every way through ``statements`` make one of the calls in ``hits``?"""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            if _contains(statement, hits):
                return True
        elif isinstance(statement, cst.If):
            if _contains(statement.test, hits):
                return True
            orelse = statement.orelse
            if orelse is not None and _must_run(_statements(statement.body), hits) and _must_run(
                    (orelse,) if isinstance(orelse, cst.If) else _statements(orelse.body), hits):
                return True
        elif isinstance(statement, cst.With):
            if any(_contains(item, hits) for item in statement.items) \
                    or _must_run(_statements(statement.body), hits):
                return True
        elif isinstance(statement, cst.For):
            if _contains(statement.iter, hits):
                return True
        elif isinstance(statement, cst.While):
            if _contains(statement.test, hits):
                return True
        if _exits(statement):
            return False
    return False
