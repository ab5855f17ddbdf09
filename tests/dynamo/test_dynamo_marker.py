"""The pytest marker on real torch.compile (eager backend), in a pytest subprocess."""

from __future__ import annotations

import pytest

TESTS = '''
import pytest
import torch

import detective


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


@pytest.mark.compile_budget(after_step=2)
def test_counter_recompiles():
    model = Counter()
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        compiled(torch.randn(2, 4)).sum().backward()
        opt.step()


def double(x):
    return x * 2


@pytest.mark.compile_budget(after_step=1)
def test_stable_function():
    compiled = torch.compile(double, backend="eager")
    for _ in range(3):
        compiled(torch.randn(3))
        detective.step()


def test_table_from_fixture(detective_watch):
    compiled = torch.compile(double, backend="eager")
    for n in (3, 3, 5):
        compiled(torch.randn(n))
        detective_watch.step()
    steps = detective_watch.run.step_events
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert sum(s["frames_compiled"] for s in steps) <= 1  # compiled in the test before, or the one new size
'''


def _line_of(text: str) -> int:
    lines = TESTS.lstrip("\n").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


@pytest.mark.slow
def test_compile_budget_marker_on_torch_compile(pytester):
    pytester.makepyfile(test_budget=TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_counter_recompiles*", "*gate FAILED: at most 0 recompile(s) from step 2 on*",
                                 "*2 recompile(s) from step 2 on (allowed 0) in step(s) 2, 3*",
                                 f"*at test_budget.py:{_line_of('self.calls += 1')} in forward*"])
