"""Per-file facts for :mod:`detective.lint.entrances`, recorded in the shared walk: names
used as values (entrances the call graph cannot see), constructions moved straight to CUDA,
scope tags for compile-disabled functions, disable wrappers and ``cls(...)`` factories, and
blocks compiled one by one (:mod:`detective.lint.compiled_parts`).
Kept apart from the cross-file decision so that a run answered from the cache never
imports libcst."""

from __future__ import annotations

import libcst as cst

from detective.lint.compiled_parts import PARTS_FACT
from detective.lint.entrances import BUILDS_CLS, COMPILE_DISABLED, DISABLES, DISABLES_COMPILE

# Methods that return the module itself: Decoder(p).eval().cuda() is still built for CUDA.
_SELF_RETURNING = frozenset({"eval", "train", "half", "float", "double", "bfloat16", "requires_grad_",
                             "to", "cuda"})
_CONSTANTS = frozenset({"True", "False", "None", "NotImplemented", "Ellipsis", "__name__", "__file__"})
_DTYPES = frozenset({"float", "float16", "float32", "float64", "half", "double", "bfloat16", "int8",
                     "int16", "int32", "int64", "long", "int", "uint8", "bool", "complex64"})
_NOT_PROJECT = ("torch", "numpy", "typing", "builtins", "collections", "functools", "abc")


def _false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _to_cuda(call: cst.Call, method: str) -> bool:
    """``.cuda(...)`` or ``.to("cuda...")`` / ``.to(device="cuda...")``."""
    if method == "cuda":
        return True
    if method != "to":
        return False
    for arg in call.args:
        value = arg.value
        if isinstance(value, cst.SimpleString) and value.evaluated_value.startswith("cuda") and (
                arg.keyword is None or arg.keyword.value == "device"):
            return True
    return False


