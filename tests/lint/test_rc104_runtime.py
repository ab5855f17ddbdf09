"""RC104 by torch version, like Ruff's target-version: `info` below torch 2.12, a warning from
2.12 on or when the version is unknown. The version is `torch-version` in the config, else the
installed torch's (metadata, never imported). The runtime fact the threshold rests on (AdamW
with capturable=False recompiles nothing per step on the installed torch_xla) is measured for
real, so an upgrade that brings the recompile back fails here."""

from __future__ import annotations

import json

import pytest
from helpers import target_costs

from detective.lint.config import Config
from detective.lint.engine import findings_for, summarise_sources
from detective.lint.environment import Environment
from detective.lint.rule import expand_selectors


OPTIM = """\
import torch
import torch_xla

model = torch.nn.Linear(4, 4).to(torch_xla.device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
"""


def rc104(run_cli, *args) -> tuple[str, str]:
    result = run_cli("lint", "--format", "json", "--min-severity", "info", *args)
    assert result.exit_code in (0, 1), result.output
    (finding,) = [f for f in json.loads(result.stdout) if f["code"] == "RC104"]
    return finding["severity"], finding["message"]


def test_the_installed_torch_decides(write, monkeypatch, run_cli):
    installed = Environment().installed_version("torch")
    assert installed == "2.9"  # this project pins torch 2.9.0
    monkeypatch.chdir(write({"optim.py": OPTIM}))
    severity, message = rc104(run_cli, "optim.py")
    assert severity == "info"
    assert "recorded from torch 2.12 on; this project runs torch 2.9, installed; on torch 2.9 / torch_xla " \
        "2.9 (PJRT CPU) AdamW with capturable=False measured 2 programs over 20 steps" in message


def test_the_configured_version_overrides_and_the_cache_follows(write, monkeypatch, run_cli):
    root = write({"optim.py": OPTIM, "pyproject.toml": '[tool.detective]\ntorch-version = "2.12"\n'})
    monkeypatch.chdir(root)
    assert rc104(run_cli, ".")[0] == "warning"
    (root / "pyproject.toml").write_text('[tool.detective]\ntorch-version = "2.11.1"\n')
    severity, message = rc104(run_cli, ".")  # a warm run with another version
    assert severity == "info" and "this project runs torch 2.11, configured" in message
    (root / "pyproject.toml").write_text('[tool.detective]\ntorch-version = "3.0"\n')
    assert rc104(run_cli, ".")[0] == "warning"


def test_an_unknown_version_stays_a_warning_and_says_so(tmp_path):
    """No torch on the search path and none configured."""
    summaries = summarise_sources({"optim.py": OPTIM})
    (finding,) = findings_for(summaries, Config(), expand_selectors(["RC104"]),
                              environment=Environment(search_path=[str(tmp_path)]))
    assert finding.severity == "warning"
    assert "the torch version is unknown: torch is not installed here and [tool.detective] sets no " \
        "torch-version" in finding.message


@pytest.mark.parametrize("value", ['2.12', '"2"', '"two"', '"2.12-rc"', '["2.12"]'])
def test_a_bad_torch_version_is_a_usage_error(write, monkeypatch, run_cli, value):
    root = write({"optim.py": OPTIM, "pyproject.toml": f"[tool.detective]\ntorch-version = {value}\n"})
    monkeypatch.chdir(root)
    result = run_cli("lint", "optim.py")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "pyproject.toml: [tool.detective] torch-version must be a quoted version " \
        'like "2.12"' in errors[0], result.output


@pytest.mark.slow
def test_adamw_without_capturable_recompiles_nothing_per_step_on_the_installed_torch_xla(tmp_path):
    """benchmarks/target_costs.py --only adamw, run for real (6 steps, a sync each). If this fails
    after a torch upgrade, the recompile is back on this version: lower RC104's threshold."""
    adamw = target_costs(tmp_path, "--only", "adamw", "--steps", "6")["adamw"]
    for capturable in ("False", "True"):
        per_step = adamw[capturable]["compiles_per_step"]
        assert len(per_step) == 6 and sum(per_step[:2]) >= 1, per_step  # the first steps compile
        assert per_step[2:] == [0, 0, 0, 0], (capturable, per_step)  # and no later one does
        assert adamw[capturable]["transfers"] == 0, adamw[capturable]
