"""What a parameter's annotation and name say about it: a tensor, a container of
non-tensors (``Dict[str, List[Any]]``), an option (``return_all=None``, ``num_heads``).
Read by :mod:`detective.lint.inference` (no type checker: annotations as written)."""

from __future__ import annotations

import libcst as cst

from detective.lint.guard_syntax import metadata_name
from detective.lint.walker import SKIP_CHILDREN, dispatch_tables, walk

NON_TENSOR_ANNOTATIONS = frozenset({
    "int", "float", "bool", "str", "bytes", "dict", "list", "tuple", "set", "Dict", "List", "Tuple",
    "Set", "Mapping", "MutableMapping", "Sequence", "Iterable", "Callable", "Any", "Module",
})
# forward(self, x, name=None, return_all=None): parameters named like options, not tensors.
OPTION_PREFIXES = ("return_", "use_", "is_", "has_", "output_", "need_", "enable_", "with_", "skip_",
                   "apply_", "do_", "num_", "n_", "add_", "allow_", "force_", "should_", "no_")
OPTION_SUFFIXES = ("_name", "_type", "_mode", "_only", "_flag", "_state", "_cache", "_degree",
                   "_kwargs", "_config", "_cfg", "_fn", "_func", "_size", "_len", "_dim", "_idx", "_num",
                   "_step", "_epoch", "_spec", "_group", "_mesh")
OPTION_NAMES = frozenset({"name", "mode", "key", "task", "config", "cfg", "kwargs", "args", "step",
                          "epoch", "dim", "training", "reduce", "verbose", "tag", "prefix", "layer_idx",
                          "mesh", "group", "process_group", "spec", "partition_spec"})


def param_is_tensor(param: cst.Param, *, is_forward: bool) -> bool:
    annotation = param.annotation
    if annotation is not None:
        # Annotated: the annotation decides (group: dist.ProcessGroup, inference: bool,
        # state: Optional[Dict[str, List[Tensor]]] is a dict).
        return annotation_is_tensor(annotation.annotation)
    if not is_forward:
        return False
    name = param.name.value
    if name in OPTION_NAMES or name.startswith(OPTION_PREFIXES) or name.endswith(OPTION_SUFFIXES) \
            or metadata_name(name):
        return False
    default = param.default
    return default is None or (isinstance(default, cst.Name) and default.value == "None")


def annotation_is_tensor(node: cst.BaseExpression) -> bool:
    """``Tensor``, ``torch.Tensor``, ``Optional[Tensor]``, ``Tensor | None``, ``"Tensor"``,
    ``Float[Tensor, "b d"]``; not a container of tensors (``List[Tensor]``, ``Dict[...]``)."""
    if isinstance(node, cst.SimpleString):
        text = str(node.evaluated_value or "").replace(" ", "")
        head = text.split("[", 1)[0].rsplit(".", 1)[-1]
        return head.endswith("Tensor") or (head in {"Optional", "Union"} and "Tensor" in text
                                           and not any(c in text for c in ("List[", "Dict[", "Tuple[")))
    if isinstance(node, cst.Name):
        return node.value.endswith("Tensor")
    if isinstance(node, cst.Attribute):
        return node.attr.value.endswith("Tensor")
    if isinstance(node, cst.BinaryOperation):  # Tensor | None
        return annotation_is_tensor(node.left) or annotation_is_tensor(node.right)
    if isinstance(node, cst.Subscript):
        head = node.value.attr.value if isinstance(node.value, cst.Attribute) else getattr(node.value, "value", "")
        items = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        if head in {"Optional", "Union"}:
            return any(annotation_is_tensor(i) for i in items)
        if head in NON_TENSOR_ANNOTATIONS or head.lower() in {"list", "dict", "tuple", "set", "sequence"}:
            return False
        return bool(items) and annotation_is_tensor(items[0])  # Float[Tensor, "b d"]
    return False


def _annotation_head(node: cst.BaseExpression) -> str:
    """``Dict`` of ``typing.Dict[str, int]``, ``list`` of ``list[int]``."""
    if isinstance(node, cst.Subscript):
        node = node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else ""


SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes"})


