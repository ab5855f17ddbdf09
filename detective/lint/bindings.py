"""How assignments, loops, returns and calls bind names in the semantic model: what a name
holds after ``x = ...``, ``for a, b in ...``, ``x += ...`` (a tensor, a boolean mask, a host
copy, a CPU-made tensor, input data, a model output) and what a function returns.

A mixin of :class:`~detective.lint.semantic.SemanticModel`, which owns the frames these
methods update; kept apart so the model's imports, scopes and classes read on their own.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from detective.lint import tensors as T
from detective.lint.api_names import SYNCING_LOADERS, XLA_COMPILE_CALLS, XLA_PROGRAM_CALLS
from detective.lint.call_site_params import CallSiteParams
from detective.lint.compile_calls import COMPILING_CALLS, compiled_part, compiles_self, module_compile
from detective.lint.inference import MODEL_NAMES, _compares_values
from detective.lint.export_code import EXPORT_CALLS
from detective.lint.model import COMPILES, COMPILES_PART, COMPILES_SELF, DRIVES_XLA, EXPORT_CHECKS, USES_XLA
from detective.lint.syntax import bound_names


class Bindings(CallSiteParams):
    def bind_target(self, target: cst.BaseExpression, *, tensor=False, boolean=False,
                    host=False, data=False, compare=False, container=False, param_group=False,
                    numeric=False, python=False) -> None:
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
        frame.guess_derived.pop(name, None)
        frame.annotations.pop(name, None)
        frame.key_kinds.pop(name, None)
        for flag, names in ((tensor, frame.tensor_names), (boolean, frame.bool_names),
                            (host, frame.host_names), (data, frame.data_names),
                            (compare, frame.compare_names), (container, frame.container_names),
                            (param_group, frame.param_group_names), (numeric, frame.numeric_names),
                            (python, frame.python_names)):
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
        tensor, guesses = infer.tensor_and_guesses(value)
        trusted = tuple(infer.assumed) if tensor else ()
        boolean = tensor and infer.is_bool_tensor(value)
        # numbers or indices (`x.topk(k).indices` included, though not followed as a tensor):
        # no mask, whatever the name says
        numeric = not boolean and infer.is_numeric_tensor(value)
        if isinstance(value, cst.Call) and self.resolve(value.func) == "slice":
            # mask_slice = slice(1, None): no mask, unless another branch bound a mask to it
            # (valid_mask = m.bool() if ... else slice(None)): the walk keeps the last binding
            function = self.function
            if any(isinstance(t, cst.Name) and (t.value in function.bool_names or t.value in function.compare_names)
                   for t in targets):
                return
            numeric = True
        host = not tensor and infer.is_host_value(value)
        compare = not tensor and _compares_values(value)
        python = not tensor and _is_python_value(value, infer)
        on_host = infer.on_host(value)
        numpy = on_host and infer.through_numpy(value)
        cpu_made = tensor and infer.made_on_cpu(value)
        container = not tensor and self._is_model_output(value)
        built = self._class_built(value)
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)) and tensor and not trusted:
                # self.s, self.m = torch.std_mean(x): each attribute holds a tensor
                for element in target.elements:
                    if isinstance(element.value, cst.Attribute):
                        self._bind_attribute(element.value, element.value, True)
            if isinstance(target, cst.Attribute):
                # Attributes outlive the walk's program point: only definite tensors count
                # (not a forward argument taken for a tensor by its name or None default).
                guessed = isinstance(value, cst.Name) and value.value in self.function.guessed_names
                self._bind_attribute(target, value, tensor and not trusted and not guessed, numpy)
                continue
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and (tensor or python):
                name, function = target.value.value, self.function
                key = T.literal_string(target.slice[0].slice.value) \
                    if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) else None
                if key is not None:
                    # state["step"] = 0 beside state["exp_avg"] = torch.zeros_like(p): each
                    # key holds what it was given (a tensor once, a tensor for good)
                    kinds = function.key_kinds.setdefault(name, {})
                    kinds[key] = tensor or kinds.get(key, False)
                if tensor and name not in function.param_group_names:
                    # d["k"] = tensor; an optimizer's param group keeps its Python hyperparameters
                    function.container_names.add(name)
                continue
            self.bind_target(target, tensor=tensor, boolean=boolean, host=host, compare=compare,
                             container=container, data=self._is_data_element(value), numeric=numeric,
                             python=python)
            if guesses and isinstance(target, cst.Name):
                # flag = score_threshold > 0: a tensor only if the guessed parameter is one
                self.function.guess_derived[target.value] = guesses
            self._trust(target, trusted)
            self._bind_cpu(target, on_host, cpu_made, numpy)
            if isinstance(target, cst.Name):
                # model = Train(...): torch.compile(model) later compiles Train's forward
                (self.function.instances.__setitem__(target.value, built) if built
                 else self.function.instances.pop(target.value, None))
            if isinstance(value, cst.Call) and isinstance(target, cst.Name):
                called = self.resolve(value.func)
                if called in SYNCING_LOADERS:
                    self.function.loader_names.add(target.value)
                if called in XLA_COMPILE_CALLS and value.args:
                    self.function.compiled_names.add(target.value)

    def _class_built(self, value: cst.BaseExpression) -> str | None:
        """``Train(encoder)``: the call target of a class it builds (a capitalised name, not
        torch's), else None."""
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return None
        target = self.call_target(value.func)
        if target is None or target.startswith(("self.", "super.")):
            return None
        return target if target.removeprefix("local:").rsplit(".", 1)[-1][:1].isupper() else None

    def _bind_cpu(self, target: cst.BaseExpression, on_host: bool, cpu_made: bool, numpy: bool = False) -> None:
        """Where the value lives: a host copy (``u, idx, c = uniques[b]`` of ``.cpu()`` results),
        one NumPy made, or a tensor made on the CPU; each name of a tuple target alike."""
        frame = self.function
        for name in bound_names(target):
            (frame.cpu_names.add if on_host else frame.cpu_names.discard)(name)
            (frame.numpy_names.add if numpy else frame.numpy_names.discard)(name)
            (frame.cpu_made_names.add if cpu_made else frame.cpu_made_names.discard)(name)

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
            # Every position is known, tensor or not: `return steps, n - start` says its
            # second item is no tensor, which no guess about the method may override.
            items.extend([""] * (len(value.elements) - len(items)))
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
                scope.returns = "tensor"  # evidence outweighs an annotation: -> int, return m.sum()
                return
            if not self.function.returns_scalar:
                scope.return_calls.extend(t for t in infer.assumed if t not in scope.return_calls)
                return
        if scope.returns != "tensor" and (self.function.returns_scalar or _is_python_value(value, infer)):
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

    def _bind_attribute(self, target: cst.Attribute, value: cst.BaseExpression, tensor: bool,
                        numpy: bool = False) -> None:
        cls = self.cls
        if cls is not None and isinstance(target.value, cst.Name) and target.value.value == "ctx":
            attr = target.attr.value
            cls.ctx_numpy[attr] = numpy and cls.ctx_numpy.get(attr, True)
            return
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
        built = _built_field(value)
        if built is not None:  # self.dispatcher = config.dispatcher.build()
            param, name = built
            annotation = next((p.annotation for p in self._defs[-1].params.params
                               if p.name.value == param and p.annotation is not None), None) if self._defs else None
            config = self._class_ref(annotation.annotation) if annotation is not None else ""
            if config:
                cls.info.built_attrs[attr] = f"{config}|{name}"
            return
        if isinstance(value, cst.Call):
            dotted = self.resolve(value.func)
            imported = self.is_import_alias(value.func)
            if dotted and (dotted.rsplit(".", 1)[-1][:1].isupper() or imported):
                # A class, or an imported factory (tutel_moe.fast_dispatcher(...)): its
                # methods are not the project's namesakes when it comes from outside.
                cls.info.attr_types[attr] = dotted if imported else f"local:{dotted}"

    def visit_For(self, node: cst.For) -> None:
        self._bind_loop(node.target, node.iter, node.body)

    # A comprehension binds its targets before its element is walked (libcst visits the
    # element first) and only inside it: `[str(x) for x in row.tolist()]` in a forward(x).
    def visit_ListComp(self, node) -> None:
        self._enter_comprehension(node.for_in, node.elt)

    def visit_DictComp(self, node) -> None:
        self._enter_comprehension(node.for_in, node.value)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def leave_ListComp(self, node) -> None:
        saved = self._comprehensions.pop()
        if saved is not None:
            restore_names(self.function, saved)

    leave_SetComp = leave_GeneratorExp = leave_DictComp = leave_ListComp

    def _enter_comprehension(self, for_in: cst.CompFor, element: cst.CSTNode) -> None:
        if not self.functions:  # module level: no frame to bind in
            self._comprehensions.append(None)
            return
        fors = [for_in]
        while fors[-1].inner_for_in is not None:
            fors.append(fors[-1].inner_for_in)
        names = [n for comp in fors for n in bound_names(comp.target)]
        self._comprehensions.append(save_names(self.function, names))
        for comp in fors:
            self._bind_loop(comp.target, comp.iter, element)

    def _bind_loop(self, target: cst.BaseExpression, it: cst.BaseExpression, body: cst.CSTNode) -> None:
        called = self.resolve(it.func) if isinstance(it, cst.Call) else None
        if _names_keys_or_indices(it, self.resolve):
            self.bind_target(target)  # keys, names and indices: not input data
        elif isinstance(it, cst.Attribute) and it.attr.value == "param_groups":
            # An optimizer's groups: group["params"] holds tensors, the rest are the
            # hyperparameters the constructor was given (Python numbers, not data).
            self.bind_target(target, param_group=True)
        elif called == "enumerate" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            self.bind_target(target.elements[0].value)
            self._bind_items(target.elements[1].value, it.args[0].value if it.args else None)
        elif self.infer.iterates_keys(target, it, body):
            self.bind_target(target)  # for k in d: ... d[k]: d is a mapping, k its key
        else:
            # for row in batch_tensor: each row is a tensor too.
            self._bind_items(target, it)
            if called == "zip" and isinstance(target, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(it.args) and not any(a.star for a in it.args):
                # for row, n in zip(host, lengths): row is an item of a host copy, n is not
                for element, arg in zip(target.elements, it.args):
                    on_host = self.infer.on_host(arg.value)
                    self._bind_cpu(element.value, on_host, False, on_host and self.infer.through_numpy(arg.value))
                    if _names_keys_or_indices(arg.value, self.resolve):
                        # zip(a.named_parameters(), b.named_parameters()): (name, param) pairs
                        self.bind_target(element.value)

    def _bind_items(self, target: cst.BaseExpression, iterable: cst.BaseExpression | None) -> None:
        """Loop targets over ``iterable``: tensors when it is one, on the same trust (the items
        of ``product(...)`` or of a helper's result are tensors only if it returns one)."""
        infer = self.infer
        infer.assumed.clear()
        # for c in batch["captions"]: a field iterated item by item in Python is a list
        tensor = iterable is not None and infer.is_tensor(iterable) and not infer.data_field_only(iterable)
        trusted = tuple(dict.fromkeys(infer.assumed)) if tensor else ()
        infer.assumed.clear()
        self.bind_target(target, data=True, tensor=tensor)
        on_host = iterable is not None and infer.on_host(iterable)
        self._bind_cpu(target, on_host, False, on_host and infer.through_numpy(iterable))
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
            dotted = self.resolve(func)
            self.note_compile(dotted)
            if COMPILES not in self.scope.tags and (dotted in COMPILING_CALLS or module_compile(node)):
                self.scope.tags.append(COMPILES)  # read by lint/entrances.py (what a test runs)
            if COMPILES_SELF not in self.scope.tags and compiles_self(node, dotted):
                self.scope.tags.append(COMPILES_SELF)
            part = compiled_part(node, dotted)
            if part is not None and COMPILES_PART + part not in self.scope.tags:
                self.scope.tags.append(COMPILES_PART + part)
            if dotted in XLA_PROGRAM_CALLS and DRIVES_XLA not in self.scope.tags:
                self.scope.tags.append(DRIVES_XLA)
            if dotted in EXPORT_CALLS and EXPORT_CHECKS not in self.scope.tags:
                self.scope.tags.append(EXPORT_CHECKS)
            if dotted and (dotted == "torch_xla" or dotted.startswith("torch_xla.")) and USES_XLA not in self.scope.tags:
                self.scope.tags.append(USES_XLA)
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
        frame = self.class_stack[-1] if self.class_stack else None
        if frame is not None and frame.depth == len(self.functions) and isinstance(node.target, cst.Name):
            if isinstance(node.annotation.annotation, cst.Name) and node.annotation.annotation.value in T.PYTHON_SCALARS:
                frame.plain_attrs.add(node.target.value)  # global_step: int = 0, whatever is loaded into it
            annotated = self._class_ref(node.annotation.annotation)  # token_dispatcher: Dispatcher.Config
            if annotated:
                frame.info.field_types[node.target.value] = annotated

    def _class_ref(self, node: cst.BaseExpression) -> str:
        """A class named in an annotation, as bases are recorded ("" for anything else); a
        bare name of a class nested in the current one (``config: Config``) first."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return ""
        frame = self.class_stack[-1] if self.class_stack else None
        if isinstance(node, cst.Name) and frame is not None and f"{frame.info.qualname}.{node.value}" in self.classes:
            return f"#{frame.info.qualname}.{node.value}"
        dotted = self.resolve(node)
        if not dotted:
            return ""
        return dotted if self.is_import_alias(node) else f"local:{dotted}"

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


def _built_field(value: cst.BaseExpression) -> tuple[str, str] | None:
    """``config.dispatcher.build()`` -> ("config", "dispatcher"): a component built from a
    field of a config parameter (torchtitan's Configurable: ``Config.build()`` makes the
    class the config is nested in)."""
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value == "build" and isinstance(value.func.value, cst.Attribute) \
            and isinstance(value.func.value.value, cst.Name):
        return value.func.value.value.value, value.func.value.attr.value
    return None


def _is_python_value(value: cst.BaseExpression, infer) -> bool:
    """``return self.n == self.k``, ``return True``, ``return len(x) > 2``, ``return t.numpy()``,
    a name bound to one of those: no tensor."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(value, cst.Name):
        # multi = n > 2 and flag; return multi: what the name was bound to says
        return value.value in {"True", "False", "None"} or value.value in infer.model.function.python_names
    if isinstance(value, (cst.Comparison, cst.BooleanOperation)):
        return True  # and is_tensor said no
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not):
        return True
    if isinstance(value, cst.Call) and T.call_method_name(value) == "numpy":
        return True  # return dist.argmin(1).cpu().numpy(): NumPy, no tensor
    if T.is_shape_metadata(value):
        return True  # return x.size(1): static under XLA, a Python int
    return infer.is_host_value(value)


def _names_keys_or_indices(it: cst.BaseExpression, resolve) -> bool:
    """``d.items()``, ``d.keys()``, ``m.named_parameters()``, ``range(n)``: iterating yields
    keys, names and indices (with their values), not input data."""
    if not isinstance(it, cst.Call):
        return False
    method = it.func.attr.value if isinstance(it.func, cst.Attribute) else ""
    return method in {"items", "keys"} or method.startswith("named_") or resolve(it.func) == "range"


def save_names(frame, names: list[str]) -> list[tuple]:
    """What a :class:`~detective.lint.semantic.FunctionFrame` knows about ``names``, to put
    back when a comprehension that rebinds them is left (its targets are its own)."""
    saved = []
    for name in dict.fromkeys(names):
        for field_name in _name_fields(frame):
            held = getattr(frame, field_name)
            saved.append((field_name, name, name in held, held.get(name) if isinstance(held, dict) else None))
    return saved


def restore_names(frame, saved: list[tuple]) -> None:
    for field_name, name, present, value in saved:
        held = getattr(frame, field_name)
        if isinstance(held, dict):
            (held.__setitem__(name, value) if present else held.pop(name, None))
        else:
            (held.add(name) if present else held.discard(name))


def _name_fields(frame) -> tuple[str, ...]:
    """The frame's fields keyed by name (sets and dicts)."""
    global _NAME_FIELDS
    if _NAME_FIELDS is None:
        _NAME_FIELDS = tuple(f.name for f in dataclasses.fields(frame)
                             if isinstance(getattr(frame, f.name), (set, dict)))
    return _NAME_FIELDS


_NAME_FIELDS: tuple[str, ...] | None = None
