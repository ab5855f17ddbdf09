"""Branches that run once (or once per key), not every step: shapes of an ``if`` statement.

:class:`detective.lint.never_traced.NeverTraced` marks their bodies as not traced per step:
a cache fill, a memo fill and a state undone by its own method; and the rest of a block
after a set-up guard that returns once the set-up is done (``if self.initted: return``).
"""

from __future__ import annotations

import libcst as cst

from detective.lint.syntax import block_statements, plain_dotted_name
from detective.lint.walker import walk


def runs_once(node: cst.If) -> bool:
    return cache_fill(node) or memo_fill(node) or undoes_state(node)


def cache_fill(node: cst.If) -> bool:
    """``if L not in self.ops: ... self.ops[L] = build(L)``: set-up run on a cache miss, once
    per key (a new sequence length), not every step."""
    test = node.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.NotIn)):
        return False
    key, cache = plain_dotted_name(test.left), plain_dotted_name(test.comparisons[0].comparator)
    if not key or not cache or node.orelse is not None:
        return False
    for statement in block_statements(node.body):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Subscript) and plain_dotted_name(t.target.value) == cache
                        and len(t.target.slice) == 1 and isinstance(t.target.slice[0].slice, cst.Index)
                        and plain_dotted_name(t.target.slice[0].slice.value) == key for t in small.targets):
                    return True
    return False


def memo_fill(node: cst.If) -> bool:
    """``if self.inv_freq is None: ... self.inv_freq = build()``: the branch fills the
    attribute it tests, so it runs at the first call (and after each reset), not every step."""
    test = node.test
    if node.orelse is not None or not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                                       and isinstance(test.comparisons[0].operator, cst.Is)
                                       and isinstance(test.comparisons[0].comparator, cst.Name)
                                       and test.comparisons[0].comparator.value == "None"):
        return False
    attr = plain_dotted_name(test.left)
    if not attr.startswith("self.") or attr.count(".") != 1:
        return False
    return any(isinstance(small, cst.Assign) and any(plain_dotted_name(t.target) == attr for t in small.targets)
               for statement in block_statements(node.body) if isinstance(statement, cst.SimpleStatementLine)
               for small in statement.body)


def undoes_state(node: cst.If) -> bool:
    """``if self.merged: self.unmerge()``: the branch calls the method that undoes the state
    its flag reports, so it runs on the first call after the state was entered, not every
    step (PEFT's adapter layers, when adapters are disabled after a merge)."""
    test, body = node.test, block_statements(node.body)
    if node.orelse is not None or len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) \
            or len(body[0].body) != 1 or not isinstance(body[0].body[0], cst.Expr):
        return False
    call = body[0].body[0].value
    flag, method = plain_dotted_name(test), plain_dotted_name(call.func) if isinstance(call, cst.Call) else ""
    if not flag.startswith("self.") or not method.startswith("self."):
        return False
    flag, method = flag[len("self."):], method[len("self."):]
    return "." not in flag and "." not in method and method.startswith("un") and len(method) > 4 \
        and flag.lstrip("_").startswith(method[2:].lstrip("_"))


def done_setup_guard(node: cst.If, rest) -> bool:
    """``if self.initted: return`` where a later statement of the block (``rest``) sets the
    flag (``self.initted = True``, ``self.initted.data.copy_(...)``, ``.fill_(True)``): the
    rest of the block is one-time set-up (k-means initialisation of a codebook), not run
    every step. The flag must name initialisation, as for ``if not self._initialized:``."""
    test = node.test
    if isinstance(test, cst.Call) and not test.args and isinstance(test.func, cst.Attribute) \
            and test.func.attr.value == "item":
        test = test.func.value  # if self.initted.item(): return
    flag = plain_dotted_name(test)
    if node.orelse is not None or not flag.startswith("self.") or flag.count(".") != 1 \
            or "init" not in flag.lower() or not _leaves(node.body):
        return False
    return any(_sets(statement, flag) for statement in rest)


def _leaves(body: cst.BaseSuite) -> bool:
    statements = block_statements(body)
    return len(statements) == 1 and isinstance(statements[0], cst.SimpleStatementLine) \
        and isinstance(statements[0].body[-1], cst.Return)


def _sets(statement: cst.CSTNode, flag: str) -> bool:
    """Does ``statement`` (at any depth, not in a nested def) assign ``flag`` or update it in
    place?"""
    found = []

    def visit(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Assign) and any(plain_dotted_name(t.target) == flag for t in node.targets):
            found.append(node)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value.endswith("_") and not node.func.attr.value.startswith("_") \
                and plain_dotted_name(node.func.value) in (flag, flag + ".data"):
            found.append(node)
        return not found and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))

    walk(statement, visit, lambda node: None)
    return bool(found)
