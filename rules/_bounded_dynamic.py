"""Which ops a file runs with bounded dynamic shapes (``XLA_EXPERIMENTAL``), for RC005.

torch_xla 2.9 reads ``XLA_EXPERIMENTAL`` (names joined by ``:``) once per process; for
``nonzero`` and ``masked_select`` (``ExperimentEnabled`` in ``csrc/aten_xla_type.cpp``)
it then lowers the op with a bounded dynamic shape instead of the CPU fallback. Measured on
PJRT CPU (``benchmarks/target_costs.py --only bounded``): ``nonzero`` over four different
counts compiles for the first count only with ``XLA_EXPERIMENTAL=nonzero:masked_select``,
and a new program plus an ``aten::nonzero`` fallback for every count without. No other op RC005 flags is covered (``masked_scatter``
named in the docs has no switch in 2.9; ``nms`` and ``early_sync`` are no shape ops).

A file runs with it when it sets it (``os.environ["XLA_EXPERIMENTAL"] = "nonzero"``,
``os.environ.setdefault(...)``) or requires it (an ``assert`` on it, ``skipIf``/
``skipUnless``/``pytest.mark.skipif`` on it). The ops are the covered names in the string
literals of that statement; a requirement that names none (``assert
os.environ["XLA_EXPERIMENTAL"] != ""``) covers both. Each becomes the file fact
``file:xla-experimental:<op>`` (see :mod:`detective.lint.project_facts`).
"""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.project_facts import FILE_ONLY
from detective.lint.rule import Facts
from detective.lint.walker import walk

FLAG = "XLA_EXPERIMENTAL"
BOUNDED_OPS = ("nonzero", "masked_select")  # the flag's shape ops in torch_xla 2.9
FACT = FILE_ONLY + "xla-experimental:"
_SKIPS = {"skipIf", "skipUnless", "skipif"}


class BoundedDynamicOps(Facts):
    def __init__(self, context):
        super().__init__(context)
        self._found = context.model.project_facts

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(_names_flag(t.target) for t in node.targets):
            self._record(node.value, setting=True)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name == "setdefault" and node.args and _names_flag(node.args[0].value):
            self._record(node, setting=True)
        elif name in _SKIPS and any(_names_flag(n) for n in _walk(node)):
            self._record(node, setting=False)

    def visit_Assert(self, node: cst.Assert) -> None:
        if any(_names_flag(n) for n in _walk(node.test)):
            self._record(node.test, setting=False)

    def _record(self, node: cst.CSTNode, setting: bool) -> None:
        named = {op for n in _walk(node) if (text := T.literal_string(n)) is not None and text != FLAG
                 for op in text.split(":") if op in BOUNDED_OPS}
        # A requirement that names no op (`!= ""`) is written for the flag's bounded shapes;
        # a setting names exactly what the process gets.
        for op in sorted(named if named or setting else BOUNDED_OPS):
            if FACT + op not in self._found:
                self._found.append(FACT + op)


def _names_flag(node: cst.CSTNode) -> bool:
    """``os.environ["XLA_EXPERIMENTAL"]`` or the bare literal ``"XLA_EXPERIMENTAL"``."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return T.literal_string(node.slice[0].slice.value) == FLAG
    return T.literal_string(node) == FLAG if isinstance(node, cst.SimpleString) else False


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node`` and every node under it (the linter's walker: libcst's ``children`` re-walks
    each node's fields through its visitor machinery, which cost ~1% of a run in asserts)."""
    found: list[cst.CSTNode] = []

    def keep(child: cst.CSTNode) -> bool:
        found.append(child)
        return True

    walk(node, keep, _nothing)
    return found


def _nothing(node: cst.CSTNode) -> None:
    return None
