"""Functions that cannot run on an XLA host: every path through them needs CUDA or a
kernel package with no XLA backend.

A function needs CUDA when each way through its body calls something that only works
with a CUDA device, or only on CPU and CUDA tensors: a kernel package with no XLA backend
(``flash_attn``, ``mamba_ssm``, flashlight/wav2letter's ASG and CTC criteria...) or an
attribute of its class built by one (``self.asg = ASGLoss(...)`` in any method, then
``self.asg.forward(...)``), ``.cuda()`` or a tensor made on a device named ``"cuda"``
(``torch.zeros(n, device="cuda")``, ``.to("cuda:0")``), CUDA streams and events, a launch of a Triton
kernel of the file (``_bwd_kernel[grid](...)``; Triton has GPU backends only), or (within the file)
another function that needs CUDA. A call under ``if`` counts only when both sides make
one, except a ``.cuda()`` under a test that is not about the device (``if scale is None:``,
lazy set-up): the program takes that side sooner or later, and on a TPU host it fails there.
A loop body or a ``try`` body does not count (it may not run); code after a conditional
``return`` counts only when the returning side made the call too, and a way that raises is
an error path, not a way around the call. A function chosen from the module's own by a name prefix
(``globals()[f"emulate_int8_{method}"]``, then called) needs CUDA when all the candidates do.
A module the project's ``setup.py`` builds (``CppExtension("fairseq.libbase", ...)``,
``CUDAExtension``, ``Extension``) counts as such a package once the files are joined, where
a call hands it a tensor (``alignment_train(p_choose, alpha, eps)`` writes into CPU or CUDA
memory; ``libnat.suggested_ed2_path(in_list, out_list, pad)`` takes Python lists and runs
anywhere: ``Scope.tensor_calls``).
Such functions are tagged ``needs-cuda``; each function also records the imported functions
it calls on every way through it (``Scope.must_calls``), so that the cross-file pass
(:meth:`detective.lint.callgraph.Project.needs_cuda`) carries the tag to their callers in
other files. A finding reached only through them
(see :meth:`detective.lint.cuda_reach.CudaReach.cuda_only_via`) is real under
``torch.compile`` but never on an XLA host, and is reported as ``info``.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.api_names import CUDA_PACKAGES
from detective.lint.jit_extensions import JitExtensions
from detective.lint.model import EXTENSION_FACT, NEEDS_CUDA, NEEDS_CUDA_DEVICE
from detective.lint.once_branches import memo_fill
from detective.lint.syntax import block_statements
from detective.lint.walker import syntax_children
from detective.lint.xla_branches import lazy_init_test

# Decorators that make a Triton kernel: launching one (`kernel[grid](...)`) needs a GPU.
TRITON_KERNELS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
CUDA_CALLS = frozenset({
    "torch.cuda.synchronize", "torch.cuda.current_stream", "torch.cuda.default_stream",
    "torch.cuda.Stream", "torch.cuda.Event", "torch.cuda.stream", "torch.cuda.current_device",
    "torch.cuda.set_device",
})
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# A test naming one of these chooses a device (`if torch.cuda.is_available()`, `if args.cpu`,
# `if x.device.type == "cuda"`): its other side is how the code runs elsewhere.
_DEVICE_WORDS = ("cuda", "gpu", "cpu", "device", "xla", "tpu", "mps", "available", "accelerator")
# Calls into these never reach a project function that needs CUDA: not recorded as must-calls.
_LIBRARY_ROOTS = frozenset({"torch", "numpy", "math", "os", "sys", "logging", "typing", "builtins",
                            "collections", "itertools", "functools", "re", "json", "time"})


def is_cuda_call(dotted: str | None, method: str | None, own_package: str = "") -> bool:
    """``own_package``: the top package of the calling file (state-spaces/mamba is mamba_ssm:
    its calls into its own modules are no kernel calls; what those modules do decides)."""
    if method == "cuda":
        return True
    if not dotted:
        return False
    head = dotted.split(".", 1)[0]
    return dotted in CUDA_CALLS or (head in CUDA_PACKAGES and head != own_package)


# Tensor methods that take a device: `.to("cuda")`, `x.new_zeros(n, device="cuda")`.
_DEVICE_METHODS = frozenset({"to", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})


def _made_on_cuda(call: cst.Call, dotted: str | None, method: str | None, resolve) -> bool:
    """``torch.zeros(n, device="cuda")``, ``x.to("cuda:0")``, ``torch.device("cuda")`` passed
    as the device: a tensor put on CUDA by name, which needs a CUDA device like ``.cuda()``."""
    if not ((dotted or "").startswith("torch.") or method in _DEVICE_METHODS):
        return False
    values = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"]
    if method == "to" and call.args and call.args[0].keyword is None:
        values.append(call.args[0].value)
    return any(_names_cuda(v, resolve) for v in values)


def _names_cuda(value: cst.BaseExpression, resolve) -> bool:
    if isinstance(value, cst.Call) and resolve(value.func) == "torch.device" and value.args:
        value = value.args[0].value
    text = T.literal_string(value)
    return text is not None and (text == "cuda" or text.startswith("cuda:"))


class CudaScopes:
    """Per-file recorder: calls that need CUDA and in-file calls, per function; decided
    when the module is left."""

    def __init__(self, model):
        self.model = model
        self.own_package = model.module_name.split(".", 1)[0]
        self.direct: set[int] = set()  # ids of calls that need CUDA
        self.moves: set[int] = set()  # ids of .cuda() calls: they count under any test but a device one
        self.targets: dict[int, str] = {}  # id(call) -> an imported function it calls
        # ids of the open statements, and of those holding a call in targets: the walk for
        # must_calls looks into those only
        self._open: list[int] = []
        self._holding: set[int] = set()
        self._exiting: set[int] = set()  # open when a return, break or continue was seen
        self._tensor_targets: set[str] = set()  # targets some call hands a tensor
        # q = globals()[f"prefix{...}"]: (scope, q) -> prefix; then (id(call), scope, prefix)
        self._picked: dict[tuple[str, str], str] = {}
        self.picked_calls: list[tuple[int, str, str]] = []
        self.direct_in: set[str] = set()  # scopes making such calls
        self.device_direct: set[int] = set()  # of those, torch.cuda.* calls and .cuda() moves
        self.device_direct_in: set[str] = set()
        self.local_calls: list[tuple[int, str, str]] = []  # (id(call), caller scope, callee qualname)
        self._local_builds: dict[int, str] = {}  # id(call) -> a name of this file it calls
        self.functions: dict[str, cst.FunctionDef] = {}
        # self.<attr> built by such a package, per class; calls on self.<attr>, decided at
        # the end (the method that builds it may come after the one that calls it).
        self.kernel_attrs: set[tuple[str, str]] = set()
        self.attr_calls: list[tuple[int, str, str, str]] = []  # (id(call), scope, class, attr)
        self._launches: list[tuple[int, str, str]] = []  # (id(call), scope, name) of name[grid](...)
        self.jit = JitExtensions()  # kernels built with torch.utils.cpp_extension.load

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions[self.model.scope.qualname] = node  # the model entered it already

    def _enter(self, node: cst.CSTNode) -> None:
        self._open.append(id(node))

    def _leave(self, node: cst.CSTNode) -> None:
        self._open.pop()

    def _exit(self, node: cst.CSTNode) -> None:
        self._exiting.update(self._open)

    # every kind of statement, so that a return anywhere inside marks the one that holds it
    visit_SimpleStatementLine = visit_If = visit_With = visit_For = visit_While = _enter
    visit_Try = visit_TryStar = visit_Match = _enter
    leave_SimpleStatementLine = leave_If = leave_With = leave_For = leave_While = _leave
    leave_Try = leave_TryStar = leave_Match = _leave
    visit_Return = visit_Break = visit_Continue = _exit

    def visit_Assign(self, node: cst.Assign) -> None:
        self.jit.note_assign(node, self.model.resolve)
        value, class_name = node.value, self.model.scope.class_name
        prefix = _globals_prefix(value)
        if prefix and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._picked[(self.model.scope.qualname, node.targets[0].target.value)] = prefix
        if class_name and isinstance(value, cst.Call) \
                and is_cuda_call(self.model.resolve(value.func), None, self.own_package):
            for target in node.targets:
                attr = T.self_attr(target.target)
                if attr:
                    self.kernel_attrs.add((class_name, attr))

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if model.module_name.rpartition(".")[2] == "setup":
            name = _extension_name(node)
            if name:
                model.project_facts.append(EXTENSION_FACT + name)
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name):
            # _bwd_kernel[grid](...): a Triton launch if _bwd_kernel is a kernel of this file
            self._launches.append((id(node), model.scope.qualname, func.value.value))
        dotted = model.resolve(func)
        self.jit.note_call(node, dotted, model.scope.qualname)
        on_cuda = _made_on_cuda(node, dotted, method, model.resolve)
        if on_cuda or is_cuda_call(dotted, method, self.own_package):
            self.direct.add(id(node))
            self.direct_in.add(model.scope.qualname)
            if on_cuda or method == "cuda" or dotted in CUDA_CALLS:  # the device itself, not a kernel package
                self.device_direct.add(id(node))
                self.device_direct_in.add(model.scope.qualname)
            if method == "cuda":
                self.moves.add(id(node))
            return
        target = model.call_target(func)
        scope = model.scope
        if isinstance(func, cst.Name) and (scope.qualname, func.value) in self._picked:
            self.picked_calls.append((id(node), scope.qualname, self._picked[(scope.qualname, func.value)]))
        if target and not target.startswith(("self.", "local:")) and target.split(".", 1)[0] not in _LIBRARY_ROOTS:
            self.targets[id(node)] = target
            self._holding.update(self._open)
            if any(model.infer.is_tensor(arg.value) for arg in node.args):
                self._tensor_targets.add(target)
        if target and target.startswith("self.") and scope.class_name:
            # self.asg(...), self.asg.forward(...): a kernel attribute, if the class builds one
            self.attr_calls.append((id(node), scope.qualname, scope.class_name, target.split(".")[1]))
        if target and target.startswith("self.") and target.count(".") == 1 and scope.class_name:
            self.local_calls.append((id(node), scope.qualname, f"{scope.class_name}.{target[5:]}"))
        elif target and target.startswith("local:") and "." not in target:
            self.local_calls.append((id(node), scope.qualname, target[6:]))
            self._local_builds[id(node)] = target[6:]  # a class of this file, if it is one
            self._holding.update(self._open)
        elif method and (owner := self._instance_class(func.value)):
            # comp = Compiler(); comp.get_functions(), or Compiler().get_functions()
            self.local_calls.append((id(node), scope.qualname, f"{owner}.{method}"))
        elif method == "apply" and isinstance(func.value, cst.Name) and func.value.value in model.classes:
            # Fn.apply(...) of an autograd Function of this file runs Fn.forward
            self.local_calls.append((id(node), scope.qualname, f"{func.value.value}.forward"))

    def _instance_class(self, value: cst.BaseExpression) -> str | None:
        """The class of this file that ``value`` is an instance of: a call to it, or a local
        bound to one (``comp = Compiler()``)."""
        model = self.model
        if isinstance(value, cst.Call):
            built = model.call_target(value.func)
        elif isinstance(value, cst.Name) and model.functions:
            built = model.function.instances.get(value.value)
        else:
            return None
        name = built[6:] if built and built.startswith("local:") else None
        return name if name in model.classes else None

    def leave_Module(self, node: cst.Module) -> None:
        scopes = self.model.scopes
        # Cls(...) of a class of this file runs Cls.__init__, which may need CUDA through another
        # file (a component built there): the cross-file pass follows "#Cls" to it.
        self.targets.update((call, f"#{name}") for call, name in self._local_builds.items()
                            if name in self.model.classes)
        if self.targets:
            for qualname, function in self.functions.items():
                must = _must_targets(block_statements(function.body), self.targets, self._holding, self._exiting)
                if must:  # (None: it only raises)
                    scopes[qualname].must_calls = sorted(must)
                    scopes[qualname].tensor_calls = sorted(must & self._tensor_targets)
        for call, caller, class_name, attr in self.attr_calls:
            if (class_name, attr) in self.kernel_attrs:
                self.direct.add(call)
                self.direct_in.add(caller)
        for call, caller in self.jit.kernel_calls():
            self.direct.add(call)
            self.direct_in.add(caller)
        kernels = {q for q, scope in scopes.items()
                   if "." not in q and any(d in TRITON_KERNELS for d in scope.decorators)}
        for call, caller, name in self._launches:
            if name in kernels:  # Triton has GPU backends only
                self.direct.add(call)
                self.direct_in.add(caller)
        if not self.direct:
            return
        for qualname in self._needing(self.direct, self.direct_in):
            scopes[qualname].tags.append(NEEDS_CUDA)
        for qualname in self._needing(self.device_direct, self.device_direct_in):
            scopes[qualname].tags.append(NEEDS_CUDA_DEVICE)

    def _needing(self, direct: set[int], direct_in: set[str]) -> set[str]:
        """The functions that make one of the calls in ``direct`` on every way through them,
        themselves or through functions of this file that do."""
        module_functions = [q for q in self.functions if "." not in q]
        picked = [(call, caller, [q for q in module_functions if q.startswith(prefix)])
                  for call, caller, prefix in self.picked_calls]
        needs: set[str] = set()
        hits, moves, callers = set(direct), set(self.moves), set(direct_in)
        while callers:  # a function that must call one that needs CUDA needs it too
            found = {q for q in callers - needs if q in self.functions
                     and _must_run(block_statements(self.functions[q].body), hits, moves)}
            # A call is as avoidable as what its callee does: one to a function that needs
            # CUDA only through a move under a non-device test (lazy `.cuda()` set-up) counts
            # on either side of such a test too; one to a function that calls a kernel on
            # every way through (a transducer loss behind `if self.use_transducer:`) does not.
            moving = {q for q in found if moves
                      and not _must_run(block_statements(self.functions[q].body), hits, set())}
            needs |= found
            calls = [(call, caller, callee in moving or f"{callee}.__init__" in moving)
                     for call, caller, callee in self.local_calls
                     if callee in found or f"{callee}.__init__" in found]  # Cls(...) runs Cls.__init__
            calls += [(call, caller, True) for call, caller, candidates in picked
                      if candidates and set(candidates) <= needs and call not in hits]
            for call, _, move in calls:
                hits.add(call)
                if move:
                    moves.add(call)
            callers = {caller for _, caller, _ in calls} - needs
        return needs


def _contains(node: cst.CSTNode, ids: set[int]) -> bool:
    if id(node) in ids:
        return True
    return any(_contains(child, ids) for child in syntax_children(node) if not isinstance(child, _NESTED))


def _exits(node: cst.CSTNode) -> bool:
    """Could this statement leave the block early (return, break, continue)? A ``raise`` is
    an error path, not a way around the call; a nested def's ``return`` leaves only that def."""
    if isinstance(node, (cst.Return, cst.Break, cst.Continue)):
        return True
    if isinstance(node, _NESTED):
        return False
    return any(_exits(child) for child in syntax_children(node) if not isinstance(child, _NESTED))


