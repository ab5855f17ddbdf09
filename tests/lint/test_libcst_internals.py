"""Fail loudly when libcst's internals the linter leans on change.

``detective.lint.positions`` subclasses libcst's private ``CodegenState`` to find node offsets
in one codegen pass, and the linter's walker reads each node's dataclass fields (with a table
of exceptions) instead of libcst's visitor. Both are checked here against libcst's public
answers (``PositionProvider``, ``CSTVisitor``) on real code, so an upgrade that breaks them
fails this file, not a rule test three layers away. pyproject.toml pins the tested range.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

import libcst as cst
import pytest
from helpers import REPO
from libcst.metadata import MetadataWrapper, PositionProvider

from detective.lint import walker
from detective.lint.positions import LineIndex, code_at, resolve_offsets

SAMPLE = '''
import torch

@torch.no_grad()
@staticmethod
async def step(model: "Net", batch, *, scale=2.0, **extra) -> None:
    if batch["x"].sum() > 0 and not extra:  # a comment
        y = [a * b for a, b in zip(batch["x"], batch["y"]) if a]
    elif (z := batch.get("z")) is not None:
        y = {k: v for k, v in z.items()}
    else:
        y = lambda t: t[1:-1, ::2]
    try:
        out = model(y, scale=scale)[0].item()
    except (ValueError, KeyError) as error:
        raise RuntimeError("bad") from error
    finally:
        del y
    match batch:
        case {"x": x} if x:
            pass
        case [first, *rest]:
            pass
    with torch.autocast("cpu"), open("f") as f:
        async for item in f:
            await item
    return out if out else -1


class Net(torch.nn.Module, metaclass=type):
    x: int = 1

    def forward(self, x):
        global G
        return (x @ x.T) ** 2, f"{x!r:>10}", *x
'''


def _sources() -> list[str]:
    files = sorted((REPO / "examples").rglob("*.py")) + sorted((REPO / "detective").rglob("*.py"))
    return [SAMPLE] + [p.read_text() for p in files[:80]]


def test_libcst_is_in_the_pinned_range():
    spec = next(d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
                if d.startswith("libcst"))
    low, high = re.match(r"libcst>=([\d.]+),<([\d.]+)", spec).groups()
    installed = tuple(int(p) for p in version("libcst").split(".")[:2])
    assert tuple(map(int, low.split("."))) <= installed < tuple(map(int, high.split("."))), (
        f"libcst {version('libcst')} is outside the tested range {spec}: rerun this file and widen the pin")


class _Order(cst.CSTVisitor):
    def __init__(self):
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node):
        self.nodes.append(node)
        return True


def _walked(node, out):
    """The linter's traversal, recording every node it visits."""
    walker.walk(node, lambda n: out.append(n) or True, lambda n: None)


@pytest.mark.parametrize("index", range(3))
def test_walker_visits_what_libcst_visits_in_the_same_order(index):
    """Every non-trivia node libcst's own visitor reaches, in libcst's order: no field renamed,
    added or reordered under the walker's feet."""
    for source in _sources()[index::3]:
        module = cst.parse_module(source)
        order = _Order()
        module.visit(order)
        expected = [n for n in order.nodes if not isinstance(n, walker._TRIVIA)]
        got: list = []
        _walked(module, got)
        assert [type(n).__name__ for n in got] == [type(n).__name__ for n in expected]
        assert all(a is b for a, b in zip(got, expected))


def test_codegen_offsets_match_libcst_positions():
    """resolve_offsets (a CodegenState subclass) puts every node where PositionProvider does."""
    for source in _sources()[:20]:
        wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        module = wrapper.module
        order = _Order()
        module.visit(order)
        nodes = [n for n in order.nodes if isinstance(n, (cst.BaseExpression, cst.BaseStatement, cst.Name))]
        targets = [n for n in nodes if isinstance(n, cst.BaseExpression)][:50]  # what fixes rewrite
        found, spans = resolve_offsets(module, nodes, targets)
        index = LineIndex(module.code)
        for node in nodes:
            start = positions[node].start
            assert index.position(found[id(node)]) == (start.line, start.column + 1), module.code_for_node(node)
        for node in targets:  # a span is exactly the node's own text, regenerated in place
            begin, end, indent = spans[id(node)]
            assert module.code[begin:end] == code_at(module, node, indent)
