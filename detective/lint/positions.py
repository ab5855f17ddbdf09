"""Line/column of a few chosen nodes, without libcst's PositionProvider.

PositionProvider records a range for every node and costs about twice the parse
itself. We only need the start of the nodes we report, so one codegen pass with
a state that counts characters and notes the offset of wanted nodes is enough
(libcst round-trips source exactly, so offsets index the original text).
"""

from __future__ import annotations

import bisect
from contextlib import nullcontext

import libcst as cst
from libcst._nodes.internal import CodegenState


_NOTHING = nullcontext()


class _Done(Exception):
    """Every node asked about has been generated: the rest of the module is not needed."""


class _OffsetState(CodegenState):
    # CodegenState uses __slots__; a subclass without slots gets a __dict__ for ours.
    def __init__(self, default_indent, default_newline, wanted, spans=frozenset()):
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        self.wanted = wanted
        self.found: dict[int, int] = {}
        self.spans = spans  # nodes whose whole text span we need (fix targets)
        self.span_found: dict[int, list[int]] = {}
        self.pending = wanted | spans  # not generated to their end yet

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.tokens.append(token)
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node) -> None:
        key = id(node)
        if key in self.wanted and key not in self.found:
            self.found[key] = self.offset
        if key in self.spans:
            self.span_found[key] = [self.offset, self.offset, tuple(self.indent_tokens)]

    def after_codegen(self, node) -> None:
        key = id(node)
        if key in self.pending:
            if key in self.spans:
                self.span_found[key][1] = self.offset
            self.pending.discard(key)
            if not self.pending:
                raise _Done  # the text after the last of them (7% of it) is never needed

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        # Statements start with their leading blank lines and comments; the syntactic
        # start is where the keyword begins, so prefer the offset seen here. Called for
        # most nodes: one shared do-nothing context manager, not a generator per call
        # (a fifth of this pass).
        key = id(node)
        if key in self.wanted:
            self.found[key] = self.offset
        return _NOTHING


class LineIndex:
    """Maps character offsets of a text to 1-based (line, column)."""

    def __init__(self, text: str):
        self._starts = [0]
        start = text.find("\n")
        while start != -1:
            self._starts.append(start + 1)
            start = text.find("\n", start + 1)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


def resolve_offsets(module: cst.Module, nodes, span_nodes=()) -> tuple[dict[int, int], dict]:
    """Offset of each node's start, and (start, end, indent) of each span node, by ``id(node)``.

    A span covers exactly the text the node generates at its place in the module, so
    replacing it with :func:`code_at` of a changed copy of the node is an exact edit.
    """
    wanted = {id(n) for n in nodes}
    spans = {id(n) for n in span_nodes}
    if not wanted and not spans:
        return {}, {}
    state = _OffsetState(module.default_indent, module.default_newline, wanted, spans)
    try:
        module._codegen(state)
    except _Done:
        pass
    return state.found, {k: tuple(v) for k, v in state.span_found.items()}


def code_at(module: cst.Module, node: cst.CSTNode, indent_tokens) -> str:
    """Source of ``node`` as it would be generated where the indentation is ``indent_tokens``.

    ``Module.code_for_node`` starts at column zero; continuation lines of a call inside
    a block carry the block's indentation, so we start from the recorded one.
    """
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens.extend(indent_tokens)
    node._codegen(state)
    return "".join(state.tokens)
