"""Whole-program policy rules (RC1xx): which code is "XLA code", and cross-file conditions."""

from __future__ import annotations

import textwrap

import pytest

from detective.lint.engine import lint_sources
from detective.lint.rule import all_rules


def lint(files: dict[str, str], select=("RC1",)):
    return lint_sources({k: textwrap.dedent(v) for k, v in files.items()}, select=list(select))


def where(findings):
    return sorted((f.path, f.line, f.code) for f in findings)


ADAM = """
import torch

def build(model):
    return torch.optim.AdamW(model.parameters())
"""


def test_every_rule_declares_where_it_applies():
    kinds = {rule.code: rule.applies_to for rule in all_rules()}
    # RC006 and RC007 decide their loop themselves (a loop over a loader passed in is no
    # region; a loop that reads a value every iteration syncs): XLA code only
    assert {kinds[c] for c in kinds if c.startswith("RC0") and c not in ("RC006", "RC007")} == {"region"}
    assert kinds["RC006"] == kinds["RC007"] == "xla-code"
    assert [c for c in kinds if c.startswith("RC1")] == [f"RC10{i}" for i in range(1, 10)] + ["RC110"]
    assert kinds["RC108"] == "any" and kinds["RC109"] == "region" and kinds["RC110"] == "xla-code"
    assert {kinds[f"RC10{i}"] for i in range(1, 8)} == {"xla-code"}


def test_function_called_from_xla_code_is_xla_code_a_merely_imported_one_is_not():
    files = {
        "pkg/__init__.py": "",
        "pkg/optim.py": ADAM,
        "pkg/other.py": ADAM,  # imported by the XLA script, never called from it
        "train.py": "import torch_xla\nfrom pkg.optim import build\nimport pkg.other\n\nopt = build(None)\n",
        "tools/other.py": ADAM,  # nobody that imports torch_xla reaches it
    }
    assert where(lint(files)) == [("pkg/optim.py", 5, "RC104")]
    finding = lint(files)[0]
    assert finding.region == "XLA code"


def test_a_file_that_imports_torch_xla_only_optionally_is_xla_code_where_it_uses_it():
    # A library with XLA among its backends (accelerate, transformers): the import sits under
    # an availability test, so only scopes that call torch_xla, and what they call, are XLA code.
    library = textwrap.dedent("""
        import torch

        if torch.cuda.is_available() is False:
            import torch_xla.core.xla_model as xm

        def build(model):
            return torch.optim.AdamW(model.parameters())

        def compile_on_gpu(model):
            return torch.compile(model)                # not reached from XLA code

        def prepare_tpu(model):
            model = model.to(xm.xla_device())
            return build(model), torch.compile(model)  # both reached from a scope using torch_xla
    """)
    found = where(lint({"lib.py": library}))
    assert ("lib.py", 8, "RC104") in found and ("lib.py", 15, "RC103") in found
    assert ("lib.py", 11, "RC103") not in found
    # The same import at the top of the file: the whole file is XLA code.
    top = library.replace("if torch.cuda.is_available() is False:\n    import", "import")
    assert ("lib.py", 10, "RC103") in where(lint({"lib.py": top}))  # a line up: no `if`


def test_a_test_module_reached_only_by_a_same_named_method_guess_keeps_its_own_scopes_out():
    # A library imported by an XLA script calls `self.thing.state_dict()` (type unknown):
    # the call graph may guess any project method of that name, a unit test's included.
    # Only the guessed method is then XLA code, not the test that builds an optimizer.
    files = {
        "lib/__init__.py": "",
        "lib/api.py": "class LLM:\n    def state_dict(self):\n        return self.thing.state_dict()\n",
        "xla_gen.py": "import torch_xla\nfrom lib.api import LLM\n\ndef main():\n    LLM().state_dict()\n",
        "tests/test_fsdp.py": (
            "import torch\n\nclass Stateful:\n    def state_dict(self):\n        return {}\n\n"
            "class Other:\n    def state_dict(self):\n        return {}\n\n"
            "def test_load(model):\n    opt = torch.optim.Adam(model.parameters())\n"),
    }
    assert lint(files) == []


def test_module_reached_only_through_a_call_chain_is_xla_code():
    files = {
        "pkg/__init__.py": "",
        "pkg/optim.py": ADAM,
        "pkg/setup.py": "from pkg import optim\n\ndef make(model):\n    return optim.build(model)\n",
        "main.py": "import torch_xla\nimport pkg.setup as s\n\ndef main(m):\n    return s.make(m)\n",
    }
    assert where(lint(files)) == [("pkg/optim.py", 5, "RC104")]


def test_without_any_torch_xla_import_policies_are_silent():
    files = {"a.py": ADAM, "b.py": "import torch\nmodel = torch.compile(torch.nn.Linear(2, 2))\n"}
    assert lint(files) == []