def _without_none(node: cst.BaseExpression) -> cst.BaseExpression:
    """``X`` of ``Optional[X]``, ``X | None`` and ``Union[X, None]``; ``node`` otherwise."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        if isinstance(node.right, cst.Name) and node.right.value == "None":
            return _without_none(node.left)
        if isinstance(node.left, cst.Name) and node.left.value == "None":
            return _without_none(node.right)
    if isinstance(node, cst.Subscript) and _annotation_head(node) in {"Optional", "Union"}:
        items = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        kept = [i for i in items if not (isinstance(i, cst.Name) and i.value == "None")]
        if len(kept) == 1:
            return _without_none(kept[0])
    return node


def annotation_is_scalar(node: cst.BaseExpression) -> bool:
    """``int``, ``bool``, ``Optional[float]``, ``str | None``: a Python scalar."""
    node = _without_none(node)
    return isinstance(node, cst.Name) and node.value in SCALAR_ANNOTATIONS


def element_annotation(node: cst.BaseExpression, depth: int) -> cst.BaseExpression | None:
    """The annotation of ``m[k]`` (depth 1), ``m[k][j]`` (depth 2) for ``m: node``: the value
    type of a mapping, the item type of a list/sequence; None when it cannot be told."""
    for _ in range(depth):
        node = _without_none(node)  # padding_constraints: Optional[Dict[str, int]]
        if not isinstance(node, cst.Subscript):
            return None
        head = _annotation_head(node).lower()
        items = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        if head in {"dict", "mapping", "mutablemapping", "ordereddict", "defaultdict"} and len(items) == 2:
            node = items[1]
        elif head in {"list", "sequence", "mutablesequence"} and len(items) == 1:
            node = items[0]
        else:
            return None
    return node


def annotation_is_plain(node: cst.BaseExpression | None) -> bool:
    """A container or a Python scalar (``List[Any]``, ``int``), not a tensor or ``Any``."""
    if node is None:
        return False
    head = _annotation_head(node)
    return head in NON_TENSOR_ANNOTATIONS and head not in {"Any", "Module"} and not annotation_is_tensor(node)


# Tensor methods whose positional arguments (two or more) are sizes: a parameter passed as one
# is a Python int (swin's PatchMerging.forward(x, H, W) does x.view(B, H, W, C)).
SIZE_TAKING_METHODS = frozenset({"view", "reshape", "expand", "new_zeros", "new_ones", "new_empty", "repeat"})

# isinstance(p, bool): a parameter checked against Python scalars only holds Python values
# (not list/tuple: ``if isinstance(feats, list): feats = feats[-1]`` takes lists and tensors).
PYTHON_TYPES = frozenset({"bool", "int", "float", "str"})


def python_type_check(node: cst.BaseExpression) -> str:
    """``p`` of ``isinstance(p, (int, float))`` (Python scalar types only), else ""."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance"
            and len(node.args) == 2 and isinstance(node.args[0].value, cst.Name)):
        return ""
    kinds = node.args[1].value
    kinds = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return node.args[0].value.value \
        if all(isinstance(k, cst.Name) and k.value in PYTHON_TYPES for k in kinds) else ""


