"""Read a graph as XLA compiled it: the HLO module of XLA's compile-time dump, into the IR model.

Diagnose mode saves each new program's ``before_optimizations`` HLO text (``--xla_dump_to``;
see runtime/compile_dumps.py), one instruction per line::

    %slice.12 = f32[8,3,8]{2,1,0} slice(%p0.1), slice={[0:8], [0:3], [0:8]},
        metadata={op_type="xla__select" op_name="xla__select" source_file="/w/f.py" source_line=26}

With XLA_HLO_DEBUG=1 torch_xla lowers each IR node under its own metadata (lowering_context.cpp,
HloMetadataSetter): op_type is the IR op with ``::`` written ``__``, source_file and source_line
the node's innermost Python frame (graph inputs, ``parameter(N)``, keep the line where the tensor
was made). Instruction ids count up in lowering order, which is the IR's post-order. So the IR
nodes come back as runs of consecutive entry instructions sharing one metadata; a node's shape
is that of its last instruction. Two neighbouring nodes with the same op on the same line merge
into one (alike in every graph of a call site), except constants and graph inputs, which lower
to one instruction each. HLO drops function
names: the tracer writes them in the file's header, from the sources as they were at run time.
"""

from __future__ import annotations

import os
import re

from detective.report.ir import Graph, Location, Node, strip_layout
from detective.runtime.compile_dumps import FUNCTION_PREFIX, HASH_PREFIX

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = (?P<shape>.+?) (?P<opcode>[a-z][\w\-]*)\((?P<args>.*?)\)(?P<rest>.*)$"
)
_OPERAND = re.compile(r"%([\w.\-]+)")
_METADATA = re.compile(r"metadata=\{(?P<body>[^}]*)\}")
_FIELD = re.compile(r'(?P<key>\w+)=(?:"(?P<text>[^"]*)"|(?P<number>-?\d+))')
_ID = re.compile(r"\.(\d+)$")
_SINGLE = ("prim__Constant", "xla__device_data")  # lowered to one instruction each: never merged


def parse_hlo_graph(text: str) -> Graph:
    """A graph file written by the tracer (header, then XLA's HLO module text), or bare HLO text."""
    functions: dict[tuple[str, int], str] = {}
    graph_hash = None
    entry: list[tuple[int, str, tuple, list[str]]] = []  # (id, shape, metadata key, operand names)
    in_entry = False
    for line in text.splitlines():
        if line.startswith("#"):
            if line.startswith(FUNCTION_PREFIX):
                number, function, path = line[len(FUNCTION_PREFIX):].split(" ", 2)
                functions[(path, int(number))] = function
            elif line.startswith(HASH_PREFIX):
                graph_hash = line[len(HASH_PREFIX):].strip()
            continue
        if line.startswith("ENTRY "):
            in_entry = True
            continue
        if not in_entry:
            continue
        if line.startswith("}"):
            break
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        meta = _METADATA.search(m["rest"])
        fields = {f["key"]: f["text"] if f["text"] is not None else int(f["number"])
                  for f in _FIELD.finditer(meta["body"])} if meta else {}
        if not fields and m["opcode"] == "tuple" and line.lstrip().startswith("ROOT"):
            continue  # the outputs tuple torch_xla adds around the roots: not an IR node
        key = (fields.get("op_type"), fields.get("op_name"), fields.get("source_file"), fields.get("source_line"))
        ident = _ID.search(m["name"])
        entry.append((int(ident.group(1)) if ident else len(entry), m["shape"], key if fields else None,
                      [m["name"], *_OPERAND.findall(m["args"])]))
    return Graph(nodes=_nodes(sorted(entry), functions), hash=graph_hash)


def _nodes(instructions: list, functions: dict[tuple[str, int], str]) -> list[Node]:
    groups: list[list] = []
    for instruction in instructions:
        key = instruction[2]
        if groups and key is not None and groups[-1][0][2] == key and key[0] not in _SINGLE:
            groups[-1].append(instruction)
        else:
            groups.append([instruction])
    node_of = {ins[3][0]: index for index, group in enumerate(groups) for ins in group}
    nodes = []
    for index, group in enumerate(groups):
        operands: list[int] = []
        for ins in group:
            for name in ins[3][1:]:
                other = node_of.get(name)
                if other is not None and other != index and other not in operands:
                    operands.append(other)
        nodes.append(_node(index, group, operands, functions))
    return nodes


def _node(index: int, group: list, operands: list[int], functions: dict) -> Node:
    key = group[0][2]
    if key is None:  # no metadata: lowered outside any IR node; keep XLA's opcode
        return Node(id=index, op="hlo::" + _opcode(group[0]), shape=strip_layout(group[-1][1]),
                    operands=tuple(operands))
    op_type, op_name, path, line = key
    location = None
    if path and isinstance(line, int):
        location = Location(functions.get((path, line), "?"), os.path.basename(path), line)
    scope = op_name.rsplit("/", 1)[0].replace("__", "::", 1) if op_name and "/" in op_name else None
    return Node(id=index, op=(op_type or "?").replace("__", "::", 1), shape=strip_layout(group[-1][1]),
                operands=tuple(operands), location=location, scope=scope)


def _opcode(instruction) -> str:
    return instruction[3][0].split(".", 1)[0]
