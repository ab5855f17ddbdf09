"""Parsing and diffing real IR graphs saved by diagnose runs (tests/report/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from detective.report.diff import diff_graphs, dims
from detective.report.ir import Location, parse_graph, parse_node

DATA = Path(__file__).resolve().parent / "data"


def graph(name: str):
    return parse_graph((DATA / f"{name}.txt").read_text())


@pytest.mark.parametrize("path", sorted(DATA.glob("*.txt")), ids=lambda p: p.stem)
def test_every_node_line_parses(path):
    text = path.read_text()
    g = parse_graph(text)
    node_lines = [line for line in text.splitlines() if line.lstrip().startswith("%")]
    assert len(g.nodes) == len(node_lines) > 0
    assert [n.id for n in g.nodes] == list(range(len(g.nodes)))
    assert g.hash is not None and g.hash in path.read_text()
    assert all(o < n.id for n in g.nodes for o in n.operands)  # printed in topological order
    assert g.frames and g.frames[0]["function"] == "sync"
    # a graph diffed with itself has nothing to explain
    same = diff_graphs(g, parse_graph(text))
    assert same.identical and not same.changes and not same.added


def test_node_fields():
    node = parse_node("  %5 = f32[8,3,8]{2,1,0} xla::select(%4), location=forward@counter_slice_broken.py:26, "
                      "xla_shape=f32[8,3,8]{2,1,0}")
    assert (node.id, node.op, node.shape, node.operands) == (5, "xla::select", "f32[8,3,8]", (4,))
    assert node.location == Location("forward", "counter_slice_broken.py", 26)
    add = parse_node("  %21 = f32[4]{0} aten::add(%20, %16, %10), scope=aten::add.3, xla_shape=f32[4]{0}, ROOT=1")
    assert add.operands == (20, 16, 10) and add.scope == "aten::add.3" and add.root == 1 and add.location is None
    assert add.params == ""
    assert parse_node("IR {") is None
    assert dims("f32[8,3,8]") == (8, 3, 8) and dims("f32[]") == ()


def test_slice_bound_from_a_python_counter_is_a_constant():
    d = diff_graphs(graph("counter_slice_step1"), graph("counter_slice_step2"))
    assert not d.added and not d.removed
    [change] = d.changes  # downstream shape changes are carried on, not origins
    assert change.kind == "constant"
    assert change.node.op == "xla::select"
    assert (change.before, change.after) == ("f32[8,2,8]", "f32[8,3,8]")  # self.step is 2, then 3
    assert change.node.location.file == "counter_slice_broken.py"


def test_input_shape_change_is_a_shape_change():
    d = diff_graphs(graph("seq_len_step1"), graph("seq_len_step3"))
    [change] = d.changes
    assert change.kind == "shape" and change.node.is_input
    assert (change.before, change.after) == ("s64[8,8]", "s64[8,12]")
    assert change.node.location.function == "main"


def test_optional_key_adds_ops():
    d = diff_graphs(graph("optional_key_step1"), graph("optional_key_step3"))
    assert {c.kind for c in d.changes} == {"structure"}
    assert not d.removed
    added = sorted(n.op for n in d.added)
    assert added.count("aten::mul") == 2 and "xla::device_data" in added  # the mask, and its use
    forward = [n for n in d.added if n.location and n.location.function == "forward"]
    assert forward and all(n.location.file == "optional_key_broken.py" for n in forward)


def test_swapped_inputs_are_not_a_shape_change():
    # grad-accumulate then optimizer step: the printed order of two accumulators swaps
    d = diff_graphs(graph("grad_accum_step1"), graph("grad_accum_step2"))
    assert {c.kind for c in d.changes} == {"structure"}
    assert any(n.location and n.location.function == "_single_tensor_sgd" for n in d.added)


def test_special_scalar_becoming_a_number_is_a_constant():
    d = diff_graphs(graph("moe_step1"), graph("moe_step5"))
    [change] = d.changes
    assert change.kind == "constant"
    assert {d.old.by_id[d.new_to_old[change.node.id]].op, change.node.op} == {"prim::Constant", "xla::device_data"}
    assert change.node.location.file == "moe_broken.py"


def test_capacity_from_a_python_int_is_a_constant_not_its_echoes():
    d = diff_graphs(graph("moe_step5"), graph("moe_step6"))
    assert not d.added and not d.removed
    constants = [c for c in d.changes if c.kind == "constant"]
    assert constants and all(c.kind == "constant" for c in d.changes)
    located = [c for c in constants if c.node.location and c.node.location.file == "moe_broken.py"]
    assert located and located[0].before == "f32[129,32]" and located[0].after == "f32[113,32]"


def test_cost_prefers_the_closest_graph():
    step1, step2 = graph("counter_slice_step1"), graph("counter_slice_step2")
    optional = graph("optional_key_step1")
    assert diff_graphs(step1, step2).cost < diff_graphs(optional, step2).cost


def test_python_numbers_feeding_a_line():
    from detective.report.sources import python_values_feeding

    moe = Path(__file__).resolve().parents[2] / "examples" / "moe" / "moe_broken.py"
    lines = moe.read_text().splitlines()

    def at(snippet):
        return next(n for n, line in enumerate(lines, 1) if snippet in line)

    dispatch = at("self.num_experts * capacity + 1")
    assert python_values_feeding(str(moe), dispatch) == [
        (at("capacity = math.ceil("), lines[at("capacity = math.ceil(") - 1].strip())]
    aux = at("self._overflow_total / self._tokens_total")
    assert [n for n, _ in python_values_feeding(str(moe), aux)] == [at("self._overflow_total += int(")]
    assert python_values_feeding(str(moe), at("probs = self.router")) == []


def _tiled(g, copies):
    from detective.report.ir import Graph, Node

    nodes, offset = [], 0
    for part in copies:
        for n in part.nodes:
            nodes.append(Node(n.id + offset, n.op, n.shape, tuple(o + offset for o in n.operands), n.location))
        offset += len(part.nodes)
    return Graph(nodes=nodes)


def test_large_graphs_stay_linear():
    import time

    a, b = graph("moe_step5"), graph("moe_step6")
    big_a = _tiled(a, [a] * 120)  # ~40k nodes, as a real model's step graph
    big_b = _tiled(a, [a] * 60 + [b] + [a] * 59)
    start = time.perf_counter()
    d = diff_graphs(big_a, big_b)
    assert time.perf_counter() - start < 10  # quadratic alignment took minutes here
    assert {c.kind for c in d.changes} == {"constant"} and not d.added


@pytest.mark.parametrize("old,new,kind", [("counter_slice_step1", "counter_slice_step2", "constant"),
                                          ("seq_len_step1", "seq_len_step3", "shape"),
                                          ("moe_step5", "moe_step6", "constant")])
def test_greedy_alignment_agrees_on_real_graphs(monkeypatch, old, new, kind):
    import detective.report.diff as diff_module

    exact = diff_graphs(graph(old), graph(new))
    monkeypatch.setattr(diff_module, "MAX_QUADRATIC", 0)  # what very large graphs get
    greedy = diff_graphs(graph(old), graph(new))
    assert {c.kind for c in greedy.changes} == {kind}
    assert [(c.node.op, c.before, c.after) for c in greedy.changes] == \
        [(c.node.op, c.before, c.after) for c in exact.changes]
