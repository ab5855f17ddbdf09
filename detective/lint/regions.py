"""Step regions inside one file, and the calls and candidates each scope records.

A loop (or ``with torch_xla.step():``) becomes a traced region of its own when every
iteration ends in a sync: the loop body up to its last unconditional
``torch_xla.sync()``/``xm.mark_step()`` (the whole body for loops over an
``MpDeviceLoader`` and for ``torch_xla.step()`` blocks) is a scope with a root reason.
Calls and candidates recorded while the walk is inside a loop wait in its
:class:`RegionFrame`; when the loop is left, the ones at or before the cut-off are
claimed by the region's scope, the rest go to the enclosing region or the function.

Compile targets passed by name (``torch_xla.compile(step_fn)``) are recorded too; whether
any scope is traced is decided across files in :mod:`detective.lint.callgraph`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint.model import CallRef, Scope
from detective.lint.semantic import COMPILE_CALLS, SYNCING_LOADERS

SYNC_CALLS = frozenset(
    {"torch_xla.sync", "torch_xla.torch_xla.sync", "torch_xla.core.xla_model.mark_step"}
)
STEP_CONTEXTS = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})


@dataclass
class Item:
    """Something recorded in a scope that a step loop may later claim."""

    kind: str  # "candidate" | "call"
    payload: object
    scope: str
    index: int  # top-level statement index in the innermost region frame


@dataclass
class RegionFrame:
    """A for/while loop or ``with torch_xla.step()`` that may turn out to be a region."""

    node: cst.CSTNode
    statements: tuple  # top-level statements of the body
    stmt_index: dict[int, int]
    always: bool = False  # MpDeviceLoader loops and torch_xla.step() blocks
    current: int = -1
    sync_indices: list[int] = field(default_factory=list)  # unconditional syncs
    conditional_sync: bool = False  # a sync under if/for/while: not every iteration syncs
    items: list[Item] = field(default_factory=list)


def block_statements(body: cst.BaseSuite):
    return body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()


class Regions:
    def __init__(self, model):
        self.model = model  # detective.lint.semantic.SemanticModel
        self.items: list[Item] = []
        self.compile_targets: list[tuple[str, CallRef, cst.CSTNode]] = []
        self.frames: list[list[RegionFrame]] = [[]]  # per function on the walk's stack
        self._loop_counts: list[int] = [0]
        self._step_withs: set[int] = set()

    # ------------------------------------------------------------------ queries
    def current(self) -> RegionFrame | None:
        """The innermost loop/step block of this function that may become a step region."""
        regions = self.frames[-1]
        return regions[-1] if regions else None

    @staticmethod
    def is_step(region: RegionFrame) -> bool:
        """Known once the loop body has been walked (in a rule's leave_For/leave_While)."""
        return bool(region.always or region.sync_indices or region.conditional_sync)

    # ------------------------------------------------------------------ recording
    def track(self, node: cst.CSTNode) -> None:
        """Called on every node: which top-level statement of the innermost loop we are in."""
        regions = self.frames[-1]
        if regions:
            region = regions[-1]
            index = region.stmt_index.get(id(node))
            if index is not None:
                region.current = index

    def record(self, item: Item, claimable: bool = True) -> None:
        regions = self.frames[-1]
        if claimable and regions:
            item.index = regions[-1].current
            regions[-1].items.append(item)
        else:
            self.items.append(item)

    def report(self, payload: tuple, scope: str | None, at_index: int | None) -> None:
        """A candidate in the current scope (or ``scope``, which a step loop cannot claim).

        ``at_index`` records it from a rule's ``leave_For``/``leave_While`` as if from the
        loop body's top-level statement of that index, so the loop can still claim it.
        """
        item = Item("candidate", payload, scope or self.model.scope.qualname, -1)
        regions = self.frames[-1]
        if at_index is not None and scope is None and regions:
            item.index = at_index
            regions[-1].items.append(item)
            return
        self.record(item, claimable=scope is None)

    # ------------------------------------------------------------------ walk hooks
    def visit_FunctionDef(self, node) -> None:
        self.frames.append([])
        self._loop_counts.append(0)

    def leave_FunctionDef(self, node) -> None:
        assert not self.frames.pop()
        self._loop_counts.pop()

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        dotted = self.model.resolve(it.func) if isinstance(it, cst.Call) else None
        always = dotted in SYNCING_LOADERS or (
            isinstance(it, cst.Name) and it.value in self.model.function.loader_names
        )
        self._push(node, node.body, always)

    def visit_While(self, node: cst.While) -> None:
        self._push(node, node.body, False)

    def _push(self, node, body, always: bool) -> None:
        stmts = block_statements(body)
        self.frames[-1].append(
            RegionFrame(node, tuple(stmts), {id(s): i for i, s in enumerate(stmts)}, always=always)
        )

    def leave_For(self, node) -> None:
        self._leave_region(node)

    leave_While = leave_For

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and self.model.resolve(call.func) in STEP_CONTEXTS:
                self._push(node, node.body, True)
                self._step_withs.add(id(node))
                return

    def leave_With(self, node: cst.With) -> None:
        if id(node) in self._step_withs:
            self._leave_region(node)

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        dotted = model.resolve(node.func)
        regions = self.frames[-1]
        if dotted in SYNC_CALLS and regions:
            region = regions[-1]
            if region.current >= 0:
                statement = region.statements[region.current]
                if isinstance(statement, (cst.If, cst.For, cst.While)):
                    region.conditional_sync = True
                else:
                    region.sync_indices.append(region.current)
        if dotted in COMPILE_CALLS and node.args:
            fn = node.args[0].value
            if isinstance(fn, cst.Call) and (model.resolve(fn.func) or "").endswith("partial") and fn.args:
                fn = fn.args[0].value
            target = model.call_target(fn) if isinstance(fn, (cst.Name, cst.Attribute)) else None
            if target is not None:
                self.compile_targets.append((model.scope.qualname, CallRef(target, 0), fn))
            return
        target = model.call_target(node.func)
        if target is not None:
            self.record(Item("call", (target, node), model.scope.qualname, -1))

    # ------------------------------------------------------------------ closing a region
    def _leave_region(self, node: cst.CSTNode) -> None:
        model = self.model
        region = self.frames[-1].pop()
        # The region ends at the last sync every iteration runs; code after a sync that
        # only some iterations run (if step % accum == 0: xm.mark_step()) is traced too.
        if region.always or (region.conditional_sync and not region.sync_indices):
            cutoff = len(region.stmt_index)
        elif region.sync_indices:
            cutoff = max(region.sync_indices)
        else:
            cutoff = None
        rest: list[Item] = region.items
        if cutoff is not None:
            self._loop_counts[-1] += 1
            count = self._loop_counts[-1]
            parent = model.scope
            suffix = "step loop" if isinstance(node, (cst.For, cst.While)) else "torch_xla.step()"
            qualname = f"{parent.qualname}.<loop{count}>" if parent.qualname != "<module>" \
                else f"<loop{count}>"
            reason = "loop over MpDeviceLoader" if region.always and isinstance(node, cst.For) else (
                "with torch_xla.step()" if region.always else "loop body before torch_xla.sync()"
            )
            scope = Scope(qualname=qualname, display=f"{parent.display} [{suffix}]", line=0,
                          class_name=parent.class_name, parent=parent.qualname, root_reason=reason)
            anchor = node.target if isinstance(node, cst.For) else (
                node.test if isinstance(node, cst.While) else node.items[0].item
            )
            model.add_scope(scope, anchor)
            rest = []
            for item in region.items:
                if 0 <= item.index <= cutoff:
                    item.scope = scope.qualname
                    self.items.append(item)
                else:
                    rest.append(item)
        # Whatever this region did not claim belongs to the enclosing region, if any.
        regions = self.frames[-1]
        if regions:
            outer = regions[-1]
            for item in rest:
                item.index = outer.current
                outer.items.append(item)
        else:
            self.items.extend(rest)
