"""Which mapping keys the project makes optional, collected in the one walk for RC004.

A key is optional somewhere in the project when a file removes it (``del m["k"]``,
``m.pop("k")``) or sets it only under a condition on data (``if len(alignments) > 0:
batch["alignments"] = ...``). A condition that reads only ``self``/``cls`` attributes is
configuration, fixed for the run (``if self.corpus_key is not None:``), and a test of the
key itself on a plain name only passes on what the caller had (``if "k" in kwargs:
out["k"] = kwargs["k"]``): neither is evidence. Each optional key becomes the project fact
``optional-key:<k>`` (see :mod:`detective.lint.project_facts`).

Every key some file writes into a mapping (``m["k"] = ...``, ``{"k": ...}``, ``dict(k=...)``)
becomes ``key-set:<k>``: the code that builds such batches is in view, so a key it never makes
optional is in every batch of a run or in none.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.project_facts import KEY_SET, OPTIONAL_KEY
from detective.lint.rule import Facts
from detective.lint.walker import syntax_children

_CONFIG_ROOTS = frozenset({"self", "cls", "True", "False", "None"})


class OptionalKeys(Facts):
    def __init__(self, context):
        super().__init__(context)
        self._conditions: list[tuple[bool, frozenset[str]]] = []  # (on data, keys it passes on)
        self._found = context.model.project_facts
        self._seen = set(self._found)

    def visit_If(self, node: cst.If) -> None:
        on_data = _reads_data(node.test, self.context.model.imports)
        self._conditions.append((on_data, frozenset(_passed_on(node.test)) if on_data else frozenset()))

    def leave_If(self, node: cst.If) -> None:
        self._conditions.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            key = _literal_key(target.target)
            if key is None:
                continue
            self._add(KEY_SET + key)
            if any(data and key not in names for data, names in self._conditions):
                self._note(key)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            key = T.literal_string(element.key) if isinstance(element, cst.DictElement) else None
            if key is not None:
                self._add(KEY_SET + key)

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
        for target in targets:
            key = _literal_key(target.value if isinstance(target, cst.Element) else target)
            if key is not None:
                self._note(key)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "dict":
            for arg in node.args:
                if arg.keyword is not None:
                    self._add(KEY_SET + arg.keyword.value)
        if isinstance(func, cst.Attribute) and func.attr.value == "pop" and node.args \
                and node.args[0].keyword is None:
            key = T.literal_string(node.args[0].value)
            if key is not None:
                self._note(key)

    def _note(self, key: str) -> None:
        self._add(OPTIONAL_KEY + key)

    def _add(self, fact: str) -> None:
        if fact not in self._seen:
            self._seen.add(fact)
            self._found.append(fact)


def _literal_key(node: cst.BaseExpression) -> str | None:
    """``m["k"]`` -> ``"k"``."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return T.literal_string(node.slice[0].slice.value)
    return None


def _passed_on(test: cst.BaseExpression) -> set[str]:
    """Keys a condition tests on a plain name: ``"k" in kwargs``, ``kwargs.get("k") is not None``.
    Under it, writing ``k`` passes on what the caller had."""
    if isinstance(test, cst.BooleanOperation):
        return _passed_on(test.left) | _passed_on(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _passed_on(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(target.comparator, cst.Name):
            key = T.literal_string(test.left)
            return {key} if key is not None else set()
        return _passed_on(test.left)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "get" \
            and isinstance(test.func.value, cst.Name) and test.args:
        key = T.literal_string(test.args[0].value)
        return {key} if key is not None else set()
    return set()


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
