"""The per-file summary cache: used when nothing changed, invalidated when anything that
matters changed, and cross-file chains always recomputed from fresh summaries."""

from __future__ import annotations

import json

import pytest

from detective.lint.config import Config
from detective.lint.engine import cache_for, lint_paths

TRAIN = """\
import torch_xla
from helpers import helper


@torch_xla.compile
def step(x):
    return helper(x)
"""
HELPER_SYNCS = "def helper(x):\n    return x.item()\n"
HELPER_CLEAN = "def helper(x):\n    return x * 2\n"


@pytest.fixture
def tree(write, monkeypatch, tmp_path):
    root = write({"train.py": TRAIN, "helpers.py": HELPER_SYNCS, "other.py": "x = 1\n"})
    monkeypatch.chdir(root)
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path / "cache"))
    return root


def lint_cached(config=None):
    """lint_paths with the cache, returning the result and the cache's hit/miss counts."""
    from detective.lint import engine

    config = config or Config()
    seen = {}
    original = engine.cache_for

    def spy(cfg):
        seen["cache"] = original(cfg)
        return seen["cache"]

    engine.cache_for = spy
    try:
        result = lint_paths(["."], config, use_cache=True)
    finally:
        engine.cache_for = original
    return result, seen["cache"].hits, seen["cache"].misses


def test_second_run_is_served_from_the_cache_with_the_same_findings(tree, tmp_path):
    first, hits, misses = lint_cached()
    assert (hits, misses) == (0, 3)
    # Nothing changed: the whole result comes back without loading a single summary.
    second, hits, misses = lint_cached()
    assert (hits, misses) == (0, 0)
    assert second.findings == first.findings and len(first.findings) == 1
    assert second.findings[0].chain == first.findings[0].chain != ()  # step -> helper
    # Without the result file, the per-file summaries answer.
    for path in (tmp_path / "cache").glob("results-*.pickle"):
        path.unlink()
    third, hits, misses = lint_cached()
    assert (hits, misses) == (3, 0) and third.findings == first.findings


def test_a_changed_callee_makes_the_chain_disappear_and_reappear(tree):
    assert [f.path for f in lint_cached()[0].findings] == ["helpers.py"]
    (tree / "helpers.py").write_text(HELPER_CLEAN)
    result, hits, misses = lint_cached()
    assert result.findings == [] and (hits, misses) == (2, 1)
    (tree / "helpers.py").write_text(HELPER_SYNCS + "# changed back, and then some\n")
    result, hits, misses = lint_cached()
    assert [f.path for f in result.findings] == ["helpers.py"] and (hits, misses) == (2, 1)
    (tree / "helpers.py").write_text(HELPER_SYNCS)  # exactly the first run's tree again
    result, hits, misses = lint_cached()
    assert [f.path for f in result.findings] == ["helpers.py"] and (hits, misses) == (0, 0)


def test_a_changed_caller_in_another_file_is_seen_though_the_callee_is_cached(tree):
    lint_cached()
    (tree / "train.py").write_text(TRAIN.replace("@torch_xla.compile\n", ""))
    result, hits, misses = lint_cached()
    assert result.findings == [] and (hits, misses) == (2, 1)


def test_roots_config_and_linter_source_are_part_of_the_key(tree, monkeypatch):
    lint_cached()
    _, hits, misses = lint_cached(Config(roots=["my_step"]))
    assert (hits, misses) == (0, 3)
    from detective.lint import cache as cache_module

    monkeypatch.setattr(cache_module, "linter_fingerprint", lambda: "another build")
    _, hits, misses = lint_cached()
    assert (hits, misses) == (0, 3)


def test_select_and_ignore_do_not_invalidate_summaries(tree):
    lint_cached()
    result, hits, misses = lint_cached(Config(select=["RC1"]))
    assert (hits, misses) == (3, 0) and result.findings == []
    result, hits, misses = lint_cached(Config(select=["RC0"]))
    assert (hits, misses) == (3, 0) and [f.code for f in result.findings] == ["RC001"]
    result, hits, misses = lint_cached(Config(select=["RC0"]))
    assert (hits, misses) == (0, 0) and [f.code for f in result.findings] == ["RC001"]


def test_entries_of_deleted_files_are_dropped(tree, tmp_path):
    import pickle

    lint_cached()
    (tree / "other.py").unlink()
    (tree / "new.py").write_text("y = 2\n")
    _, hits, misses = lint_cached()
    assert (hits, misses) == (2, 1)
    (cache_file,) = (tmp_path / "cache").glob("summaries-*.pickle")
    keys = pickle.loads(cache_file.read_bytes())
    assert sorted(k.split("\0", 1)[0].rsplit("/", 1)[-1] for k in keys) == ["helpers.py", "new.py", "train.py"]


def test_a_corrupt_cache_file_is_ignored(tree, tmp_path):
    lint_cached()
    for path in (tmp_path / "cache").glob("*.pickle"):
        path.write_bytes(b"not a pickle")
    result, hits, misses = lint_cached()
    assert (hits, misses) == (0, 3) and len(result.findings) == 1


def test_cli_writes_the_cache_next_to_the_config_unless_no_cache(write, run_cli, monkeypatch):
    monkeypatch.delenv("DETECTIVE_CACHE_DIR", raising=False)
    root = write({"proj/pyproject.toml": "[tool.detective]\n", "proj/pkg/a.py": HELPER_SYNCS})
    monkeypatch.chdir(root / "proj" / "pkg")
    run_cli("lint", "--no-cache", ".")
    assert not (root / "proj" / ".detective").exists()
    run_cli("lint", ".")
    assert list((root / "proj" / ".detective" / "cache").glob("summaries-*.pickle"))
    assert (root / "proj" / ".detective" / "cache" / ".gitignore").read_text().strip().endswith("*")


