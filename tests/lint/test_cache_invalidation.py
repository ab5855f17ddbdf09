"""Cached base-class resolution is dropped when what it was read from changes: a base class
in another project file, or an installed package's module (edited, removed, installed,
or another sys.path). Runs go through lint_paths with the on-disk cache, whole-project and
pre-commit style (a few files with the project as context)."""

from __future__ import annotations

import importlib
import os
import textwrap

import pytest

from detective.lint.config import Config
from detective.lint.engine import lint_paths

HEAD = """\
from {module} import BaseLayer


class Head(BaseLayer):
    def forward(self, x):
        return x.sum().item()
"""
MODULE_BASE = "import torch\n\n\nclass BaseLayer(torch.nn.Module):\n    pass\n"
PLAIN_BASE = "class BaseLayer:\n    \"\"\"Not a module any more.\"\"\"\n"
NO_GUESS = Config(guess_modules=False)  # only resolution can make Head.forward traced


def found(paths=("head.py",), project=None):
    result = lint_paths(list(paths), NO_GUESS, use_cache=True, project=project)
    return [(f.path, f.line, f.code) for f in result.findings]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("project", [None, ["."]], ids=["whole-project", "pre-commit"])
def test_a_base_class_edited_in_another_file_changes_the_findings(tmp_path, cache_dir, project):
    (tmp_path / "layers.py").write_text(MODULE_BASE)
    (tmp_path / "head.py").write_text(HEAD.format(module="layers"))
    paths = ["head.py"] if project else ["."]
    assert found(paths, project) == [("head.py", 6, "RC001")]
    assert found(paths, project) == [("head.py", 6, "RC001")]  # from the whole-result cache
    (tmp_path / "layers.py").write_text(PLAIN_BASE)  # head.py itself is unchanged
    assert found(paths, project) == []
    (tmp_path / "layers.py").write_text(MODULE_BASE)
    assert found(paths, project) == [("head.py", 6, "RC001")]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An installed package ``fw`` on sys.path (never imported), and a project using it."""
    site = tmp_path / "site"
    (site / "fw").mkdir(parents=True)
    (site / "fw" / "__init__.py").write_text("")
    (site / "fw" / "layers.py").write_text(MODULE_BASE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "head.py").write_text(HEAD.format(module="fw.layers"))
    (project / "other.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(project)
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path / "cache"))
    return site


@pytest.mark.parametrize("paths, project", [(["."], None), (["head.py"], ["."])],
                         ids=["whole-project", "pre-commit"])
def test_an_edited_installed_base_changes_the_findings(site, tmp_path, paths, project):
    stub = site / "fw" / "layers.py"
    answers = tmp_path / "cache" / "environment-answers.pickle"
    assert found(paths, project) == [("head.py", 6, "RC001")]
    written = answers.stat().st_mtime_ns
    # Another file changes: no whole result, but the installed answers are reused as they are.
    (tmp_path / "project" / "other.py").write_text("x = 2\n")
    assert found(paths, project) == [("head.py", 6, "RC001")]
    assert answers.stat().st_mtime_ns == written
    stub.write_text(PLAIN_BASE)  # only the installed package changed
    assert found(paths, project) == []
    stub.write_text(MODULE_BASE + "\n# reinstalled\n")
    assert found(paths, project) == [("head.py", 6, "RC001")]


def test_an_installed_base_removed_or_installed_changes_the_findings(site, tmp_path):
    stub = site / "fw" / "layers.py"
    assert found() == [("head.py", 6, "RC001")]
    moved = site / "fw" / "layers.py.off"
    os.replace(stub, moved)  # uninstalled: the base is unknown, and guessing is off
    importlib.invalidate_caches()
    assert found() == []
    os.replace(moved, stub)
    importlib.invalidate_caches()
    assert found() == [("head.py", 6, "RC001")]


def test_another_sys_path_is_another_environment(site, tmp_path, monkeypatch):
    assert found() == [("head.py", 6, "RC001")]
    shadow = tmp_path / "shadow"  # an earlier entry on the path with its own fw.layers
    (shadow / "fw").mkdir(parents=True)
    (shadow / "fw" / "__init__.py").write_text("")
    (shadow / "fw" / "layers.py").write_text(textwrap.dedent(PLAIN_BASE))
    monkeypatch.syspath_prepend(str(shadow))
    assert found() == []


def test_a_few_changed_summaries_go_to_a_delta_file_until_many_change(tmp_path, cache_dir):
    from detective.lint import engine

    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return x\n")
    (tmp_path / "train.py").write_text("import torch_xla\nfrom m0 import f0\n\n\n@torch_xla.compile\n"
                                       "def step(x):\n    return f0(x)\n")

    def run():
        caches = []
        original = engine.cache_for
        engine.cache_for = lambda cfg: caches.append(original(cfg)) or caches[-1]
        try:
            result = lint_paths(["."], Config(), use_cache=True)
        finally:
            engine.cache_for = original
        for path in cache_dir.glob("results-*.pickle"):
            path.unlink()  # always go through the summaries
        return [(f.path, f.code) for f in result.findings], caches[0].hits, caches[0].misses

    assert run() == ([], 0, 21)
    (main,) = cache_dir.glob("summaries-*.pickle")
    written = main.stat().st_mtime_ns
    (tmp_path / "m0.py").write_text("def f0(x):\n    return x.item()\n")
    assert run() == ([("m0.py", "RC001")], 20, 1)
    assert main.stat().st_mtime_ns == written and list(cache_dir.glob("delta-*.pickle"))
    assert run() == ([("m0.py", "RC001")], 21, 0)  # the delta's entry is read back
    for i in range(1, 6):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return -x\n")
    assert run() == ([("m0.py", "RC001")], 16, 5)
    assert main.stat().st_mtime_ns != written and not list(cache_dir.glob("delta-*.pickle"))
    assert run() == ([("m0.py", "RC001")], 21, 0)


def test_a_run_answered_from_the_cache_imports_neither_libcst_nor_the_rules(tmp_path, cache_dir):
    import subprocess
    import sys

    (tmp_path / "train.py").write_text("import torch_xla\n\n\n@torch_xla.compile\ndef step(x):\n"
                                       "    return x.item()\n")
    env = {**os.environ, "DETECTIVE_CACHE_DIR": str(cache_dir)}

    def run(*extra):
        return subprocess.run([sys.executable, "-X", "importtime", "-m", "detective", "lint", *extra, "."],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    first, second = run(), run()
    assert first.returncode == second.returncode == 1 and first.stdout == second.stdout
    assert "RC001" in second.stdout
    assert " libcst" in first.stderr and " libcst" not in second.stderr
    assert "detective.rules.rc001" not in second.stderr
    for path in cache_dir.glob("rules-*.pickle"):
        path.write_bytes(b"garbage")  # unreadable: the rules are imported again
    assert run("--select", "RC0").stdout == second.stdout
    assert run("--select", "XX9").returncode == 2
