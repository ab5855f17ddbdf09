"""Parse torch_xla's own debug output: PT_XLA_DEBUG blocks and XLA_SAVE_TENSORS_FILE graphs.

Formats (torch_xla 2.9): every PT_XLA_DEBUG line carries a prefix naming its block kind;
a block opens and closes with a line of '='. The saved-tensors file holds one record per
sync: ``[Name]``, ``TensorsGraphInfo:`` frames, ``## BEGIN_GRAPH`` … ``Graph Hash: h`` … ``## END_GRAPH``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Order matters: "Unexpected Execution Analysis: " contains "Execution Analysis: ".
_PREFIXES = (
    ("Unexpected Execution Analysis: ", "unexpected_execution"),
    ("Compilation Analysis: ", "compilation"),
    ("Execution Analysis: ", "execution"),
)
# One whole block: its opening and closing '=' lines carry the same prefix. "Post Compilation
# Analysis" blocks start with "Post" and never match.
_BLOCK = re.compile(
    r"^((?:Unexpected )?(?:Execution|Compilation) Analysis: )={20,}\n.*?^\1={20,}\n", re.M | re.S
)
_FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>.+):(?P<line>\d+)\)$")
_RECORD = re.compile(r"^\[(?P<name>[^\]\n]+)\]\n(?P<body>.*?)^## END_GRAPH\n", re.S | re.M)
_GRAPH_HASH = re.compile(r"^Graph Hash: ([0-9a-f]+)\s*$", re.M)


@dataclass
class Block:
    kind: str  # "compilation", "execution" or "unexpected_execution"
    cause: str | None = None
    graph_hash: str | None = None
    graph_name: str | None = None
    inputs: int | None = None
    outputs: int | None = None
    frames: list[dict] = field(default_factory=list)
    frames_truncated: bool = False
    encoded: str | None = None  # JSON of the fields above, filled once by the tracer


def parse_frame(text: str) -> dict | None:
    m = _FRAME.match(text.strip())
    if m is None:
        return None
    return {"file": m["file"], "line": int(m["line"]), "function": m["function"]}


def parse_blocks(text: str) -> list[Block]:
    """Blocks in file order; incomplete trailing blocks are dropped."""
    return [_parse_block(m.group(0)) for m in _BLOCK.finditer(text)]


class BlockCache:
    """Parse each distinct block text once: in a steady loop the same blocks repeat verbatim."""

    def __init__(self, limit: int = 10_000):
        self._blocks: dict[str, Block] = {}
        self._limit = limit
        self._last: tuple[str, list[Block]] = ("", [])

    def parse(self, text: str) -> list[Block]:
        if text == self._last[0]:  # a steady step writes exactly what the previous one did
            return list(self._last[1])
        blocks = []
        for m in _BLOCK.finditer(text):
            raw = m.group(0)
            block = self._blocks.get(raw)
            if block is None:
                if len(self._blocks) >= self._limit:
                    self._blocks.clear()
                block = self._blocks[raw] = _parse_block(raw)
            blocks.append(block)
        self._last = (text, blocks)
        return list(blocks)


def _parse_block(raw: str) -> Block:
    block: Block | None = None
    section = None
    for line in raw.splitlines():
        for prefix, kind in _PREFIXES:
            if line.startswith(prefix):
                body = line[len(prefix) :]
                break
        else:
            continue
        if block is None:
            block = Block(kind=kind)
            continue  # the opening ==== line
        stripped = body.strip()
        if body.startswith("  "):
            if section == "cause" and block.cause is None:
                block.cause = stripped
            elif section == "graph":
                key, _, value = stripped.partition(": ")
                if key == "Graph Hash":
                    block.graph_hash = value
                elif key == "Graph Name":
                    block.graph_name = value
                elif key == "Number of Graph Inputs":
                    block.inputs = int(value)
                elif key == "Number of Graph Outputs":
                    block.outputs = int(value)
            elif section == "frames":
                frame = parse_frame(stripped)
                if frame is not None:
                    block.frames.append(frame)
                elif stripped.startswith(".."):
                    block.frames_truncated = True
        elif stripped.endswith("Cause"):
            section = "cause"
        elif stripped.startswith("Graph Info"):
            section = "graph"
        elif stripped.startswith("Python Frame Triggered Execution"):
            section = "frames"
        else:
            section = None
    return block


def parse_saved_graphs(text: str) -> dict[str, str]:
    """Graph hash -> the whole saved record (frames, root hashes and IR text)."""
    graphs: dict[str, str] = {}
    for m in _RECORD.finditer(text):
        hashes = _GRAPH_HASH.findall(m["body"])
        if hashes:
            graphs.setdefault(hashes[-1], m.group(0))
    return graphs