class EntranceFacts:
    """Per-file recorder: names used as values, constructions moved straight to CUDA, and
    scope tags for compile-disabled functions, disable wrappers and ``cls(...)`` factories."""

    def __init__(self, model):
        self.model = model
        self.skip: set[int] = set()  # ids of Name/Attribute nodes that are not value uses
        self.raw: dict[str, None] = {}  # value uses to resolve through module-level names
        self.refs: dict[str, None] = {}  # value uses already resolved (function-level imports)
        self.to_cuda: set[int] = set()  # ids of calls whose result is moved to CUDA at once
        self.cuda_keys: dict[tuple[str, str], str] = {}  # (scope, callee name) -> target
        self.plain_keys: set[tuple[str, str]] = set()
        self.moved: set[tuple[str, str]] = set()  # (scope, target): `v = f(...)` then v moved off XLA
        self._pending: list[list] = []  # per open block: the callees whose results it moves
        # Constructions put on a device the code names by a value (`M().to(device)`,
        # `M(device=d)`, `m = M()` then `m.to(d)`): maybe the XLA device.
        self.to_device: set[int] = set()
        self.device_moved: set[tuple[str, str]] = set()  # (scope, target)
        self._device_pending: list[list] = []
        self._part_loops: dict[tuple[str, str], str] = {}  # (scope, loop variable) -> container attribute

    # ------------------------------------------------------------------ definitions
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.skip.add(id(node.name))
        # A base is no construction: the cross-file pass reads ClassInfo.bases (a subclass
        # instance enters the base's forward), apart from names that may build a class.
        self.skip.update(id(base.value) for base in node.bases)
        if node.decorators:  # @register_model(...): built by a registry we cannot see
            self.refs["#" + self.model.class_stack[-1].info.qualname] = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.skip.add(id(node.name))
        for decorator in node.decorators:
            expression = decorator.decorator
            call = expression if isinstance(expression, cst.Call) else None
            if self.model.resolve(call.func if call else expression) in DISABLES and not (call and any(
                    a.keyword is not None and a.keyword.value == "recursive" and _false(a.value)
                    for a in call.args)):
                self.model.scope.tags.append(COMPILE_DISABLED)

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        if isinstance(value, cst.Call) and self.model.resolve(value.func) in DISABLES and not any(
                a.keyword is not None and a.keyword.value == "recursive" and _false(a.value) for a in value.args):
            self.model.scope.tags.append(DISABLES_COMPILE)

    # ------------------------------------------------------------------ moved results
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._pending.append(_moves_in(node.body))
        self._device_pending.append(_device_moves_in(node.body))

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        # resolved on leaving: a function-level import above the call is known by now
        for found, pending in ((self.moved, self._pending), (self.device_moved, self._device_pending)):
            for func in pending.pop():
                target = self.model.call_target(func)
                if target:
                    found.add((self.model.scope.qualname, target))

    # ------------------------------------------------------------------ uses
    # Only names that may be classes are followed (CamelCase or _Private, as PEP 8 names
    # classes): the walk visits every name, and a lowercase class stays a normal root
    # (its constructions are not read as moved to CUDA either).
    def visit_For(self, node: cst.For) -> None:
        part = part_loop(node)  # for block in model.layers: compiling block compiles a part
        if part is not None:
            self._part_loops[(self.model.scope.qualname, part[0])] = part[1]

    def visit_Call(self, node: cst.Call) -> None:
        compiled = compiled_name(node, self.model.resolve(node.func) if isinstance(
            node.func, (cst.Name, cst.Attribute)) else None)
        part = self._part_loops.get((self.model.scope.qualname, compiled)) if compiled else None
        if part is not None:  # block.compile(**cfg) is nn.Module.compile too
            self.model.project_facts.append(PARTS_FACT + part)
            self.model.note_compile("torch.compile")
        func = node.func
        skip = self.skip
        skip.add(id(func))
        kind = type(func)
        if kind is cst.Attribute:
            skip.add(id(func.value))  # Fn.apply(...), Model.build(...): a call, not the class passed on
            name = func.attr.value
            first = name[0]
            if first.isupper() or first == "_":
                # mod.Model(...) builds Model; Model.Config(...) is a member of Model (a config
                # class whose build() makes a Model): the receiver is a use, decided across files.
                self._use_expression(func.value)
            if name == "cuda" or name == "to":
                inner = func.value
                while type(inner) is cst.Call and type(inner.func) is cst.Attribute \
                        and inner.func.attr.value in _SELF_RETURNING:
                    inner = inner.func.value
                if type(inner) is cst.Call:
                    if name == "cuda" or _to_cuda(node, name):
                        self.to_cuda.add(id(inner))
                    elif _to_device(node):
                        self.to_device.add(id(inner))
        elif kind is cst.Name:
            name = func.value
            if name == "isinstance" or name == "issubclass":
                if len(node.args) > 1:
                    checked = node.args[1].value  # a type test names the class without building it
                    skip.add(id(checked))
                    if type(checked) is cst.Tuple:
                        skip.update(id(e.value) for e in checked.elements)
            elif name == "super":
                skip.update(id(a.value) for a in node.args)  # super(Encoder, self).__init__()
            elif name == "cls" and self.model.scope.class_name:
                if BUILDS_CLS not in self.model.scope.tags:
                    self.model.scope.tags.append(BUILDS_CLS)
        else:
            return
        first = name[0]
        if not (first.isupper() or first == "_"):
            return
        key = (self.model.scope.qualname, name)
        if id(node) in self.to_device or _device_argument(node):
            target = self.model.call_target(func)
            if target:
                self.device_moved.add((key[0], target))
        if id(node) in self.to_cuda:
            target = self.model.call_target(func)
            if target:
                self.cuda_keys[key] = target
        else:
            self.plain_keys.add(key)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        first = attr[0]
        if not (first.isupper() or first == "_" or attr == "apply"):
            return  # x.shape; Cls.method as a value leaves the name Cls to visit_Name
        skip = self.skip
        skip.add(id(node.attr))
        skip.add(id(node.value))  # only the whole dotted use counts
        if id(node) not in skip:
            self._use_expression(node)

    def visit_Name(self, node: cst.Name) -> None:
        value = node.value
        first = value[0]
        if (first.isupper() or first == "_") and value not in _CONSTANTS and id(node) not in self.skip:
            self._use(value, value)

    def _use_expression(self, node: cst.BaseExpression) -> None:
        parts = []
        while type(node) is cst.Attribute:
            parts.append(node.attr.value)
            node = node.value
        if type(node) is cst.Name and node.value != "self":
            parts.append(node.value)
            self._use(".".join(reversed(parts)), node.value)

    def _use(self, dotted: str, head: str) -> None:
        for frame in reversed(self.model.functions[1:]):
            if head in frame.aliases:
                self.refs[frame.aliases[head] + dotted[len(head):]] = None
                return
        self.raw[dotted] = None

    # ------------------------------------------------------------------ results
    def value_refs(self, classes) -> list[str]:
        """Project-looking names used as values: ``#Local.rest`` or dotted through imports."""
        model = self.model
        found = dict(self.refs)
        for dotted in self.raw:
            head, dot, rest = dotted.partition(".")
            if head in model.imports:
                found[model.imports[head] + dot + rest] = None
            elif head in classes:
                found["#" + dotted] = None
        return sorted(r for r in found if not r.startswith(_NOT_PROJECT))

    def device_built(self) -> list[tuple[str, str]]:
        """(scope, call target) where some construction is put on a device named by a value."""
        return sorted(self.device_moved)

    def cuda_built(self) -> list[tuple[str, str]]:
        """(scope, call target) where every construction of that name in the scope goes
        straight to CUDA, or whose result the scope moves to CUDA or the CPU."""
        return sorted({(scope, target) for (scope, name), target in self.cuda_keys.items()
                       if (scope, name) not in self.plain_keys} | self.moved)


