"""Gradient-accumulation facts shared by RC101 and RC102, collected in the one walk.

Each loop body and function body gets an :class:`AccFrame` of the calls that matter for
accumulation (backward, optimizer step, zero_grad, syncs, compiles). The rules read
``context.facts[Accumulation].frame`` in their ``leave_For``/``leave_While``/
``leave_FunctionDef``/``leave_Module``: facts are left after the rules, so at that point
the frame's events and its children (inner loops, already left) are complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from detective.lint.api_names import STEP_CONTEXTS, SYNC_CALLS
from detective.lint.rule import Facts
from detective.lint.api_names import XLA_COMPILE_CALLS
from detective.lint.syntax import dotted_name

OPTIMIZER_STEP_CALLS = frozenset({"torch_xla.core.xla_model.optimizer_step"})


@dataclass
class AccEvent:
    """A call that matters for gradient accumulation, recorded in its innermost loop/function."""

    kind: str  # "backward" | "step" | "zero_grad" | "sync" | "compile" | "compiled_call"
    node: cst.CSTNode
    accum: bool  # under an `if` that looks like an accumulation boundary (`% N`, "accum")
    depth: int  # number of enclosing `if`s inside this frame
    scope: str
    once: bool = False  # under an `if` side that leaves the loop (`mark_step(); break`): runs once


@dataclass
class AccFrame:
    """Events of one loop body or function body."""

    node: cst.CSTNode | None
    is_loop: bool
    events: list[AccEvent] = field(default_factory=list)
    children: list["AccFrame"] = field(default_factory=list)
    if_stack: list[bool] = field(default_factory=list)
    exit_stack: list[bool] = field(default_factory=list)  # the `if` side being walked ends the loop

    def has(self, kind: str, accum: bool | None = None) -> bool:
        return any(e.kind == kind and (accum is None or e.accum == accum) for e in self.events)

    @property
    def does_micro_work(self) -> bool:
        return self.has("backward") or self.has("compiled_call")

    @property
    def is_flat_accumulation(self) -> bool:
        """A loop that does backward every iteration and steps the optimizer every N."""
        return (self.is_loop and self.does_micro_work and self.has("step", accum=True)
                and not self.has("step", accum=False))

    def micro_children(self) -> list["AccFrame"]:
        """Inner loops that accumulate while this frame steps the optimizer once."""
        if not self.has("step"):
            return []
        return [c for c in self.children if c.is_loop and c.does_micro_work and not c.has("step")]


class Accumulation(Facts):
    def __init__(self, context):
        super().__init__(context)
        self.stack: list[AccFrame] = [AccFrame(node=None, is_loop=False)]

    @property
    def frame(self) -> AccFrame:
        return self.stack[-1]

    def _event(self, kind: str, node: cst.CSTNode) -> None:
        frame = self.stack[-1]
        frame.events.append(AccEvent(kind, node, any(frame.if_stack), len(frame.if_stack),
                                     self.context.scope.qualname, any(frame.exit_stack)))

    def visit_FunctionDef(self, node) -> None:
        self.stack.append(AccFrame(node=node, is_loop=False))

    def leave_FunctionDef(self, node) -> None:
        self.stack.pop()

    def visit_For(self, node) -> None:
        self.stack.append(AccFrame(node=node, is_loop=True))

    visit_While = visit_For

    def leave_For(self, node) -> None:
        child = self.stack.pop()
        self.stack[-1].children.append(child)

    leave_While = leave_For

    def visit_If(self, node: cst.If) -> None:
        self.stack[-1].if_stack.append(_accumulation_test(node.test))
        self.stack[-1].exit_stack.append(_leaves(node.body))

    def visit_Else(self, node: cst.Else) -> None:
        exits = self.stack[-1].exit_stack
        if exits:
            exits[-1] = _leaves(node.body)

    def leave_If(self, node: cst.If) -> None:
        self.stack[-1].if_stack.pop()
        self.stack[-1].exit_stack.pop()

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and self.context.resolve(call.func) in XLA_COMPILE_CALLS | STEP_CONTEXTS:
                self._event("compile", call)

    def visit_Call(self, node: cst.Call) -> None:
        kind = self._kind(node, self.context.resolve(node.func))
        if kind is not None:
            self._event(kind, node)

    def _kind(self, node: cst.Call, dotted: str | None) -> str | None:
        if dotted in SYNC_CALLS:
            return "sync"
        if dotted in XLA_COMPILE_CALLS:
            return "compile"
        if dotted in OPTIMIZER_STEP_CALLS:
            return "step"
        func = node.func
        if isinstance(func, cst.Name):
            functions = self.context.functions
            compiled = (functions[-1].compiled_names, functions[0].compiled_names)
            return "compiled_call" if any(func.value in names for names in compiled) else None
        if not isinstance(func, cst.Attribute) or dotted in STEP_CONTEXTS:
            return None
        method = func.attr.value
        if method in {"backward", "zero_grad"}:
            return method
        if method == "step":
            receiver = dotted_name(func.value).lower()
            if "sched" in receiver or (node.args and not receiver.endswith("scaler")):
                return None  # lr schedulers; env.step(action)
            return "step"
        return None


def _leaves(body: cst.BaseSuite) -> bool:
    """Does this block end by leaving the loop (``break``, ``return``, ``raise``)?"""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not statements:
        return False
    last = statements[-1]
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else []
    return bool(smalls) and isinstance(smalls[-1], (cst.Break, cst.Return, cst.Raise))


def _accumulation_test(test: cst.BaseExpression) -> bool:
    """`if (i + 1) % accum == 0`, `if step % N`, `if ... accumulat...`, `if accelerator.sync_gradients`."""
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Modulo):
                return True
            stack += [node.left, node.right]
        elif isinstance(node, cst.Comparison):
            stack.append(node.left)
            stack += [c.comparator for c in node.comparisons]
        elif isinstance(node, cst.BooleanOperation):
            stack += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, (cst.Name, cst.Attribute)):
            text = dotted_name(node).lower()
            if "accum" in text or "sync_gradients" in text:
                return True
        elif isinstance(node, cst.Call):
            stack.append(node.func)
            stack += [a.value for a in node.args]
    return False