def _must_run(statements, hits: set[int], moves: set[int]) -> bool | None:
    """Does every way through ``statements`` make one of the calls in ``hits``? A call in
    ``moves`` (``.cuda()``) counts on either side of a test that does not choose a device.
    An ``if`` that may return (``if cache is not None: return kernel_with_cache(...)``)
    counts when its side makes the call and so does the rest of the block. A way that
    raises first is an error path, not a way around the call: None when every way raises
    (falsy, so a stub that only raises needs nothing)."""
    statements = list(statements)
    for index, statement in enumerate(statements):
        if isinstance(statement, cst.SimpleStatementLine):
            if _contains(statement, hits):
                return True
            if any(isinstance(small, cst.Raise) for small in statement.body):
                return None
        elif isinstance(statement, cst.If):
            if _contains(statement.test, hits):
                return True
            orelse = statement.orelse
            rest = () if orelse is None else (orelse,) if isinstance(orelse, cst.If) else block_statements(orelse.body)
            if orelse is not None:
                both = _meet(_must_run(block_statements(statement.body), hits, moves), _must_run(rest, hits, moves))
                if both is not False:
                    return both
            if moves and not _chooses_device(statement.test) and (
                    _must_run(block_statements(statement.body), moves, moves) or _must_run(rest, moves, moves)):
                return True
            if _lazy_setup(statement) and _must_run(block_statements(statement.body), hits, moves):
                return True  # if self._ops is None: self._ops = build_kernels(): the first call takes it
            if orelse is None and _exits(statement):
                return _meet(_must_run(block_statements(statement.body), hits, moves),
                             _must_run(statements[index + 1:], hits, moves))
        elif isinstance(statement, cst.With):
            if any(_contains(item, hits) for item in statement.items):
                return True
            inside = _must_run(block_statements(statement.body), hits, moves)
            if inside is not False:
                return inside
        elif isinstance(statement, cst.For):
            if _contains(statement.iter, hits):
                return True
        elif isinstance(statement, cst.While):
            if _contains(statement.test, hits):
                return True
        if _exits(statement):
            return False
    return False