def _device_value(node: cst.BaseExpression) -> bool:
    """A device the code names by a value: not a "cpu"/"cuda" literal, not a dtype."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.startswith("xla")
    if isinstance(node, cst.Integer):
        return False
    if isinstance(node, cst.Attribute) and node.attr.value in _DTYPES:
        return False
    return not (isinstance(node, cst.Name) and node.value in _CONSTANTS)


def _to_device(call: cst.Call) -> bool:
    """``.to(device)`` / ``.to(device=d)`` with the device named by a value."""
    for position, arg in enumerate(call.args):
        if arg.keyword is None and position == 0 or arg.keyword is not None and arg.keyword.value == "device":
            return _device_value(arg.value)
    return False


def _device_argument(call: cst.Call) -> bool:
    """``M(..., device=d)``: built on a device named by a value."""
    return any(arg.keyword is not None and arg.keyword.value == "device" and _device_value(arg.value)
               for arg in call.args)


def _device_moves_in(statements) -> list:
    """``v = build(...)``, then in the same block ``v.to(d)`` or ``v = v.to(d)`` with the
    device named by a value: the ``build`` callees whose results may run on any device."""
    found = []
    bound: dict[str, cst.BaseExpression] = {}
    for statement in statements:
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            continue
        small = statement.body[0]
        value = small.value if type(small) in (cst.Expr, cst.Assign) else None
        if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "to" \
                and _to_device(value):
            inner = value.func.value
            while type(inner) is cst.Call and type(inner.func) is cst.Attribute \
                    and inner.func.attr.value in _SELF_RETURNING:
                inner = inner.func.value
            name = _dotted(inner)
            if name in bound:
                found.append(bound.pop(name))
                continue
        assigned = _single_assign(statement)
        if assigned is not None:
            name, value = assigned
            bound.pop(name, None)
            if type(value) is cst.Call:
                bound[name] = value.func
    return found


def _moves_in(statements) -> list:
    """``v = build(...)`` (or ``self.v = ...``), then in the same block, before ``v`` is bound
    again, ``v = v.cuda()``, ``v = v.cuda() if c else v.cpu()`` or ``if c: v = v.cuda()
    else: v = v.cpu()``: the ``build`` callees whose results run on CUDA or the CPU."""
    found = []
    bound: dict[str, cst.BaseExpression] = {}  # v -> the function of the call it holds
    for statement in statements:
        assigned = _single_assign(statement)
        if assigned is not None:
            name, value = assigned
            if name in bound and _moved(value, name, cpu=False):
                found.append(bound.pop(name))
                continue
            bound.pop(name, None)
            if type(value) is cst.Call:
                bound[name] = value.func
        elif type(statement) is cst.If and bound:
            sides = [_single_assign(b) for b in _branch_bodies(statement)]
            if len(sides) == 2 and all(sides) and sides[0][0] == sides[1][0] in bound \
                    and all(_moved(value, name, cpu=True) for name, value in sides):
                found.append(bound.pop(sides[0][0]))
    return found


def _dotted(node) -> str | None:
    """``v`` or ``self.v``."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return "self." + node.attr.value
    return None


