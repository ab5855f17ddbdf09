"""RC003's cost model, measured: a module's int attribute bumped in a compiled forward.

The same source is linted and run under real torch.compile (a counting backend), so the
linter's verdict per counter rests on what dynamo does: it guards on a module's int
attributes, so a counter read at entry makes a graph per value even when nothing traced
reads it (no cost on XLA, where such a value never enters a graph); a counter that
restarts from a constant at the top of the method is not read at entry: one graph."""

from __future__ import annotations

import pytest

from detective.lint.engine import lint_sources

SOURCE = '''\
import torch


class Flows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x * self.n


class Bumped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x * 2


class Restarts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n = 0
        for _ in range(3):
            self.n += 1
        if self.n == 0:
            x = x + 1
        return x * 2
'''
LINES = {"Flows": 10, "Bumped": 20, "Restarts": 32}
CALLS = 5


@pytest.fixture(scope="module")
def graphs() -> dict[str, int]:
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(SOURCE, "counters.py", "exec"), namespace)
    counts = {}
    for name in LINES:
        made = []

        def backend(gm, example_inputs):
            made.append(gm)
            return gm.forward

        torch._dynamo.reset()
        module = torch.compile(namespace[name](), backend=backend)
        for _ in range(CALLS):
            module(torch.ones(3))
        counts[name] = len(made)
    torch._dynamo.reset()
    return counts


@pytest.mark.slow
def test_lint_verdicts_follow_the_graphs_torch_compile_makes(graphs):
    findings = {f.line: f for f in lint_sources({"counters.py": SOURCE}) if f.code == "RC003"}
    # A graph per call for both counters read at entry; one graph for the one that restarts.
    assert graphs == {"Flows": CALLS, "Bumped": CALLS, "Restarts": 1}
    assert set(findings) == {LINES["Flows"], LINES["Bumped"]}
    assert set(findings[LINES["Flows"]].costs_on) == {"xla", "compile"}
    assert findings[LINES["Bumped"]].costs_on == ("compile",)


def test_a_counter_only_bumped_is_info_where_the_project_only_targets_xla():
    uses_xla = "import torch_xla\nfrom counters import Bumped, Flows\n"
    findings = {(f.path, f.line): f.severity
                for f in lint_sources({"counters.py": SOURCE, "train.py": uses_xla}) if f.code == "RC003"}
    assert findings == {("counters.py", LINES["Flows"]): "warning",
                        ("counters.py", LINES["Bumped"]): "info"}
