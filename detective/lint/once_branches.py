"""Branches that run once (or once per key), not every step: shapes of an ``if`` statement.

:class:`detective.lint.never_traced.NeverTraced` marks their bodies as not traced per step:
a cache fill, a memo fill and a state undone by its own method.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.syntax import block_statements, plain_dotted_name


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
