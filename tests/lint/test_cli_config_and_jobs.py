"""`detective lint --config` and `-j`, as a user runs them."""

from __future__ import annotations

import json

from helpers import EXAMPLES, detective

from detective.lint.engine import PARALLEL_THRESHOLD


def _codes(proc) -> list[str]:
    return sorted({f["code"] for f in json.loads(proc.stdout)})


def test_config_names_a_pyproject_elsewhere(tmp_path):
    config = tmp_path / "settings" / "pyproject.toml"
    config.parent.mkdir()
    config.write_text('[tool.detective]\nselect = ["RC001"]\n')
    target = EXAMPLES / "lint"
    everything = detective("lint", "--no-cache", "--format", "json", target, cwd=tmp_path)
    only = detective("lint", "--no-cache", "--format", "json", "--config", config, target, cwd=tmp_path)
    assert everything.returncode == only.returncode == 1
    assert len(_codes(everything)) > 1 and _codes(only) == ["RC001"]
    broken = tmp_path / "broken.toml"
    broken.write_text("[tool.detective]\nselect = 3\n")
    bad = detective("lint", "--no-cache", "--config", broken, target, cwd=tmp_path)
    assert bad.returncode == 2 and "broken.toml" in bad.stderr
    absent = detective("lint", "--no-cache", "--config", tmp_path / "absent.toml", target, cwd=tmp_path)
    assert absent.returncode == 2


def test_jobs_give_the_same_findings_as_one_process(tmp_path):
    target = EXAMPLES  # enough files for a process pool
    assert len(list(target.rglob("*.py"))) >= PARALLEL_THRESHOLD
    one = detective("lint", "--no-cache", "--format", "json", "-j", "1", target, cwd=tmp_path)
    two = detective("lint", "--no-cache", "--format", "json", "--jobs", "2", target, cwd=tmp_path)
    assert one.returncode == two.returncode == 1
    assert json.loads(one.stdout) == json.loads(two.stdout) and json.loads(one.stdout)
    zero = detective("lint", "--no-cache", "-j", "0", target, cwd=tmp_path)
    assert zero.returncode == 2 and "-j" in zero.stderr
