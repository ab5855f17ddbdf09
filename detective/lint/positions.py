"""Line/column of a few chosen nodes, without libcst's PositionProvider.

PositionProvider records a range for every node and costs about twice the parse
itself. We only need the start of the nodes we report, so one codegen pass with
a state that counts characters and notes the offset of wanted nodes is enough
(libcst round-trips source exactly, so offsets index the original text).
"""

from __future__ import annotations

import bisect
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState


class _OffsetState(CodegenState):
    # CodegenState uses __slots__; a subclass without slots gets a __dict__ for ours.
    def __init__(self, default_indent, default_newline, wanted):
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        self.wanted = wanted
        self.found: dict[int, int] = {}

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

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        # Statements start with their leading blank lines and comments; the syntactic
        # start is where the keyword begins, so prefer the offset seen here.
        key = id(node)
        if key in self.wanted:
            self.found[key] = self.offset
        yield


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


def resolve_offsets(module: cst.Module, nodes) -> dict[int, int]:
    """Character offset of each node's start, keyed by ``id(node)``."""
    wanted = {id(n) for n in nodes}
    if not wanted:
        return {}
    state = _OffsetState(module.default_indent, module.default_newline, wanted)
    module._codegen(state)
    return state.found
