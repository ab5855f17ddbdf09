"""`detective lint --fix` / `--diff`: only behaviour-keeping fixes, idempotent, always parseable."""

from __future__ import annotations

import ast
import textwrap

import hypothesmith
import libcst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detective.lint.config import Config
from detective.lint.engine import lint_paths, lint_sources
from detective.lint.fix import fix_text

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

TRAIN = """\
import torch
import torch_xla


def train(model, loader, accum):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
"""
# RC104 is a warning from torch 2.12 on (the installed torch is 2.9): these tests are about fixing.
PYPROJECT = '[tool.detective]\ntorch-version = "2.12"\n'
ON_2_12 = Config(torch_version="2.12")
FIXED = TRAIN.replace("lr=1e-3)", "lr=1e-3, capturable=True)").replace(
    "zero_grad()", "zero_grad(set_to_none=False)")


def fix_all(source: str, path: str = "t.py") -> str:
    for _ in range(4):
        fixable = [f for f in lint_sources({path: source}, ON_2_12) if f.fix]
        fixed, applied = fix_text(source, fixable)
        if not applied:
            return source
        source = fixed
    return source


def test_fix_writes_the_two_fixes_and_a_second_run_changes_nothing(run_cli, write):
    root = write({"train.py": TRAIN, "pyproject.toml": PYPROJECT})
    target = root / "train.py"
    first = run_cli("lint", "--fix", "--no-cache", str(target))
    assert target.read_text() == FIXED
    assert "Fixed 2 findings in 1 file." in first.stderr
    assert first.exit_code == 0  # nothing left
    second = run_cli("lint", "--fix", "--no-cache", str(target))
    assert target.read_text() == FIXED
    assert "Fixed" not in second.stderr and second.exit_code == 0


def test_diff_previews_without_writing(run_cli, write):
    root = write({"train.py": TRAIN, "pyproject.toml": PYPROJECT})
    target = root / "train.py"
    result = run_cli("lint", "--diff", "--no-cache", str(target))
    assert result.exit_code == 1
    assert target.read_text() == TRAIN
    assert "-            opt.zero_grad()\n+            opt.zero_grad(set_to_none=False)\n" in result.stdout
    assert "+    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)" in result.stdout
    assert result.stdout.startswith(f"--- a/{result.stdout.split('a/', 1)[1].split(chr(10))[0]}")
    clean = run_cli("lint", "--diff", "--no-cache", str(write({"ok.py": FIXED}) / "ok.py"))
    assert clean.exit_code == 0 and clean.stdout == ""
    assert run_cli("lint", "--fix", "--diff", str(target)).exit_code == 2


def test_env_bf16_is_explained_not_fixed(run_cli, write):
    source = "import os\nos.environ['XLA_USE_BF16'] = '1'\n"
    root = write({"launch.py": source})
    result = run_cli("lint", "--fix", "--no-cache", str(root / "launch.py"))
    assert (root / "launch.py").read_text() == source
    assert result.exit_code == 1 and "RC108 [env-bf16]" in result.stdout
    assert "cast the model instead" in result.stdout


def test_fix_skips_a_file_changed_since_it_was_linted(write):
    from detective.lint.fix import plan_fixes

    root = write({"train.py": TRAIN, "pyproject.toml": PYPROJECT})
    result = lint_paths([str(root / "train.py")], ON_2_12)
    (root / "train.py").write_text(TRAIN + "\n# edited meanwhile\n")
    assert plan_fixes(result.findings, result.summaries) == []


def test_fixes_survive_the_process_pool(write, monkeypatch):
    files = {f"m{i:02}.py": TRAIN for i in range(30)}
    root = write(files)
    monkeypatch.chdir(root)
    result = lint_paths(["."], ON_2_12, jobs=2)
    fixable = [f for f in result.findings if f.fix]
    assert len(fixable) == 60
    assert {f.fix_title for f in fixable} == {"add capturable=True", "use zero_grad(set_to_none=False)"}


def test_fix_keeps_bom_and_crlf(run_cli, write):
    root = write({"w.py": b"\xef\xbb\xbf" + TRAIN.replace("\n", "\r\n").encode(), "pyproject.toml": PYPROJECT})
    run_cli("lint", "--fix", "--no-cache", str(root / "w.py"))
    raw = (root / "w.py").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    assert raw[3:].decode() == FIXED.replace("\n", "\r\n")


