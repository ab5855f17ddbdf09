"""Rule base class and the registry of rules found in ``detective.rules``.

A rule is a class with a stable ``code`` (``RC001``), a kebab-case ``name``, a
one-line ``summary``, a Ruff-style ``doc`` (What it does / Why is this bad /
Example / Use instead) and VALID/INVALID example programs that the test suite runs
through the whole linter. Rules implement ``visit_<Node>``/``leave_<Node>``
methods; all rules share one traversal driven by :class:`~detective.lint.context.Context`.
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import libcst as cst


@dataclass(frozen=True)
class Valid:
    code: str


@dataclass(frozen=True)
class Invalid:
    code: str
    line: int | None = None  # 1-based line the finding must be on, when given
    chain: tuple[str, ...] | None = None  # expected function names along the chain


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    doc: ClassVar[str]
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def __init__(self, context):
        self.context = context

    def report(self, node: cst.CSTNode, message: str, scope: str | None = None) -> None:
        self.context.report(self.code, node, message, scope)

    @classmethod
    def documentation(cls) -> str:
        return f"{cls.code} ({cls.name})\n\n{textwrap.dedent(cls.doc).strip()}\n"


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in ``detective.rules``, ordered by code."""
    import detective.rules as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule \
                    and value.__module__ == module.__name__:
                found.append(value)
    codes = [r.code for r in found]
    duplicates = {c for c in codes if codes.count(c) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda r: r.code))


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.code: r for r in all_rules()}


def expand_selectors(selectors) -> set[str]:
    """Codes matched by exact codes or prefixes (``RC0``, ``RC``); unknown ones raise."""
    codes = set(rules_by_code())
    chosen: set[str] = set()
    for selector in selectors:
        selector = selector.strip().upper()
        if selector == "ALL":
            chosen |= codes
            continue
        matched = {c for c in codes if c.startswith(selector)}
        if not matched:
            raise ValueError(f"unknown rule selector {selector!r}")
        chosen |= matched
    return chosen
