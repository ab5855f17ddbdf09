"""Helpers shared by the whole-program policy rules (RC1xx): environment writes, XLA
devices, optimizer constructors. Pure functions over libcst nodes and the context.
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T

ENVIRON = "os.environ"
RUNTIME_ENV_PREFIXES = ("XLA_", "PJRT_", "PT_XLA_", "LIBTPU_")
XLA_DEVICE_CALLS = frozenset(
    {"torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.core.xla_model.xla_device"}
)
USE_SPMD = frozenset({"torch_xla.runtime.use_spmd"})
REDUCE_CALLS = frozenset(
    {"torch_xla.core.xla_model.all_reduce", "torch_xla.core.xla_model.mesh_reduce"}
)
DISTRIBUTED_CALLS = frozenset(
    {
        "torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch",
        "torch_xla.torch_xla.launch", "torch_xla.runtime.world_size",
        "torch_xla.runtime.global_ordinal", "torch_xla.runtime.local_ordinal",
        "torch_xla.core.xla_model.xrt_world_size", "torch_xla.core.xla_model.get_ordinal",
        "torch_xla.core.xla_model.is_master_ordinal", "torch.distributed.init_process_group",
        "torch_xla.core.xla_model.all_reduce", "torch_xla.core.xla_model.mesh_reduce",
    }
)
ADAM_CLASSES = frozenset(
    {"torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.AdamW", "torch.optim.adam.Adam"}
)
TENSOR_FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "tensor", "eye",
     "linspace", "zeros_like", "ones_like", "empty_like", "full_like", "randn_like", "as_tensor"}
)


def env_writes(node: cst.CSTNode, context) -> list[tuple[str, cst.BaseExpression | None, cst.CSTNode]]:
    """(key, value, anchor) for each literal environment key this statement/call sets."""
    found = []
    if isinstance(node, cst.Assign):
        for target in node.targets:
            key = _environ_key(target.target, context)
            if key is not None:
                found.append((key, node.value, target.target))
    elif isinstance(node, cst.Call):
        dotted = context.resolve(node.func) or ""
        args = node.args
        if dotted in {f"{ENVIRON}.setdefault", "os.putenv"} and args and args[0].keyword is None:
            key = T.literal_string(args[0].value)
            if key is not None:
                found.append((key, args[1].value if len(args) > 1 else None, node))
        elif dotted == f"{ENVIRON}.update":
            for arg in args:
                if arg.keyword is not None:
                    found.append((arg.keyword.value, arg.value, node))
                elif isinstance(arg.value, cst.Dict):
                    found.extend((k, v, node) for k, v in dict_items(arg.value))
    return found


def dict_items(node: cst.Dict) -> list[tuple[str, cst.BaseExpression]]:
    items = []
    for element in node.elements:
        if isinstance(element, cst.DictElement):
            key = T.literal_string(element.key)
            if key is not None:
                items.append((key, element.value))
    return items


def _environ_key(target: cst.BaseExpression, context) -> str | None:
    if not isinstance(target, cst.Subscript) or context.resolve(target.value) != ENVIRON:
        return None
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    return T.literal_string(target.slice[0].slice.value)


def is_runtime_flag(key: str) -> bool:
    return key.startswith(RUNTIME_ENV_PREFIXES)


def truthy_setting(value: cst.BaseExpression | None) -> bool:
    """"1", 1, "true", True: the value turns an env switch on."""
    if value is None:
        return False
    if isinstance(value, cst.Integer):
        return value.value != "0"
    if isinstance(value, cst.Name):
        return value.value == "True"
    text = T.literal_string(value)
    return text is not None and text.strip().lower() in {"1", "true", "yes", "on"}


def keyword(node: cst.Call, name: str) -> cst.Arg | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(node: cst.Call) -> bool:
    return any(arg.star == "**" for arg in node.args)


def is_literal(value: cst.BaseExpression, text: str) -> bool:
    return isinstance(value, cst.Name) and value.value == text


def plain_keyword(name: str, value: str) -> cst.Arg:
    """``name=value`` with no spaces around ``=``, as PEP 8 writes keyword arguments."""
    return cst.Arg(
        keyword=cst.Name(name), value=cst.Name(value),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                              whitespace_after=cst.SimpleWhitespace("")),
    )


def append_argument(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` with ``arg`` added last, keeping one-line or one-per-line layout."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma (one argument per line): the new argument takes the old last
        # comma (whitespace up to the closing parenthesis); the old last one gets the
        # separator the others use.
        separator = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else \
            cst.Comma(whitespace_after=call.whitespace_before_args)
        args[-1] = last.with_changes(comma=separator)
        args.append(arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    return call.with_changes(args=args)


def xla_device_expr(node: cst.BaseExpression, context, device_names: set[str]) -> bool:
    """`torch_xla.device()`, `xm.xla_device()`, `"xla"`, `torch.device("xla")`, or a name bound to one."""
    if isinstance(node, cst.Name):
        return node.value in device_names
    if isinstance(node, cst.Call):
        dotted = context.resolve(node.func)
        if dotted in XLA_DEVICE_CALLS:
            return True
        if dotted == "torch.device" and node.args:
            text = T.literal_string(node.args[0].value)
            return text is not None and text.startswith("xla")
        return False
    text = T.literal_string(node)
    return text is not None and text.startswith("xla")


def calls_reach(candidate, summary, project, tag: str) -> bool:
    """Cross-file check of an ordering rule (RC106, RC110): does one of the calls made before the
    flagged line (``candidate.after_calls``) reach a function tagged ``tag`` in the project?
    A finding with no such calls stands on its own evidence."""
    if not candidate.after_calls:
        return True
    scope = summary.scopes.get(candidate.scope)
    class_name = scope.class_name if scope else None
    starts = [n for n in (project.resolve(t, summary, class_name) for t in candidate.after_calls) if n]
    return bool(starts) and project.reaches_tag(starts, tag)