# -------------------------------------------------------------------- properties
ZERO_GRADS = ["opt.zero_grad()", "opt.zero_grad(set_to_none=True)", "opt.zero_grad(True)",
              "opt.zero_grad(set_to_none=False)", "model.zero_grad( )", "opt.zero_grad(set_to_none = True)"]
OPTIMIZERS = [
    "torch.optim.AdamW(model.parameters())",
    "torch.optim.Adam(model.parameters(), lr=1e-3)",
    "torch.optim.AdamW(\n        model.parameters(),\n        lr=1e-3,\n    )",
    "torch.optim.AdamW(\n        model.parameters(), lr=1e-3\n    )",
    "torch.optim.AdamW(model.parameters(), capturable=True)",
    "torch.optim.AdamW(model.parameters(), capturable=False)",
    "torch.optim.AdamW(model.parameters(), **kwargs)",
    "torch.optim.SGD(model.parameters(), lr=0.1)",
    "AdamW([p for p in model.parameters()],  weight_decay=0.1 ,)",
]


@st.composite
def accumulation_program(draw):
    optimizer = draw(st.sampled_from(OPTIMIZERS))
    zero = draw(st.sampled_from(ZERO_GRADS))
    inside_if = draw(st.booleans())
    extra = draw(st.lists(st.sampled_from(["print(i)", "torch_xla.sync()", "x = x * 2", zero]), max_size=3))
    nested = draw(st.booleans())
    body = ["model(x).sum().backward()"]
    step = ["opt.step()", zero]
    if nested:
        loop = ("for cycle in loader:\n        for x in cycle:\n            model(x).sum().backward()\n"
                + textwrap.indent("\n".join(step + extra), " " * 8))
    else:
        tail = textwrap.indent("\n".join(step), "    ") if inside_if else "\n".join(step)
        loop = ("for i, x in enumerate(loader):\n"
                + textwrap.indent("\n".join(body + (["if (i + 1) % accum == 0:", tail] if inside_if else [tail])
                                            + extra), " " * 8))
    return ("import torch\nimport torch_xla\nfrom torch.optim import AdamW\n\n\n"
            "def train(model, loader, accum, kwargs):\n"
            f"    opt = {optimizer}\n    {loop}\n")


@SETTINGS
@given(accumulation_program())
def test_fix_result_parses_is_idempotent_and_removes_every_fixable_finding(source):
    once = fix_all(source)
    ast.parse(once)
    libcst.parse_module(once)
    assert [f for f in lint_sources({"t.py": once}) if f.fix] == []
    assert fix_all(once) == once
    # Fixes only ever add `capturable=True` or turn set_to_none to False: nothing else moves.
    before = {(f.code, f.message) for f in lint_sources({"t.py": source}) if not f.fix}
    after = {(f.code, f.message) for f in lint_sources({"t.py": once})}
    assert before <= after
    assert _shape(once) == _shape(source)


def _shape(source: str) -> str:
    """The AST with the only two things a fix may touch erased: zero_grad's arguments and
    a `capturable=True` keyword. Everything else must be identical after fixing."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad":
                node.args, node.keywords = [], []
            node.keywords = [k for k in node.keywords if not (
                k.arg == "capturable" and isinstance(k.value, ast.Constant) and k.value.value is True)]
    return ast.dump(tree)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node())
def test_fix_on_arbitrary_python_is_parseable_and_idempotent(source):
    source = "import torch_xla\n" + source
    once = fix_all(source, "gen.py")
    libcst.parse_module(once)
    assert fix_all(once, "gen.py") == once


def test_fix_after_runs_served_from_the_cache(run_cli, write):
    root = write({"train.py": TRAIN, "pyproject.toml": PYPROJECT})
    target = root / "train.py"
    for _ in range(2):  # the second run is answered from the result cache
        assert run_cli("lint", str(target)).exit_code == 1
    result = run_cli("lint", "--fix", str(target))
    assert target.read_text() == FIXED and "Fixed 2 findings in 1 file." in result.stderr
    assert run_cli("lint", "--fix", str(target)).exit_code == 0 and target.read_text() == FIXED
