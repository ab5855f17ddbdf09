"""Parse the IR text torch_xla saves per graph (XLA_SAVE_TENSORS_FILE, text format), and read
any saved graph file into this model (:func:`read_graph`; HLO from XLA's dump: report/hlo.py).

One node per line, for example::

    %5 = f32[8,6,8]{2,1,0} xla::select(%4), location=forward@counter_slice_broken.py:26, xla_shape=f32[8,6,8]{2,1,0}

With XLA_IR_DEBUG=1 ``location=func@basename:line`` is the innermost Python frame when the
node was made (graph inputs, ``xla::device_data``, carry the line where the tensor was made).
Values of constants and slice bounds are not printed: they show up as output-shape changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NODE = re.compile(r"^\s*%(?P<id>\d+) = (?P<shape>.+?) (?P<op>[A-Za-z_][\w.]*::[\w.]+)\((?P<args>[^)]*)\)(?P<rest>.*)$")
_OPERAND = re.compile(r"%(\d+)")
_LOCATION = re.compile(r"(?:^|, )location=(?P<func>.+?)@(?P<file>[^@,]+?):(?P<line>\d+)(?=,|$)")
_SCOPE = re.compile(r"(?:^|, )scope=(?P<scope>[^,]+)")
_ROOT = re.compile(r"(?:^|, )ROOT=(?P<root>\d+)")
_KNOWN_KEYS = ("location=", "scope=", "ROOT=", "xla_shape=")
_LAYOUT = re.compile(r"\{[\d,]*\}")
_FRAME = re.compile(r"^\s+(?P<function>\S.*?) \((?P<file>.+):(?P<line>\d+)\)\s*$")
_HASH = re.compile(r"^Graph Hash: ([0-9a-f]+)\s*$", re.M)


@dataclass(frozen=True)
class Location:
    function: str
    file: str  # basename only, as torch_xla prints it
    line: int

    def __str__(self) -> str:
        return f"{self.function}@{self.file}:{self.line}"


@dataclass
class Node:
    id: int
    op: str
    shape: str  # without layout: "f32[8,6,8]"
    operands: tuple[int, ...]
    location: Location | None = None
    scope: str | None = None
    root: int | None = None
    params: str = ""  # anything else printed after the operands (op attributes)

    @property
    def is_input(self) -> bool:
        return self.op == "xla::device_data"

    @property
    def is_constant(self) -> bool:
        return self.op == "prim::Constant"

    def signature(self) -> tuple:
        return (self.op, self.location)


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    hash: str | None = None
    frames: list[dict] = field(default_factory=list)  # TensorsGraphInfo, innermost first, full paths

    def __post_init__(self):
        self.by_id = {n.id: n for n in self.nodes}
        self._users: dict[int, list[int]] | None = None

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.is_input]

    def users(self) -> dict[int, list[int]]:
        if self._users is None:
            self._users = {n.id: [] for n in self.nodes}
            for n in self.nodes:
                for o in n.operands:
                    self._users.setdefault(o, []).append(n.id)
        return self._users


def strip_layout(shape: str) -> str:
    return _LAYOUT.sub("", shape).strip()


def _split_top(text: str) -> list[str]:
    """Split ", "-separated attributes, not inside brackets: xla_shape=f32[8,6]{1,0} is one."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return parts


def parse_node(line: str) -> Node | None:
    m = _NODE.match(line)
    if m is None:
        return None
    rest = m["rest"]
    loc = _LOCATION.search(rest)
    scope = _SCOPE.search(rest)
    root = _ROOT.search(rest)
    params = ", ".join(p for p in _split_top(rest) if p and not p.startswith(_KNOWN_KEYS))
    return Node(
        id=int(m["id"]),
        op=m["op"],
        shape=strip_layout(m["shape"]),
        operands=tuple(int(o) for o in _OPERAND.findall(m["args"])),
        location=Location(loc["func"], loc["file"], int(loc["line"])) if loc else None,
        scope=scope["scope"].strip() if scope else None,
        root=int(root["root"]) if root else None,
        params=params,
    )


def parse_graph(text: str) -> Graph:
    """A saved graph record (frames, root hashes, IR) or bare IR text."""
    nodes: list[Node] = []
    frames: list[dict] = []
    in_info = False
    for line in text.splitlines():
        if line.startswith("TensorsGraphInfo:"):
            in_info = True
            continue
        if in_info:
            fm = _FRAME.match(line)
            if fm:
                frames.append({"file": fm["file"], "line": int(fm["line"]), "function": fm["function"]})
                continue
            in_info = False
        node = parse_node(line)
        if node is not None:
            nodes.append(node)
    hashes = _HASH.findall(text)
    return Graph(nodes=nodes, hash=hashes[-1] if hashes else None, frames=frames)


def read_graph(path: str) -> Graph:
    """A run's saved graph: ``graphs/<hash>.hlo.txt`` (XLA's dump, diagnose mode now) or
    ``graphs/<hash>.txt`` (torch_xla's IR text: thread ranks, and runs recorded before). OSError
    when it cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if path.endswith(".hlo.txt"):
        from detective.report.hlo import parse_hlo_graph

        return parse_hlo_graph(text)
    return parse_graph(text)
