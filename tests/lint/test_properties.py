"""The linter never crashes on valid Python, and region logic holds on generated programs."""

from __future__ import annotations

import textwrap

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detective.lint.analyze import SourceError
from detective.lint.engine import lint_sources

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# hypothesmith spends most of this test generating programs (a large one takes ~0.5 s to
# build, a fraction of that to lint); 100 examples keep tests/lint within its time budget.
@settings(SETTINGS, max_examples=100)
@given(hypothesmith.from_node())
def test_never_crashes_on_arbitrary_valid_python(source):
    try:
        findings = lint_sources({"gen.py": source})
    except SourceError:
        # libcst's grammar rejects a few programs CPython accepts (a backslash continuation
        # before "\r\n"): reported as a file that cannot be parsed, which is no crash.
        return
    for finding in findings:
        assert finding.line >= 1 and finding.column >= 1


# Snippets that read x (a tensor parameter of forward) and the trigger each one is.
TRIGGERS = {
    "y = x.item()": "RC001",
    "y = float(x.sum())": "RC001",
    "print(x)": "RC001",
    "y = x.cpu()": "RC001",
    "if x.mean() > 0:\n    y = x": "RC002",
    "assert not torch.isnan(x).any()": "RC002",
    "self.calls += 1": "RC003",
    "if 'mask' in batch:\n    y = x": "RC004",
    "y = x[x > 0]": "RC005",
    "y = torch.nonzero(x)": "RC005",
}
NEUTRAL = ["y = x * 2", "y = torch.relu(x)", "n = x.shape[0]", "if x is None:\n    y = 0",
           "z = [1, 2, 3]", "for i in range(3):\n    y = x + i", "y = self.calls"]


@st.composite
def module_program(draw):
    body = draw(st.lists(st.sampled_from(list(TRIGGERS) + NEUTRAL), min_size=1, max_size=6))
    traced = draw(st.booleans())
    base = "torch.nn.Module" if traced else "object"
    statements = textwrap.indent("\n".join(body), " " * 8)
    source = (
        "import torch\n\n"
        f"class M({base}):\n"
        "    def __init__(self):\n        super().__init__()\n        self.calls = 0\n\n"
        "    def forward(self, x, batch):\n"
        f"{statements}\n"
        "        return x\n"
    )
    expected = {TRIGGERS[s] for s in body if s in TRIGGERS} if traced else set()
    return source, expected


@SETTINGS
@given(module_program())
def test_triggers_fire_exactly_inside_module_forward(program):
    source, expected = program
    codes = {f.code for f in lint_sources({"m.py": source})}
    assert codes == expected, source


@st.composite
def loop_program(draw):
    before = draw(st.lists(st.sampled_from(["v = loss.item()", "w = loss * 2", "u = loss.cpu()"]),
                           min_size=0, max_size=3))
    after = draw(st.lists(st.sampled_from(["v = loss.item()", "print(loss)", "w = loss.cpu()"]),
                          min_size=0, max_size=3))
    sync = draw(st.sampled_from(["torch_xla.sync()", "xm.mark_step()", "pass"]))
    lines = ["loss = model(batch).mean()", *before, sync, *after]
    body = textwrap.indent("\n".join(lines), " " * 8)
    source = ("import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
              "def train(model, loader):\n    for batch in loader:\n" + body + "\n")
    first = 7 + 1  # line of the first statement after `loss = ...`
    expected = set()
    if sync != "pass":
        expected = {first + i for i, s in enumerate(before) if s != "w = loss * 2"}
    return source, expected


@SETTINGS
@given(loop_program())
def test_step_loop_flags_only_reads_before_the_sync(program):
    source, expected = program
    lines = {f.line for f in lint_sources({"t.py": source})}
    assert lines == expected, source
