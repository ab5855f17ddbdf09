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


class CycleMemo:
    """Answers to a recursive yes/no question over a graph that may have cycles.

    A question met again while it is being answered (a cycle) proves nothing and answers
    False for now. An answer that rested on such a provisional False, or on a search cut
    short (``cut()``), holds only for the question that started the search: it is kept only
    when it is that outermost question's own. So no answer depends on which question was
    asked first (the order sets and dicts happen to iterate in, which varies per run with
    the hash seed), as the old "store False, then overwrite" memo did.
    """

    def __init__(self):
        self.known: dict = {}
        self._open: set = set()
        self._unsure = False

    def ask(self, key, answer) -> bool:
        """The answer for ``key``: ``answer()`` (which may ask others) unless known."""
        if key in self.known:
            return self.known[key]
        if key in self._open:
            self._unsure = True
            return False
        self._open.add(key)
        outer, self._unsure = self._unsure, False
        try:
            result = answer()
        finally:
            self._open.discard(key)
        if not self._unsure or not self._open:
            self.known[key] = result
        self._unsure = outer or self._unsure
        return result

    def cut(self) -> None:
        """The current search stopped short (a depth limit): its answers are provisional."""
        self._unsure = True
