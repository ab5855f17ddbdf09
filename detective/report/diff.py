"""Align two IR graphs and find where they start to differ.

Nodes are aligned by (op, location) with difflib over the printed (topological) order, then by
op alone inside the stretches that did not align. A matched pair whose operands map onto each
other but whose output shape changed is an *origin* (a constant baked in: a slice bound, a size
from a Python int); a matched pair with changed operands only carries a change made upstream and
is skipped. Unmatched nodes are structural changes; a graph input whose shape changed is a shape
change; ``prim::Constant`` <-> ``xla::device_data`` at one position is a special scalar (0 or 1)
that became an ordinary number, or back.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from detective.report.ir import Graph, Node

_DIMS = re.compile(r"\[([\d,]*)\]")


@dataclass
class Change:
    kind: str  # "shape" | "constant" | "structure"
    node: Node
    side: str  # "new": node of the new graph; "old": node only in the old graph
    before: str | None = None
    after: str | None = None


@dataclass
class GraphDiff:
    old: Graph
    new: Graph
    new_to_old: dict[int, int] = field(default_factory=dict)
    added: list[Node] = field(default_factory=list)
    removed: list[Node] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)  # origins only, in new-graph order

    @property
    def cost(self) -> int:
        """How far apart the two graphs are: unmatched nodes plus changed origins."""
        return len(self.added) + len(self.removed) + sum(c.kind != "structure" for c in self.changes)

    @property
    def identical(self) -> bool:
        return self.cost == 0

    def kinds(self) -> set[str]:
        return {c.kind for c in self.changes}


def dims(shape: str) -> tuple[int, ...] | None:
    m = _DIMS.search(shape)
    if m is None:
        return None
    return tuple(int(d) for d in m.group(1).split(",") if d)


MAX_QUADRATIC = 4_000_000  # difflib on the differing middle only up to this many node pairs


def _align(old: list[Node], new: list[Node]) -> dict[int, int]:
    """new id -> old id. Common prefix and suffix first (linear); difflib on what is left."""
    pairs: dict[int, int] = {}
    sa, sb = [n.signature() for n in old], [n.signature() for n in new]
    p = 0
    while p < len(sa) and p < len(sb) and sa[p] == sb[p]:
        pairs[new[p].id] = old[p].id
        p += 1
    q = 0
    while q < len(sa) - p and q < len(sb) - p and sa[-1 - q] == sb[-1 - q]:
        pairs[new[-1 - q].id] = old[-1 - q].id
        q += 1
    a, b = old[p:len(old) - q], new[p:len(new) - q]
    if not a or not b:
        return pairs
    if len(a) * len(b) > MAX_QUADRATIC:  # huge graphs: greedy, in order, by (op, location)
        _pair_greedy(a, b, pairs, key=lambda n: n.signature())
        _pair_greedy(a, b, pairs, key=lambda n: n.op)
        return pairs
    outer = SequenceMatcher(None, sa[p:len(sa) - q], sb[p:len(sb) - q], autojunk=False)
    for tag, i1, i2, j1, j2 in outer.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                pairs[b[j1 + k].id] = a[i1 + k].id
        elif tag == "replace":
            ra, rb = a[i1:i2], b[j1:j2]
            inner = SequenceMatcher(None, [n.op for n in ra], [n.op for n in rb], autojunk=False)
            left_a, left_b = [], []
            for itag, k1, k2, l1, l2 in inner.get_opcodes():
                if itag == "equal":
                    for k in range(k2 - k1):
                        pairs[rb[l1 + k].id] = ra[k1 + k].id
                else:
                    left_a += ra[k1:k2]
                    left_b += rb[l1:l2]
            _pair_scalars(left_a, left_b, pairs)
    # left over on both sides with the same op, location and shape: moved, not changed (the
    # backward pass is sometimes printed in another order)
    _pair_greedy(a, b, pairs, key=lambda n: (n.op, n.location, n.shape))
    return pairs


def _pair_greedy(old: list[Node], new: list[Node], pairs: dict[int, int], key) -> None:
    taken = set(pairs.values())
    pool: dict = {}
    for n in old:
        if n.id not in taken:
            pool.setdefault(key(n), []).append(n.id)
    for n in new:
        if n.id not in pairs:
            ids = pool.get(key(n))
            if ids:
                pairs[n.id] = ids.pop(0)


def _pair_scalars(old: list[Node], new: list[Node], pairs: dict[int, int]) -> None:
    """prim::Constant <-> xla::device_data of one shape, in order: a special scalar swapped."""
    used: set[int] = set()
    for b in new:
        if b.op not in ("prim::Constant", "xla::device_data"):
            continue
        for a in old:
            if a.id not in used and a.shape == b.shape and {a.op, b.op} == {"prim::Constant", "xla::device_data"}:
                pairs[b.id] = a.id
                used.add(a.id)
                break


def _repair_inputs(old: Graph, new: Graph, new_to_old: dict[int, int]) -> None:
    """Inputs lined up by position whose shapes differ: re-pair those that swapped places
    (same location, each with the other's shape) before calling anything a shape change."""
    odd = [(b, old.by_id[new_to_old[b.id]]) for b in new.inputs
           if b.id in new_to_old and old.by_id[new_to_old[b.id]].shape != b.shape]
    free = [a for _, a in odd]
    repaired: set[int] = set()
    for b, _ in odd:
        match = next((a for a in free if a.shape == b.shape and a.location == b.location), None)
        if match is not None:
            new_to_old[b.id] = match.id
            free.remove(match)
            repaired.add(match.id)
    for b, a in odd:  # its old partner went to another input: b is unmatched (structure)
        if new_to_old.get(b.id) == a.id and a.id in repaired:
            del new_to_old[b.id]


def _same_users(a: Node, b: Node, old: Graph, new: Graph, old_to_new: dict[int, int]) -> bool:
    users_a = {old_to_new.get(u) for u in old.users().get(a.id, [])}
    users_b = set(new.users().get(b.id, []))  # noqa: users() is cached per graph
    return bool(users_a & users_b) or not users_b


def _explained(old_shape: str, new_shape: str, input_changes: list[tuple[int, int]]) -> bool:
    """A size change that is an input's size change (or a whole multiple of it), carried on."""
    a, b = dims(old_shape), dims(new_shape)
    if a is None or b is None or len(a) != len(b) or not input_changes:
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if not any(o and n and x % o == 0 and y % n == 0 and x // o == y // n for o, n in input_changes):
            return False
    return True


def diff_graphs(old: Graph, new: Graph) -> GraphDiff:
    result = GraphDiff(old, new)
    new_to_old = _align(old.nodes, new.nodes)
    _repair_inputs(old, new, new_to_old)
    old_to_new = {o: n for n, o in new_to_old.items()}
    for b in new.inputs:  # two different inputs lined up by position: not one input resized
        a_id = new_to_old.get(b.id)
        if a_id is not None and old.by_id[a_id].shape != b.shape and not _same_users(
            old.by_id[a_id], b, old, new, old_to_new
        ):
            del new_to_old[b.id], old_to_new[a_id]
    result.new_to_old = new_to_old
    result.added = [n for n in new.nodes if n.id not in new_to_old]
    result.removed = [n for n in old.nodes if n.id not in old_to_new]

    input_changes: list[tuple[int, int]] = []
    candidates: list[Change] = []
    for b in new.nodes:
        if b.id not in new_to_old:
            continue
        a = old.by_id[new_to_old[b.id]]
        if a.op != b.op:  # special scalar swapped for device data or back
            result.changes.append(
                Change("constant", b, "new", before=_scalar(a), after=_scalar(b))
            )
            continue
        if a.shape == b.shape:
            continue
        if b.is_input:
            result.changes.append(Change("shape", b, "new", before=a.shape, after=b.shape))
            da, db = dims(a.shape), dims(b.shape)
            if da and db and len(da) == len(db):
                input_changes += [(x, y) for x, y in zip(da, db) if x != y]
            continue
        mapped = tuple(old_to_new.get(o) for o in a.operands)
        if mapped != b.operands:
            continue  # operands themselves differ: the change came from upstream
        if any(old.by_id[o].shape != new.by_id[n].shape for o, n in zip(a.operands, b.operands)):
            continue  # an operand changed shape: carried on
        candidates.append(Change("constant", b, "new", before=a.shape, after=b.shape))
    for change in candidates:
        if not _explained(change.before, change.after, input_changes):
            result.changes.append(change)
    result.changes += [Change("structure", n, "new") for n in result.added]
    result.changes += [Change("structure", n, "old") for n in result.removed]
    order = {n.id: i for i, n in enumerate(new.nodes)}
    result.changes.sort(key=lambda c: (c.side != "new", order.get(c.node.id, 0) if c.side == "new" else c.node.id))
    return result


def _scalar(node: Node) -> str:
    if node.is_constant:
        return f"{node.shape} constant (a special scalar, 0 or 1, baked in)"
    return f"{node.shape} device data (a number other than 0 and 1)"


def summarize_ops(nodes: list[Node], sign: str, limit: int = 4) -> str:
    counts = Counter(n.op for n in nodes)
    parts = [f"{sign}{op}" + (f" ×{c}" if c > 1 else "") for op, c in counts.most_common(limit)]
    if len(counts) > limit:
        parts.append(f"{sign}{sum(c for _, c in counts.most_common()[limit:])} more")
    return ", ".join(parts)
