"""Which code counts as traced: roots, aliases, step loops and calls across files."""

from __future__ import annotations

import textwrap

import pytest

from detective.lint.config import Config
from detective.lint.engine import lint_sources
from detective.lint.model import ChainLink


def lint(files: dict[str, str], **kwargs):
    # Region logic is what these tests are about: the region-trigger rules (RC0xx) only.
    kwargs.setdefault("select", ["RC0"])
    return lint_sources({k: textwrap.dedent(v) for k, v in files.items()}, **kwargs)


def where(findings):
    return sorted((f.path, f.line, f.code) for f in findings)


ITEM = "    return x.sum().item()\n"


@pytest.mark.parametrize(
    "header, decorator",
    [
        ("import torch_xla as tx", "@tx.compile"),
        ("from torch_xla import compile", "@compile"),
        ("from torch_xla import compile as xla_compile", "@xla_compile()"),
        ("import torch", "@torch.compile"),
        ("import torch", "@torch.compile(fullgraph=True)"),
    ],
)
def test_compile_decorators_under_any_alias(header, decorator):
    src = f"{header}\n\n{decorator}\ndef step(x):\n{ITEM}"
    assert where(lint({"a.py": src})) == [("a.py", 5, "RC001")]


def test_function_passed_to_compile_call_and_partial():
    src = """
    import functools
    import torch
    import torch_xla

    def step(x):
        return x.item()

    def other(x, scale):
        return x.tolist()

    compiled = torch_xla.compile(step)
    fast = torch.compile(functools.partial(other, scale=2))
    """
    assert where(lint({"a.py": src})) == [("a.py", 7, "RC001"), ("a.py", 10, "RC001")]


def test_code_outside_regions_is_silent():
    src = """
    import torch

    def evaluate(model, x):
        out = model(x)
        if out.sum() > 0:
            print(out.item())

    class Dataset:
        def __getitem__(self, i):
            return torch.ones(3).tolist()
    """
    assert lint({"a.py": src}) == []


def test_module_subclass_across_files_and_self_method_calls():
    files = {
        "base.py": """
            from torch import nn

            class Block(nn.Module):
                def helper(self, x):
                    return x.item()
        """,
        "model.py": """
            from base import Block

            class Attention(Block):
                def forward(self, x):
                    return self.helper(x) + self.norm(x)

                def norm(self, x):
                    return x.cpu()

                def unused(self, x):
                    return x.numpy()
        """,
    }
    found = lint(files)
    assert where(found) == [("base.py", 6, "RC001"), ("model.py", 9, "RC001")]
    chains = {f.path: tuple(map(str, f.chain)) for f in found}
    assert chains["base.py"] == ("Attention.forward (model.py:5)", "Block.helper (base.py:5)")


def test_package_reexports_and_relative_imports():
    files = {
        "pkg/__init__.py": "from .ops import scaled\n",
        "pkg/ops.py": """
            from .inner import read

            def scaled(x):
                return read(x) * 2
        """,
        "pkg/inner.py": """
            def read(x):
                return float(x.sum())
        """,
        "train.py": """
            import torch_xla
            import pkg

            @torch_xla.compile
            def step(x):
                return pkg.scaled(x)
        """,
    }
    found = lint(files)
    assert where(found) == [("pkg/inner.py", 3, "RC001")]
    assert [link.function for link in found[0].chain] == ["step", "scaled", "read"]
    assert [link.path for link in found[0].chain] == ["train.py", "pkg/ops.py", "pkg/inner.py"]


def test_step_loop_region_ends_at_the_last_sync():
    src = """
    import torch
    import torch_xla.core.xla_model as xm

    def train(model, loader):
        for batch in loader:
            loss = model(batch["x"]).mean()
            value = loss.item()
            loss.backward()
            xm.mark_step()
            print(loss.item())
        print(loss.item())
    """
    assert where(lint({"t.py": src})) == [("t.py", 8, "RC001")]


