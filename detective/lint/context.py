"""The one traversal every rule shares.

``Context`` walks a module once. On each node it first updates what it knows
(imports, the scope stack, step-loop regions, which names hold tensors), then calls
the rules' ``visit_<Node>`` methods; on the way out it calls the rules'
``leave_<Node>`` methods before updating itself. Rules read the context through
helpers such as :meth:`Context.is_tensor` and report candidates with
:meth:`Context.report`; whether a candidate's scope is traced is decided later,
across files, in :mod:`detective.lint.callgraph`.

We dispatch ourselves rather than through ``libcst.batched_visitor`` so the order is
fixed (context before rules on visit, after them on leave) and so matcher
decorators cannot be silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint import tensors as T
from detective.lint.model import CallRef, ClassInfo, Scope

SYNC_CALLS = frozenset(
    {"torch_xla.sync", "torch_xla.torch_xla.sync", "torch_xla.core.xla_model.mark_step"}
)
STEP_CONTEXTS = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})
XLA_COMPILE_CALLS = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
OPTIMIZER_STEP_CALLS = frozenset({"torch_xla.core.xla_model.optimizer_step"})
COMPILE_CALLS = frozenset(
    {"torch.compile", "torch_xla.compile", "torch_xla.torch_xla.compile"}
)
SYNCING_LOADERS = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
    }
)
NON_TENSOR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes", "dict", "list", "tuple"})


@dataclass
class _Item:
    """Something recorded in a scope that a step loop may later claim."""

    kind: str  # "candidate" | "call"
    payload: object
    scope: str
    index: int  # top-level statement index in the innermost region frame


@dataclass
class _RegionFrame:
    """A for/while loop or ``with torch_xla.step()`` that may turn out to be a region."""

    node: cst.CSTNode
    statements: tuple  # top-level statements of the body
    stmt_index: dict[int, int]
    always: bool = False  # MpDeviceLoader loops and torch_xla.step() blocks
    current: int = -1
    sync_indices: list[int] = field(default_factory=list)  # unconditional syncs
    conditional_sync: bool = False  # a sync under if/for/while: not every iteration syncs
    items: list[_Item] = field(default_factory=list)


@dataclass
class _FunctionFrame:
    scope: Scope
    aliases: dict[str, str] = field(default_factory=dict)
    tensor_names: set[str] = field(default_factory=set)
    bool_names: set[str] = field(default_factory=set)
    host_names: set[str] = field(default_factory=set)  # bound from host reads
    data_names: set[str] = field(default_factory=set)  # parameters and loop targets
    loader_names: set[str] = field(default_factory=set)
    compiled_names: set[str] = field(default_factory=set)  # f = torch_xla.compile(g)
    regions: list[_RegionFrame] = field(default_factory=list)
    loop_count: int = 0


@dataclass
class AccEvent:
    """A call that matters for gradient accumulation, recorded in its innermost loop/function."""

    kind: str  # "backward" | "step" | "zero_grad" | "sync" | "compile" | "compiled_call"
    node: cst.CSTNode
    accum: bool  # under an `if` that looks like an accumulation boundary (`% N`, "accum")
    depth: int  # number of enclosing `if`s inside this frame
    scope: str


@dataclass
class AccFrame:
    """Events of one loop body or function body, for the accumulation rules (RC101/RC102).

    Rules read ``context.acc_frame`` in their ``leave_For``/``leave_While``/
    ``leave_FunctionDef``/``leave_Module``: at that point its events and its
    children (inner loops, already left) are complete.
    """

    node: cst.CSTNode
    is_loop: bool
    events: list[AccEvent] = field(default_factory=list)
    children: list["AccFrame"] = field(default_factory=list)
    if_stack: list[bool] = field(default_factory=list)

    def has(self, kind: str, accum: bool | None = None) -> bool:
        return any(e.kind == kind and (accum is None or e.accum == accum) for e in self.events)

    @property
    def does_micro_work(self) -> bool:
        return self.has("backward") or self.has("compiled_call")

    @property
    def is_flat_accumulation(self) -> bool:
        """A loop that does backward every iteration and steps the optimizer every N."""
        return (self.is_loop and self.does_micro_work and self.has("step", accum=True)
                and not self.has("step", accum=False))

    def micro_children(self) -> list["AccFrame"]:
        """Inner loops that accumulate while this frame steps the optimizer once."""
        if not self.has("step"):
            return []
        return [c for c in self.children if c.is_loop and c.does_micro_work and not c.has("step")]


@dataclass
class ClassFrame:
    info: ClassInfo
    depth: int = 0  # len(Context.functions) when entered: methods are one deeper
    tensor_attrs: set[str] = field(default_factory=set)  # buffers, parameters, tensors
    number_attrs: set[str] = field(default_factory=set)  # initialised to Python numbers


def _block_statements(body: cst.BaseSuite):
    return body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


class Context(cst.CSTVisitor):
    def __init__(self, module_name: str, is_package: bool, rule_classes, extra_roots=()):
        super().__init__()
        self.module_name = module_name
        self.is_package = is_package
        self.extra_roots = frozenset(extra_roots)
        self.imports: dict[str, str] = {}
        self.scopes: dict[str, Scope] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.anchors: dict[str, cst.CSTNode] = {}  # scope qualname -> node whose line we show
        self.items: list[_Item] = []
        self.compile_targets: list[tuple[str, CallRef, cst.CSTNode]] = []
        self.functions: list[_FunctionFrame] = []
        self.class_stack: list[ClassFrame] = []
        self._nodes_for_lines: list[cst.CSTNode] = []
        self._step_withs: set[int] = set()
        self.imports_xla = False  # torch_xla imported so far (in traversal order)
        self.module_imports: list[str] = []
        self.acc_stack: list[AccFrame] = []
        self.rules = [rule_class(self) for rule_class in rule_classes]
        self._visit, self._leave = _dispatch_tables(self.rules)
        module_scope = Scope(qualname="<module>", display="<module>", line=1)
        self.scopes["<module>"] = module_scope
        self.functions.append(_FunctionFrame(module_scope))
        self.acc_stack.append(AccFrame(node=None, is_loop=False))

    # ------------------------------------------------------------------ dispatch
    def on_visit(self, node: cst.CSTNode) -> bool:
        name = type(node).__name__
        frame = self.functions[-1]
        if frame.regions:
            region = frame.regions[-1]
            index = region.stmt_index.get(id(node))
            if index is not None:
                region.current = index
        enter = _ENTER.get(name)
        if enter is not None:
            enter(self, node)
        for fn in self._visit.get(name, ()):
            fn(node)
        return name not in _SKIP_CHILDREN

    def run(self, module: cst.Module) -> None:
        """Walk ``module`` once, in libcst's visiting order, without rebuilding it.

        ``module.visit(self)`` would do the same visits, but libcst reconstructs (and
        re-validates) every node on the way back up and visits every whitespace, comma
        and bracket: about half the cost of linting a file. No rule or context hook
        looks at those tokens, so we walk only the nodes that carry syntax.
        """
        self._walk(module)

    def _walk(self, node: cst.CSTNode) -> None:
        if self.on_visit(node):
            kinds = _KIND
            for name in _child_fields(type(node)):
                value = getattr(node, name)
                kind = kinds.get(type(value))
                if kind is None:
                    kind = _classify(type(value))
                if kind == 1:
                    self._walk(value)
                elif kind == 2:
                    for child in value:
                        kind = kinds.get(type(child))
                        if kind is None:
                            kind = _classify(type(child))
                        if kind == 1:
                            self._walk(child)
        self.on_leave(node)

    # libcst's defaults look up visit_<Node>_<attr> on every attribute of every node.
    def on_visit_attribute(self, node, attribute) -> None:
        pass

    def on_leave_attribute(self, original_node, attribute) -> None:
        pass

    def on_leave(self, original_node: cst.CSTNode) -> None:
        name = type(original_node).__name__
        for fn in self._leave.get(name, ()):
            fn(original_node)
        exit_ = _EXIT.get(name)
        if exit_ is not None:
            exit_(self, original_node)

    # ------------------------------------------------------------------ rule API
    @property
    def function(self) -> _FunctionFrame:
        return self.functions[-1]

    @property
    def scope(self) -> Scope:
        return self.functions[-1].scope

    @property
    def cls(self) -> ClassFrame | None:
        """The class whose method we are in (None in plain functions)."""
        scope = self.scope
        if self.class_stack and scope.class_name == self.class_stack[-1].info.qualname:
            return self.class_stack[-1]
        return None

    @property
    def acc_frame(self) -> AccFrame:
        return self.acc_stack[-1]

    def report(self, code: str, node: cst.CSTNode, message: str, scope: str | None = None, *,
               replace=None, fix_title: str = "", after_calls=(), at_index: int | None = None,
               subject: str = "") -> None:
        """Record a candidate in the current scope (or ``scope``, which a step loop cannot claim).

        ``at_index`` reports from a rule's ``leave_For``/``leave_While`` as if from the
        loop body's top-level statement of that index, so the loop can still claim it.
        """
        extras = (replace, fix_title, tuple(after_calls)) if replace or after_calls else None
        item = _Item("candidate", (code, message, node, extras, subject), scope or self.scope.qualname, -1)
        regions = self.function.regions
        if at_index is not None and scope is None and regions:
            item.index = at_index
            regions[-1].items.append(item)
            return
        self._record(item, claimable=scope is None)

    def current_region(self):
        """The innermost loop/step block of this function that may become a step region."""
        regions = self.function.regions
        return regions[-1] if regions else None

    @staticmethod
    def region_is_step(region) -> bool:
        """Known once the loop body has been visited (in a rule's leave_For/leave_While)."""
        return bool(region.always or region.sync_indices or region.conditional_sync)

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Dotted name of a Name/Attribute chain with import aliases expanded."""
        if isinstance(node, cst.Name):
            for frame in reversed(self.functions):
                if node.value in frame.aliases:
                    return frame.aliases[node.value]
            return self.imports.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr.value}" if base else None
        return None

    def is_tensor(self, node: cst.BaseExpression) -> bool:
        frame = self.function
        if isinstance(node, cst.Name):
            return node.value in frame.tensor_names
        if isinstance(node, cst.Attribute):
            attr = node.attr.value
            if attr in T.NON_TENSOR_ATTRIBUTES:
                return False
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                cls = self.cls
                return cls is not None and attr in cls.tensor_attrs
            return attr in T.TENSOR_ATTRIBUTES and self.is_tensor(node.value)
        if isinstance(node, cst.Call):
            return self._call_is_tensor(node)
        if isinstance(node, cst.Subscript):
            if self.is_tensor(node.value):
                return True
            # batch["input_ids"]: an element of a mapping that came in as data.
            return (
                isinstance(node.value, cst.Name)
                and node.value.value in frame.data_names
                and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)
                and T.literal_string(node.slice[0].slice.value) is not None
            )
        if isinstance(node, cst.BinaryOperation):
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if isinstance(node, cst.UnaryOperation):
            return not isinstance(node.operator, cst.Not) and self.is_tensor(node.expression)
        if isinstance(node, cst.Comparison):
            return self._comparison_on_tensor(node)
        if isinstance(node, cst.IfExp):
            return self.is_tensor(node.body) or self.is_tensor(node.orelse)
        return False

    def is_bool_tensor(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.function.bool_names
        if isinstance(node, cst.Comparison):
            return self._comparison_on_tensor(node)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
            return self.is_bool_tensor(node.expression)
        if isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)
        ):
            return self.is_bool_tensor(node.left) or self.is_bool_tensor(node.right)
        if isinstance(node, cst.Call):
            method = T.call_method_name(node)
            dotted = self.resolve(node.func)
            if T.is_torch_name(dotted):
                return dotted.rsplit(".", 1)[-1] in T.BOOL_METHODS
            if method in T.BOOL_METHODS and (method != "bool" or self.is_tensor(node.func.value)):
                return True
            if method == "to" and any(self.resolve(a.value) == "torch.bool" for a in node.args):
                return True
        return False

    def reads_tensor_value(self, node: cst.BaseExpression) -> bool:
        """Does evaluating ``node`` for truth read a tensor's value on the host?"""
        if isinstance(node, cst.BooleanOperation):
            return self.reads_tensor_value(node.left) or self.reads_tensor_value(node.right)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return self.reads_tensor_value(node.expression)
        return self.is_tensor(node)

    def is_host_value(self, node: cst.BaseExpression) -> bool:
        """Is this a Python number read from a tensor (``.item()``, ``int(t)``, ...)?"""
        if isinstance(node, cst.Name):
            return node.value in self.function.host_names
        if isinstance(node, cst.Call):
            method = T.call_method_name(node)
            if method in {"item", "tolist"}:
                return True
            if isinstance(node.func, cst.Name) and node.func.value in {"int", "float", "round", "len"}:
                return any(self.is_tensor(a.value) or self.is_host_value(a.value) for a in node.args)
            return False
        if isinstance(node, cst.BinaryOperation):
            return self.is_host_value(node.left) or self.is_host_value(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.is_host_value(node.expression)
        return False

    # ------------------------------------------------------------------ internals
    def _call_is_tensor(self, node: cst.Call) -> bool:
        func = node.func
        dotted = self.resolve(func)
        if T.is_torch_name(dotted):
            return T.torch_call_returns_tensor(dotted)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if isinstance(func.value, cst.Name) and func.value.value == "self":
                # self.proj(x): a submodule applied to a tensor gives a tensor; a method of
                # the module named like a tensor op (self.scatter) says nothing.
                return method not in T.NON_TENSOR_METHODS and any(self.is_tensor(a.value) for a in node.args)
            if method in T.NON_TENSOR_METHODS:
                return False
            if method in T.TENSOR_ONLY_METHODS:
                return True
            return self.is_tensor(func.value)
        if isinstance(func, cst.Name):
            if func.value in T.PY_BUILTINS_NOT_TENSOR:
                return False
            if func.value in self.function.tensor_names:  # a module bound to a name
                return False
        return False

    def _comparison_on_tensor(self, node: cst.Comparison) -> bool:
        if not all(isinstance(t.operator, T.COMPARE_OPS) for t in node.comparisons):
            return False
        return self.is_tensor(node.left) or any(self.is_tensor(t.comparator) for t in node.comparisons)

    def _record(self, item: _Item, claimable: bool = True) -> None:
        regions = self.function.regions
        if claimable and regions:
            item.index = regions[-1].current
            regions[-1].items.append(item)
        else:
            self.items.append(item)

    def _add_scope(self, scope: Scope, anchor: cst.CSTNode) -> None:
        # Redefinitions (if/else branches) get a suffix so both are kept.
        base, n = scope.qualname, 1
        while scope.qualname in self.scopes:
            n += 1
            scope.qualname = f"{base}#{n}"
        self.scopes[scope.qualname] = scope
        self.anchors[scope.qualname] = anchor

    def _qualify(self, name: str) -> str:
        outer = self.class_stack[-1].info.qualname if self._in_class_body() else None
        if outer:
            return f"{outer}.{name}"
        parent = self.scope.qualname
        return name if parent == "<module>" else f"{parent}.{name}"

    def _in_class_body(self) -> bool:
        # Directly in a class body when the innermost class was entered after the
        # innermost function.
        if not self.class_stack:
            return False
        return self.class_stack[-1].depth == len(self.functions)

    def _call_target(self, func: cst.BaseExpression) -> str | None:
        if isinstance(func, cst.Attribute):
            value = func.value
            if isinstance(value, cst.Name) and value.value == "self":
                return f"self.{func.attr.value}"
            if (
                isinstance(value, cst.Attribute)
                and isinstance(value.value, cst.Name)
                and value.value.value == "self"
            ):
                return f"self.{value.attr.value}.{func.attr.value}"
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
                and value.func.value == "super"
            ):
                return f"super.{func.attr.value}"
        dotted = self.resolve(func)
        if dotted is None or T.is_torch_name(dotted) or dotted in T.PY_BUILTINS_NOT_TENSOR:
            return None
        head = dotted.split(".", 1)[0]
        if isinstance(func, (cst.Name, cst.Attribute)) and self._is_import_alias(func):
            return dotted
        return f"local:{dotted}" if head else None

    def _is_import_alias(self, func: cst.BaseExpression) -> bool:
        while isinstance(func, cst.Attribute):
            func = func.value
        if not isinstance(func, cst.Name):
            return False
        return func.value in self.imports or any(func.value in f.aliases for f in self.functions)

    # ------------------------------------------------------------------ scope entry/exit
    def _enter_function(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        in_class = self._in_class_body()
        qualname = self._qualify(name)
        decorators = []
        root_reason = None
        for dec in node.decorators:
            target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
            dotted = self.resolve(target) or ""
            decorators.append(dotted)
            if dotted in COMPILE_CALLS:
                root_reason = f"@{dotted}"
            elif dotted in self.extra_roots or dotted.rsplit(".", 1)[-1] in self.extra_roots:
                root_reason = f"@{dotted} (configured root)"
        if root_reason is None and (name in self.extra_roots or qualname in self.extra_roots):
            root_reason = "configured root"
        scope = Scope(
            qualname=qualname,
            display=qualname,
            line=0,
            class_name=self.class_stack[-1].info.qualname if in_class else None,
            parent=self.scope.qualname,
            root_reason=root_reason,
            decorators=decorators,
        )
        self._add_scope(scope, node.name)
        self._nodes_for_lines.append(node.name)
        if in_class:
            self.class_stack[-1].info.methods.append(name)
        frame = _FunctionFrame(scope)
        params = node.params
        all_params = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                frame.data_names.add(extra.name.value)
        for param in all_params:
            pname = param.name.value
            if pname in {"self", "cls"}:
                continue
            frame.data_names.add(pname)
            if _param_is_tensor(param, is_forward=in_class and name == "forward", resolve=self.resolve):
                frame.tensor_names.add(pname)
        self.functions.append(frame)
        self.acc_stack.append(AccFrame(node=node, is_loop=False))

    def _leave_function(self, node: cst.FunctionDef) -> None:
        frame = self.functions.pop()
        assert not frame.regions
        self.acc_stack.pop()

    def _enter_class(self, node: cst.ClassDef) -> None:
        qualname = self._qualify(node.name.value)
        bases = []
        for arg in node.bases:
            dotted = self.resolve(arg.value)
            if dotted:
                bases.append(dotted if self._is_import_alias(arg.value) else f"local:{dotted}")
        info = ClassInfo(qualname=qualname, line=0, bases=bases, methods=[])
        base, n = qualname, 1
        while info.qualname in self.classes:
            n += 1
            info.qualname = f"{base}#{n}"
        self.classes[info.qualname] = info
        self.anchors[f"class:{info.qualname}"] = node.name
        self._nodes_for_lines.append(node.name)
        self.class_stack.append(ClassFrame(info, depth=len(self.functions)))

    def _leave_class(self, node: cst.ClassDef) -> None:
        self.class_stack.pop()

    def _enter_loop(self, node: cst.For | cst.While) -> None:
        frame = self.function
        stmts = _block_statements(node.body)
        always = False
        if isinstance(node, cst.For):
            self._bind_target(node.target, data=True)
            it = node.iter
            dotted = self.resolve(it.func) if isinstance(it, cst.Call) else None
            if dotted in SYNCING_LOADERS or (isinstance(it, cst.Name) and it.value in frame.loader_names):
                always = True
        frame.regions.append(
            _RegionFrame(node, tuple(stmts), {id(s): i for i, s in enumerate(stmts)}, always=always)
        )
        self.acc_stack.append(AccFrame(node=node, is_loop=True))

    def _leave_for_while(self, node: cst.CSTNode) -> None:
        self._leave_loop(node)
        child = self.acc_stack.pop()
        self.acc_stack[-1].children.append(child)

    def _enter_if(self, node: cst.If) -> None:
        self.acc_frame.if_stack.append(_accumulation_test(node.test))

    def _leave_if(self, node: cst.If) -> None:
        self.acc_frame.if_stack.pop()

    def _acc_event(self, kind: str, node: cst.CSTNode) -> None:
        frame = self.acc_frame
        frame.events.append(AccEvent(kind, node, any(frame.if_stack), len(frame.if_stack),
                                     self.scope.qualname))

    def _leave_loop(self, node: cst.CSTNode) -> None:
        frame = self.function
        region = frame.regions.pop()
        # The region ends at the last sync every iteration runs; code after a sync that
        # only some iterations run (if step % accum == 0: xm.mark_step()) is traced too.
        if region.always:
            cutoff = len(region.stmt_index)
        elif region.sync_indices:
            cutoff = max(region.sync_indices)
        elif region.conditional_sync:
            cutoff = len(region.stmt_index)
        else:
            cutoff = None
        claimed: list[_Item] = []
        rest: list[_Item] = []
        if cutoff is not None:
            frame.loop_count += 1
            parent = frame.scope
            suffix = "step loop" if isinstance(node, (cst.For, cst.While)) else "torch_xla.step()"
            qualname = f"{parent.qualname}.<loop{frame.loop_count}>" if parent.qualname != "<module>" \
                else f"<loop{frame.loop_count}>"
            reason = "loop over MpDeviceLoader" if region.always and isinstance(node, cst.For) else (
                "with torch_xla.step()" if region.always else "loop body before torch_xla.sync()"
            )
            scope = Scope(
                qualname=qualname,
                display=f"{parent.display} [{suffix}]",
                line=0,
                class_name=parent.class_name,
                parent=parent.qualname,
                root_reason=reason,
            )
            anchor = node.target if isinstance(node, cst.For) else (
                node.test if isinstance(node, cst.While) else node.items[0].item
            )
            self._add_scope(scope, anchor)
            self._nodes_for_lines.append(anchor)
            for item in region.items:
                (claimed if 0 <= item.index <= cutoff else rest).append(item)
            for item in claimed:
                item.scope = scope.qualname
                self.items.append(item)
        else:
            rest = region.items
        # Whatever this region did not claim belongs to the enclosing region, if any.
        if frame.regions:
            outer = frame.regions[-1]
            for item in rest:
                item.index = outer.current
                outer.items.append(item)
        else:
            self.items.extend(rest)

    def _enter_with(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and self.resolve(call.func) in XLA_COMPILE_CALLS | STEP_CONTEXTS:
                self._acc_event("compile", call)
            if isinstance(call, cst.Call) and self.resolve(call.func) in STEP_CONTEXTS:
                stmts = _block_statements(node.body)
                self.function.regions.append(
                    _RegionFrame(node, tuple(stmts), {id(s): i for i, s in enumerate(stmts)}, always=True)
                )
                self._step_withs.add(id(node))
                return

    def _leave_with(self, node: cst.With) -> None:
        if id(node) in self._step_withs:
            self._leave_loop(node)

    # ------------------------------------------------------------------ bindings
    def _bind_target(self, target: cst.BaseExpression, *, tensor=False, boolean=False,
                     host=False, data=False) -> None:
        frame = self.function
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value, tensor=tensor, data=data)
            return
        if isinstance(target, cst.StarredElement):
            self._bind_target(target.value, tensor=tensor, data=data)
            return
        if not isinstance(target, cst.Name):
            return
        name = target.value
        for flag, names in ((tensor, frame.tensor_names), (boolean, frame.bool_names),
                            (host, frame.host_names), (data, frame.data_names)):
            (names.add if flag else names.discard)(name)

    def _bind_value(self, targets, value: cst.BaseExpression) -> None:
        tensor = self.is_tensor(value)
        boolean = tensor and self.is_bool_tensor(value)
        host = not tensor and self.is_host_value(value)
        for target in targets:
            if isinstance(target, cst.Attribute):
                self._bind_attribute(target, value, tensor)
            else:
                self._bind_target(target, tensor=tensor, boolean=boolean, host=host)
                if isinstance(value, cst.Call) and isinstance(target, cst.Name):
                    called = self.resolve(value.func)
                    if called in SYNCING_LOADERS:
                        self.function.loader_names.add(target.value)
                    if called in XLA_COMPILE_CALLS and value.args:
                        self.function.compiled_names.add(target.value)

    def _bind_attribute(self, target: cst.Attribute, value: cst.BaseExpression, tensor: bool) -> None:
        if not (isinstance(target.value, cst.Name) and target.value.value == "self"):
            return
        cls = self.cls
        if cls is None:
            return
        attr = target.attr.value
        if tensor or (isinstance(value, cst.Call) and (self.resolve(value.func) or "").endswith("Parameter")):
            cls.tensor_attrs.add(attr)
        elif T.is_number_literal(value) or (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
            and value.func.value in {"int", "float"}
        ):
            cls.number_attrs.add(attr)
        if isinstance(value, cst.Call):
            dotted = self.resolve(value.func)
            if dotted and dotted.rsplit(".", 1)[-1][:1].isupper():
                local = not self._is_import_alias(value.func)
                cls.info.attr_types[attr] = f"local:{dotted}" if local else dotted

    # ------------------------------------------------------------------ node handlers
    def _note_import(self, dotted: str) -> None:
        self.module_imports.append(dotted)
        if dotted == "torch_xla" or dotted.startswith("torch_xla."):
            self.imports_xla = True

    def _visit_import(self, node: cst.Import) -> None:
        target = self.imports if len(self.functions) == 1 else self.function.aliases
        for alias in node.names:
            dotted = _dotted(alias.name)
            self._note_import(dotted)
            if alias.asname is not None:
                target[alias.asname.name.value] = dotted
            else:
                head = dotted.split(".", 1)[0]
                target[head] = head

    def _visit_import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        base = _dotted(node.module) if node.module is not None else ""
        if node.relative:
            parts = self.module_name.split(".")
            if not self.is_package:
                parts = parts[:-1]
            up = len(node.relative) - 1
            parts = parts[: len(parts) - up] if up else parts
            base = ".".join([*parts, base] if base else parts)
        target = self.imports if len(self.functions) == 1 else self.function.aliases
        if base:
            self._note_import(base)
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else _dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            target[local] = f"{base}.{name}" if base else name
            self._note_import(target[local])

    def _visit_call(self, node: cst.Call) -> None:
        dotted = self.resolve(node.func)
        frame = self.function
        if dotted in SYNC_CALLS and frame.regions:
            region = frame.regions[-1]
            if region.current >= 0:
                statement = region.statements[region.current]
                if isinstance(statement, (cst.If, cst.For, cst.While)):
                    region.conditional_sync = True
                else:
                    region.sync_indices.append(region.current)
        kind = self._acc_kind(node, dotted)
        if kind is not None:
            self._acc_event(kind, node)
        if dotted in COMPILE_CALLS and node.args:
            fn = node.args[0].value
            if isinstance(fn, cst.Call) and (self.resolve(fn.func) or "").endswith("partial") and fn.args:
                fn = fn.args[0].value
            target = self._call_target(fn) if isinstance(fn, (cst.Name, cst.Attribute)) else None
            if target is not None:
                self.compile_targets.append((self.scope.qualname, CallRef(target, 0), fn))
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in {
            "register_buffer", "register_parameter"
        } and isinstance(node.func.value, cst.Name) and node.func.value.value == "self" and node.args:
            name = T.literal_string(node.args[0].value)
            cls = self.cls
            if name and cls is not None:
                cls.tensor_attrs.add(name)
        target = self._call_target(node.func)
        if target is not None:
            self._record(_Item("call", (target, node), self.scope.qualname, -1))

    def _acc_kind(self, node: cst.Call, dotted: str | None) -> str | None:
        if dotted in SYNC_CALLS:
            return "sync"
        if dotted in XLA_COMPILE_CALLS:
            return "compile"
        if dotted in OPTIMIZER_STEP_CALLS:
            return "step"
        func = node.func
        if isinstance(func, cst.Name):
            compiled = (self.function.compiled_names, self.functions[0].compiled_names)
            return "compiled_call" if any(func.value in names for names in compiled) else None
        if not isinstance(func, cst.Attribute) or dotted in STEP_CONTEXTS:
            return None
        method = func.attr.value
        if method in {"backward", "zero_grad"}:
            return method
        if method == "step":
            receiver = _dotted(func.value).lower()
            if "sched" in receiver or (node.args and not receiver.endswith("scaler")):
                return None  # lr schedulers; env.step(action)
            return "step"
        return None

    def _leave_assign(self, node: cst.Assign) -> None:
        self._bind_value([t.target for t in node.targets], node.value)

    def _leave_ann_assign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind_value([node.target], node.value)

    def _leave_aug_assign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and self.is_tensor(node.value):
            self.function.tensor_names.add(node.target.value)


def _param_is_tensor(param: cst.Param, *, is_forward: bool, resolve) -> bool:
    annotation = param.annotation
    if annotation is not None:
        dotted = resolve(annotation.annotation) or ""
        if dotted.endswith("Tensor"):
            return True
        if dotted in NON_TENSOR_ANNOTATIONS or not is_forward:
            return False
    if not is_forward:
        return False
    default = param.default
    return default is None or (isinstance(default, cst.Name) and default.value == "None")


def _accumulation_test(test: cst.BaseExpression) -> bool:
    """`if (i + 1) % accum == 0`, `if step % N`, `if ... accumulat...`, `if accelerator.sync_gradients`."""
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Modulo):
                return True
            stack += [node.left, node.right]
        elif isinstance(node, cst.Comparison):
            stack.append(node.left)
            stack += [c.comparator for c in node.comparisons]
        elif isinstance(node, cst.BooleanOperation):
            stack += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, (cst.Name, cst.Attribute)):
            text = _dotted(node).lower()
            if "accum" in text or "sync_gradients" in text:
                return True
        elif isinstance(node, cst.Call):
            stack.append(node.func)
            stack += [a.value for a in node.args]
    return False


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


