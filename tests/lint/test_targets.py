"""The project's targets (xla, compile): found in the sources, or set in the config; a finding
that costs only on a backend the project does not target is "info". The runtime fact it rests
on (a bool-mask fill costs on torch_xla, not under torch.compile) is measured for real."""

from __future__ import annotations

import json

import pytest
from helpers import target_costs


MODEL = """\
import torch


class Loss(torch.nn.Module):
    def forward(self, logits, labels):
        ignored = labels < 0
        labels[ignored] = 0
        picked = logits[ignored]
        return logits.gather(-1, labels[..., None]).sum() + picked.sum()
"""
COMPILES = "import torch\nfrom model import Loss\n\nloss = torch.compile(Loss())\n"


def severities(run_cli, *args) -> dict[int, tuple[str, list[str]]]:
    result = run_cli("lint", "--format", "json", "--min-severity", "info", *args)
    assert result.exit_code in (0, 1), result.output
    return {f["line"]: (f["severity"], f["costs_on"]) for f in json.loads(result.stdout) if f["code"] == "RC005"}


def test_found_targets_weigh_a_mask_fill(write, monkeypatch, run_cli):
    root = write({"model.py": MODEL, "train.py": COMPILES})
    monkeypatch.chdir(root)
    # torch.compile only: the fill (line 7) is info, the masked read (line 8) costs on both.
    assert severities(run_cli, ".") == {7: ("info", ["xla"]), 8: ("warning", ["xla", "compile"])}
    text = run_cli("lint", "--min-severity", "info", ".").stdout
    assert "costs only on torch_xla; this project targets torch.compile, found" in text

    (root / "xla_train.py").write_text("import torch_xla\nfrom model import Loss\n")
    assert severities(run_cli, ".")[7] == ("warning", ["xla"])  # xla and compile: both count

    # Neither found (code about to be ported): every target counts.
    (root / "xla_train.py").unlink()
    (root / "train.py").unlink()
    assert severities(run_cli, ".")[7] == ("warning", ["xla"])


def test_files_alone_see_only_their_own_facts(write, monkeypatch, run_cli):
    root = write({"model.py": MODEL, "train.py": COMPILES})
    monkeypatch.chdir(root)
    assert severities(run_cli, "model.py")[7] == ("warning", ["xla"])  # train.py unseen: both
    assert severities(run_cli, "--project", ".", "model.py")[7] == ("info", ["xla"])


def test_configured_targets_override_and_the_cache_follows(write, monkeypatch, run_cli):
    root = write({"model.py": MODEL, "train.py": COMPILES,
                  "pyproject.toml": '[tool.detective]\ntargets = ["xla"]\n'})
    monkeypatch.chdir(root)
    assert severities(run_cli, ".")[7] == ("warning", ["xla"])
    (root / "pyproject.toml").write_text('[tool.detective]\ntargets = ["compile"]\n')
    assert severities(run_cli, ".")[7] == ("info", ["xla"])  # a warm run with other targets
    text = run_cli("lint", "--min-severity", "info", ".").stdout
    assert "this project targets torch.compile, configured" in text


@pytest.mark.parametrize("value", ['["tpu"]', '[]', '"xla"', '[1]'])
def test_a_bad_targets_value_is_a_usage_error(write, monkeypatch, run_cli, value):
    root = write({"model.py": MODEL, "pyproject.toml": f"[tool.detective]\ntargets = {value}\n"})
    monkeypatch.chdir(root)
    result = run_cli("lint", "model.py")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "pyproject.toml: [tool.detective] targets must be a non-empty list of " \
        "'xla', 'compile'" in errors[0], result.output


@pytest.mark.slow
def test_a_mask_fill_costs_on_torch_xla_and_not_under_torch_compile(tmp_path):
    """benchmarks/target_costs.py, run for real: what the targets model assumes."""
    costs = target_costs(tmp_path, "--only", "masks")
    for fill in ("x[m] = 0", 'x[m] = float("-inf")', "x[m_rows] = 0.5"):
        assert costs["xla"][fill]["fallbacks"].get("aten::nonzero", 0) >= 1
        assert costs["xla"][fill]["transfers"] >= 1
        assert costs["compile"][fill]["one_graph"], costs["compile"][fill]
    for both in ("x[m] (read)", "x[m] += 1", ".item()"):
        assert costs["xla"][both]["transfers"] >= 1
        assert not costs["compile"][both]["one_graph"]
