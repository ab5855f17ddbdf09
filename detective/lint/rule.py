"""Rule base class and the registry of rules found in ``detective.rules``.

A rule is a class with a stable ``code`` (``RC001``), a kebab-case ``name``, a
one-line ``summary``, a Ruff-style ``doc`` (What it does / Why is this bad /
Example / Use instead) and VALID/INVALID example programs that the test suite runs
through the whole linter. Rules implement ``visit_<Node>``/``leave_<Node>``
methods; all rules share one traversal driven by :class:`~detective.lint.context.Context`.

What a rule reads from ``self.context`` (the semantic model at the walk's position):
``resolve(expr)`` (dotted name, imports expanded), ``is_tensor``, ``is_bool_tensor``,
``is_host_value``, ``reads_tensor_value``, ``scope`` (the Scope being walked),
``function`` (its bindings: ``data_names``, ``tensor_names``...), ``functions``,
``cls``/``class_stack`` (``tensor_attrs``, ``number_attrs``), ``current_region()`` and
``region_is_step(region)``. Facts that several rules need from the same walk are a
:class:`Facts` class named in the rules' ``facts`` and read as
``self.context.facts[ThatClass]`` (see ``rules/_accumulation.py``).
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

from detective.lint.config import Config

if TYPE_CHECKING:  # rule modules import libcst; this registry does not need to
    import libcst as cst


@dataclass(frozen=True)
class Valid:
    """No finding of this rule at the default severity (an "info" one may stand)."""

    code: str
    config: Config | None = None  # the project's settings (default: none set)


@dataclass(frozen=True)
class Invalid:
    code: str
    line: int | None = None  # 1-based line the finding must be on, when given
    severity: str = "warning"  # the finding's severity (on ``line`` when given)
    config: Config | None = None  # the project's settings (default: none set)


# Where a rule's candidates count, decided in the cross-file pass:
#   "region"   - the candidate's scope is reachable from a traced root (compiled
#                function, nn.Module.forward, step loop): trigger rules.
#   "xla-code" - the candidate's file imports torch_xla, or is reachable through
#                imports or calls from a file that does: whole-program policies.
#   "any"      - everywhere (a setting that is wrong wherever it is made).
APPLIES_TO = ("region", "xla-code", "any")


class Facts:
    """Facts collected in the shared walk for the rules that name this class in ``facts``.

    Subclasses implement ``visit_<Node>``/``leave_<Node>`` like rules; one instance per
    file is shared by every rule that asks for it. On the way in, facts are updated
    before the rules' visits; on the way out, after the rules' leaves.
    """

    def __init__(self, context):
        self.context = context


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    doc: ClassVar[str]
    applies_to: ClassVar[str] = "region"
    fixable: ClassVar[bool] = False  # offers a behaviour-keeping fix (`detective lint --fix`)
    facts: ClassVar[tuple[type[Facts], ...]] = ()  # shared facts this rule reads
    # What was measured on a torch earlier than a ``torch>=X`` its candidates need: the
    # reason a finding is "info" there (see detective.lint.project_facts).
    measured_below: ClassVar[str] = ""
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def __init__(self, context):
        self.context = context

    def report(self, node: cst.CSTNode, message: str, scope: str | None = None, *,
               replace: tuple[cst.CSTNode, cst.CSTNode] | None = None, fix_title: str = "",
               after_calls: tuple[str, ...] = (), at_index: int | None = None,
               subject: str = "", severity: str = "warning", costs_on: tuple[str, ...] = (),
               needs: tuple[str, ...] = (), guarded_by: tuple[str, ...] = (),
               assumes: tuple[str, ...] = ()) -> None:
        """Record a candidate; ``replace=(old, new)`` offers swapping node ``old`` for ``new``.

        ``subject`` is what the finding is about as the message shows it (``.item()``,
        ``batch``, ``self.steps``): a printed chain ends with it and ``detective report``
        matches it against the source line. ``after_calls`` are call targets the rule's
        :meth:`cross_check` looks at across files; ``at_index`` see :meth:`Context.report`.
        ``severity``: "warning", or "info" for a finding that is real but rarely costs an XLA
        run anything (see :data:`detective.lint.model.SEVERITIES`). ``costs_on``: the backends
        ("xla", "compile") where the match costs anything, when not every one; ``needs``:
        project facts of which one must hold for a warning (see
        :mod:`detective.lint.project_facts`); otherwise the finding is "info". ``guarded_by``:
        parameter guards (``P``/``P+``, as :meth:`ParamGuards.guarded_by`) under which the
        finding's evidence was made, added to those of the node itself. ``assumes``: what
        evidence read at an earlier visit rested on (:meth:`Context.assumptions`), for a
        finding reported later.
        """
        self.context.report(self.code, node, message, scope, replace=replace, fix_title=fix_title,
                            after_calls=after_calls, at_index=at_index, subject=subject,
                            severity=severity, project=(tuple(costs_on), tuple(needs)), guarded_by=guarded_by,
                            assumes=assumes)

    @classmethod
    def cross_check(cls, candidate, summary, project) -> bool:
        """Cross-file condition on a candidate that passed the ``applies_to`` filter."""
        return True

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
    for rule in found:
        if rule.applies_to not in APPLIES_TO:
            raise RuntimeError(f"{rule.code}: applies_to must be one of {APPLIES_TO}")
    codes = [r.code for r in found]
    duplicates = {c for c in codes if codes.count(c) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda r: r.code))


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.code: r for r in all_rules()}


def expand_selectors(selectors, codes=None) -> set[str]:
    """Codes matched by exact codes or prefixes (``RC0``, ``RC``); unknown ones raise.
    ``codes``: every rule's code when already known (else the rules are imported)."""
    codes = set(codes if codes is not None else rules_by_code())
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
