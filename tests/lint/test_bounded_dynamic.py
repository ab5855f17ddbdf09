"""RC005 under bounded dynamic shapes: `nonzero`/`masked_select` in a file that sets or requires
XLA_EXPERIMENTAL are `info` in that file only; the runtime fact (with the flag, a new count
compiles nothing; without it, a program and a CPU fallback per count) is measured for real."""

from __future__ import annotations


import pytest
from helpers import target_costs

from detective.lint.engine import lint_sources


# The shape of pytorch/xla's test/ds/test_dynamic_shape_models.py: the requirement comes last.
REQUIRES = """\
import os
import unittest
import torch
import torch_xla


class TestDynamic(unittest.TestCase):
    def test_compile_once(self):
        for step in range(3):
            x = torch.randn(8, device=torch_xla.device())
            idx = torch.nonzero(x > 0)
            kept = torch.masked_select(x, x > 0)
            values = torch.unique(x)
            torch_xla.sync()


if __name__ == "__main__":
    assert os.environ["XLA_EXPERIMENTAL"] != ""
    unittest.main()
"""
# Another file of the same project, without the flag.
PLAIN = REQUIRES.replace('    assert os.environ["XLA_EXPERIMENTAL"] != ""\n', "")


def rc005(sources: dict[str, str]) -> dict[tuple[str, str], str]:
    return {(f.path, f.subject): f.severity for f in lint_sources(sources) if f.code == "RC005"}


def test_a_required_flag_makes_its_bounded_ops_info_in_that_file_only():
    found = rc005({"test_ds.py": REQUIRES, "test_plain.py": PLAIN})
    assert found == {
        ("test_ds.py", "nonzero"): "info", ("test_ds.py", "masked_select"): "info",
        ("test_ds.py", "unique"): "warning",  # not bounded by the flag
        ("test_plain.py", "nonzero"): "warning", ("test_plain.py", "masked_select"): "warning",
        ("test_plain.py", "unique"): "warning",
    }


@pytest.mark.parametrize("line, bounded", [
    ('os.environ["XLA_EXPERIMENTAL"] = "nonzero"', {"nonzero"}),
    ('os.environ.setdefault("XLA_EXPERIMENTAL", "nonzero:masked_select:nms")', {"nonzero", "masked_select"}),
    ('os.environ["XLA_EXPERIMENTAL"] = "nms"', set()),  # no shape op of RC005
    ('pytestmark = pytest.mark.skipif("masked_select" not in os.environ.get("XLA_EXPERIMENTAL", ""), '
     'reason="bounded")', {"masked_select"}),
    ('flags = os.environ.get("XLA_EXPERIMENTAL", "")', set()),  # a read is no requirement
])
def test_what_the_file_says_decides_which_ops(line, bounded):
    source = PLAIN.replace("import os\n", f"import os\nimport pytest\n{line}\n")
    found = rc005({"test_ds.py": source})
    assert {subject for (_, subject), severity in found.items() if severity == "info"} == bounded
    assert found[("test_ds.py", "unique")] == "warning"


def test_the_message_says_why():
    (message,) = [f.message for f in lint_sources({"test_ds.py": REQUIRES}) if f.subject == "nonzero"]
    assert "this file sets or requires XLA_EXPERIMENTAL for nonzero: torch_xla gives it a bounded dynamic " \
        "shape, no new program when the count changes" in message


@pytest.mark.slow
def test_nonzero_compiles_once_for_every_count_under_the_flag(tmp_path):
    """benchmarks/target_costs.py --only bounded, run for real: two fresh torch_xla processes."""
    runs = target_costs(tmp_path, "--only", "bounded")["bounded"]
    plain, bounded = runs[""], runs["nonzero:masked_select"]
    assert plain["sums"] == bounded["sums"] == [0.0, 3.0, 10.0, 21.0]  # same results either way
    assert all(n >= 1 for n in plain["compiles_per_count"]) and plain["fallbacks"] == 4, plain
    assert bounded["compiles_per_count"][0] >= 1 and bounded["compiles_per_count"][1:] == [0, 0, 0], bounded
    assert bounded["fallbacks"] == 0, bounded
