"""Names a scope binds once, to a literal, and never rebinds: flags fixed by the code.

yolov5's ``non_max_suppression`` sets ``merge = False  # use merge-NMS`` and later runs
``if merge and (1 < n < 3e3): ...``: nothing can make that side run, short of editing the
file. Likewise a module's ``DEBUG = False`` tested in its functions. A name counts when the
scope's top-level statements bind it once with ``name = <literal>`` (``True``, ``False``,
``None``, an integer) and nothing else in the scope binds it (no other assignment, loop or
``with`` target, ``global``/``nonlocal``, import, ``del``, parameter); a module name also
must not be declared ``global`` in any function of the file. Its truth is known: +1 true,
-1 false (see :meth:`detective.lint.never_traced.NeverTraced.sense`).
"""

from __future__ import annotations

from collections import Counter

import libcst as cst

from detective.lint.syntax import bound_names
from detective.lint.walker import walk

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class LiteralFlags:
    """The fixed names one scope can read: name -> +1 (true) or -1 (false), decided when a
    test first asks (most scopes test none, so the walk over a body that proves a name is
    never bound again runs only where a test reads a candidate).

    ``statements``: the scope's body; ``params``: its parameter names (never fixed); ``outer``:
    the enclosing scope's flags (a function reads the module's names it does not bind);
    ``module``: the file's tree when the scope is the module (for its functions' ``global``)."""

    def __init__(self, statements, params=(), outer: "LiteralFlags | None" = None,
                 module: cst.Module | None = None):
        self._statements = statements
        self._params = frozenset(params)
        self._outer = outer
        self._module = module
        self._candidates = _candidates(statements)
        self._bound: Counter | None = None
        self._decided: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._candidates) or bool(self._outer)

    def __getitem__(self, name: str) -> int:
        truth = self._decided.get(name)
        if truth is None:
            truth = self._decided[name] = self._decide(name)
        if not truth:
            raise KeyError(name)
        return truth

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def get(self, name: str, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def _decide(self, name: str) -> int:
        if name in self._params:
            return 0
        own = self._candidates.get(name, 0)
        outer = 0 if own or not self._outer else self._outer.get(name, 0)
        if not own and not outer:
            return 0
        if self._bound is None:
            self._bound = _bindings(self._statements)
            if self._module is not None:
                for declared in _declared_global(self._module):
                    self._bound[declared] += 2
        count = self._bound[name]
        return own if count == 1 else 0 if own else outer if count == 0 else 0


def _candidates(statements) -> dict[str, int]:
    """Names the top-level statements bind with ``name = <literal>``, with the literal's truth."""
    found: dict[str, int] = {}
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
                and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1:
            assign = statement.body[0]
            target, truth = assign.targets[0].target, _truth(assign.value)
            if isinstance(target, cst.Name) and truth:
                found[target.value] = truth
    return found


def _truth(value: cst.BaseExpression) -> int:
    if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
        return 1 if value.value == "True" else -1
    if isinstance(value, cst.Integer):
        return 1 if value.evaluated_value else -1
    return 0


def _bindings(statements) -> Counter:
    """How many times each name is bound in these statements, not counting nested scopes."""
    counts: Counter = Counter()

    def visit(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                counts.update(bound_names(target.target))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
            counts.update(bound_names(node.target) if isinstance(node.target, cst.BaseExpression) else ())
        elif isinstance(node, (cst.For, cst.CompFor)):
            counts.update(bound_names(node.target))
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            counts.update(bound_names(node.asname.name))
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            counts.update(bound_names(node.name.name))
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            counts.update({n.name.value: 2 for n in node.names})
        elif isinstance(node, cst.Del):
            counts.update({n: 2 for n in bound_names(node.target)})
        elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                name = alias.asname.name if alias.asname else alias.name
                counts.update(bound_names(name) if isinstance(name, cst.Name) else ())
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            counts[node.name.value] += 2
            return False
        return not isinstance(node, _SCOPES)

    for statement in statements:
        walk(statement, visit, lambda node: None)
    return counts


def _declared_global(module: cst.Module) -> set[str]:
    names: set[str] = set()

    def visit(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Global):
            names.update(n.name.value for n in node.names)
        return True

    walk(module, visit, lambda node: None)
    return names


def function_flags(node: cst.FunctionDef, outer: LiteralFlags | None) -> LiteralFlags:
    """The flags a function can read: its own, and those of the enclosing scopes it does not
    bind itself (a parameter or local of the same name hides the module's)."""
    statements = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    params = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
    for star in (node.params.star_arg, node.params.star_kwarg):
        if isinstance(star, cst.Param):
            params.append(star.name.value)
    return LiteralFlags(statements, params, outer)
