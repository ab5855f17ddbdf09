"""Code written for ``torch.export``: classes that guard read values with ``torch._check``.

``torch._check(n <= limit)`` after ``n = t.item()``, or ``torch.cond(pred.item(), ...)``, is how
code is made traceable with data-dependent values: torch.export (and torch.compile with
``capture_scalar_outputs``) keeps the value symbolic, an unbacked size, instead of breaking
the graph on it. torchtune's ``modules/_export`` and its CLIP inference transform are such
code. A host read in a class one of whose methods does this is ``info`` in a project that
does not target torch_xla (the lazy tensor still syncs on it): see the engine.
"""

from __future__ import annotations

from detective.lint.model import EXPORT_CHECKS, FileSummary

EXPORT_CALLS = frozenset({
    "torch._check", "torch._check_is_size", "torch._check_with", "torch._check_value",
    "torch._check_index", "torch.cond", "torch._higher_order_ops.cond.cond",
})

EXPORT_NOTE = ("written for symbolic tracing: {where} guards the values it reads with torch._check or "
               "torch.cond, so torch.export and torch.compile with capture_scalar_outputs keep them symbolic, "
               "no graph break; this project does not target torch_xla, where the read would still sync")


def export_checked(summary: FileSummary, scope_name: str) -> str:
    """The class (or function) of ``scope_name`` that guards values for export, "" if none."""
    scope = summary.scopes.get(scope_name)
    if scope is None:
        return ""
    if scope.class_name is None:
        return scope.display if EXPORT_CHECKS in scope.tags else ""
    return scope.class_name if any(
        s.class_name == scope.class_name and EXPORT_CHECKS in s.tags for s in summary.scopes.values()) else ""
