"""Hook handles a function removes: a hook that removes its own handle runs once, no region.

``h = m.register_forward_pre_hook(fn)`` keeps a handle; ``h.remove()`` (or ``for h in
handles: h.remove()``) in the hook's own body makes it one-time set-up, and removal in the
registering function makes the hook a call of that function rather than a traced root
(:class:`detective.lint.regions.Regions` reads both).
"""

from __future__ import annotations

import libcst as cst

from detective.lint.syntax import block_statements, inner_suites, plain_dotted_name


def handles_removed_anywhere(body: cst.BaseSuite) -> set[str]:
    """Handles a function body removes in any of its blocks (``h.remove()``, or ``for h in
    handles: h.remove()`` removing ``handles``), nested functions left out. Statements only:
    no expression is visited."""
    removed: set[str] = set()
    stack = list(block_statements(body))
    while stack:
        statement = stack.pop()
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        name = removed_handle(statement)
        if name:
            removed.add(name)
        if isinstance(statement, cst.For) and isinstance(statement.target, cst.Name) \
                and statement.target.value in {removed_handle(s) for s in block_statements(statement.body)}:
            if name := plain_dotted_name(statement.iter):
                removed.add(name)
        for suite in inner_suites(statement):
            stack.extend(block_statements(suite))
    return removed


def removed_handle(statement: cst.CSTNode) -> str:
    """``X`` of a statement ``X.remove()`` (a hook handle removed), else ""."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return ""
    for small in statement.body:
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value == "remove":
            return plain_dotted_name(call.func.value)
    return ""
