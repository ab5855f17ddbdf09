"""What a guard or a passed value is, read from the syntax: the helpers of
:class:`~detective.lint.param_guards.ParamGuards`."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.xla_params import CONFIG, FALSY, LITERAL, NONE, OTHER

# Names of objects whose attributes are settings (``args.fp16``, ``self.cfg.normalize``,
# ``task_cfg.normalize``): what a call passes from them is a Python value.
CONFIG_NAMES = frozenset({"args", "cfg", "config", "conf", "opt", "opts", "hparams", "hp", "options"})
CONFIG_SUFFIXES = ("_cfg", "_config", "_args", "_conf", "_opts")


# Builtins whose result is a Python value.
PYTHON_CONVERSIONS = frozenset({"float", "int", "bool", "str", "round", "len"})


def value_kind(node) -> str:
    """A Python literal (false or not), a setting (read from a config object, a module's
    ``training`` flag) or a builtin's Python number, or other."""
    if isinstance(node, cst.Name):
        return {"True": LITERAL, "False": FALSY, "None": NONE}.get(node.value, OTHER)
    if isinstance(node, (cst.Integer, cst.Float)):
        return FALSY if node.evaluated_value == 0 else LITERAL
    if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float)) \
            and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return value_kind(node.expression)
    if isinstance(node, cst.SimpleString):
        return FALSY if not node.evaluated_value else LITERAL
    if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
        return LITERAL
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr" \
            and len(node.args) >= 2 and is_config(node.args[0].value):
        return CONFIG  # getattr(args, "fp16", False)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in PYTHON_CONVERSIONS:
        return CONFIG  # float(sigma): a Python number, whatever it was made from
    if isinstance(node, cst.Attribute) and (is_config(node.value) or node.attr.value == "training"):
        return CONFIG  # self.training: a module's mode flag, set by .train()/.eval()
    return OTHER


def is_config(node) -> bool:
    while isinstance(node, cst.Attribute):
        if _config_name(node.attr.value):
            return True
        node = node.value
    return isinstance(node, cst.Name) and _config_name(node.value)


def _config_name(name: str) -> bool:
    return name in CONFIG_NAMES or name.endswith(CONFIG_SUFFIXES)


# Per-sample metadata in the mmcv convention (img_metas[0]["flip"], "ori_shape"): Python
# values describing the batch, not its tensors.
METADATA_NAMES = frozenset({"meta", "metas", "metadata", "img_meta", "img_metas", "image_meta", "image_metas"})
METADATA_SUFFIXES = ("_meta", "_metas", "_metadata")


def metadata_name(name: str) -> bool:
    return name in METADATA_NAMES or name.endswith(METADATA_SUFFIXES)


def is_metadata(node) -> bool:
    return isinstance(node, cst.Name) and metadata_name(node.value)


def _is_self_attr(node, attr: str) -> bool:
    return T.self_attr(node) == attr


def self_attrs(test) -> list[str]:
    """``self.A`` tested for truth or None-ness in ``test`` (through not/and/or)."""
    found, stack = [], [test]
    while stack:
        node = stack.pop()
        if (attr := T.self_attr(node)) is not None:
            found.append(attr)
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            stack.append(node.left)
    return found


def sense_if_unset(test, attr: str) -> int:
    """The test's truth when ``self.attr`` is None (or false where it is tested for truth):
    +1 true, -1 false, 0 unknown."""
    if _is_self_attr(test, attr):
        return -1
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -sense_if_unset(test.expression, attr)
    if isinstance(test, cst.BooleanOperation):
        left, right = sense_if_unset(test.left, attr), sense_if_unset(test.right, attr)
        if isinstance(test.operator, cst.And):
            return -1 if -1 in (left, right) else (1 if left == right == 1 else 0)
        return 1 if 1 in (left, right) else (-1 if left == right == -1 else 0)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and _is_self_attr(test.left, attr):
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            return 1 if isinstance(target.operator, cst.Is) else (
                -1 if isinstance(target.operator, cst.IsNot) else 0)
    return 0


def tests_truth(test, name: str, attr: bool = False) -> bool:
    """``if P:`` / ``not P`` / ``P and x``: the test needs P true, not only given."""
    stack = [test]
    while stack:
        node = stack.pop()
        if (_is_self_attr(node, name) if attr else (isinstance(node, cst.Name) and node.value == name)):
            return True
        if isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
    return False


def is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def names_in(test: cst.BaseExpression) -> set[str]:
    found = set()
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
        elif isinstance(node, cst.Comparison):
            stack.append(node.left)
    return found


def message_lambda(node: cst.BaseExpression) -> bool:
    """``lambda: f"..."``: a lazy message (torch._check, transformers' torch_compilable_check)."""
    if not isinstance(node, cst.Lambda):
        return False
    body = node.body
    if isinstance(body, cst.Call) and isinstance(body.func, cst.Attribute) and body.func.attr.value == "format":
        body = body.func.value  # lambda: "... {}".format(t.sum())
    return isinstance(body, (cst.FormattedString, cst.ConcatenatedString, cst.SimpleString))
