"""The report's linter pass: the files a run names, linted with their project as context."""

from __future__ import annotations

from detective.report.join import lint_files

TRAIN = """\
import torch_xla
from helpers import helper


@torch_xla.compile
def step(x):
    return helper(x)
"""
HELPER = "def helper(x):\n    return x.item()\n"


def test_a_helper_the_run_names_is_linted_with_the_step_that_calls_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(TRAIN)
    helper = tmp_path / "proj" / "helpers.py"
    helper.write_text(HELPER)
    # In no project: the helper alone, and nothing says a compiled step calls it.
    findings, errors = lint_files(None, [str(helper)], str(tmp_path / "proj"))
    assert findings == [] and errors == []
    # In a project (its pyproject.toml): the step in train.py is context, the chain is found,
    # and only the named file is reported on.
    (tmp_path / "proj" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    findings, errors = lint_files(None, [str(helper)], str(tmp_path / "proj"))
    assert [(f.code, f.line) for f in findings] == [("RC001", 2)] and errors == []
    assert findings[0].path.endswith("helpers.py")
    assert [link.function for link in findings[0].chain] == ["step", "helper"]
