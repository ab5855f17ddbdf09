"""Golden fixtures (TorchFix style): `detective lint .` in each fixtures/lint/<case>/ must
print exactly fixtures/lint/<case>.expected. Regenerate after a reviewed change with
DETECTIVE_UPDATE_GOLDENS=1 and read the diff before committing it.

A golden cannot freeze a miss: every expected finding is marked in the fixture's source
(`# expect: RC001, RC003`), every known miss too (`# known-gap: RC005 <why>`), and
test_marks checks the findings against the marks, so regenerating a golden over a lost
finding fails, and fixing a known gap fails until its mark says expect.
"""

from __future__ import annotations

import os
import re
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


EXPECT = re.compile(r"#.*?\bexpect:\s*((?:RC\d{3}[,\s]*)+)")
KNOWN_GAP = re.compile(r"#.*?\bknown-gap:\s*((?:RC\d{3}[,\s]*)+)")


def _marks(case: Path, pattern: re.Pattern) -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(case.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for match in pattern.finditer(line):
                for code in re.findall(r"RC\d{3}", match.group(1)):
                    found.add((path.relative_to(case).as_posix(), number, code))
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_marks(case, monkeypatch):
    from detective.lint.config import load_config
    from detective.lint.engine import lint_paths

    monkeypatch.chdir(case)
    result = lint_paths(["."], load_config(start=case))
    found = {(f.path, f.line, f.code) for f in result.findings}
    expected, gaps = _marks(case, EXPECT), _marks(case, KNOWN_GAP)
    assert expected, f"{case.name}: no '# expect:' marks"
    assert found == expected, (f"missing: {sorted(expected - found)}; "
                               f"unmarked: {sorted(found - expected)}")
    assert not found & gaps, f"known gaps now found, mark them expect: {sorted(found & gaps)}"
