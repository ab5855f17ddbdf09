"""Where a tensor lives: already copied to the host, or made on the CPU in this function.

Part of :class:`~detective.lint.inference.TensorInference` (a mixin: the questions here ask
``is_tensor`` about operands and keep its ``assumed`` list clean). A host read of such a
tensor syncs no device on torch_xla; under torch.compile it still breaks the graph.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T

# Torch factories that make a tensor on the CPU unless given a device (or a default device).
CPU_FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
    "arange", "range", "linspace", "logspace", "eye", "from_numpy", "LongTensor", "FloatTensor",
    "IntTensor", "BoolTensor", "ByteTensor", "DoubleTensor", "HalfTensor", "Tensor",
})
# Methods whose result may live elsewhere than the receiver (x.to(device), x.cuda(), x.type_as(y)).
MOVING_METHODS = frozenset({"to", "cuda", "type_as", "xla", "type", "copy_", "set_"})
# Methods of torch_xla objects that return NumPy arrays: Mesh.get_logical_mesh() (torch_xla 2.9,
# distributed/spmd/xla_sharding.py: ``self.device_ids.reshape(self.mesh_shape)``, an ndarray).
NUMPY_METHODS = frozenset({"get_logical_mesh"})


class Placement:
    def on_host(self, node: cst.BaseExpression) -> bool:
        """Is this computed from a tensor already copied to the host (``x.cpu()``, ``.numpy()``,
        a name bound from one, ``u != -1`` with ``u`` such a name, the elements of a list of
        them)? Reading it syncs nothing more, and ops on it make no XLA program."""
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return self.on_host(node.elt)
        if isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)):
            sides = [node.expression] if isinstance(node, cst.UnaryOperation) else \
                [node.left, node.right] if isinstance(node, cst.BinaryOperation) else \
                [node.left, *(t.comparator for t in node.comparisons)]
            return self._operands_all(sides, self.on_host)
        while True:
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in {"cpu", "numpy", *NUMPY_METHODS}:
                    return True
                if isinstance(func, cst.Attribute) and func.attr.value == "to" and any(
                        T.is_cpu_device(a.value, self.model.resolve) for a in node.args):
                    return True  # x.to("cpu"), x.to(torch.device("cpu"), non_blocking=True)
                node = func.value if isinstance(func, cst.Attribute) else None
            elif self._numpy_ctx_attr(node):
                return True
            elif isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            elif isinstance(node, cst.Name):
                return node.value in self.model.function.cpu_names
            elif isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)):
                return self.on_host(node)  # (u != -1).any()
            else:
                return False
            if node is None:
                return False

    def through_numpy(self, node: cst.BaseExpression) -> bool:
        """Of a host value, did NumPy make it (``x.cpu().numpy()``, ``np.argmax(a)``, a name
        bound from one, an operator with such an operand)? Reading it is a NumPy read, which
        the linter leaves alone (it was never a device tensor's value read here)."""
        if isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)):
            sides = [node.expression] if isinstance(node, cst.UnaryOperation) else \
                [node.left, node.right] if isinstance(node, cst.BinaryOperation) else \
                [node.left, *(t.comparator for t in node.comparisons)]
            return any(self.through_numpy(s) for s in sides)
        while True:
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in {"numpy", *NUMPY_METHODS}:
                    return True
                if (self.model.resolve(func) or "").startswith("numpy."):
                    return True
                node = func.value if isinstance(func, cst.Attribute) else None
            elif self._numpy_ctx_attr(node):
                return True
            elif isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            elif isinstance(node, cst.Name):
                return node.value in self.model.function.numpy_names
            else:
                return False
            if node is None:
                return False

    def _numpy_ctx_attr(self, node: cst.BaseExpression) -> bool:
        """``ctx.device_ids`` in an autograd Function whose every assignment of it so far
        (forward, before backward in the file) was a NumPy host value."""
        if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "ctx"):
            return False
        cls = self.model.cls
        return cls is not None and cls.ctx_numpy.get(node.attr.value, False)

    def made_on_cpu(self, node: cst.BaseExpression) -> bool:
        """Is this a tensor made on the CPU in this function (``torch.zeros(n)``,
        ``torch.tensor(x.size())`` with no ``device=`` or ``device="cpu"``, a host copy ``x.cpu()``, what is
        computed from such tensors alone)? Reading its value syncs no device on XLA (under
        torch.compile it still breaks the graph)."""
        if isinstance(node, cst.Name):
            # cu_seqlens_cpu: a name that says where the tensor lives; a host copy (x.cpu()).
            function = self.model.function
            if self.params_on_cpu and node.value in function.params and node.value not in function.locals:
                return True  # a return summary: where the arguments live (see SemanticModel)
            return node.value in function.cpu_made_names or node.value in function.cpu_names \
                or node.value.endswith("_cpu")
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "cpu":
                return True  # a host copy: what is computed from it runs on the CPU
            dotted = self.model.resolve(func) or ""
            if T.is_torch_name(dotted):
                if dotted.count(".") == 1 and dotted.rsplit(".", 1)[-1] in CPU_FACTORIES:
                    # no device= (the default), or device="cpu" / torch.device("cpu")
                    return not any(a.keyword is not None and (a.keyword.value == "out" or (
                        a.keyword.value == "device" and not T.is_cpu_device(a.value, self.model.resolve)))
                        for a in node.args)
                # torch.cumsum(t), F.pad(t, p): the result lives where its tensor inputs live.
                return self._inputs_on_cpu(node)
            if isinstance(func, cst.Name) and self.model.cpu_following.get(dotted):
                return self._inputs_on_cpu(node)  # a helper of this file whose return follows them
            cls = self.model.cls
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                    and cls is not None and self.model.cpu_following.get(f"{cls.info.qualname}.{func.attr.value}"):
                return self._inputs_on_cpu(node)  # self._constrain(row): a method of this class, defined above
            if isinstance(func, cst.Attribute) and (func.attr.value not in MOVING_METHODS or (
                    func.attr.value == "to" and self._casts_only(node))):
                return self.made_on_cpu(func.value)  # torch.zeros(n).long().sum(), .to(torch.float32)
            return False
        if isinstance(node, (cst.List, cst.Tuple)):
            return bool(node.elements) and all(self.made_on_cpu(e.value) for e in node.elements)
        if isinstance(node, cst.Subscript):
            return self.made_on_cpu(node.value)
        if isinstance(node, cst.UnaryOperation):
            return self.made_on_cpu(node.expression)
        if isinstance(node, (cst.BinaryOperation, cst.Comparison)):
            sides = [node.left, node.right] if isinstance(node, cst.BinaryOperation) else \
                [node.left, *(t.comparator for t in node.comparisons)]
            return self._operands_all(sides, self.made_on_cpu)
        return False

    def _operands_all(self, sides, test) -> bool:
        """Some operand passes ``test`` and every other one passes it or is no tensor (numbers
        mix in; a device tensor would not)."""
        if not any(test(s) for s in sides):
            return False
        mark = len(self.assumed)
        others = all(test(s) or not self.is_tensor(s) for s in sides)
        del self.assumed[mark:]  # a question, not evidence a finding stands on
        return others

    def _casts_only(self, node: cst.Call) -> bool:
        """``x.to(torch.float32)``, ``x.to(dtype=d)``: a cast that keeps the tensor where it is."""
        def cast(arg: cst.Arg) -> bool:
            if arg.keyword is not None:
                return arg.keyword.value in {"dtype", "copy", "non_blocking", "memory_format"}
            dotted = self.model.resolve(arg.value) or ""
            return dotted.startswith("torch.") and dotted.rsplit(".", 1)[-1] in T.DTYPE_NAMES
        return bool(node.args) and all(cast(a) for a in node.args)

    def _inputs_on_cpu(self, node: cst.Call) -> bool:
        """Some argument is a CPU tensor and every other one a CPU tensor or no tensor."""
        values = [a.value for a in node.args]
        if not any(self.made_on_cpu(v) for v in values):
            return False
        mark = len(self.assumed)
        others = all(self.made_on_cpu(v) or not (
            self.is_tensor(v) or isinstance(v, (cst.List, cst.Tuple))
            and any(self.is_tensor(e.value) for e in v.elements)) for v in values)
        del self.assumed[mark:]  # a question, not evidence a finding stands on
        return others
