"""Golden fixtures (TorchFix style): `detective lint .` in each fixtures/lint/<case>/ must
print exactly fixtures/lint/<case>.expected. Regenerate after a reviewed change with
DETECTIVE_UPDATE_GOLDENS=1 and read the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from detective.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
CASES = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def test_there_are_fixtures():
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_golden(case, monkeypatch):
    monkeypatch.chdir(case)
    result = CliRunner().invoke(cli, ["lint", "."], catch_exceptions=False)
    transcript = f"exit {result.exit_code}\n{result.output}"
    expected = case.with_suffix(".expected")
    if os.environ.get("DETECTIVE_UPDATE_GOLDENS"):
        expected.write_text(transcript)
    assert transcript == expected.read_text()
