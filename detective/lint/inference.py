"""Is this expression a tensor, a boolean mask, a host value? Answers over the semantic model.

Evidence is what the code shows (torch calls, forward parameters, names bound from
tensor expressions, tensor-only methods, buffers and parameters of the class), no type
checker. It is conservative on purpose: a wrong "tensor" produces a false finding, a
missed one only silence. The tables of torch names live in :mod:`detective.lint.tensors`,
what parameter annotations and names say in :mod:`detective.lint.parameters`, where a
tensor lives (host copies, CPU-made tensors) in :mod:`detective.lint.placement`.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.guard_syntax import is_config, is_metadata
from detective.lint.parameters import annotation_is_plain, element_annotation, param_is_tensor, python_type_check
from detective.lint.placement import Placement
from detective.lint.walker import walk

_NUMBER_CASTS = frozenset({"long", "int", "float", "double", "half", "bfloat16", "short"})
_NUMBER_DTYPES = frozenset(f"torch.{t}" for t in ("long", "int", "int32", "int64", "float", "float16", "float32",
                                                    "float64", "bfloat16", "half", "double"))
_ARITHMETIC = frozenset({"mul", "add", "sub", "div", "floor_divide", "remainder", "arange"})
# Ops whose result holds indices or counts (integers): never a boolean mask.
_INDEX_OPS = frozenset({"argsort", "argmax", "argmin", "randperm", "multinomial", "searchsorted", "bucketize"})
# Ops giving (values, indices): ``.indices`` of their result is integers.
_WITH_INDICES = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median", "cummax", "cummin"})
_VIEWS = frozenset({"view", "reshape", "flatten", "contiguous", "clone", "squeeze", "unsqueeze", "transpose",
                    "permute", "detach"})
MODEL_NAMES = frozenset({"model", "net", "module", "network", "encoder", "decoder", "backbone"})
MASK_SUFFIXES = ("_idx", "_index", "_ids", "_id", "_len", "_lens", "_lengths", "_count", "_prob",
                 "_probs", "_ratio", "_type", "_token", "_fn", "_key", "_keys", "_name", "_names", "_kind",
                 "_mode", "_size", "_value", "_dim")


# Builtins and math functions that turn a tensor operand into a Python number.
# (Not len(): the length of a tensor is its first dimension, static shape metadata.)
HOST_BUILTINS = frozenset({"int", "float", "round", "min", "max", "math.ceil",
                           "math.floor", "math.sqrt", "math.log", "math.log2", "ceil", "floor"})


def _compares_values(value: cst.BaseExpression) -> bool:
    """``top == i``, ``ids >= 0``: a comparison that is a mask when its operands are tensors."""
    if not isinstance(value, cst.Comparison):
        return False
    if not all(isinstance(t.operator, T.COMPARE_OPS) for t in value.comparisons):
        return False
    sides = [value.left, *(t.comparator for t in value.comparisons)]
    return not any(isinstance(s, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
                   or (isinstance(s, cst.Name) and s.value in {"None", "True", "False"}) for s in sides)


class TensorInference(Placement):
    def __init__(self, model):
        self.model = model  # detective.lint.semantic.SemanticModel
        # Call targets the answers since the last clear() took for tensors on trust: the
        # project's own helpers, whose return summaries are only known across files.
        self.assumed: list[str] = []
        self.params_on_cpu = False  # while summarising a return: parameters count as CPU tensors
        # Parameters taken for tensors by guess alone (forward(self, normalize, x)) that a truth
        # test read, by the test's node id: the finding stands unless the project passes them
        # only Python values (see detective.lint.arg_facts).
        self.rests_on: dict[int, tuple[str, ...]] = {}
        self._guessed: list[str] | None = None  # collecting while a truth test is read
        self._unguessed = False  # asking again with guessed parameters taken for no tensor
        self._narrowed: set[str] = set()  # names an isinstance test before them made Python numbers
        self._keyed: tuple = (None, frozenset())  # a function and the names it reads by a string key

    def param_is_tensor(self, param: cst.Param, *, is_forward: bool) -> bool:
        return param_is_tensor(param, is_forward=is_forward)

    def is_mask(self, node: cst.BaseExpression) -> bool:
        """Used as an index, is this a boolean mask? Evidence as for :meth:`is_bool_tensor`,
        plus names bound from comparisons (``chosen = top == i``) and names that say so
        (``padding_mask``, ``~masked_tokens``)."""
        if self.is_bool_tensor(node):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
            return self.is_mask(node.expression)
        if isinstance(node, cst.Subscript) and all(isinstance(e.slice, cst.Slice) for e in node.slice):
            return self.is_mask(node.value)  # mask[:, 1:]
        function = self.model.function
        if isinstance(node, cst.Name) and node.value in function.compare_names:
            return True
        if isinstance(node, cst.Comparison) and _compares_values(node):
            return True  # ids[ids >= 0], lprobs[lprobs != lprobs]: a comparison as an index
        name = node.value if isinstance(node, cst.Name) else (
            node.attr.value if isinstance(node, cst.Attribute) else None)
        if name is None or name in function.host_names or name in function.cpu_names:
            return False
        if isinstance(node, cst.Name) and name in function.numeric_names:
            return False  # masked_target = torch.mul(target, keep.long()): integers, not a mask
        lowered = name.lower()
        if "mask" not in lowered or lowered.endswith(MASK_SUFFIXES) or name.isupper():
            return False  # ATTENTION_MASK: a constant naming a key, not a mask
        self.weigh_receiver(node)  # mask = masks[i] of np.zeros(...): NumPy vetoes
        return True

    def is_tensor(self, node: cst.BaseExpression) -> bool:
        model = self.model
        if isinstance(node, cst.Name):
            function = model.function
            if node.value not in function.tensor_names or node.value in self._narrowed:
                return False
            if node.value in function.guessed_names and self._keyed_mapping(node):
                return False  # forward(self, samples) read as samples["text_input"]: a mapping
            if self._guessed is not None:
                if node.value in function.guessed_names:
                    if self._unguessed:
                        return False
                    self._guessed.append(node.value)
                elif node.value in function.guess_derived:
                    if self._unguessed:
                        return False
                    self._guessed.extend(function.guess_derived[node.value])
            trusted = function.assumed_names.get(node.value)
            if trusted:
                self.assumed.extend(trusted)
            return True
        if isinstance(node, cst.Attribute):
            attr = node.attr.value
            if attr in T.NON_TENSOR_ATTRIBUTES:
                return False
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                cls = model.cls
                return cls is not None and attr in cls.tensor_attrs and attr not in cls.plain_attrs
            return attr in T.TENSOR_ATTRIBUTES and self.is_tensor(node.value)
        if isinstance(node, cst.Call):
            return self._call_is_tensor(node)
        if isinstance(node, cst.Subscript):
            value = node.value
            if self.is_tensor(value):
                return True
            key = T.literal_string(node.slice[0].slice.value) \
                if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) else None
            kinds = model.function.key_kinds.get(value.value) if isinstance(value, cst.Name) else None
            if kinds and key in kinds:
                return kinds[key]  # what this function stored under the key
            if isinstance(value, cst.Name) and value.value in model.function.container_names:
                return True  # out["loss"] of a model's output, or a dict filled with tensors
            if isinstance(value, cst.Name) and value.value in model.function.param_group_names:
                return key == "params"
            # batch["input_ids"], batch["net_input"]["mask"]: an element of a mapping that
            # came in as data (a string field compared with a string is no tensor: see
            # _comparison_on_tensor).
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index) \
                    or T.literal_string(node.slice[0].slice.value) is None:
                return False
            depth = 0
            while isinstance(value, cst.Subscript):
                value, depth = value.value, depth + 1
            if not (isinstance(value, cst.Name) and value.value in model.function.data_names) or is_config(value) \
                    or is_metadata(value):
                return False  # parallel_config["ep_degree"], cfg["lr"], img_metas[0]["flip"]: not batch fields
            # packed: Dict[str, List[Any]]: packed["flags"] is a list, as annotated.
            annotation = model.function.annotations.get(value.value)
            return annotation is None or not annotation_is_plain(element_annotation(annotation, depth + 1))
        if isinstance(node, cst.BinaryOperation):
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if isinstance(node, cst.UnaryOperation):
            return not isinstance(node.operator, cst.Not) and self.is_tensor(node.expression)
        if isinstance(node, cst.Comparison):
            return self._comparison_on_tensor(node)
        if isinstance(node, cst.IfExp):
            return self.is_tensor(node.body) or self.is_tensor(node.orelse)
        if isinstance(node, cst.BooleanOperation):
            # `a or b` is one of its operands: a tensor when both are (`flag or (x is None)`,
            # `"k" in kw and kw["k"]` may be Python bools).
            return self.is_tensor(node.left) and self.is_tensor(node.right)
        return False

    def is_bool_tensor(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.model.function.bool_names
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
            dotted = self.model.resolve(node.func)
            if T.is_torch_name(dotted):
                return dotted.rsplit(".", 1)[-1] in T.BOOL_METHODS
            if method in T.BOOL_METHODS and (method != "bool" or self.is_tensor(node.func.value)):
                return True
            if method == "to" and any(self.model.resolve(a.value) == "torch.bool" for a in node.args):
                return True
        return False

    def mask_by_name_only(self, node: cst.BaseExpression) -> bool:
        """A name taken for a mask only because it says so (not bound from a comparison or
        known boolean)."""
        function = self.model.function
        return isinstance(node, cst.Name) and node.value not in function.bool_names \
            and node.value not in function.compare_names

    def is_numeric_tensor(self, node: cst.BaseExpression) -> bool:
        """A tensor that is plainly not boolean: a cast to a number type (``.long()``,
        ``.to(torch.float32)``), arithmetic (``t - start``, ``torch.mul(a, b)``), indices
        (``x.argsort()``, ``x.topk(k).indices``), or a view or slice of a tensor already known
        so (``masked_target.view(-1)``, ``rand_indices[:, :k]``)."""
        if isinstance(node, cst.BinaryOperation):
            return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Divide, cst.FloorDivide))
        if isinstance(node, cst.Name):
            return node.value in self.model.function.numeric_names
        if isinstance(node, cst.Subscript):
            return all(isinstance(e.slice, cst.Slice) for e in node.slice) and self.is_numeric_tensor(node.value)
        if isinstance(node, cst.Attribute):
            return node.attr.value == "indices" and isinstance(node.value, cst.Call) \
                and T.call_method_name(node.value) in _WITH_INDICES
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        dotted = self.model.resolve(func) or ""
        if T.is_torch_name(dotted) and dotted.rsplit(".", 1)[-1] in _ARITHMETIC | _INDEX_OPS:
            return True
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        if method in _NUMBER_CASTS or method in _INDEX_OPS:
            return True
        if method == "to" and node.args and (self.model.resolve(node.args[0].value) or "") in _NUMBER_DTYPES:
            return True
        return method in _VIEWS and self.is_numeric_tensor(func.value)

    def weigh_receiver(self, node: cst.BaseExpression) -> None:
        """Record what the receiver of a tensor-only operation was taken for on trust, as
        veto-only assumptions (``~target``): a finding on it stands unless the call is
        known to give no tensor (NumPy, a project helper returning a Python value)."""
        mark = len(self.assumed)
        if not self.is_tensor(node) and isinstance(node, cst.Call):
            target = self.model.call_target(node.func)
            if target and target.startswith("self."):
                # self.kmeans(feats).tolist(): the method's return summary may say NumPy
                self.assumed.append(target)
        self.assumed[mark:] = [t if t.startswith("~") else f"~{t.lstrip('?')}" for t in self.assumed[mark:]]

    def data_field_only(self, node: cst.BaseExpression) -> bool:
        """``batch["captions"]``: taken for a tensor only as a field of a mapping that came in
        as data (no tensor stored under the key here, no model output)."""
        if not (isinstance(node, cst.Subscript) and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)
                and T.literal_string(node.slice[0].slice.value) is not None):
            return False
        value, function = node.value, self.model.function
        # (a tensor has no string keys: a guessed tensor read so is a mapping too)
        return isinstance(value, cst.Name) and value.value in function.data_names \
            and value.value not in function.container_names and value.value not in function.key_kinds

    def tensor_and_guesses(self, node: cst.BaseExpression) -> tuple[bool, tuple[str, ...]]:
        """Is ``node`` a tensor, and if only because of parameters taken for tensors by guess
        alone (``score_threshold > 0`` in ``forward(ctx, boxes, score_threshold)``), which."""
        if self._guessed is not None:  # nested in a question that collects them already
            return self.is_tensor(node), ()
        self._guessed = []
        try:
            if not self.is_tensor(node):
                return False, ()
            if not self._guessed:
                return True, ()
            mark = len(self.assumed)
            self._unguessed = True
            alone = not self.is_tensor(node)
            del self.assumed[mark:]
            return True, tuple(dict.fromkeys(self._guessed)) if alone else ()
        finally:
            self._guessed = None
            self._unguessed = False

    def note_guesses(self, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        """A read of ``value`` reported at ``node`` (``float(sigma)``) rests on guessed
        parameters alone: kept for the cross-file check, as truth tests' are."""
        _tensor, guesses = self.tensor_and_guesses(value)
        if guesses:
            self.rests_on[id(node)] = guesses

    def reads_tensor_value(self, node: cst.BaseExpression, dead=frozenset()) -> bool:
        """Does evaluating ``node`` for truth read a tensor's value on the host? Operands in
        ``dead`` (ids of nodes never evaluated on XLA, e.g. after ``is_xla_tensor(x) or``)
        do not count. When the answer rests on parameters taken for tensors by guess alone,
        they are left in ``rests_on[id(node)]``."""
        if self._guessed is not None:  # nested (a rule asking about a part): no second look
            return self._reads_value(node, dead)
        self._guessed = []
        try:
            if not self._reads_value(node, dead):
                return False
            if self._guessed:  # ask again without them: does anything else read a tensor?
                mark = len(self.assumed)
                self._unguessed = True
                alone = not self._reads_value(node, dead)
                del self.assumed[mark:]
                if alone:
                    self.rests_on[id(node)] = tuple(dict.fromkeys(self._guessed))
            return True
        finally:
            self._guessed = None
            self._unguessed = False

    def _reads_value(self, node: cst.BaseExpression, dead) -> bool:
        if id(node) in dead:
            return False
        if isinstance(node, cst.BooleanOperation):
            if self._reads_value(node.left, dead):
                return True
            # `not isinstance(t, (int, float)) or t != 1`, `isinstance(t, float) and t > 0.5`:
            # the right side runs only when t is a Python number
            narrowed = _narrowed_to_python(node)
            if not narrowed or narrowed in self._narrowed:
                return self._reads_value(node.right, dead)
            self._narrowed.add(narrowed)
            try:
                return self._reads_value(node.right, dead)
            finally:
                self._narrowed.discard(narrowed)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return self._reads_value(node.expression, dead)
        return self.is_tensor(node)

    def is_host_value(self, node: cst.BaseExpression) -> bool:
        """Is this a Python number read from a tensor (``.item()``, ``int(t)``, ...)?"""
        if isinstance(node, cst.Name):
            return node.value in self.model.function.host_names
        if isinstance(node, cst.Call):
            method = T.call_method_name(node)
            if method in {"item", "tolist"}:
                return True
            func = node.func
            name = func.value if isinstance(func, cst.Name) else (self.model.resolve(func) or "")
            if name in HOST_BUILTINS:
                return any(self.is_tensor(a.value) or self.is_host_value(a.value) for a in node.args)
            return False
        if isinstance(node, cst.BinaryOperation):
            return self.is_host_value(node.left) or self.is_host_value(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.is_host_value(node.expression)
        return False

    def iterates_keys(self, target: cst.BaseExpression, iterable: cst.BaseExpression, body: cst.CSTNode) -> bool:
        """``for k in d:`` whose body reads ``d[k]`` (a comprehension's element for its
        ``for``): ``d`` is a mapping (a dict of tensors taken for a tensor), so ``k`` is one
        of its keys, no tensor row."""
        if not isinstance(target, cst.Name):
            return False
        mark = len(self.assumed)
        tensor = self.is_tensor(iterable)
        del self.assumed[mark:]  # a question, not evidence a finding stands on
        if not tensor:
            return False  # only a loop over a supposed tensor is worth the look
        item, found = target.value, False

        def indexed_by_item(node) -> bool:  # <iterable>[<item>]; stop looking once found
            nonlocal found
            if type(node) is cst.Subscript and len(node.slice) == 1 \
                    and isinstance(node.slice[0].slice, cst.Index) \
                    and isinstance(node.slice[0].slice.value, cst.Name) \
                    and node.slice[0].slice.value.value == item and node.value.deep_equals(iterable):
                found = True
            return not found

        walk(body, indexed_by_item, lambda node: None)  # not .visit: it rebuilds the body
        return found

    # ------------------------------------------------------------------ internals
    def _call_is_tensor(self, node: cst.Call) -> bool:
        func = node.func
        dotted = self.model.resolve(func)
        if T.is_torch_name(dotted):
            return T.torch_call_returns_tensor(dotted)
        if isinstance(func, cst.Name) and func.value in ("min", "max") and len(node.args) >= 2 and all(
                a.keyword is None and not a.star and self.is_tensor(a.value) for a in node.args):
            return True  # min(a, b) of tensors is one of them
        if isinstance(func, (cst.Name, cst.Attribute)) and not (
            isinstance(func, cst.Name) and (func.value in T.PY_BUILTINS_NOT_TENSOR
                                            or func.value in self.model.function.tensor_names
                                            or func.value in self.model.function.data_names
                                            or any(func.value in f.locals for f in self.model.functions))
        ) and (isinstance(func, cst.Name) or self.model.is_import_alias(func)) and dotted \
                and dotted.rsplit(".", 1)[-1].lstrip("_")[:1].islower():
            # helper(x), utils.helper(x): a tensor if the project's helper returns one.
            target = self.model.call_target(func)
            if target is not None and not target.startswith("self."):
                self.assumed.append(target)
                return True
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if isinstance(func.value, cst.Name) and func.value.value == "self":
                # self.proj(x): a submodule applied to a tensor gives a tensor; a method of
                # the module named like a tensor op (self.scatter) says nothing.
                if method in T.NON_TENSOR_METHODS:
                    return False
                mark = len(self.assumed)
                handed = any(self.is_tensor(a.value) for a in node.args)
                # A question, not evidence: what the arguments rest on must not let the
                # finding stand when the method's own summary says "no tensor" (free-init's
                # `self.get_timesteps(n, timesteps)` returns `n - start` however tensor
                # `timesteps` is).
                del self.assumed[mark:]
                if not handed:
                    return False
                # A method of this class decides by its return summary (self.should_skip(x)
                # returning self.n == self.k is no tensor); anything else (a submodule) is.
                self.assumed.append(f"?self.{method}")
                return True
            if method in T.NON_TENSOR_METHODS:
                return False
            if self.model.library_function(func):
                return False  # np.max(y), math.sqrt(n): a library function, not a tensor method
            if method in T.TENSOR_ONLY_METHODS:
                # Evidence enough on its own; a receiver taken for a tensor on trust can
                # only veto it (np.ones(3).sum() is NumPy).
                self.weigh_receiver(func.value)
                return True
            return self.is_tensor(func.value)
        if isinstance(func, cst.Name):
            if func.value in T.PY_BUILTINS_NOT_TENSOR:
                return False
            if func.value in self.model.function.tensor_names:  # a module bound to a name
                return False
        return False

    def _comparison_on_tensor(self, node: cst.Comparison) -> bool:
        if not all(isinstance(t.operator, T.COMPARE_OPS) for t in node.comparisons):
            return False
        sides = [node.left, *(t.comparator for t in node.comparisons)]
        if any(isinstance(s, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
               or (isinstance(s, cst.Name) and s.value == "None") for s in sides):
            return False  # batch["task"] == "qa": a string field; x == None: a Python bool
        return any(self.is_tensor(side) for side in sides)

    def reads_in_operator(self, node: cst.Comparison) -> bool:
        """``-1 in labels``: ``Tensor.__contains__`` reads the tensor on the host (not ``key in
        batch`` where the function reads ``batch["mask"]``: see is_tensor)."""
        return any(isinstance(t.operator, (cst.In, cst.NotIn)) and self.is_tensor(t.comparator)
                   and T.literal_string(node.left) is None for t in node.comparisons)

    def _keyed_mapping(self, node: cst.BaseExpression) -> bool:
        """A guessed tensor parameter the current function reads by a string key
        (``batch["mask"]``, ``"mask" in batch``, ``batch.get("mask")``): a mapping."""
        model = self.model
        if not (isinstance(node, cst.Name) and node.value in model.function.guessed_names and model._defs):
            return False
        function = model._defs[-1]
        if self._keyed[0] is not function:
            self._keyed = (function, _names_read_by_key(function))
        return node.value in self._keyed[1]


def _names_read_by_key(function: cst.FunctionDef) -> frozenset[str]:
    """Names a function reads by a string key: ``batch["mask"]``, ``"mask" in batch``,
    ``batch.get("mask")``."""
    found: set[str] = set()

    def on_visit(node) -> bool:
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) \
                and T.literal_string(node.slice[0].slice.value) is not None:
            found.add(node.value.value)
        elif isinstance(node, cst.Comparison) and T.literal_string(node.left) is not None:
            found.update(t.comparator.value for t in node.comparisons
                         if isinstance(t.operator, (cst.In, cst.NotIn)) and isinstance(t.comparator, cst.Name))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Name) and node.func.attr.value == "get" and node.args \
                and T.literal_string(node.args[0].value) is not None:
            found.add(node.func.value.value)
        return not isinstance(node, (cst.FunctionDef, cst.ClassDef)) or node is function

    walk(function, on_visit, lambda node: None)
    return frozenset(found)


def _narrowed_to_python(node: cst.BooleanOperation) -> str:
    """The name the left operand leaves a Python scalar for the right one: ``isinstance(p,
    float) and ...``, ``not isinstance(p, (int, float)) or ...``; "" otherwise."""
    left = node.left
    if isinstance(node.operator, cst.And):
        return python_type_check(left)
    if isinstance(left, cst.UnaryOperation) and isinstance(left.operator, cst.Not):
        return python_type_check(left.expression)
    return ""
