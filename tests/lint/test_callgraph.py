"""CallGraph (the linter's own adjacency dict) gives the chains networkx gave: the same first
shortest path from the roots, in root order, and the same descendants, on random graphs."""

from __future__ import annotations

import networkx as nx  # the dev extra installs it: the oracle must never skip silently
from hypothesis import given, settings
from hypothesis import strategies as st

from detective.lint.callgraph import CallGraph

nodes = st.integers(min_value=0, max_value=7).map(lambda i: ("f.py", f"s{i}"))
edges = st.lists(st.tuples(nodes, nodes), max_size=60)


@settings(max_examples=300, deadline=None)
@given(edges=edges, roots=st.lists(nodes, max_size=5, unique=True))
def test_shortest_paths_and_descendants_match_networkx(edges, roots):
    ours, theirs = CallGraph(), nx.DiGraph()
    for caller, callee in edges:
        ours.add_edge(caller, callee)
        theirs.add_edge(caller, callee)
    for root in roots:
        ours.add_node(root)
        theirs.add_node(root)
    source = ("", "<roots>")  # how the linter called networkx: a virtual source before the roots
    theirs.add_edges_from((source, root) for root in roots)
    expected = nx.single_source_shortest_path(theirs, source) if roots else {source: [source]}
    del expected[source]
    assert ours.shortest_paths(roots) == {node: path[1:] for node, path in expected.items()}
    if roots:
        theirs.remove_node(source)
    starts = sorted({caller for caller, _ in edges})[::2]
    # Callers always add the starts themselves (reaches_tag, called_from_xla, xla_files).
    assert set(starts) | ours.descendants(starts) == set(starts).union(
        *(nx.descendants(theirs, start) for start in starts))
