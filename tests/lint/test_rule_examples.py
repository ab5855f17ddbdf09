"""Every rule's own VALID/INVALID examples, run through the whole linter."""

from __future__ import annotations

import textwrap

import pytest

from detective.lint.engine import lint_sources
from detective.lint.model import DEFAULT_MIN_SEVERITY, at_least
from detective.lint.rule import all_rules

CASES = [
    pytest.param(rule, kind, i, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, example in enumerate(examples)
]


@pytest.mark.parametrize("rule, kind, index, example", CASES)
def test_rule_example(rule, kind, index, example):
    source = textwrap.dedent(example.code)
    found = [f for f in lint_sources({"example.py": source}, example.config) if f.code == rule.code]
    if kind == "valid":
        shown = [f for f in found if at_least(f.severity, DEFAULT_MIN_SEVERITY)]
        assert shown == [], f"{rule.code} fired on a VALID example: {shown}"
        return
    if example.line is not None:
        found = [f for f in found if f.line == example.line]
    assert found, f"{rule.code} did not fire on INVALID example {index} (line {example.line}):\n{source}"
    assert example.severity in {f.severity for f in found}, [(f.line, f.severity, f.message) for f in found]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_documented(rule):
    assert rule.code[:2] == "RC" and rule.code[2:].isdigit()
    assert rule.name == rule.name.lower() and " " not in rule.name
    doc = rule.documentation()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in doc, f"{rule.code} doc lacks {heading!r}"
    assert rule.VALID and rule.INVALID, f"{rule.code} needs VALID and INVALID examples"
