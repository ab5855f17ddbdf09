"""Which mapping keys the project makes optional, collected in the one walk for RC004.

A key is optional somewhere in the project when a file removes it (``del m["k"]``,
``m.pop("k")``) or sets it only under a condition on data (``if len(alignments) > 0:
batch["alignments"] = ...``). None of these is evidence:

- a condition that reads only attributes of ``self``/``cls``, a ``config``/``cfg`` object or
  parsed ``args``: configuration, fixed for the run (``if self.corpus_key is not None:``,
  ``if not config.normalize_before:``);
- a test of the key itself on a plain name or an element of one (``if "k" in kwargs:``,
  ``"k" in m.keys()``, ``m.get("k") is not None``, a collater's ``"k" in samples[0]``), or
  a ``None`` test of a name the written value is made from (``if f0 is not None:
  batch["f0"] = f0.to(device)``): the write passes on what the caller had;
- a write whose value reads the same key of the same mapping (``m["k"] = f(m["k"])``): the
  key was there already;
- a ``del m["k"]`` that a later statement of the same block sets again (``m["k"] = new``):
  a replacement;
- a removal, under no data condition, from a mapping the function built or bound itself
  (``samples = collate(samples); del samples["net_input"]["source"]``): every batch it
  makes lacks the key alike (a removal from a mapping the function was handed still counts:
  its callers decide which batches pass through);
- a write, under a data condition, of a key the mapping already holds in that function (a
  dict literal bound to the name, or an unconditional write): ``batch = {"source": x}; if
  pad: batch["source"] = padded``, a replacement;
- a ``.pop("k")`` from keyword arguments (``kwargs``, ``cross_attention_kwargs``): an option
  consumed before the rest is passed on;
- a write into a mapping of results (``logging_output["k"] = ...``, ``outputs[...]``), which
  RC004 never treats as input either.

Each optional key becomes the project fact ``optional-key:<k>`` (see
:mod:`detective.lint.project_facts`).
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.project_facts import OPTIONAL_KEY
from detective.lint.rule import Facts
from detective.lint.walker import syntax_children

# Roots whose attributes are configuration, fixed for the run: the object's own settings,
# a config object or parsed command-line arguments.
_CONFIG_ROOTS = frozenset({"self", "cls", "True", "False", "None", "config", "cfg", "args", "hparams", "opt"})


class OptionalKeys(Facts):
    def __init__(self, context):
        super().__init__(context)
        # (on data, keys it passes on, names it tests against None)
        self._conditions: list[tuple[bool, frozenset[str], frozenset[str]]] = []
        self._replaced: set[int] = set()  # ids of `del m["k"]` statements set again later in their block
        # Per function: mapping (as code) -> keys it holds for sure (a dict literal bound to a
        # name, a write under no data condition); a later write of such a key replaces it.
        self._holds: list[dict[str, set[str]]] = [{}]
        self._params: list[set[str]] = [set()]  # per function: its parameters' names
        self._found = context.model.project_facts
        self._seen = set(self._found)

    def visit_If(self, node: cst.If) -> None:
        on_data = _reads_data(node.test, self.context.model.imports)
        if on_data:
            self._conditions.append((True, frozenset(_passed_on(node.test, self.context.model.imports)),
                                     frozenset(_none_tested(node.test))))
        else:
            self._conditions.append((False, frozenset(), frozenset()))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._note_replacements(node.body)

    def visit_Module(self, node: cst.Module) -> None:
        self._note_replacements(node.body)

    def _note_replacements(self, body) -> None:
        for index, statement in enumerate(body):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, cst.Del):
                    continue
                later = [t.target for s in body[index + 1:] if isinstance(s, cst.SimpleStatementLine)
                         for a in s.body if isinstance(a, cst.Assign) for t in a.targets]
                deleted = small.target.elements if isinstance(small.target, cst.Tuple) else [small.target]
                if all(any(_literal_key(t) is not None and t.deep_equals(d) for t in later)
                       for d in (e.value if isinstance(e, cst.Element) else e for e in deleted)):
                    self._replaced.add(id(small))

    def leave_If(self, node: cst.If) -> None:
        self._conditions.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._holds.append({})
        params = node.params
        self._params.append({p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
                            | {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._holds.pop()
        self._params.pop()

    def _on_data(self) -> bool:
        return any(data for data, _keys, _tested in self._conditions)

    def _removal_counts(self, mapping: cst.BaseExpression) -> bool:
        """A removal is evidence under a data condition, or from a mapping the function was
        handed (``def drop(batch): del batch["k"]``: whoever calls it decides for which batches).
        A mapping the function builds and strips on every call (``samples =
        super().collater(samples); del samples["net_input"]["source"]``) lacks the key in every
        batch alike."""
        if self._on_data() or len(self._params) == 1:
            return True
        while isinstance(mapping, (cst.Subscript, cst.Attribute)):
            mapping = mapping.value
        return not isinstance(mapping, cst.Name) or mapping.value in self._params[-1]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                # samples = super().collater(samples): a mapping this function made, from here on
                self._params[-1].discard(target.target.value)
            if isinstance(target.target, cst.Name) and isinstance(node.value, cst.Dict):
                # input = {"source": x}: the mapping holds these keys from here on
                self._holds[-1][target.target.value] = {
                    k for e in node.value.elements if isinstance(e, cst.DictElement)
                    and (k := T.literal_string(e.key)) is not None}
            key = _literal_key(target.target)
            if key is None:
                continue
            if _result_mapping(target.target.value):
                continue  # logging_output["k"] = ...: a result being filled, not a batch
            if _reads_subscript(node.value, target.target):
                continue  # m["k"] = f(m["k"]): the key was there already
            mapping = _mapping_code(target.target.value)
            if mapping and key in self._holds[-1].get(mapping, ()):
                continue  # if num_pad: input["source"] = padded(...): a replacement
            if not self._on_data():
                if mapping:
                    self._holds[-1].setdefault(mapping, set()).add(key)
                continue
            read = _names(node.value)
            if any(data and key not in keys and not (tested & read) for data, keys, tested in self._conditions):
                self._note(key)

    def visit_Del(self, node: cst.Del) -> None:
        if id(node) in self._replaced:
            return
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
        for target in targets:
            target = target.value if isinstance(target, cst.Element) else target
            key = _literal_key(target)
            if key is not None and self._removal_counts(target.value):
                self._note(key)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "pop" and node.args \
                and node.args[0].keyword is None and not _keyword_mapping(func.value) \
                and self._removal_counts(func.value):
            key = T.literal_string(node.args[0].value)
            if key is not None:
                self._note(key)

    def _note(self, key: str) -> None:
        self._add(OPTIONAL_KEY + key)

    def _add(self, fact: str) -> None:
        if fact not in self._seen:
            self._seen.add(fact)
            self._found.append(fact)


def _mapping_code(node: cst.BaseExpression) -> str:
    """``input`` or ``samples["net_input"]`` as text; "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    key = _literal_key(node)
    if key is not None:
        inner = _mapping_code(node.value)
        return f"{inner}[{key!r}]" if inner else ""
    return ""


