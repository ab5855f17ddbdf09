"""`detective lint` / `detective rules` as a user runs them: formats, exit codes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

BROKEN = """\
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.item()
        return x
"""
CLEAN = "import torch\n\ndef f(x):\n    return x + 1\n"


def test_text_output_exit_code_and_summary(run_cli, write):
    root = write({"net.py": BROKEN})
    result = run_cli("lint", str(root / "net.py"))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].endswith("net.py:5:12: RC002 [tensor-branch] `if` on a tensor value syncs to the host "
                             "and bakes the branch into the graph")
    assert ":6:20: RC001 [host-sync]" in lines[1]
    assert lines[-1] == "Found 2 findings (1 file checked)."


def test_clean_tree_exits_zero(run_cli, write):
    root = write({"a.py": CLEAN, "pkg/__init__.py": "", "pkg/b.py": CLEAN})
    result = run_cli("lint", str(root))
    assert result.exit_code == 0
    assert result.output.strip() == "All checks passed! (3 files checked)"


def test_json_format_fields(run_cli, write):
    root = write({"net.py": BROKEN})
    result = run_cli("lint", "--format", "json", str(root))
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [d["code"] for d in data] == ["RC002", "RC001"]
    assert set(data[0]) >= {"path", "line", "column", "code", "name", "message", "chain"}
    assert data[0]["chain"] == [] and data[0]["name"] == "tensor-branch"
    assert data[0]["region"] == "nn.Module.forward"


def test_select_ignore_exit_zero_statistics(run_cli, write):
    root = write({"net.py": BROKEN})
    only = json.loads(run_cli("lint", "--format", "json", "--select", "RC001", str(root)).output)
    assert [d["code"] for d in only] == ["RC001"]
    rest = json.loads(run_cli("lint", "--format", "json", "--ignore", "RC001,RC003", str(root)).output)
    assert [d["code"] for d in rest] == ["RC002"]
    assert run_cli("lint", "--exit-zero", str(root)).exit_code == 0
    stats = run_cli("lint", "--statistics", str(root))
    assert stats.output.splitlines()[:2] == ["    1  RC001  host-sync", "    1  RC002  tensor-branch"]


def test_unknown_selector_is_a_usage_error(run_cli, write):
    root = write({"net.py": BROKEN})
    result = run_cli("lint", "--select", "RC9", str(root))
    assert result.exit_code == 2
    assert "unknown rule selector 'RC9'" in result.output


def test_suppression_comments(run_cli, write):
    source = BROKEN.replace("if x.sum() > 0:", "if x.sum() > 0:  # noqa: RC002").replace(
        "return x.item()", "return x.item()  # detective: ignore[RC001]"
    )
    root = write({"a.py": source, "b.py": BROKEN.replace("> 0:", "> 0:  # detective: ignore"),
                  "c.py": BROKEN.replace("> 0:", "> 0:  # noqa: RC001")})
    data = json.loads(run_cli("lint", "--format", "json", str(root)).output)
    assert sorted((d["path"].rsplit("/", 1)[-1], d["code"]) for d in data) == [
        ("b.py", "RC001"), ("c.py", "RC001"), ("c.py", "RC002")]


def test_pyproject_config(run_cli, write):
    root = write({
        "pyproject.toml": """
            [tool.detective]
            ignore = ["RC002"]
            exclude = ["generated/*"]
            per-file-ignores = {"legacy/*" = ["RC001"]}
            roots = ["my_step"]
        """,
        "net.py": BROKEN,
        "generated/g.py": BROKEN,
        "legacy/old.py": BROKEN,
        "steps.py": "def my_step(x):\n    return x.tolist()\n",
    })
    result = run_cli("lint", "--format", "json", str(root))
    found = sorted((d["path"].split(str(root) + "/")[-1], d["code"]) for d in json.loads(result.output))
    assert found == [("net.py", "RC001"), ("steps.py", "RC001")]


def test_bad_config_is_a_usage_error(run_cli, write):
    root = write({"pyproject.toml": "[tool.detective]\nselekt = ['RC001']\n", "a.py": CLEAN})
    result = run_cli("lint", str(root))
    assert result.exit_code == 2
    assert "unknown option(s): selekt" in result.output


def test_bad_files_are_reported_and_the_rest_still_linted(run_cli, write):
    root = write({
        "broken_syntax.py": "def f(:\n    pass\n",
        "latin1.py": "# caf\xe9\nx = 1\n".encode("latin-1"),
        "binary.py": b"\x00\x01\x02ELF",
        "net.py": BROKEN,
    })
    result = run_cli("lint", str(root), str(root / "missing.py"))
    assert result.exit_code == 1  # findings in net.py still count
    errors = [line for line in result.stderr.splitlines()]
    assert any(line.endswith("missing.py: no such file or directory") for line in errors)
    assert any("broken_syntax.py: cannot parse:" in line and "line 1" in line for line in errors)
    assert any("latin1.py: cannot read: not UTF-8 text" in line for line in errors)
    assert any("binary.py: cannot read: binary file" in line for line in errors)
    assert len(errors) == 4
    assert "Found 2 findings (1 file checked, 4 could not be linted)." in result.stdout


def test_nothing_lintable_exits_two(run_cli, write):
    root = write({"bad.py": "def (:\n"})
    assert run_cli("lint", str(root / "bad.py")).exit_code == 2
    assert run_cli("lint", str(root / "nope")).exit_code == 2


def test_rules_listing_and_docs(run_cli):
    listing = run_cli("rules")
    assert listing.exit_code == 0
    codes = [line.split()[0] for line in listing.output.splitlines()]
    assert codes[:5] == ["RC001", "RC002", "RC003", "RC004", "RC005"]
    doc = run_cli("rules", "RC003")
    assert doc.exit_code == 0 and "register_buffer" in doc.output and "## Use instead" in doc.output
    assert run_cli("rules", "python-counter").output == doc.output
    assert run_cli("rules", "RC999").exit_code == 2


def test_python_dash_m_entry_point(write):
    root = write({"net.py": BROKEN})
    proc = subprocess.run([sys.executable, "-m", "detective", "lint", str(root)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "RC001 [host-sync]" in proc.stdout


def test_linter_does_not_import_torch(write):
    root = write({"net.py": BROKEN})
    code = ("import sys; from detective.lint.engine import lint_paths; from detective.lint.config import Config;"
            f"r = lint_paths([{str(root)!r}], Config()); assert r.findings;"
            "bad = [m for m in ('torch', 'pandas', 'torch_xla') if m in sys.modules]; print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