def _single_assign(statement) -> tuple[str, cst.BaseExpression] | None:
    """``v = value`` / ``self.v = value`` as a whole statement line."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if type(assign) is not cst.Assign or len(assign.targets) != 1:
        return None
    name = _dotted(assign.targets[0].target)
    return (name, assign.value) if name else None


def _branch_bodies(statement: cst.If) -> list:
    """The one statement of each side of ``if c: ... else: ...`` (nothing for elif chains)."""
    orelse = statement.orelse
    if type(orelse) is not cst.Else:
        return []
    bodies = [statement.body, orelse.body]
    if not all(type(b) is cst.IndentedBlock and len(b.body) == 1 for b in bodies):
        return []
    return [b.body[0] for b in bodies]


def _moved(value, name: str, cpu: bool) -> bool:
    """Is ``value`` ``name`` moved to CUDA (or, with ``cpu``, to the CPU), as
    ``name.cuda()``, ``name.eval().to("cuda")``, or a conditional expression of two moves?"""
    if type(value) is cst.IfExp:
        return _moved(value.body, name, True) and _moved(value.orelse, name, True)
    if type(value) is not cst.Call or type(value.func) is not cst.Attribute:
        return False
    method = value.func.attr.value
    if not (_to_cuda(value, method) or cpu and (method == "cpu" or _to_cpu(value, method))):
        return False
    inner = value.func.value
    while type(inner) is cst.Call and type(inner.func) is cst.Attribute and inner.func.attr.value in _SELF_RETURNING:
        inner = inner.func.value
    return _dotted(inner) == name


def _to_cpu(call: cst.Call, method: str) -> bool:
    return method == "to" and any(isinstance(a.value, cst.SimpleString) and a.value.evaluated_value == "cpu"
                                  for a in call.args)


_CHILD_METHODS = frozenset({"named_children", "children", "values", "items"})


def part_loop(node: cst.For) -> tuple[str, str] | None:
    """(loop variable, container attribute) of ``for [name,] block in m.layers[.named_children()]``."""
    it, target = node.iter, node.target
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" and it.args:
        it = it.args[0].value
        target = target.elements[-1].value if isinstance(target, cst.Tuple) and len(target.elements) == 2 else None
    elif isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _CHILD_METHODS \
            and not it.args:
        pairs = it.func.attr.value in ("named_children", "items")
        it = it.func.value
        if pairs:
            target = target.elements[-1].value if isinstance(target, cst.Tuple) and len(target.elements) == 2 else None
    if not isinstance(target, cst.Name):
        return None
    chain = []
    while isinstance(it, cst.Attribute):
        chain.append(it.attr.value)
        it = it.value
    if not isinstance(it, cst.Name) or it.value == "self" or not chain:
        return None
    return target.value, chain[-1]


def compiled_name(call: cst.Call, dotted: str | None) -> str | None:
    """The plain name a call compiles: ``block.compile(...)`` or ``torch.compile(block, ...)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "compile" and isinstance(func.value, cst.Name):
        return func.value.value
    if dotted == "torch.compile" and call.args and call.args[0].keyword is None \
            and isinstance(call.args[0].value, cst.Name):
        return call.args[0].value.value
    return None
