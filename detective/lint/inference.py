"""Is this expression a tensor, a boolean mask, a host value? Answers over the semantic model.

Evidence is what the code shows (torch calls, forward parameters, names bound from
tensor expressions, tensor-only methods, buffers and parameters of the class), no type
checker. It is conservative on purpose: a wrong "tensor" produces a false finding, a
missed one only silence. The tables of torch names live in :mod:`detective.lint.tensors`.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T

NON_TENSOR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes", "dict", "list", "tuple"})


class TensorInference:
    def __init__(self, model):
        self.model = model  # detective.lint.semantic.SemanticModel

    def param_is_tensor(self, param: cst.Param, *, is_forward: bool) -> bool:
        annotation = param.annotation
        if annotation is not None:
            dotted = self.model.resolve(annotation.annotation) or ""
            if dotted.endswith("Tensor"):
                return True
            if dotted in NON_TENSOR_ANNOTATIONS or not is_forward:
                return False
        if not is_forward:
            return False
        default = param.default
        return default is None or (isinstance(default, cst.Name) and default.value == "None")

    def is_tensor(self, node: cst.BaseExpression) -> bool:
        model = self.model
        if isinstance(node, cst.Name):
            return node.value in model.function.tensor_names
        if isinstance(node, cst.Attribute):
            attr = node.attr.value
            if attr in T.NON_TENSOR_ATTRIBUTES:
                return False
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                cls = model.cls
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
                and node.value.value in model.function.data_names
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
            return node.value in self.model.function.host_names
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
        dotted = self.model.resolve(func)
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
            if func.value in self.model.function.tensor_names:  # a module bound to a name
                return False
        return False

    def _comparison_on_tensor(self, node: cst.Comparison) -> bool:
        if not all(isinstance(t.operator, T.COMPARE_OPS) for t in node.comparisons):
            return False
        return self.is_tensor(node.left) or any(self.is_tensor(t.comparator) for t in node.comparisons)
