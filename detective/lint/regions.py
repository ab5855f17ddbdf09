"""Step regions inside one file, and the calls and candidates each scope records.

A loop (or ``with torch_xla.step():``) becomes a traced region of its own when every
iteration ends in a sync: the loop body up to its last unconditional
``torch_xla.sync()``/``xm.mark_step()`` (the whole body for loops over an
``MpDeviceLoader`` and for ``torch_xla.step()`` blocks; up to a step block at the top of
the loop body, which syncs as it exits) is a scope with a root reason.
Calls and candidates recorded while the walk is inside a loop wait in its
:class:`RegionFrame`; when the loop is left, the ones at or before the cut-off are
claimed by the region's scope, the rest go to the enclosing region or the function.

Compile targets passed by name (``torch_xla.compile(step_fn)``) are recorded too; whether
any scope is traced is decided across files in :mod:`detective.lint.callgraph`. Branch
sides that never run traced on XLA are the mixin :mod:`detective.lint.never_traced`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint import tensors as T
from detective.lint.model import COMPILED, CallRef, Scope
from detective.lint.api_names import COMPILE_CALLS, SYNCING_LOADERS
from detective.lint.api_names import STEP_CONTEXTS, STEP_TRACES, SYNC_CALLS
from detective.lint.guard_syntax import message_lambda
from detective.lint.hook_handles import handles_removed_anywhere, removed_handle
from detective.lint.never_traced import NeverTraced
from detective.lint.syntax import block_statements, bound_names, plain_dotted_name
from detective.lint.xla_branches import dotted_tail

HOOK_METHODS = frozenset({
    "register_forward_hook", "register_forward_pre_hook", "register_module_forward_hook",
    "register_module_forward_pre_hook",
})
STEP_CLOSURES = frozenset({"torch_xla.core.xla_model.add_step_closure"})  # run after the step
CUDA_GRAPH_CALLS = frozenset({
    "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
    "torch.cuda.graphs.graph", "torch.cuda.graphs.CUDAGraph",
})
ERROR_LOGS = frozenset({"error", "exception", "critical", "fatal", "warning", "warn"})
WARN_CALLS = frozenset({"warnings.warn"})  # its message is built only when the odd case happens


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
    reason: str = ""  # root reason when always
    current: int = -1
    sync_indices: list[int] = field(default_factory=list)  # unconditional syncs
    conditional_sync: bool = False  # a sync under if/for/while: not every iteration syncs
    items: list[Item] = field(default_factory=list)
    depth: int = 0  # blocks open when the loop began (see Regions.visit_Break)
    unsynced_break: bool = False  # a `break` with no sync before it in the iteration


class Regions(NeverTraced):
    def __init__(self, model):
        self.model = model  # detective.lint.semantic.SemanticModel
        self.items: list[Item] = []
        self.compile_targets: list[tuple[str, CallRef, cst.CSTNode, str]] = []
        self.step_closures: list[tuple[str, str]] = []  # (scope, call target): not traced
        # Hooks that remove themselves: id(register call) -> what its handle is assigned to;
        # function name -> handles its body removes unconditionally (see one_time_hooks).
        self._handles: dict[int, str] = {}
        self._removes: dict[str, set[str]] = {}
        self._pending_hooks: list[tuple[tuple, str, str]] = []
        # Per function on the walk's stack: handles it removes anywhere in its own body. A
        # hook whose handle the registering function removes runs only while that function
        # runs (calibration, inspection): a call it makes, not a region of its own.
        self._fn_removes: list[set[str]] = [set()]
        self.frames: list[list[RegionFrame]] = [[]]  # per function on the walk's stack
        self._loop_counts: list[int] = [0]
        self._step_withs: set[int] = set()
        self._init_never_traced()

    # ------------------------------------------------------------------ queries
    def current(self) -> RegionFrame | None:
        """The innermost loop/step block of this function that may become a step region."""
        regions = self.frames[-1]
        return regions[-1] if regions else None

    def after_sync(self) -> bool:
        """Is the walk on a statement after a sync in the same block (or an enclosing one)?
        A value read there was materialised by the sync: no new graph is cut."""
        return any(b[2] is not None and b[1] > b[2] for b in self._blocks)

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
        block = self._blocks[-1]
        index = block[0].get(id(node))
        if index is not None:
            block[1] = index
        if self.dead and id(node) in self.dead:
            self.dead_depth += 1
            if id(node) in self.once:
                self.once_depth += 1
        if self.cuda and id(node) in self.cuda:
            self.cuda_depth += 1
            self.cuda_why.append(self.cuda[id(node)])
        if self.uncompiled and id(node) in self.uncompiled:
            self.uncompiled_depth += 1

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
        self.enter_flags(node)
        self.frames.append([])
        self._loop_counts.append(0)
        removed = {name for statement in block_statements(node.body) if (name := removed_handle(statement))}
        if removed:
            self._removes.setdefault(node.name.value, set()).update(removed)
        self._fn_removes.append(handles_removed_anywhere(node.body))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.decorator_depth += 1  # calls here run once, where the def is (see Project.graph)

    def leave_Decorator(self, node: cst.Decorator) -> None:
        self.decorator_depth -= 1

    def leave_FunctionDef(self, node) -> None:
        self.leave_flags()
        assert not self.frames.pop()
        self._loop_counts.pop()
        self._fn_removes.pop()

    def visit_While(self, node: cst.While) -> None:
        self._push(node, node.body, False)
        self._mark_short_circuit(node.test)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            value = value.elt  # handles = [m.register_forward_hook(fn) for m in mods]
        if isinstance(value, cst.Call) and len(node.targets) == 1:
            handle = plain_dotted_name(node.targets[0].target)
            if handle:
                self._handles[id(value)] = handle  # h = m.register_forward_pre_hook(fn)
        super().visit_Assign(node)  # names bound from XLA tests

    def visit_For(self, node: cst.For) -> None:
        for name in bound_names(node.target):
            self._none_on_xla.pop(name, None)
        it = node.iter
        dotted = self.model.resolve(it.func) if isinstance(it, cst.Call) else None
        if dotted == "enumerate" and it.args and not it.args[0].star:  # for i, batch in enumerate(loader)
            it = it.args[0].value
            dotted = self.model.resolve(it.func) if isinstance(it, cst.Call) else None
        always = dotted in SYNCING_LOADERS or (
            isinstance(it, cst.Name) and it.value in self.model.function.loader_names
        )
        self._push(node, node.body, always)
        self.frames[-1][-1].depth = len(self._blocks)

    def visit_Break(self, node: cst.Break) -> None:
        loop = next((r for r in reversed(self.frames[-1]) if isinstance(r.node, (cst.For, cst.While))), None)
        if loop is not None and not any(b[2] is not None and b[1] > b[2] for b in self._blocks[loop.depth:]):
            loop.unsynced_break = True

    def _push(self, node, body, always: bool, reason: str = "") -> None:
        stmts = block_statements(body)
        self.frames[-1].append(RegionFrame(node, tuple(stmts), {id(s): i for i, s in enumerate(stmts)},
                                           always=always, reason=reason))

    def leave_For(self, node) -> None:
        region = self._leave_region(node)
        if region.always and isinstance(node, cst.For) and not region.unsynced_break:
            # MpDeviceLoader syncs before it raises StopIteration (torch_xla 2.9's
            # parallel_loader), and each break here follows a sync: nothing is pending after
            # the loop (a read there is materialised, as after torch_xla.sync()).
            block = self._blocks[-1]
            block[2] = block[1]

    def leave_While(self, node) -> None:
        self._leave_region(node)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            dotted = self.model.resolve(call.func) if isinstance(call, cst.Call) else None
            if dotted in STEP_CONTEXTS or dotted in STEP_TRACES:
                said = "with torch_xla.step()" if dotted in STEP_CONTEXTS else "with xp.StepTrace()"
                regions = self.frames[-1]
                if regions and regions[-1].current >= 0 and regions[-1].statements[regions[-1].current] is node:
                    # for step, (x, y) in ...: x = x[:step]; with xp.StepTrace(): ...: the block
                    # syncs as it exits, so what the loop body did before it is that step's graph.
                    regions[-1].sync_indices.append(regions[-1].current)
                    regions[-1].reason = f"loop body up to {said}"
                self._push(node, node.body, True, said)
                self._step_withs.add(id(node))
                return

    def leave_With(self, node: cst.With) -> None:
        if id(node) in self._step_withs:
            self._leave_region(node)

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        dotted = model.resolve(node.func)
        regions = self.frames[-1]
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and len(node.args) == 1 \
                and isinstance(node.args[0].value, cst.Call) and (handles := plain_dotted_name(func.value)):
            self._handles[id(node.args[0].value)] = handles  # handles.append(m.register_forward_hook(fn))
        if isinstance(func, cst.Attribute) and func.attr.value in ERROR_LOGS \
                and "log" in dotted_tail(func.value).lower():
            self.dead.update(id(a) for a in node.args)  # logger.error(f"... {x.item()}")
        elif dotted in WARN_CALLS:
            self.dead.update(id(a) for a in node.args)
        # torch._check(cond, lambda: f"... {t.sum()}"): a message built only when the check fails
        self.dead.update(id(a.value) for a in node.args if message_lambda(a.value))
        if dotted in SYNC_CALLS:
            block = self._blocks[-1]
            block[2] = block[1]
        if dotted in CUDA_GRAPH_CALLS or T.call_method_name(node) in {"replay", "capture_begin"}:
            model.scope.tags.append("cuda-graph")
        if dotted in STEP_CLOSURES and node.args:
            fn = node.args[0].value
            if isinstance(fn, cst.Lambda):
                self.dead.add(id(fn))
            else:
                target = model.call_target(fn) if isinstance(fn, (cst.Name, cst.Attribute)) else None
                if target is not None:
                    self.step_closures.append((model.scope.qualname, target))
            return
        if dotted in SYNC_CALLS and regions:
            region = regions[-1]
            if region.current >= 0:
                statement = region.statements[region.current]
                if isinstance(statement, (cst.If, cst.For, cst.While)):
                    region.conditional_sync = True
                else:
                    region.sync_indices.append(region.current)
        method = T.call_method_name(node)
        hook = method in HOOK_METHODS or (dotted or "").rsplit(".", 1)[-1] in HOOK_METHODS
        if (dotted in COMPILE_CALLS or hook) and node.args:
            fn = node.args[0].value
            if isinstance(fn, cst.Call) and (model.resolve(fn.func) or "").endswith("partial") and fn.args:
                fn = fn.args[0].value
            target = (not hook and model.instance_target(fn)) or (
                model.call_target(fn) if isinstance(fn, (cst.Name, cst.Attribute)) else None)
            if target is not None and self.call_kind() != "dead":
                reason = f"registered with {method or dotted}" if hook else COMPILED
                if hook and self._handles.get(id(node)) in self._fn_removes[-1]:
                    self.record(Item("call", (target, node, self.call_kind()), model.scope.qualname, -1))
                elif not (hook and self._handles.get(id(node))):
                    self.compile_targets.append((model.scope.qualname, CallRef(target), fn, reason))
                else:  # decided once the whole file is walked (the hook may be defined later)
                    self._pending_hooks.append(((model.scope.qualname, CallRef(target), fn, reason),
                                                dotted_tail(fn), self._handles[id(node)]))
            return
        target = model.call_target(node.func)
        if target is not None:
            self.record(Item("call", (target, node, self.call_kind()), model.scope.qualname, -1))

    def one_time_hooks(self) -> None:
        """Move hooks registered with a handle to ``compile_targets`` unless the hook's own
        body removes that handle unconditionally (``self._check.remove()`` as one of its
        statements): such a hook runs at the first forward only, like lazy set-up, and is
        no region. Call once the file is walked."""
        for entry, fn_name, handle in self._pending_hooks:
            if handle not in self._removes.get(fn_name, ()):
                self.compile_targets.append(entry)
        self._pending_hooks = []

    # ------------------------------------------------------------------ closing a region
    def _leave_region(self, node: cst.CSTNode) -> RegionFrame:
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
                region.reason or "loop body before torch_xla.sync()"
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
        return region

