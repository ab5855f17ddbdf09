"""CI formats: SARIF 2.1.0 (validated against the official schema), GitHub, JUnit, JSON lines."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest

from detective.lint.rule import all_rules

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

SOURCE = """\
import torch
import torch_xla


class Net(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.item()
        return x


opt = torch.optim.AdamW(Net().parameters())
"""


@pytest.fixture
def project(write, monkeypatch):
    root = write({"src/net.py": SOURCE, "src/bad.py": "def (:\n",
                  # RC104 is a warning from torch 2.12 on (the installed torch is 2.9)
                  "pyproject.toml": '[tool.detective]\ntorch-version = "2.12"\n', ".git/HEAD": "ref: refs/heads/main\n"})
    monkeypatch.chdir(root)
    return root


def test_sarif_validates_and_carries_rule_metadata(project, run_cli):
    result = run_cli("lint", "--format", "sarif", "--no-cache", "src")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    rc104 = next(r for r in rules if r["id"] == "RC104")
    assert rc104["name"] == "adamw-not-capturable"
    assert rc104["shortDescription"]["text"].startswith("torch.optim.AdamW/Adam")
    assert "capturable=True" in rc104["fullDescription"]["text"] and "## " not in rc104["fullDescription"]["text"]
    assert "## Use instead" in rc104["help"]["markdown"] and "Use instead" in rc104["help"]["text"]
    results = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"],
                r["locations"][0]["physicalLocation"]["region"]["startColumn"]) for r in run["results"]}
    assert results == {("RC002", 7, 12), ("RC001", 8, 20), ("RC104", 12, 7)}
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert uris == {"src/net.py"}  # relative to the repository root, forward slashes
    for r in run["results"]:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
    fixed = [r for r in run["results"] if r["ruleId"] == "RC104"][0]
    replacement = fixed["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["insertedContent"]["text"].endswith("capturable=True)")
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes] == ["src/bad.py"]


def test_sarif_of_a_clean_tree_validates(project, run_cli):
    result = run_cli("lint", "--format", "sarif", "--no-cache", "--select", "RC005", "src/net.py")
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["runs"][0]["results"] == [] and result.exit_code == 0


def test_github_workflow_commands(project, run_cli):
    result = run_cli("lint", "--format", "github", "--no-cache", "src")
    lines = result.stdout.splitlines()
    assert lines[0] == ("::warning file=src/net.py,line=7,col=12,title=RC002 tensor-branch::"
                        "`if` on a tensor value syncs to the host and bakes the branch into the graph")
    assert len([line for line in lines if line.startswith("::warning ")]) == 3
    assert lines[-1].startswith("::error file=src/bad.py,title=detective::cannot parse:")


def test_junit_is_xml_with_one_failure_per_finding(project, run_cli):
    result = run_cli("lint", "--format", "junit", "--no-cache", "src")
    root = ElementTree.fromstring(result.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "3" and root.get("errors") == "1"
    failures = root.findall(".//failure")
    assert sorted(f.get("type") for f in failures) == ["RC001", "RC002", "RC104"]
    assert root.find(".//error").get("message").startswith("cannot parse:")


def test_json_lines_match_json(project, run_cli):
    lines = run_cli("lint", "--format", "json-lines", "--no-cache", "src").stdout.splitlines()
    full = json.loads(run_cli("lint", "--format", "json", "--no-cache", "src").stdout)
    assert [json.loads(line) for line in lines] == full and len(lines) == 3
