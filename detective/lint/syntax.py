"""Syntax helpers on statements and targets, one definition each, shared by the model and rules.

Pure functions of libcst nodes: what a block holds, how it ends, which blocks a compound
statement holds, which names a target binds, and a name or attribute chain as text.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.walker import walk


def block_statements(body: cst.BaseSuite) -> tuple:
    """The statements of a block: an indented block's lines, or a one-line suite's small
    statements (``if x: return``)."""
    return body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


def ends_in_exit(body: cst.BaseSuite, raise_only: bool = False) -> bool:
    """Does this block end by leaving the function (``return`` or ``raise``; only ``raise``
    with ``raise_only``)?"""
    statements = block_statements(body)
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, cst.Raise if raise_only else (cst.Return, cst.Raise))


def inner_suites(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    """The blocks directly inside a compound statement: body, ``elif``/``else`` chains,
    ``except`` handlers and ``finally``."""
    suites = [getattr(statement, "body", None)] if isinstance(statement, cst.BaseCompoundStatement) else []
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:  # elif chains, for/while/try else
        suites.append(orelse.body)
        orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None
    for handler in getattr(statement, "handlers", ()):
        suites.append(handler.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        suites.append(final.body)
    return [s for s in suites if isinstance(s, cst.BaseSuite)]


def bound_names(target: cst.BaseExpression) -> list[str]:
    """Plain names an assignment or loop target binds: ``a``, ``a, (b, *c)``; none for
    ``self.x`` or ``d[k]``."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in bound_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


def dotted_name(node: cst.BaseExpression) -> str:
    """``a.b.c`` as text, with an empty part for what is not a name (``f().x`` -> ``.x``),
    so that a method name can still be read off a call on a call's result."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""


def plain_dotted_name(node: cst.BaseExpression) -> str:
    """``h``, ``self.first_check``, ``SparseSelfAttention.ops``: a chain of names only;
    "" for anything else (subscripts, calls anywhere in the chain)."""
    name = dotted_name(node)
    return name if name and "" not in name.split(".") else ""


def reads_key(body: cst.CSTNode, container: cst.BaseExpression, key: cst.BaseExpression) -> bool:
    """Does ``body`` subscript ``container`` by ``key`` (``if k in d: v = d[k]``)? Then the
    membership test is a mapping's, whatever ``container`` was taken for."""
    found = False

    def on_visit(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) and node.value.deep_equals(container) \
                and node.slice[0].slice.value.deep_equals(key):
            found = True
        return not found

    walk(body, on_visit, lambda node: None)
    return found
