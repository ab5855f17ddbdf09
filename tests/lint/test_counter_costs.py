"""RC003's cost model, measured: a module's int attribute bumped in a forward, run under
real torch.compile (a counting backend) and on torch_xla (its CompileTime metric).

The same source is linted and run, so the linter's verdict per counter rests on what the
compilers do. Dynamo guards on a module's int attributes: a counter read at entry makes a
graph per value even when nothing traced reads it. torch_xla uploads Python numbers other
than 0 and 1 as device data, and a branch test picks one of its sides: a counter read only
by tensor arithmetic or by a test makes a few graphs, not one per value. A counter that
reaches a slice bound is a constant of the graph: one per value on both. A counter that
restarts from a constant at the top of the method is not read at entry: one graph."""

from __future__ import annotations

import os
import subprocess
import sys

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


class Branches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        if self.n % 2 == 0:
            x = x + 1
        self.n += 1
        return x * 2


class Sliced(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x[: self.n] * 2
'''
LINES = {"Flows": 10, "Bumped": 20, "Restarts": 32, "Branches": 46, "Sliced": 56}
CALLS = 5
XLA_RUN = """
import sys, torch, torch_xla, torch_xla.debug.metrics as met
namespace = {}
exec(compile(sys.argv[1], "counters.py", "exec"), namespace)
for name in sys.argv[2:]:
    met.clear_all()
    module, x = namespace[name](), torch.ones(8, device=torch_xla.device())
    for _ in range(%d):
        y = module(x)  # a live result: the sync compiles and runs its graph
        torch_xla.sync()
    data = met.metric_data("CompileTime")
    print(name, data[0] if data else 0)
""" % CALLS


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
            module(torch.ones(8))
        counts[name] = len(made)
    torch._dynamo.reset()
    return counts


@pytest.fixture(scope="module")
def xla_graphs() -> dict[str, int]:
    pytest.importorskip("torch_xla")
    done = subprocess.run([sys.executable, "-c", XLA_RUN, SOURCE, *LINES], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PJRT_DEVICE": "CPU"}, check=True)
    return {name: int(count) for name, count in (line.split() for line in done.stdout.splitlines())}


@pytest.mark.slow
def test_lint_verdicts_follow_the_graphs_torch_compile_and_torch_xla_make(graphs, xla_graphs):
    findings = {f.line: f for f in lint_sources({"counters.py": SOURCE}) if f.code == "RC003"}
    # torch.compile: a graph per call for every counter read at entry; one for the one that restarts.
    assert graphs == {"Flows": CALLS, "Bumped": CALLS, "Restarts": 1, "Branches": CALLS, "Sliced": CALLS}
    # torch_xla: only the slice bound makes a graph per value; the number in arithmetic is
    # data after 0 and 1, the branch has two sides.
    # (a graph another module already compiled is reused: x * 2 is one graph for Bumped and Restarts)
    assert xla_graphs["Sliced"] == CALLS and xla_graphs["Bumped"] <= 1 and xla_graphs["Restarts"] <= 1
    assert xla_graphs["Flows"] <= 3 and xla_graphs["Branches"] == 2
    assert set(findings) == {LINES["Flows"], LINES["Bumped"], LINES["Branches"], LINES["Sliced"]}
    assert set(findings[LINES["Sliced"]].costs_on) == {"xla", "compile"}
    for name in ("Flows", "Bumped", "Branches"):
        assert findings[LINES[name]].costs_on == ("compile",), name


def test_a_counter_without_a_per_value_xla_graph_is_info_where_the_project_only_targets_xla():
    uses_xla = "import torch_xla\nfrom counters import Bumped, Flows\n"
    findings = {(f.path, f.line): f.severity
                for f in lint_sources({"counters.py": SOURCE, "train.py": uses_xla}) if f.code == "RC003"}
    assert findings == {("counters.py", LINES["Flows"]): "info", ("counters.py", LINES["Bumped"]): "info",
                        ("counters.py", LINES["Branches"]): "info", ("counters.py", LINES["Sliced"]): "warning"}
