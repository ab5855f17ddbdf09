"""The semantic model of one file: imports, scopes, classes and what each name is bound to.

Updated as the walk goes (:mod:`detective.lint.context` calls it before the rules on
the way in and after them on the way out), so at any node it answers for the program
point the walk is at: ``resolve`` expands import aliases, the innermost
:class:`FunctionFrame` says which names hold tensors, boolean masks, host values or
input data right now (a rebinding clears what an earlier binding said), and the
innermost :class:`ClassFrame` which ``self`` attributes are tensors (buffers,
parameters) or Python numbers. What a value *is* is decided by
:class:`~detective.lint.inference.TensorInference` over this state. How assignments, loops,
returns and calls update the frames is in :mod:`detective.lint.bindings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint import tensors as T
from detective.lint.api_names import COMPILE_CALLS, COMPILER_MODULES, NON_TENSOR_LIBRARIES
from detective.lint.bindings import Bindings
from detective.lint.inference import TensorInference
from detective.lint.model import ClassInfo, Scope
from detective.lint.parameters import annotation_is_scalar, python_type_check, python_valued_names
from detective.lint.project_facts import COMPILE_FACT
from detective.lint.syntax import dotted_name


@dataclass
class FunctionFrame:
    """Bindings of one function (or the module) at the walk's current program point."""

    scope: Scope
    aliases: dict[str, str] = field(default_factory=dict)  # function-level imports
    tensor_names: set[str] = field(default_factory=set)
    bool_names: set[str] = field(default_factory=set)  # boolean tensors (masks)
    host_names: set[str] = field(default_factory=set)  # Python numbers read from tensors
    data_names: set[str] = field(default_factory=set)  # parameters and loop targets
    compare_names: set[str] = field(default_factory=set)  # chosen = top == i: a mask if indexed
    python_names: set[str] = field(default_factory=set)  # multi = n > 2 and flag: a Python value to return
    instances: dict[str, str] = field(default_factory=dict)  # model = Train(...): name -> class call target
    numeric_names: set[str] = field(default_factory=set)  # masked_target = t - start: no mask, whatever its name
    container_names: set[str] = field(default_factory=set)  # model outputs, dicts of tensors
    param_group_names: set[str] = field(default_factory=set)  # for group in opt.param_groups
    key_kinds: dict[str, dict[str, bool]] = field(default_factory=dict)  # d["k"] = tensor / Python value
    assumed_names: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tensor if helper returns one
    locals: set[str] = field(default_factory=set)  # every name assigned here (loss_fn = nn.NLLLoss())
    cpu_names: set[str] = field(default_factory=set)  # tensors already copied to the host (x.cpu())
    numpy_names: set[str] = field(default_factory=set)  # host values NumPy made (x.cpu().numpy(), np.argmax(a))
    cpu_made_names: set[str] = field(default_factory=set)  # torch.zeros(n) with no device: CPU tensors
    loader_names: set[str] = field(default_factory=set)  # MpDeviceLoader(...) bound here
    compiled_names: set[str] = field(default_factory=set)  # f = torch_xla.compile(g)
    guessed_names: set[str] = field(default_factory=set)  # forward(self, x, adaptive_r=None): tensors by guess
    guess_derived: dict[str, tuple[str, ...]] = field(default_factory=dict)  # flag = thr > 0: rests on thr
    annotations: dict[str, cst.BaseExpression] = field(default_factory=dict)  # parameters as annotated
    params: frozenset = frozenset()  # the parameters' names
    returns_scalar: bool = False  # def f(...) -> int: what it returns on trust is no tensor


# Parameters named for one of an optimizer's param groups (timm's Adopt._init_group(self,
# group, ...), Adafactor._get_lr(param_group, param_state)): Python hyperparameters and "params".
PARAM_GROUP_PARAMS = frozenset({"group", "param_group"})


@dataclass
class ClassFrame:
    info: ClassInfo
    depth: int = 0  # len(SemanticModel.functions) when entered: methods are one deeper
    tensor_attrs: set[str] = field(default_factory=set)  # buffers, parameters, tensors
    number_attrs: set[str] = field(default_factory=set)  # initialised to Python numbers
    plain_attrs: set[str] = field(default_factory=set)  # fields annotated int/float/bool/str
    # An autograd Function's ctx.<attr> -> every assignment so far a NumPy host value
    # (ctx.device_ids = mesh.get_logical_mesh() in forward, read in backward)
    ctx_numpy: dict[str, bool] = field(default_factory=dict)
    node: cst.ClassDef | None = None
    _python_valued: frozenset[str] | None = None

    def python_valued(self) -> frozenset[str]:
        """Names the class's code shows to hold Python values (scanned once, on demand)."""
        if self._python_valued is None:
            self._python_valued = python_valued_names(self.node) if self.node is not None else frozenset()
        return self._python_valued


