"""The semantic model of one file: imports, scopes, classes and what each name is bound to.

Updated as the walk goes (:mod:`detective.lint.context` calls it before the rules on
the way in and after them on the way out), so at any node it answers for the program
point the walk is at: ``resolve`` expands import aliases, the innermost
:class:`FunctionFrame` says which names hold tensors, boolean masks, host values or
input data right now (a rebinding clears what an earlier binding said), and the
innermost :class:`ClassFrame` which ``self`` attributes are tensors (buffers,
parameters) or Python numbers. What a value *is* is decided by
:class:`~detective.lint.inference.TensorInference` over this state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint import tensors as T
from detective.lint.inference import MODEL_NAMES, TensorInference, _compares_values
from detective.lint.model import ClassInfo, Scope
from detective.lint.parameters import python_valued_names
from detective.lint.project_facts import COMPILE_FACT

COMPILE_CALLS = frozenset({"torch.compile", "torch_xla.compile", "torch_xla.torch_xla.compile"})
XLA_COMPILE_CALLS = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
COMPILER_MODULES = ("torch._dynamo.", "torch.compiler.")
SYNCING_LOADERS = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
    }
)


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
    container_names: set[str] = field(default_factory=set)  # model outputs, dicts of tensors
    assumed_names: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tensor if helper returns one
    locals: set[str] = field(default_factory=set)  # every name assigned here (loss_fn = nn.NLLLoss())
    cpu_names: set[str] = field(default_factory=set)  # tensors already copied to the host (x.cpu())
    cpu_made_names: set[str] = field(default_factory=set)  # torch.zeros(n) with no device: CPU tensors
    loader_names: set[str] = field(default_factory=set)  # MpDeviceLoader(...) bound here
    compiled_names: set[str] = field(default_factory=set)  # f = torch_xla.compile(g)
    guessed_names: set[str] = field(default_factory=set)  # forward(self, x, adaptive_r=None): tensors by guess
    annotations: dict[str, cst.BaseExpression] = field(default_factory=dict)  # parameters as annotated
    params: frozenset = frozenset()  # the parameters' names


@dataclass
class ClassFrame:
    info: ClassInfo
    depth: int = 0  # len(SemanticModel.functions) when entered: methods are one deeper
    tensor_attrs: set[str] = field(default_factory=set)  # buffers, parameters, tensors
    number_attrs: set[str] = field(default_factory=set)  # initialised to Python numbers
    node: cst.ClassDef | None = None
    _python_valued: frozenset[str] | None = None

    def python_valued(self) -> frozenset[str]:
        """Names the class's code shows to hold Python values (scanned once, on demand)."""
        if self._python_valued is None:
            self._python_valued = python_valued_names(self.node) if self.node is not None else frozenset()
        return self._python_valued