def test_with_step_and_mpdeviceloader_bodies_are_regions():
    src = """
    import torch
    import torch_xla
    import torch_xla.distributed.parallel_loader as pl

    def a(model, loader, device):
        for batch in pl.MpDeviceLoader(loader, device):
            model(batch).mean().item()

    def b(model, loader, device):
        train_loader = pl.MpDeviceLoader(loader, device)
        for batch in train_loader:
            model(batch).cpu()

    def c(model, x):
        with torch_xla.step():
            model(x).sum().tolist()
        model(x).sum().tolist()
    """
    assert where(lint({"t.py": src})) == [("t.py", 8, "RC001"), ("t.py", 13, "RC001"), ("t.py", 17, "RC001")]


def test_loop_without_sync_is_not_a_region_but_helpers_called_in_one_are():
    src = """
    import torch_xla

    def log(x):
        return x.item()

    def train(model, data):
        for x in data:
            model(x).item()
        for x in data:
            log(model(x))
            torch_xla.sync()
    """
    found = lint({"t.py": src})
    assert where(found) == [("t.py", 5, "RC001")]
    assert found[0].chain == (ChainLink("t.py", "train [step loop]", 10), ChainLink("t.py", "log", 4))
    assert found[0].subject


def test_nested_defs_and_super_calls():
    src = """
    import torch

    class Base(torch.nn.Module):
        def forward(self, x):
            return x

        def post(self, x):
            return x.cpu()

    class Child(Base):
        def forward(self, x):
            def inner(y):
                return y.numpy()
            return super().post(inner(x))
    """
    assert where(lint({"m.py": src})) == [("m.py", 9, "RC001"), ("m.py", 14, "RC001")]


def test_submodule_attribute_calls_resolve_to_project_classes():
    src = """
    from torch import nn

    class Helper:
        def __call__(self, x):
            return x.item()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.helper = Helper()

        def forward(self, x):
            return self.helper(x)
    """
    found = lint({"m.py": src})
    assert where(found) == [("m.py", 6, "RC001")]


def test_configured_roots():
    src = """
    from mylib import step_wrapper

    @step_wrapper
    def step(x):
        return x.item()

    def manual(x):
        return x.tolist()
    """
    assert lint({"a.py": src}) == []
    config = Config(roots=["step_wrapper", "manual"])
    assert where(lint({"a.py": src}, config=config)) == [("a.py", 6, "RC001"), ("a.py", 9, "RC001")]


def test_import_cycles_do_not_hang():
    files = {
        "a.py": "from b import g\nimport torch_xla\n\n@torch_xla.compile\ndef f(x):\n    return g(x)\n",
        "b.py": "from a import f\n\ndef g(x):\n    f(x)\n    return x.item()\n",
    }
    assert where(lint(files)) == [("b.py", 5, "RC001")]


def test_evidence_does_not_mistake_module_methods_or_predicates_for_tensors():
    # Both were false positives in torch/nn/parallel/data_parallel.py and activation.py.
    src = """
    import torch

    class DP(torch.nn.Module):
        def forward(self, *inputs, **kwargs):
            inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
            if not inputs and not module_kwargs:
                inputs = ((),)
            if torch.overrides.has_torch_function(inputs):
                return None
            return inputs
    """
    assert lint({"dp.py": src}) == []


def test_a_conditional_sync_does_not_end_the_region():
    # Accumulation loops sync only every N iterations: what follows runs traced on the others.
    src = """
    import torch_xla.core.xla_model as xm

    def train(model, opt, loader):
        for step, batch in enumerate(loader):
            loss = model(batch).mean()
            loss.backward()
            if (step + 1) % 4 == 0:
                opt.step()
                xm.mark_step()
            print(loss.item())
    """
    assert where(lint({"t.py": src})) == [("t.py", 11, "RC001")]


def test_nested_functions_inside_loops_do_not_confuse_the_rules():
    # A def inside a loop inside a def inside a loop: every rule's own loop/function
    # bookkeeping must unwind in order (found on torch/distributed/pipelining).
    src = """
    import torch

    class M(torch.nn.Module):
        def forward(self, xs):
            for x in xs:
                def inner(y):
                    for z in y:
                        def deeper(w):
                            return w[: len(w)]
                    return y
                inner(x)
            return xs.item()
    """
    assert where(lint({"a.py": src}, select=["ALL"])) == [("a.py", 13, "RC001")]