def _result_mapping(node: cst.BaseExpression) -> bool:
    """``logging_output``, ``outputs``, ``self.out``: a mapping of results (RC004 never tests
    these either: see ``data_mapping``)."""
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
    return "out" in name.lower()


def _keyword_mapping(node: cst.BaseExpression) -> bool:
    """``kwargs``, ``cross_attention_kwargs``, ``self.model_kwargs``: keyword arguments. Popping
    one consumes an option before the rest is passed on; which options a call passes is
    fixed by its code, so the pop says nothing about batches that differ."""
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
    return name.endswith("kwargs")


def _literal_key(node: cst.BaseExpression) -> str | None:
    """``m["k"]`` -> ``"k"``."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return T.literal_string(node.slice[0].slice.value)
    return None


def _reads_subscript(value: cst.CSTNode, target: cst.BaseExpression) -> bool:
    """Does ``value`` read ``target`` (``m["k"]``) itself?"""
    if isinstance(value, cst.Subscript) and value.deep_equals(target):
        return True
    return any(_reads_subscript(child, target) for child in syntax_children(value))


def _names(value: cst.CSTNode) -> set[str]:
    """The plain names an expression reads."""
    if isinstance(value, cst.Name):
        return {value.value}
    if isinstance(value, cst.Attribute):
        return _names(value.value)
    return {name for child in syntax_children(value) for name in _names(child)}


def _none_tested(test: cst.BaseExpression) -> set[str]:
    """Plain names a condition tests against None: ``f0 is not None``, ``a is not None and b``."""
    if isinstance(test, cst.BooleanOperation):
        return _none_tested(test.left) | _none_tested(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name) \
            and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        return {test.left.value}
    return set()


def _passed_on(test: cst.BaseExpression, modules) -> set[str]:
    """Keys a condition tests on a plain name or an element of one: ``"k" in kwargs``,
    ``"k" in kwargs.keys()``, ``samples[0].get("k") is not None``. Under it, writing ``k``
    passes on what the caller had, unless another part of the condition decides on data
    (``len(samples) > 1 and "k" in samples[0]``: only some batches get the key)."""
    if isinstance(test, cst.BooleanOperation):
        sides = [(side, _passed_on(side, modules)) for side in (test.left, test.right)]
        if any(not keys and not _none_tested(side) and _reads_data(side, modules) for side, keys in sides):
            return set()
        return sides[0][1] | sides[1][1]
    if isinstance(test, cst.UnaryOperation):
        return _passed_on(test.expression, modules)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        comparator = target.comparator
        if isinstance(comparator, cst.Call) and isinstance(comparator.func, cst.Attribute) \
                and comparator.func.attr.value == "keys" and not comparator.args:
            comparator = comparator.func.value  # "k" in m.keys()
        if isinstance(target.operator, (cst.In, cst.NotIn)) and _plain_mapping(comparator):
            key = T.literal_string(test.left)
            return {key} if key is not None else set()
        return _passed_on(test.left, modules)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "get" \
            and _plain_mapping(test.func.value) and test.args:
        key = T.literal_string(test.args[0].value)
        return {key} if key is not None else set()
    return set()


def _plain_mapping(node: cst.BaseExpression) -> bool:
    """``kwargs``, ``samples[0]``, ``batch["net_input"]``: a name or an element of one."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Name)


def _reads_data(node: cst.CSTNode, modules) -> bool:
    """Does the condition read anything but ``self``/``cls`` attributes, imported modules and
    constants? (A called function's own name is no data.)"""
    if isinstance(node, cst.Name):
        return node.value not in _CONFIG_ROOTS and node.value not in modules
    if isinstance(node, (cst.Attribute, cst.Arg)):
        return _reads_data(node.value, modules)
    if isinstance(node, cst.Subscript):
        return True  # an element of something: data
    children = syntax_children(node)  # tokens and whitespace hold no names
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
        children = node.args
    return any(_reads_data(child, modules) for child in children)