def _lazy_setup(statement: cst.If) -> bool:
    """``if self._ops is None: self._ops = ...`` or ``if not self._initialized:``: one-time
    set-up that the first call takes, unlike an option (``if self.use_transducer:``)."""
    return statement.orelse is None and (memo_fill(statement) or lazy_init_test(statement.test))


def _meet(a: bool | None, b: bool | None) -> bool | None:
    """Two ways out of a test: a side that only raises leaves the other to decide."""
    return b if a is None else a if b is None else (a and b)


def _must_targets(statements, targets: dict[int, str], holding: set[int], exiting: set[int]) -> set[str] | None:
    """The imported functions (``targets`` of call ids) every way through ``statements`` calls,
    by the rules of :func:`_must_run` (None: every way raises); ``holding``: the statements
    that hold such calls, ``exiting``: those that may leave early."""
    found: set[str] = set()
    statements = list(statements)
    for index, statement in enumerate(statements):
        if isinstance(statement, cst.SimpleStatementLine) \
                and any(isinstance(small, cst.Raise) for small in statement.body):
            return None  # raise RuntimeError(...): an error path, whatever it calls
        if id(statement) not in holding:
            pass
        elif isinstance(statement, cst.SimpleStatementLine):
            found |= _targets_in(statement, targets)
        elif isinstance(statement, cst.If):
            found |= _targets_in(statement.test, targets)
            orelse = statement.orelse
            if orelse is not None:
                rest = (orelse,) if isinstance(orelse, cst.If) else block_statements(orelse.body)
                both = _meet_targets(_must_targets(block_statements(statement.body), targets, holding, exiting),
                                     _must_targets(rest, targets, holding, exiting))
                if both is None:
                    return None
                found |= both
            elif _lazy_setup(statement):  # taken at the first call
                found |= _must_targets(block_statements(statement.body), targets, holding, exiting) or set()
            elif id(statement) in exiting:  # the side may return: what it and the rest both call
                both = _meet_targets(_must_targets(block_statements(statement.body), targets, holding, exiting),
                                     _must_targets(statements[index + 1:], targets, holding, exiting))
                return None if both is None else found | both
        elif isinstance(statement, cst.With):
            for item in statement.items:
                found |= _targets_in(item, targets)
            found |= _must_targets(block_statements(statement.body), targets, holding, exiting) or set()
        elif isinstance(statement, cst.For):
            found |= _targets_in(statement.iter, targets)
        elif isinstance(statement, cst.While):
            found |= _targets_in(statement.test, targets)
        if id(statement) in exiting:
            break
    return found


