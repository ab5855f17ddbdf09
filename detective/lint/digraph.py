"""The call graph as a plain adjacency dict with a breadth-first search, not networkx:
importing networkx costs ~0.15 s, a sixth of the pre-commit budget, for two traversals."""

from __future__ import annotations

Node = tuple[str, str]  # (path, qualname)


class CallGraph:
    """Directed graph as insertion-ordered adjacency dicts (the order networkx keeps)."""

    def __init__(self):
        self.succ: dict[Node, dict[Node, None]] = {}

    def __contains__(self, node: Node) -> bool:
        return node in self.succ

    def __iter__(self):
        return iter(self.succ)

    def add_node(self, node: Node) -> None:
        self.succ.setdefault(node, {})

    def add_edge(self, caller: Node, callee: Node) -> None:
        self.succ.setdefault(caller, {})[callee] = None
        self.succ.setdefault(callee, {})

    @property
    def edges(self):
        return [(caller, callee) for caller, callees in self.succ.items() for callee in callees]

    def descendants(self, starts) -> set[Node]:
        """Everything reachable from ``starts`` (the starts themselves only if on a cycle)."""
        seen: set[Node] = set()
        stack = [n for start in starts for n in self.succ.get(start, ())]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self.succ.get(node, ()))
        return seen

    def shortest_paths(self, sources, skip=frozenset()) -> dict[Node, list[Node]]:
        """Breadth-first from ``sources`` in order, successors in insertion order: for each
        reached node the first shortest path found (the one networkx's
        ``single_source_shortest_path`` from a virtual source before ``sources`` returns).
        Edges in ``skip`` are not followed."""
        paths: dict[Node, list[Node]] = {}
        level = []
        for source in sources:
            if source not in paths:
                paths[source] = [source]
                level.append(source)
        succ = self.succ
        while level:
            following = []
            for node in level:
                path = paths[node]
                for callee in succ.get(node, ()):
                    if callee not in paths and (not skip or (node, callee) not in skip):
                        paths[callee] = [*path, callee]
                        following.append(callee)
            level = following
        return paths

    def reachable(self, sources, skip=frozenset(), avoid=frozenset()) -> set[Node]:
        """Nodes reached from ``sources`` without following ``skip`` edges or entering
        ``avoid`` nodes (sources in ``avoid`` are left out too)."""
        seen = {s for s in sources if s not in avoid}
        stack = list(seen)
        while stack:
            node = stack.pop()
            for callee in self.succ.get(node, ()):
                if callee not in seen and callee not in avoid and (node, callee) not in skip:
                    seen.add(callee)
                    stack.append(callee)
        return seen