class SemanticModel(Bindings):
    def __init__(self, module_name: str, is_package: bool, extra_roots=()):
        self.module_name = module_name
        self.is_package = is_package
        self.extra_roots = frozenset(extra_roots)
        self.imports: dict[str, str] = {}
        self.scopes: dict[str, Scope] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.anchors: dict[str, cst.CSTNode] = {}  # scope qualname -> node whose line we show
        self.functions: list[FunctionFrame] = []
        self.class_stack: list[ClassFrame] = []
        self.imports_xla = False  # torch_xla imported so far (in walk order)
        self.module_imports: list[str] = []
        self.star_imports: list[str] = []  # from pkg.mod import * (module level)
        self.project_facts: list[str] = []  # see FileSummary.facts
        self.infer = TensorInference(self)
        # Functions of this file whose returns are on the CPU whenever their tensor arguments
        # are (cumsum_exclusive(t) = F.pad(t, p).cumsum(-1)), for calls later in the file.
        self.cpu_following: dict[str, bool] = {}
        self._resolved: dict[int, str | None] = {}  # id(node) -> dotted; the tree outlives the walk
        self._targets: dict[int, str | None] = {}  # id(func) -> call_target, while the aliases hold
        self._defs: list[cst.FunctionDef] = []  # the functions being walked, innermost last
        self._comprehensions: list[list | None] = []  # what each open comprehension's targets hid
        # `if isinstance(p, int):` -> id of the side where p is a Python number -> p; the
        # sides being walked with such a name, innermost last (infer._narrowed holds it).
        self._narrowing: dict[int, str] = {}
        self._narrowed_sides: list[tuple[int, str]] = []
        module_scope = Scope(qualname="<module>", display="<module>", line=1)
        self.scopes["<module>"] = module_scope
        self.functions.append(FunctionFrame(module_scope))

    # ------------------------------------------------------------------ where we are
    @property
    def function(self) -> FunctionFrame:
        return self.functions[-1]

    @property
    def scope(self) -> Scope:
        return self.functions[-1].scope

    @property
    def cls(self) -> ClassFrame | None:
        """The class whose method we are in (None in plain functions)."""
        scope = self.functions[-1].scope
        if self.class_stack and scope.class_name == self.class_stack[-1].info.qualname:
            return self.class_stack[-1]
        return None

    def in_class_body(self) -> bool:
        # Directly in a class body when the innermost class was entered after the
        # innermost function.
        return bool(self.class_stack) and self.class_stack[-1].depth == len(self.functions)

    # ------------------------------------------------------------------ names
    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Dotted name of a Name/Attribute chain with import aliases expanded (memoised per
        node: every rule asks about the same call's callee)."""
        key = id(node)
        if key in self._resolved:
            return self._resolved[key]
        result = self._resolve(node)
        self._resolved[key] = result
        return result

    def _resolve(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            for frame in reversed(self.functions):
                if node.value in frame.aliases:
                    return frame.aliases[node.value]
            return self.imports.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr.value}" if base else None
        return None

    def is_import_alias(self, func: cst.BaseExpression) -> bool:
        while isinstance(func, cst.Attribute):
            func = func.value
        if not isinstance(func, cst.Name):
            return False
        return func.value in self.imports or any(func.value in f.aliases for f in self.functions)

    def library_function(self, func: cst.BaseExpression) -> bool:
        """``np.unique(m)``, ``math.sqrt(n)``, ``np.random.default_rng()``: a function of a
        non-tensor library (imported, or under its conventional alias), no tensor method."""
        if not isinstance(func, cst.Attribute):
            return False
        head = func.value
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name) or any(head.value in f.locals for f in self.functions):
            return False
        if head.value in T.MODULE_ALIASES:
            return True
        return self.is_import_alias(func) \
            and (self.resolve(func) or "").split(".", 1)[0] in NON_TENSOR_LIBRARIES

    def instance_target(self, fn: cst.BaseExpression) -> str | None:
        """``torch.compile(model)``, ``(model.forward)``, ``(model.act)`` with ``model =
        Train(...)`` bound in this function: that method of the class built."""
        if isinstance(fn, cst.Name):
            name, method = fn.value, "forward"
        elif isinstance(fn, cst.Attribute) and isinstance(fn.value, cst.Name):
            name, method = fn.value.value, fn.attr.value
        else:
            return None
        built = self.function.instances.get(name)
        return f"{built}.{method}" if built else None

    def call_target(self, func: cst.BaseExpression) -> str | None:
        """What a call resolves to later, across files: ``self.m``, ``super.m``, a dotted
        import, or ``local:name`` for something this file defines; None for torch/builtins.
        Memoised per node (four recorders ask about every call) until an import or a def
        changes what is an import alias."""
        key = id(func)
        if key in self._targets:
            return self._targets[key]
        result = self._targets[key] = self._call_target(func)
        return result

    def _call_target(self, func: cst.BaseExpression) -> str | None:
        if isinstance(func, cst.Attribute):
            value = func.value
            if isinstance(value, cst.Name) and value.value == "self":
                return f"self.{func.attr.value}"
            if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) \
                    and value.value.value == "self":
                return f"self.{value.attr.value}.{func.attr.value}"
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "super":
                return f"super.{func.attr.value}"
        dotted = self.resolve(func)
        if dotted is None or T.is_torch_name(dotted) or dotted in T.PY_BUILTINS_NOT_TENSOR:
            return None
        if isinstance(func, (cst.Name, cst.Attribute)) and self.is_import_alias(func):
            return dotted
        return f"local:{dotted}" if dotted.split(".", 1)[0] else None

    def note_import(self, dotted: str) -> None:
        self.module_imports.append(dotted)
        if dotted == "torch_xla" or dotted.startswith("torch_xla."):
            self.imports_xla = True
        self.note_compile(dotted)

    def note_compile(self, dotted: str | None) -> None:
        """``torch.compile``, ``torch._dynamo.*``, ``torch.compiler.*`` used: the project
        targets torch.compile (see detective.lint.project_facts)."""
        if dotted and (dotted == "torch.compile" or f"{dotted}.".startswith(COMPILER_MODULES)) \
                and COMPILE_FACT not in self.project_facts:
            self.project_facts.append(COMPILE_FACT)

    def visit_Import(self, node: cst.Import) -> None:
        self._targets.clear()
        target = self.imports if len(self.functions) == 1 else self.function.aliases
        for alias in node.names:
            dotted = dotted_name(alias.name)
            self.note_import(dotted)
            if alias.asname is not None:
                target[alias.asname.name.value] = dotted
            else:
                head = dotted.split(".", 1)[0]
                target[head] = head

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._targets.clear()
        base = dotted_name(node.module) if node.module is not None else ""
        if node.relative:
            parts = self.module_name.split(".")
            if not self.is_package:
                parts = parts[:-1]
            up = len(node.relative) - 1
            parts = parts[: len(parts) - up] if up else parts
            base = ".".join([*parts, base] if base else parts)
        if isinstance(node.names, cst.ImportStar):
            if base and len(self.functions) == 1:
                self.note_import(base)
                self.star_imports.append(base)  # resolution looks in there for names defined nowhere else
            return
        target = self.imports if len(self.functions) == 1 else self.function.aliases
        if base:
            self.note_import(base)
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else dotted_name(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            target[local] = f"{base}.{name}" if base else name
            self.note_import(target[local])

    # ------------------------------------------------------------------ scopes
    def qualify(self, name: str) -> str:
        if self.in_class_body():
            return f"{self.class_stack[-1].info.qualname}.{name}"
        parent = self.scope.qualname
        return name if parent == "<module>" else f"{parent}.{name}"

    def add_scope(self, scope: Scope, anchor: cst.CSTNode) -> None:
        # Redefinitions (if/else branches) get a suffix so both are kept.
        base, n = scope.qualname, 1
        while scope.qualname in self.scopes:
            n += 1
            scope.qualname = f"{base}#{n}"
        self.scopes[scope.qualname] = scope
        self.anchors[scope.qualname] = anchor

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        in_class = self.in_class_body()
        qualname = self.qualify(name)
        decorators = []
        root_reason = None
        for dec in node.decorators:
            target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
            dotted = self.resolve(target) or ""
            decorators.append(dotted)
            self.note_compile(dotted)
            if dotted in COMPILE_CALLS:
                root_reason = f"@{dotted}"
            elif dotted in self.extra_roots or dotted.rsplit(".", 1)[-1] in self.extra_roots:
                root_reason = f"@{dotted} (configured root)"
        if root_reason is None and (name in self.extra_roots or qualname in self.extra_roots):
            root_reason = "configured root"
        scope = Scope(qualname=qualname, display=qualname, line=0,
                      # A def nested in a method closes over its self.
                      class_name=self.class_stack[-1].info.qualname if in_class else self.scope.class_name,
                      parent=self.scope.qualname, root_reason=root_reason, decorators=decorators)
        self.add_scope(scope, node.name)
        if in_class:
            self.class_stack[-1].info.methods.append(name)
        frame = FunctionFrame(scope)
        frame.returns_scalar = node.returns is not None and annotation_is_scalar(node.returns.annotation)
        params = node.params
        for extra in (params.star_arg, params.star_kwarg):
            # A constructor's **kwargs are options (RadTTS: self.ap_use_unvoiced_bias =
            # kwargs["ap_use_unvoiced_bias"]), not the fields of a batch.
            if isinstance(extra, cst.Param) and not (in_class and name == "__init__" and extra is params.star_kwarg):
                frame.data_names.add(extra.name.value)
        # autograd.Function's static backward gets tensors like forward; ctx is not one.
        is_forward = in_class and (name == "forward" or (
            name == "backward" and any(d.endswith("staticmethod") for d in decorators)))
        plain = set()
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            pname = param.name.value
            if pname in {"self", "cls", "ctx"}:
                continue
            if param.annotation is None and is_forward and pname in self.class_stack[-1].python_valued():
                plain.add(pname)  # forward(self, x, layer_results=None) compared with "end" elsewhere
                continue
            if pname in PARAM_GROUP_PARAMS and param.annotation is None and not is_forward:
                # an optimizer's helpers take one of its param groups: _init_group(self, group, ...)
                # (a module's forward(self, group) gets whatever its callers pass: data)
                frame.param_group_names.add(pname)
                plain.add(pname)
                continue
            frame.data_names.add(pname)
            if param.annotation is not None:
                frame.annotations[pname] = param.annotation.annotation
            if self.infer.param_is_tensor(param, is_forward=is_forward):
                frame.tensor_names.add(pname)
                if param.annotation is None:
                    frame.guessed_names.add(pname)
        frame.params = frozenset(frame.data_names | plain)
        if self._defs and not in_class:
            self.bind_params_from_call_sites(self._defs[-1], node, frame)
        self._defs.append(node)
        self.functions.append(frame)
        self._targets.clear()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defs.pop()
        self.functions.pop()
        self._targets.clear()

    def visit_If(self, node: cst.If) -> None:
        """``if isinstance(p, int): ...`` (Python scalar types only): in that side ``p`` is a
        Python number, whatever it was annotated (``offset: Union[int, Tensor]``); likewise
        the ``else`` of ``if not isinstance(p, int)``, and the side where ``isinstance(p,
        torch.Tensor)`` is false (demucs' ``center_trim(tensor, reference)``)."""
        test = node.test
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        inner = test.expression if negated else test
        name, tensor = python_type_check(inner), self._tensor_type_check(inner)
        # the side where the name is not a tensor: isinstance(p, int) true, or isinstance(p, Tensor) false
        side = node.body if (name and not negated) or (tensor and negated) else \
            node.orelse.body if (name or tensor) and isinstance(node.orelse, cst.Else) else None
        if side is not None:
            self._narrowing[id(side)] = name or tensor

    def _tensor_type_check(self, node: cst.BaseExpression) -> str:
        """``p`` of ``isinstance(p, torch.Tensor)``, else ""."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance" \
                and len(node.args) == 2 and isinstance(node.args[0].value, cst.Name) \
                and self.resolve(node.args[1].value) in ("torch.Tensor", "torch.nn.Parameter"):
            return node.args[0].value.value
        return ""

    def visit_IndentedBlock(self, node: cst.BaseSuite) -> None:
        name = self._narrowing.pop(id(node), None) if self._narrowing else None
        if name and name not in self.infer._narrowed:
            self.infer._narrowed.add(name)
            self._narrowed_sides.append((id(node), name))

    def leave_IndentedBlock(self, node: cst.BaseSuite) -> None:
        if self._narrowed_sides and self._narrowed_sides[-1][0] == id(node):
            self.infer._narrowed.discard(self._narrowed_sides.pop()[1])

    visit_SimpleStatementSuite = visit_IndentedBlock
    leave_SimpleStatementSuite = leave_IndentedBlock

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        qualname = self.qualify(node.name.value)
        bases = []
        for arg in node.bases:
            dotted = self.resolve(arg.value)
            if dotted:
                bases.append(dotted if self.is_import_alias(arg.value) else f"local:{dotted}")
        info = ClassInfo(qualname=qualname, line=0, bases=bases, methods=[])
        base, n = qualname, 1
        while info.qualname in self.classes:
            n += 1
            info.qualname = f"{base}#{n}"
        self.classes[info.qualname] = info
        self.anchors[f"class:{info.qualname}"] = node.name
        self.class_stack.append(ClassFrame(info, depth=len(self.functions), node=node))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        frame = self.class_stack.pop()
        frame.info.tensor_attrs = sorted(frame.tensor_attrs)