def _meet_targets(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    return b if a is None else a if b is None else a & b


def _targets_in(node: cst.CSTNode, targets: dict[int, str]) -> set[str]:
    found = {targets[id(node)]} if id(node) in targets else set()
    for child in syntax_children(node):
        if not isinstance(child, _NESTED):
            found |= _targets_in(child, targets)
    return found


def _chooses_device(test: cst.CSTNode) -> bool:
    """Does the test name a device (a name, attribute or string with a device word)?"""
    if isinstance(test, cst.Name):
        text = test.value
    elif isinstance(test, cst.Attribute):
        text = test.attr.value
    elif isinstance(test, cst.SimpleString):
        text = test.value
    else:
        text = ""
    if any(word in text.lower() for word in _DEVICE_WORDS):
        return True
    return any(_chooses_device(child) for child in syntax_children(test) if not isinstance(child, _NESTED))


def _extension_name(call: cst.Call) -> str | None:
    """``CppExtension("fairseq.libbase", sources=...)`` (any ``*Extension``) in a setup.py:
    the module it builds."""
    func = call.func
    called = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
    if not (isinstance(called, str) and called.endswith("Extension")):
        return None
    for arg in call.args:
        if (arg.keyword is None and not arg.star) or (arg.keyword is not None and arg.keyword.value == "name"):
            value = arg.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                return value.evaluated_value
            return None
    return None


def _globals_prefix(value: cst.BaseExpression) -> str | None:
    """``globals()[f"emulate_int8_{method}"]`` -> ``"emulate_int8_"``: a module function
    picked by a name prefix."""
    if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Call)
            and isinstance(value.value.func, cst.Name) and value.value.func.value == "globals"
            and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index)):
        return None
    key = value.slice[0].slice.value
    if isinstance(key, cst.FormattedString) and key.parts and isinstance(key.parts[0], cst.FormattedStringText):
        return key.parts[0].value or None
    return None