class SemanticModel:
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
        self.project_facts: list[str] = []  # see FileSummary.facts
        self.infer = TensorInference(self)
        # Functions of this file whose returns are on the CPU whenever their tensor arguments
        # are (cumsum_exclusive(t) = F.pad(t, p).cumsum(-1)), for calls later in the file.
        self.cpu_following: dict[str, bool] = {}
        self._resolved: dict[int, str | None] = {}  # id(node) -> dotted; the tree outlives the walk
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

    def call_target(self, func: cst.BaseExpression) -> str | None:
        """What a call resolves to later, across files: ``self.m``, ``super.m``, a dotted
        import, or ``local:name`` for something this file defines; None for torch/builtins."""
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
        if isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module) if node.module is not None else ""
        if node.relative:
            parts = self.module_name.split(".")
            if not self.is_package:
                parts = parts[:-1]
            up = len(node.relative) - 1
            parts = parts[: len(parts) - up] if up else parts
            base = ".".join([*parts, base] if base else parts)
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
        params = node.params
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
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
            frame.data_names.add(pname)
            if param.annotation is not None:
                frame.annotations[pname] = param.annotation.annotation
            if self.infer.param_is_tensor(param, is_forward=is_forward):
                frame.tensor_names.add(pname)
                if param.annotation is None:
                    frame.guessed_names.add(pname)
        frame.params = frozenset(frame.data_names | plain)
        self.functions.append(frame)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

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

    # ------------------------------------------------------------------ bindings
    def bind_target(self, target: cst.BaseExpression, *, tensor=False, boolean=False,
                    host=False, data=False, compare=False, container=False) -> None:
        frame = self.function
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind_target(element.value, tensor=tensor, data=data)
            return
        if isinstance(target, cst.StarredElement):
            self.bind_target(target.value, tensor=tensor, data=data)
            return
        if not isinstance(target, cst.Name):
            return
        name = target.value
        frame.locals.add(name)
        frame.guessed_names.discard(name)  # rebound: no longer the argument as passed
        frame.annotations.pop(name, None)
        for flag, names in ((tensor, frame.tensor_names), (boolean, frame.bool_names),
                            (host, frame.host_names), (data, frame.data_names),
                            (compare, frame.compare_names), (container, frame.container_names)):
            (names.add if flag else names.discard)(name)

    def bind_value(self, targets, value: cst.BaseExpression) -> None:
        if len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List)) \
                and isinstance(value, (cst.Tuple, cst.List)) \
                and len(targets[0].elements) == len(value.elements) \
                and not any(isinstance(e, cst.StarredElement) for e in (*targets[0].elements, *value.elements)):
            # bsz, max_len = lens.size(0), lens.max().item(): element by element
            for target, element in zip(targets[0].elements, value.elements):
                self.bind_value([target.value], element.value)
            return
        infer = self.infer
        infer.assumed.clear()
        tensor = infer.is_tensor(value)
        trusted = tuple(infer.assumed) if tensor else ()
        boolean = tensor and infer.is_bool_tensor(value)
        host = not tensor and infer.is_host_value(value)
        compare = not tensor and _compares_values(value)
        on_host = infer.on_host(value)
        cpu_made = tensor and infer.made_on_cpu(value)
        container = not tensor and self._is_model_output(value)
        for target in targets:
            if isinstance(target, cst.Attribute):
                # Attributes outlive the walk's program point: only definite tensors count
                # (not a forward argument taken for a tensor by its name or None default).
                guessed = isinstance(value, cst.Name) and value.value in self.function.guessed_names
                self._bind_attribute(target, value, tensor and not trusted and not guessed)
                continue
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and tensor:
                self.function.container_names.add(target.value.value)  # d["k"] = tensor
                continue
            self.bind_target(target, tensor=tensor, boolean=boolean, host=host, compare=compare,
                             container=container, data=self._is_data_element(value))
            self._trust(target, trusted)
            self._bind_cpu(target, on_host, cpu_made)
            if isinstance(value, cst.Call) and isinstance(target, cst.Name):
                called = self.resolve(value.func)
                if called in SYNCING_LOADERS:
                    self.function.loader_names.add(target.value)
                if called in XLA_COMPILE_CALLS and value.args:
                    self.function.compiled_names.add(target.value)

    def _bind_cpu(self, target: cst.BaseExpression, on_host: bool, cpu_made: bool) -> None:
        """Where the value lives: a host copy (``u, idx, c = uniques[b]`` of ``.cpu()`` results)
        or a tensor made on the CPU; each name of a tuple target alike."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_cpu(element.value, on_host, cpu_made)
        elif isinstance(target, cst.StarredElement):
            self._bind_cpu(target.value, on_host, cpu_made)
        elif isinstance(target, cst.Name):
            frame = self.function
            (frame.cpu_names.add if on_host else frame.cpu_names.discard)(target.value)
            (frame.cpu_made_names.add if cpu_made else frame.cpu_made_names.discard)(target.value)

    def _trust(self, target: cst.BaseExpression, trusted: tuple[str, ...]) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            # x, pad = helper(...): element i is a tensor if the helper's i-th result is.
            for index, element in enumerate(target.elements):
                self._trust(element.value, tuple(t if "@" in t else f"{t}@{index}" for t in trusted))
        elif isinstance(target, cst.Name):
            if trusted:
                self.function.assumed_names[target.value] = trusted
            else:
                self.function.assumed_names.pop(target.value, None)

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        scope = self.scope
        if value is None or scope.qualname == "<module>":
            return
        infer = self.infer
        infer.params_on_cpu = True
        follows = infer.made_on_cpu(value)
        infer.params_on_cpu = False
        self.cpu_following[scope.qualname] = self.cpu_following.get(scope.qualname, True) and follows
        if isinstance(value, cst.Tuple):
            # return x, pad_length: which positions are tensors ("tensor", or the calls
            # whose results they are, "a|b"; target@i in assumptions).
            items = scope.return_items
            for index, element in enumerate(value.elements):
                infer.assumed.clear()
                if infer.is_tensor(element.value):
                    items.extend([""] * (index + 1 - len(items)))
                    if items[index] != "tensor":
                        calls = [t for t in (items[index].split("|") if items[index] else []) + infer.assumed]
                        items[index] = "|".join(dict.fromkeys(calls)) if infer.assumed else "tensor"
            return
        infer.assumed.clear()
        if infer.is_tensor(value):
            if not infer.assumed:
                scope.returns = "tensor"
                return
            scope.return_calls.extend(t for t in infer.assumed if t not in scope.return_calls)
        elif scope.returns != "tensor" and _is_python_value(value, infer):
            scope.returns = "python"

    def _is_data_element(self, value: cst.BaseExpression) -> bool:
        """``net_input = sample["net_input"]``: a nested mapping of the input is input too."""
        if not isinstance(value, cst.Subscript):
            return False
        while isinstance(value, cst.Subscript):
            if len(value.slice) != 1 or not isinstance(value.slice[0].slice, cst.Index) \
                    or T.literal_string(value.slice[0].slice.value) is None:
                return False
            value = value.value
        return isinstance(value, cst.Name) and value.value in self.function.data_names

    def _is_model_output(self, value: cst.BaseExpression) -> bool:
        """``net_output = model(**sample["net_input"])``: a model passed in, called."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        name = func.value if isinstance(func, cst.Name) else None
        if name is None or name not in self.function.data_names:
            return False
        return name in MODEL_NAMES or name.endswith("_model")

    def _bind_attribute(self, target: cst.Attribute, value: cst.BaseExpression, tensor: bool) -> None:
        cls = self.cls
        if cls is None or not (isinstance(target.value, cst.Name) and target.value.value == "self"):
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
            imported = self.is_import_alias(value.func)
            if dotted and (dotted.rsplit(".", 1)[-1][:1].isupper() or imported):
                # A class, or an imported factory (tutel_moe.fast_dispatcher(...)): its
                # methods are not the project's namesakes when it comes from outside.
                cls.info.attr_types[attr] = dotted if imported else f"local:{dotted}"

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        target = node.target
        method = it.func.attr.value if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) else ""
        called = self.resolve(it.func) if isinstance(it, cst.Call) else None
        if method in {"items", "keys"} or method.startswith("named_") or called == "range":
            self.bind_target(target)  # keys, names and indices: not input data
        elif called == "enumerate" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            self.bind_target(target.elements[0].value)
            self._bind_items(target.elements[1].value, it.args[0].value if it.args else None)
        elif self.infer.iterates_keys(node):
            self.bind_target(target)  # for k in d: ... d[k]: d is a mapping, k its key
        else:
            # for row in batch_tensor: each row is a tensor too.
            self._bind_items(target, it)
            if called == "zip" and isinstance(target, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(it.args) and not any(a.star for a in it.args):
                # for row, n in zip(host, lengths): row is an item of a host copy, n is not
                for element, arg in zip(target.elements, it.args):
                    self._bind_cpu(element.value, self.infer.on_host(arg.value), False)

    def _bind_items(self, target: cst.BaseExpression, iterable: cst.BaseExpression | None) -> None:
        """Loop targets over ``iterable``: tensors when it is one, on the same trust (the items
        of ``product(...)`` or of a helper's result are tensors only if it returns one)."""
        infer = self.infer
        infer.assumed.clear()
        tensor = iterable is not None and infer.is_tensor(iterable)
        trusted = tuple(dict.fromkeys(infer.assumed)) if tensor else ()
        infer.assumed.clear()
        self.bind_target(target, data=True, tensor=tensor)
        self._bind_cpu(target, iterable is not None and infer.on_host(iterable), False)
        stack = [target]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in node.elements)
            elif isinstance(node, cst.StarredElement):
                stack.append(node.value)
            elif isinstance(node, cst.Name):
                if trusted:
                    self.function.assumed_names[node.value] = trusted
                else:
                    self.function.assumed_names.pop(node.value, None)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, (cst.Name, cst.Attribute)):
            self.note_compile(self.resolve(func))
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and len(node.args) == 1 \
                and isinstance(func.value, cst.Name) and func.value.value in self.function.locals:
            # uniques.append(p.cpu().unique_consecutive()): a list of host copies (while every
            # element appended is one).
            on_host = self.infer.on_host(node.args[0].value)
            (self.function.cpu_names.add if on_host else self.function.cpu_names.discard)(func.value.value)
        if isinstance(func, cst.Attribute) and func.attr.value in {"register_buffer", "register_parameter"} \
                and isinstance(func.value, cst.Name) and func.value.value == "self" and node.args:
            name = T.literal_string(node.args[0].value)
            cls = self.cls
            if name and cls is not None:
                cls.tensor_attrs.add(name)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.bind_value([t.target for t in node.targets], node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_value([node.target], node.value)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if not isinstance(node.target, cst.Name):
            return
        infer, frame, name = self.infer, self.function, node.target.value
        infer.assumed.clear()
        if infer.is_tensor(node.value) and name not in frame.tensor_names:
            # size *= n with n from a helper: a tensor only if the helper returns one.
            frame.tensor_names.add(name)
            if infer.assumed:
                frame.assumed_names[name] = tuple(dict.fromkeys(infer.assumed))
        infer.assumed.clear()


def _is_python_value(value: cst.BaseExpression, infer) -> bool:
    """``return self.n == self.k``, ``return True``, ``return len(x) > 2``: no tensor."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(value, cst.Name):
        return value.value in {"True", "False", "None"}
    if isinstance(value, (cst.Comparison, cst.BooleanOperation)):
        return True  # and is_tensor said no
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not):
        return True
    return infer.is_host_value(value)


def dotted_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""
