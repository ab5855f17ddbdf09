"""The shapes of compile calls the walk tags a scope by (``compiles``, ``compiles-self``,
``compiles-part:<attr>``; see :mod:`detective.lint.model`): which call compiles, and what.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.api_names import COMPILE_CALLS

COMPILING_CALLS = COMPILE_CALLS | {"torch._dynamo.optimize"}
_COMPILE_KEYWORDS = frozenset({"backend", "fullgraph", "mode", "dynamic", "options"})


def module_compile(call: cst.Call) -> bool:
    """``block.compile(backend=..., fullgraph=True)``: nn.Module.compile, told from
    ``re.compile`` and the like by torch.compile's keywords."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "compile" and any(
        arg.keyword is not None and arg.keyword.value in _COMPILE_KEYWORDS for arg in call.args)


def compiles_self(call: cst.Call, dotted: str | None) -> bool:
    """``super().compile(...)``, ``torch.compile(self)``, ``nn.Module.compile(self)``: the
    method compiles the module it belongs to."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "compile" and isinstance(func.value, cst.Call) \
            and isinstance(func.value.func, cst.Name) and func.value.func.value == "super":
        return True
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    if isinstance(first, cst.Attribute) and first.attr.value == "forward":
        first = first.value  # torch.compile(self.forward); not self.trainable_module, a part
    return (dotted in COMPILING_CALLS or dotted == "torch.nn.Module.compile") \
        and isinstance(first, cst.Name) and first.value == "self"


def compiled_part(call: cst.Call, dotted: str | None) -> str | None:
    """``torch.compile(self.encoder.forward)``, ``torch.compile(self.encoder)``,
    ``self.encoder.compile(mode=...)``: the attribute of ``self`` compiled (a component, or a
    method: the cross-file pass tells them apart), else None."""
    if dotted in COMPILING_CALLS:
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            return None
        target = call.args[0].value
    elif module_compile(call):
        target = call.func.value
    else:
        return None
    if isinstance(target, cst.Attribute) and target.attr.value == "forward":
        target = target.value
    return T.self_attr(target)