class PythonValueEvidence:
    """Names a class's own code shows to hold Python values, whatever their parameter's
    name suggests: compared with a string (``layer_results == "end"`` in a helper that
    ``forward`` passes it to), checked against Python types only (``isinstance(p, bool)``),
    passed as one of the sizes of ``x.view(B, H, W, C)`` and its kin, used as a slice bound or a
    term of one (``z[..., pad:pad + length]``), compared with two or more
    integers along one ``if``/``elif`` chain (``if phase == 0: ... elif phase == 1:``),
    and in an ``autograd.Function`` (first parameter ``ctx``) stored on ``ctx``
    (``ctx.scale = scale``: tensors go through ``save_for_backward``) or read by string key
    (``opts["offload"]``: ``apply`` tracks only tensors passed as arguments themselves).
    Keyed on the name within one class, like the class's attributes."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        # Per enclosing def: is its first parameter ctx? its parameters' names (evidence is
        # on a parameter only: ``for k in sd: if k == "w"`` says nothing of forward's ``k``).
        self._ctx: list[bool] = []
        self._params: list[set[str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        self._ctx.append(bool(params) and params[0].name.value == "ctx")
        self._params.append({p.name.value for p in params})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._ctx.pop()
        self._params.pop()

    def _note(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name):
            self._note_name(node.value)

    def _note_name(self, name: str) -> None:
        if self._params and name in self._params[-1]:
            self.names.add(name)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        sides = [node.left, *(t.comparator for t in node.comparisons)]
        if any(isinstance(s, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) for s in sides) \
                and all(isinstance(t.operator, (cst.Equal, cst.NotEqual)) for t in node.comparisons):
            for side in sides:
                self._note(side)
        elif len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, (cst.In, cst.NotIn)) \
                and _string_choices(node.comparisons[0].comparator):
            self._note(node.left)  # assert reduction_override in (None, "none", "mean", "sum")

    def visit_Call(self, node: cst.Call) -> None:
        checked = python_type_check(node)
        if checked:
            self._note_name(checked)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in SIZE_TAKING_METHODS \
                and len(node.args) > 1:
            for arg in node.args:  # x.view(B, H, W, C): H and W are sizes
                if arg.keyword is None and not arg.star:
                    self._note(arg.value)

    def visit_If(self, node: cst.If) -> None:
        # if phase == 0: ... elif phase == 1: ...: a dispatch on a Python number (a tensor in
        # an `if` is one value at most, and no code tests one against a list of modes)
        literals: dict[str, set[str]] = {}
        branch: cst.BaseSuite | cst.If | cst.Else | None = node
        while isinstance(branch, cst.If):
            test = branch.test
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                    and isinstance(test.comparisons[0].operator, cst.Equal) \
                    and isinstance(test.left, cst.Name) and isinstance(test.comparisons[0].comparator, cst.Integer):
                literals.setdefault(test.left.value, set()).add(test.comparisons[0].comparator.value)
            branch = branch.orelse
        for name, values in literals.items():
            if len(values) > 1:
                self._note_name(name)

    def visit_Slice(self, node: cst.Slice) -> None:
        # z[..., self.pad:self.pad + length]: a bound, or a term of one, is a Python int
        # (a tensor there would be read on the host; code slices by sizes)
        stack = [node.lower, node.upper]
        while stack:
            bound = stack.pop()
            if isinstance(bound, cst.BinaryOperation) and isinstance(bound.operator, (cst.Add, cst.Subtract)):
                stack += [bound.left, bound.right]
            elif isinstance(bound, cst.UnaryOperation) and isinstance(bound.operator, cst.Minus):
                stack.append(bound.expression)
            elif bound is not None:
                self._note(bound)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._ctx and self._ctx[-1] and isinstance(node.value, cst.Name) and any(
                isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                and t.target.value.value == "ctx" for t in node.targets):
            self._note(node.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._ctx and self._ctx[-1] and isinstance(node.value, cst.Name) and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) \
                and isinstance(node.slice[0].slice.value, cst.SimpleString):
            self._note(node.value)


# Node type name -> PythonValueEvidence methods (unbound): built once, used per class.
_EVIDENCE_VISIT, _EVIDENCE_LEAVE = ({name: [fn.__func__ for fn in fns] for name, fns in table.items()}
                                    for table in dispatch_tables([PythonValueEvidence()]))


def _string_choices(node: cst.BaseExpression) -> bool:
    """A literal tuple, list or set of strings (and None): ``(None, "none", "mean", "sum")``."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)) or not node.elements:
        return False
    values = [e.value for e in node.elements if isinstance(e, cst.Element)]
    return len(values) == len(node.elements) \
        and all(isinstance(v, cst.SimpleString) or (isinstance(v, cst.Name) and v.value == "None") for v in values) \
        and any(isinstance(v, cst.SimpleString) for v in values)


def python_valued_names(body: cst.CSTNode) -> frozenset[str]:
    """The names :class:`PythonValueEvidence` finds in ``body`` (a class). Walked with the
    linter's own walker (no libcst re-validation, no tokens): this scan runs per class."""
    finder = PythonValueEvidence()

    def on_visit(node: cst.CSTNode) -> bool:
        name = type(node).__name__
        for fn in _EVIDENCE_VISIT.get(name, ()):
            fn(finder, node)
        return name not in SKIP_CHILDREN

    def on_leave(node: cst.CSTNode) -> None:
        for fn in _EVIDENCE_LEAVE.get(type(node).__name__, ()):
            fn(finder, node)

    walk(body, on_visit, on_leave)
    return frozenset(finder.names)
