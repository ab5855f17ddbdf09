"""detective.lint.syntax: the one definition of each statement and target helper."""

from __future__ import annotations

import libcst as cst

from detective.lint.syntax import (block_statements, bound_names, dotted_name, ends_in_exit, inner_suites,
                                   plain_dotted_name)


def _statement(source: str) -> cst.BaseStatement:
    return cst.parse_module(source).body[0]


def _expression(source: str) -> cst.BaseExpression:
    return cst.parse_expression(source)


def test_a_one_line_suite_holds_its_small_statements_and_can_exit():
    one_line = _statement("if m is None: return x\n")
    assert [type(s) for s in block_statements(one_line.body)] == [cst.Return]
    assert ends_in_exit(one_line.body)
    assert not ends_in_exit(one_line.body, raise_only=True)
    block = _statement("if m is None:\n    y = 1\n    raise ValueError(y)\n")
    assert ends_in_exit(block.body, raise_only=True)
    assert not ends_in_exit(_statement("if m:\n    y = 1\n").body)
    assert not ends_in_exit(_statement("if m:\n    for i in x:\n        return i\n").body)


def test_inner_suites_follow_elif_chains_handlers_and_finally():
    chain = _statement("if a:\n    p()\nelif b:\n    q()\nelse:\n    r()\n")
    assert len(inner_suites(chain)) == 3
    guarded = _statement("try:\n    p()\nexcept E:\n    q()\nelse:\n    r()\nfinally:\n    s()\n")
    assert len(inner_suites(guarded)) == 4
    assert inner_suites(_statement("x = 1\n")) == []


def test_bound_names_unpack_nested_and_starred_targets_only():
    assert bound_names(_expression("(a, (b, *c))")) == ["a", "b", "c"]
    assert bound_names(_expression("[x, *rest]")) == ["x", "rest"]
    assert bound_names(_expression("self.x")) == []
    assert bound_names(_expression("d[k]")) == []


def test_plain_dotted_names_are_chains_of_names_only():
    assert dotted_name(_expression("f().item")) == ".item"  # a method name can still be read off
    assert plain_dotted_name(_expression("f().item")) == ""
    assert plain_dotted_name(_expression("self.ops")) == "self.ops"
    assert plain_dotted_name(_expression("a[0].b")) == ""
    assert plain_dotted_name(_expression("h")) == "h"
