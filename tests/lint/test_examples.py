"""`detective lint examples/lint` flags what each broken example marks, and nothing in fixed ones."""

from __future__ import annotations

import json
import re
from detective.lint.config import Config
from detective.lint.engine import lint_paths
from helpers import REPO

EXAMPLES = REPO / "examples" / "lint"
MARK = re.compile(r"#.*?\b(RC\d{3})\b(?:.*?\b(RC\d{3})\b)?")


def expected_marks() -> set[tuple[str, int, str]]:
    marks = set()
    for path in sorted(EXAMPLES.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for code in filter(None, (m for match in MARK.finditer(line) for m in match.groups())):
                marks.add((path.relative_to(REPO).as_posix(), number, code))
    return marks


def test_broken_examples_flag_exactly_the_marked_lines(monkeypatch):
    monkeypatch.chdir(REPO)
    # The examples mark RC104 where it costs: from torch 2.12 on (the installed torch is 2.9).
    result = lint_paths(["examples/lint"], Config(base=REPO, torch_version="2.12"))
    assert result.errors == []
    found = {(f.path, f.line, f.code) for f in result.findings}
    assert found == expected_marks()
    assert len(found) >= 9  # one per rule at least, plus the seed's doubled counter line


def test_fixed_examples_are_silent(monkeypatch):
    monkeypatch.chdir(REPO)
    fixed = [p.relative_to(REPO).as_posix() for p in EXAMPLES.rglob("*_fixed*") ]
    result = lint_paths(fixed, Config(base=REPO))
    assert result.files_checked >= 8
    assert result.findings == []


def test_cross_file_chain_is_printed(run_cli, monkeypatch):
    monkeypatch.chdir(REPO)
    result = run_cli("lint", "examples/lint/cross_file", "--format", "json")
    assert result.exit_code == 1
    (finding,) = json.loads(result.output)
    assert finding["path"] == "examples/lint/cross_file/metrics.py"
    assert (finding["line"], finding["code"]) == (3, "RC001")
    assert finding["chain"] == [
        "train_step (examples/lint/cross_file/train.py:14)",
        "compute_loss (examples/lint/cross_file/losses.py:6)",
        "log_accuracy (examples/lint/cross_file/metrics.py:1)",
    ]
    assert finding["region"] == "passed to a compile call"
    assert "train_step (examples/lint/cross_file/train.py:14) → compute_loss" in finding["message"]
    assert finding["message"].endswith("→ .item() at examples/lint/cross_file/metrics.py:3)")