# Context hooks by node type; rules are dispatched from the tables built per run.
_ENTER = {
    "FunctionDef": Context._enter_function,
    "ClassDef": Context._enter_class,
    "For": Context._enter_loop,
    "While": Context._enter_loop,
    "With": Context._enter_with,
    "If": Context._enter_if,
    "Import": Context._visit_import,
    "ImportFrom": Context._visit_import_from,
    "Call": Context._visit_call,
}
_EXIT = {
    "FunctionDef": Context._leave_function,
    "ClassDef": Context._leave_class,
    "For": Context._leave_for_while,
    "While": Context._leave_for_while,
    "With": Context._leave_with,
    "If": Context._leave_if,
    "Assign": Context._leave_assign,
    "AnnAssign": Context._leave_ann_assign,
    "AugAssign": Context._leave_aug_assign,
}
# Tokens and whitespace: never visited by Context.run.
_TRIVIA = (
    cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline,
    cst.Comment, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon,
    cst.AssignEqual, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp,
    cst.BaseAugOp, cst.Asynchronous, cst.ImportStar,
)
_TRIVIA_FIELDS = frozenset({
    "leading_lines", "lines_after_decorators", "lpar", "rpar", "comma", "dot", "semicolon", "equal",
    "colon", "first_colon", "second_colon", "lbracket", "rbracket", "lbrace", "rbrace", "header",
    "footer", "trailing_whitespace", "operator", "asynchronous", "newline", "indent",
})
# Where libcst visits children in another order than its dataclass fields are declared.
_FIELD_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.Arg: ("keyword", "value"),
    cst.MatchCase: ("pattern", "guard", "body"),
}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
# Concrete type -> 0 (skip: token, whitespace, str, None), 1 (node to walk), 2 (sequence).
# isinstance against libcst's abstract bases is slow; a dict lookup per type is not.
_KIND: dict[type, int] = {}


def _classify(cls: type) -> int:
    mro = cls.__mro__  # not issubclass: abstract-base checks walk every registered subclass
    if tuple in mro or list in mro:
        kind = 2
    elif cst.CSTNode in mro and not any(base in mro for base in _TRIVIA):
        kind = 1
    else:
        kind = 0
    _KIND[cls] = kind
    return kind


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        import dataclasses

        fields = _FIELD_ORDER.get(cls) or tuple(
            f.name for f in dataclasses.fields(cls)
            if f.name not in _TRIVIA_FIELDS and not f.name.startswith("whitespace")
        )
        _CHILD_FIELDS[cls] = fields
    return fields


# Subtrees nothing looks into: imports are handled whole, annotations are not evaluated.
_SKIP_CHILDREN = frozenset({"Import", "ImportFrom", "Annotation"})


def _dispatch_tables(rules):
    visit: dict[str, list] = {}
    leave: dict[str, list] = {}
    for rule in rules:
        for attr in dir(type(rule)):
            if attr.startswith("visit_"):
                visit.setdefault(attr[6:], []).append(getattr(rule, attr))
            elif attr.startswith("leave_"):
                leave.setdefault(attr[6:], []).append(getattr(rule, attr))
    return visit, leave
