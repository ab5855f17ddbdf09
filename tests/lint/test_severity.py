"""Severity: "info" findings (reads of CPU tensors) are hidden by default and shown, marked as
such, in every output format with --min-severity info or min-severity = "info" in the config."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.lint.test_formats import SCHEMA

SOURCE = """\
import torch
import torch_xla


class Sampler(torch.nn.Module):
    def forward(self, x):
        idx = torch.randint(0, 10, (4,))
        n = idx.max().item()
        return x[:, :4] * n + x.sum().item()
"""


@pytest.fixture
def project(write, monkeypatch):
    root = write({"src/net.py": SOURCE, ".git/HEAD": "ref: refs/heads/main\n"})
    monkeypatch.chdir(root)
    return root


def test_default_hides_info_and_says_so(project, run_cli):
    result = run_cli("lint", "--no-cache", "src")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line.split(": ")[1].split(" ")[0] for line in lines if line.startswith("src/")] == ["RC001"]
    assert "src/net.py:9:" in result.stdout and "src/net.py:8:" not in result.stdout
    assert "1 lower-severity finding not shown (--min-severity info shows them)." in lines


def test_min_severity_info_shows_and_marks_them(project, run_cli):
    result = run_cli("lint", "--no-cache", "--min-severity", "info", "src")
    line = next(x for x in result.stdout.splitlines() if x.startswith("src/net.py:8:"))
    assert "RC001 [host-sync] (info) `.item()`" in line and "no device sync on XLA" in line
    warning = next(x for x in result.stdout.splitlines() if x.startswith("src/net.py:9:"))
    assert "(info)" not in warning  # warning lines keep their format
    assert "not shown" not in result.stdout


def test_json_sarif_and_github_carry_the_severity(project, run_cli):
    found = json.loads(run_cli("lint", "--no-cache", "--min-severity", "info", "--format", "json", "src").stdout)
    assert {(f["line"], f["severity"]) for f in found} == {(8, "info"), (9, "warning")}
    log = json.loads(run_cli("lint", "--no-cache", "--min-severity", "info", "--format", "sarif", "src").stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    levels = {(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["level"])
              for r in log["runs"][0]["results"]}
    assert levels == {(8, "note"), (9, "warning")}
    github = run_cli("lint", "--no-cache", "--min-severity", "info", "--format", "github", "src").stdout
    assert github.count("::notice file=src/net.py,line=8") == 1
    assert github.count("::warning file=src/net.py,line=9") == 1


def test_config_min_severity_and_only_info_exits_clean(write, monkeypatch, run_cli):
    root = write({
        "pyproject.toml": '[tool.detective]\nmin-severity = "info"\n',
        "net.py": SOURCE.replace(" + x.sum().item()", ""),
    })
    monkeypatch.chdir(root)
    shown = run_cli("lint", "--no-cache", "net.py")
    assert shown.exit_code == 1 and "(info)" in shown.stdout
    hidden = run_cli("lint", "--no-cache", "--min-severity", "warning", "net.py")
    assert hidden.exit_code == 0  # only an info finding, and it is not shown
    assert "All checks passed!" in hidden.stdout and "1 lower-severity finding not shown" in hidden.stdout


def test_bad_min_severity_in_config_is_a_usage_error(write, monkeypatch, run_cli):
    root = write({"pyproject.toml": '[tool.detective]\nmin-severity = "loud"\n', "net.py": SOURCE})
    monkeypatch.chdir(root)
    result = run_cli("lint", "--no-cache", "net.py")
    assert result.exit_code == 2 and "min-severity must be one of info, warning" in result.output