def test_project_context_for_a_few_changed_files(tree, run_cli):
    # Only helpers.py is named (as pre-commit passes changed files); the chain needs train.py.
    alone = json.loads(run_cli("lint", "--format", "json", "helpers.py").stdout)
    assert alone == []
    with_project = run_cli("lint", "--format", "json", "--project", ".", "helpers.py")
    found = json.loads(with_project.stdout)
    assert [(f["path"], f["code"]) for f in found] == [("helpers.py", "RC001")]
    assert found[0]["chain"][0].startswith("step (train.py:")
    assert with_project.exit_code == 1
    # Files seen only as context are never reported on, even when they have findings.
    (tree / "train.py").write_text(TRAIN + "\nimport os\nos.environ['XLA_USE_BF16'] = '1'\n")
    found = json.loads(run_cli("lint", "--format", "json", "--project", ".", "helpers.py").stdout)
    assert {f["path"] for f in found} == {"helpers.py"}


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.py", "setup.cfg", ".git/"])
def test_a_file_named_inside_a_project_is_linted_with_the_project_as_context(tree, run_cli, marker, monkeypatch):
    # The tree above has no project marker, so helpers.py alone saw nothing (test above);
    # inside a project, the project is read as --project would read it.
    (tree / marker).mkdir() if marker.endswith("/") else (tree / marker).write_text("")
    (tree / "pkg").mkdir()
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "helpers.py").write_text(HELPER_SYNCS)
    (tree / "train.py").write_text(TRAIN.replace("from helpers", "from pkg.helpers"))
    for named in (["pkg/helpers.py"], ["pkg"]):
        found = json.loads(run_cli("lint", "--format", "json", *named).stdout)
        assert [(f["path"], f["code"]) for f in found] == [("pkg/helpers.py", "RC001")], named
        assert found[0]["chain"][0].startswith("step (train.py:")
    # A cold read of many files says so on stderr, once, and names the way out.
    from detective.lint import engine

    monkeypatch.setattr(engine, "NOTICE_FILES", 2)
    (tree / "setup.cfg").write_text("")  # a change of project markers: nothing else
    cold = run_cli("lint", "--no-cache", "--format", "json", "pkg/helpers.py")
    n = len(list(tree.rglob("*.py")))
    assert [line for line in cold.stderr.splitlines() if line.startswith("detective: reading ")] == [
        f"detective: reading {n} files of {tree.resolve()} as context for the files named "
        f"({n} not in the cache yet; --no-project lints them alone)"]
    assert "detective: reading" not in run_cli("lint", "--no-cache", "--project", ".", "pkg/helpers.py").stderr
    # A context file that cannot be read is no error of this run: only named files are.
    (tree / "broken.py").write_bytes(b"def f(:\n\xff\xfe")
    named = run_cli("lint", "--format", "json", "pkg/helpers.py")
    assert named.exit_code == 1 and "broken.py" not in named.output
    assert [f["code"] for f in json.loads(named.stdout)] == ["RC001"]
    # --no-project reads the named files only: the chain is gone.
    assert json.loads(run_cli("lint", "--format", "json", "--no-project", "pkg/helpers.py").stdout) == []
    both = run_cli("lint", "--project", ".", "--no-project", "pkg/helpers.py")
    assert both.exit_code == 2 and "--project and --no-project are exclusive" in both.output


def test_the_project_root_is_the_nearest_marker_and_never_home(tmp_path, monkeypatch):
    from detective.lint.discovery import default_project, project_root

    (tmp_path / "home" / ".git").mkdir(parents=True)
    (tmp_path / "home" / "scratch").mkdir()
    (tmp_path / "home" / "scratch" / "x.py").write_text("x = 1\n")
    (tmp_path / "home" / "repo" / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "home" / "repo" / "pyproject.toml").write_text("")
    (tmp_path / "home" / "repo" / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "home" / "repo" / "src" / "pkg" / "m.py").write_text("x = 1\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = tmp_path / "home" / "repo"
    assert project_root([str(repo / "src" / "pkg" / "m.py")]) == repo.resolve()
    assert default_project([str(repo / "src" / "pkg")]) == (str(repo.resolve()),)
    assert default_project([str(repo / "src")]) == ()          # a project directory is named itself
    assert project_root([str(tmp_path / "home" / "scratch" / "x.py")]) is None  # a dotfiles repository at ~
    # A subproject inside the project: the outer one holds both; a build script inside a
    # package (an extension's setup.py) marks no project.
    (repo / "tools" / "sub").mkdir(parents=True)
    (repo / "tools" / "sub" / "setup.py").write_text("")
    (repo / "tools" / "sub" / "t.py").write_text("x = 1\n")
    (repo / "src" / "pkg" / "ext").mkdir()
    (repo / "src" / "pkg" / "ext" / "__init__.py").write_text("")
    (repo / "src" / "pkg" / "ext" / "setup.py").write_text("")
    assert project_root([str(repo / "tools" / "sub" / "t.py")]) == (repo / "tools" / "sub").resolve()
    assert project_root([str(repo / "tools" / "sub" / "t.py"), str(repo / "src" / "pkg" / "m.py")]) == repo.resolve()
    assert project_root([str(repo / "src" / "pkg" / "ext" / "__init__.py")]) == repo.resolve()
    # Paths of two projects: none is read for both.
    assert project_root([str(repo / "src" / "pkg" / "m.py"), str(tmp_path / "home" / "scratch" / "x.py")]) is None