def test_env_bf16_applies_even_outside_xla_code():
    files = {"launch.py": "import os\nos.environ['XLA_USE_BF16'] = '1'\n"}
    assert where(lint(files)) == [("launch.py", 2, "RC108")]
    assert lint(files)[0].fix == ()  # explained, never fixed


def test_spmd_after_a_helper_in_another_file_that_creates_xla_tensors():
    helpers = """
    import torch
    import torch_xla.core.xla_model as xm

    def load_weights():
        return torch.ones(4, device=xm.xla_device())

    def read_config():
        return {"lr": 1e-3}
    """
    main = """
    import torch_xla.runtime as xr
    from helpers import load_weights, read_config

    def first():
        cfg = read_config()
        xr.use_spmd()

    def second():
        w = load_weights()
        xr.use_spmd()
    """
    assert where(lint({"helpers.py": helpers, "main.py": main})) == [("main.py", 11, "RC106")]


def test_spmd_helper_that_creates_tensors_through_another_call():
    helpers = """
    import torch
    import torch_xla

    def _alloc():
        return torch.zeros(2, device=torch_xla.device())

    def setup():
        return _alloc()
    """
    main = "import torch_xla.runtime as xr\nfrom helpers import setup\n\nsetup()\nxr.use_spmd()\n"
    assert where(lint({"helpers.py": textwrap.dedent(helpers), "main.py": main})) == [("main.py", 5, "RC106")]


@pytest.mark.parametrize("loop, expected", [
    # flat accumulation, sync per micro-step, zero_grad default
    ("""
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
        torch_xla.sync()
    """, {(10, "RC101"), (11, "RC102")}),
    # the step under a non-accumulation condition: not accumulation, nothing to say
    ("""
    for i, x in enumerate(loader):
        model(x).sum().backward()
        if use_scaler:
            scaler.step(opt)
        else:
            opt.step()
        opt.zero_grad()
        torch_xla.sync()
    """, set()),
    # accumulation driven by a named flag, sync inside the boundary: only the zero_grad
    ("""
    for x in loader:
        model(x).sum().backward()
        if is_accumulation_boundary:
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch_xla.sync()
    """, {(10, "RC101")}),
    # a with torch_xla.step() per micro-step of an inner accumulation loop
    ("""
    for cycle in cycles:
        for x in cycle:
            with torch_xla.step():
                model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    """, {(8, "RC102")}),
])
def test_accumulation_loops(loop, expected):
    src = "import torch\nimport torch_xla\n\ndef train(model, opt, loader, accum, cycles, scaler, use_scaler, " \
          "is_accumulation_boundary):\n" + textwrap.indent(textwrap.dedent(loop), "    ")
    found = {(f.line, f.code) for f in lint_sources({"t.py": src}, select=["RC101", "RC102"])}
    assert found == expected, src


def test_flags_after_import_respects_order_and_early_setup_calls():
    src = """
    import os

    def early():
        os.environ["PJRT_DEVICE"] = "CPU"

    def late():
        os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/x"

    os.environ["PT_XLA_DEBUG_LEVEL"] = "1"
    early()
    import torch_xla
    os.environ["LIBTPU_INIT_ARGS"] = ""
    os.environ["HOME"] = "/root"
    late()
    """
    assert where(lint({"run.py": src})) == [("run.py", 8, "RC105"), ("run.py", 13, "RC105")]


def test_local_metric_read_then_reduced():
    src = """
    import torch_xla.core.xla_model as xm

    def log(loss, acc):
        value = loss.item()
        host_acc = acc.cpu()
        total = xm.all_reduce(xm.REDUCE_SUM, [loss])
        return xm.mesh_reduce("acc", acc.item(), sum)
    """
    # loss is read then all_reduce'd; acc is read (.cpu()) but reduced only as a host value.
    assert where(lint({"m.py": src})) == [("m.py", 5, "RC107")]


def test_python_constant_slice_only_in_traced_code():
    src = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.seen = 0

        def forward(self, x, lengths_list):
            self.seen += 1
            a = x[:, : self.seen]
            n = len(lengths_list)
            return a, torch.zeros(n)

    class Plain:
        def __init__(self):
            self.seen = 0

        def grow(self, x):
            self.seen += 1
            return x[: self.seen]
    """
    assert where(lint({"n.py": src}, select=["RC109"])) == [("n.py", 11, "RC109"), ("n.py", 13, "RC109")]


def test_spmd_after_calls_that_cannot_reach_project_code_is_silent():
    # The only call before use_spmd is a method of a parameter: nothing in the project.
    src = """
    import torch_xla.runtime as xr

    def shard(module):
        first = next(module.parameters())
        xr.use_spmd()
        return first
    """
    assert lint({"s.py": src}) == []
