"""Base classes resolved through the project and the installed environment, the regions
issue 9 names (autograd.Function, hooks, StepTrace) and the code that is not a region
(step closures, reads right after the sync, XLA-unreachable branches, one-time set-up)."""

from __future__ import annotations

import textwrap
import time

from detective.lint.config import Config
from detective.lint.engine import findings_for, lint_sources, summarise_sources
from detective.lint.environment import Environment
from detective.lint.rule import expand_selectors


def lint(files, env_path=None, **config):
    sources = {k: textwrap.dedent(v) for k, v in files.items()}
    cfg = Config(**config)
    environment = Environment(search_path=[str(env_path)]) if env_path else None
    found = findings_for(summarise_sources(sources, cfg), cfg, expand_selectors(["ALL"]),
                         environment=environment)
    return sorted((f.path, f.line, f.code) for f in found)


def write_package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


HEAD = """
    from fw.layers import BaseLayer

    class Head(BaseLayer):
        def forward(self, x):
            return x.sum().item()
    """


def test_base_from_an_installed_package_is_followed_to_nn_module(tmp_path):
    write_package(tmp_path, {
        "fw/__init__.py": "from .core import *\n",
        "fw/core.py": "import torch.nn as nn\n\nclass Layer(nn.Module):\n    pass\n",
        "fw/layers.py": "from fw import Layer\n\nclass BaseLayer(Layer):\n    pass\n",
    })
    assert lint({"head.py": HEAD}, env_path=tmp_path, guess_modules=False) == [("head.py", 6, "RC001")]


def test_base_that_is_not_a_module_is_not_guessed(tmp_path):
    write_package(tmp_path, {"fw/__init__.py": "", "fw/layers.py": "class BaseLayer(object):\n    pass\n"})
    assert lint({"head.py": HEAD}, env_path=tmp_path) == []


def test_unresolved_base_with_forward_is_guessed_and_the_guess_can_be_turned_off(tmp_path):
    assert lint({"head.py": HEAD}, env_path=tmp_path) == [("head.py", 6, "RC001")]
    assert lint({"head.py": HEAD}, env_path=tmp_path, guess_modules=False) == []
    star = "from fw import *\n" + textwrap.dedent(HEAD).split("\n", 2)[2]
    assert lint({"head.py": star}, env_path=tmp_path) == [("head.py", 5, "RC001")]


def test_base_resolved_through_another_project_file():
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": "import torch\n\nclass BaseLayer(torch.nn.Module):\n    pass\n",
        "pkg/head.py": HEAD.replace("fw.layers", "pkg.base"),
    }
    assert lint(files, guess_modules=False) == [("pkg/head.py", 6, "RC001")]


def test_a_base_re_exported_by_star_imports_resolves_and_star_cycles_end():
    files = {
        "pkg/__init__.py": "from .layers import *\nfrom .other import *\n",
        "pkg/layers.py": "import torch\n\nclass BaseLayer(torch.nn.Module):\n    pass\n",
        "pkg/other.py": "from pkg import *\nfrom pkg.more import *\n",
        "pkg/more.py": "from pkg.other import *\nfrom pkg import *\n",
        "pkg/head.py": HEAD.replace("fw.layers", "pkg"),
    }
    assert lint(files, guess_modules=False) == [("pkg/head.py", 6, "RC001")]
    started = time.perf_counter()
    missing = {**files, "pkg/head.py": HEAD.replace("fw.layers", "pkg.more").replace("BaseLayer", "Missing")}
    assert lint(missing, guess_modules=False) == []  # found nowhere: no module, no hang
    assert time.perf_counter() - started < 30


def test_bad_installed_modules_fall_back_to_the_guess_without_crashing(tmp_path):
    write_package(tmp_path, {
        "broken/__init__.py": "class BaseLayer(:\n",  # does not parse
        "cyc/__init__.py": "from cyc.b import A as BaseLayer\n",
        "cyc/b.py": "from cyc.c import C\n\nclass A(C):\n    pass\n",
        "cyc/c.py": "from cyc.b import A\n\nclass C(A):\n    pass\n",
        "loop/__init__.py": "from loop import BaseLayer\n",  # re-exports itself
        "binary/__init__.py": "",
    })
    (tmp_path / "binary" / "ext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\0\0")
    started = time.perf_counter()
    for module in ("broken", "cyc", "loop", "binary.ext", "torch._C"):
        source = HEAD.replace("fw.layers", module)
        assert lint({"head.py": source}, env_path=tmp_path) == [("head.py", 6, "RC001")], module
        assert lint({"head.py": source}, env_path=tmp_path, guess_modules=False) == [], module
    assert time.perf_counter() - started < 30


def test_buffer_registered_by_a_base_in_torch_is_not_a_python_counter():
    src = """
    import torch

    class Norm(torch.nn.BatchNorm1d):
        def forward(self, x):
            self.num_batches_tracked += 1
            self.calls += 1
            return x
    """
    assert lint({"n.py": src}) == [("n.py", 7, "RC003")]


def test_buffer_registered_by_a_project_base_is_not_a_python_counter():
    files = {
        "base.py": """
            import torch

            class Base(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("seen", torch.zeros(()))
        """,
        "model.py": """
            from base import Base

            class Model(Base):
                def forward(self, x):
                    self.seen += 1
                    return x
        """,
    }
    assert lint(files) == []


def test_autograd_function_forward_and_backward_are_traced_and_ctx_is_not_a_tensor():
    src = """
    import torch

    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if ctx.needs_input_grad[0]:
                ctx.save_for_backward(x)
            return x.clamp(0, 1)

        @staticmethod
        def backward(ctx, grad):
            return grad * float(grad.norm())
    """
    assert lint({"f.py": src}) == [("f.py", 13, "RC001")]


def test_hooks_and_step_trace_are_regions():
    src = """
    import torch_xla.debug.profiler as xp

    def log_hook(module, inputs, output):
        print(output.mean().item())

    def attach(model):
        model.register_forward_pre_hook(log_hook)

    def train(model, loader, step):
        for batch in loader:
            with xp.StepTrace("train"):
                loss = model(batch)
                stats = loss.tolist()
    """
    assert lint({"h.py": src}) == [("h.py", 5, "RC001"), ("h.py", 14, "RC001")]


def test_step_closures_and_reads_after_the_sync_are_not_regions():
    src = """
    import torch_xla
    import torch_xla.core.xla_model as xm

    def train(model, loader):
        for step, batch in enumerate(loader):
            loss = model(batch)

            def report():
                print(loss.item())

            xm.add_step_closure(report)
            xm.add_step_closure(lambda: print(loss.item()))
            if step % 10 == 0:
                torch_xla.sync()
                print(loss.item())
            torch_xla.sync()
    """
    assert lint({"t.py": src}) == []


def test_branches_that_never_run_on_xla_and_one_time_setup_are_silent():
    src = """
    import torch
    import torch_xla.core.xla_model as xm

    class Net(torch.nn.Module):
        def forward(self, x):
            if not xm.is_xla_tensor(x):
                print(x.sum().item())
            if x.device.type == "xla":
                y = x
            else:
                y = x[x > 0]
            if self.xla:
                pass
            elif x.sum().item() > 0:
                pass
            if torch.jit.is_scripting():
                x.tolist()
            if not self._initialized:
                self.scale = x.abs().max().item()
            return y.max().item()
    """
    assert lint({"n.py": src}) == [("n.py", 21, "RC001")]


def test_module_driving_cuda_graph_replay_is_not_a_root():
    src = """
    import torch

    class Graphed(torch.nn.Module):
        def __call__(self, x):
            self.graph.replay()
            return self.out.item()

        def forward(self, x):
            return x.sum().item()
    """
    assert lint({"g.py": src}) == [("g.py", 10, "RC001")]


def test_environment_answers_are_cached_by_content(tmp_path):
    write_package(tmp_path, {"fw/__init__.py": "import torch\n\nclass L(torch.nn.Module):\n    pass\n"})
    env = Environment(search_path=[str(tmp_path)])
    assert env.kind("fw.L") == "module" and env.dirty
    again = Environment(search_path=[str(tmp_path)], store=env.store)
    assert again.kind("fw.L") == "module" and not again.dirty
    (tmp_path / "fw" / "__init__.py").write_text("class L:\n    pass\n")
    changed = Environment(search_path=[str(tmp_path)], store=env.store)
    assert changed.kind("fw.L") == "other" and changed.dirty


def test_lint_sources_uses_the_installed_environment():
    src = """
    from torch.nn.parallel import DistributedDataParallel

    class Wrapped(DistributedDataParallel):
        def forward(self, x):
            return x.sum().item()
    """
    assert [(f.line, f.code) for f in lint_sources({"w.py": textwrap.dedent(src)})] == [(6, "RC001")]


def test_return_summaries_across_files_decide_helper_results():
    files = {
        "pkg/__init__.py": "",
        "pkg/util.py": """
            import torch
            import torch.nn.functional as F

            def is_padded(m):
                return (m == 0).any()

            def ready(n, k):
                return n == k

            def pad_to_multiple(x, k):
                if x.size(0) % k == 0:
                    return x, 0
                return F.pad(x, (0, 1)), 1
        """,
        "pkg/model.py": """
            import numpy as np
            import torch
            from pkg.util import is_padded, ready, pad_to_multiple

            class Net(torch.nn.Module):
                def forward(self, x, mask):
                    if is_padded(mask):
                        x = x * mask
                    if ready(3, 4):
                        x = x + 1
                    x, pad = pad_to_multiple(x, 8)
                    if pad > 0:
                        x = x[:-1]
                    table = np.arange(4)
                    return x * table.sum().item()
        """,
    }
    assert lint(files) == [("pkg/model.py", 8, "RC002")]


def test_module_classes_of_installed_packages_are_cached_on_disk(tmp_path, monkeypatch):
    from detective.lint.engine import lint_paths

    (tmp_path / "pyproject.toml").write_text("[tool.detective]\nguess-modules = false\n")
    # torch_xla's FSDP wrapper: an nn.Module only its source says so (never imported here)
    (tmp_path / "m.py").write_text(textwrap.dedent(HEAD.replace("fw.layers", "torch_xla.distributed.fsdp")
                                                   .replace("BaseLayer", "XlaFullyShardedDataParallel")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path / "cache"))
    from detective.lint.config import load_config

    result = lint_paths(["m.py"], load_config(start=tmp_path), use_cache=True)
    assert [(f.line, f.code) for f in result.findings] == [(6, "RC001")]
    assert (tmp_path / "cache" / "environment.pickle").is_file()


CONFIGURABLE = """
    from dataclasses import dataclass

    class Configurable:
        @dataclass
        class Config:
            def build(self):
                return self._owner(config=self)
"""
DISPATCHERS = """
    from dataclasses import dataclass
    from configurable import Configurable

    class Dispatcher(Configurable):
        @dataclass
        class Config(Configurable.Config):
            pass

        def dispatch(self, x):
            return x

    class AllToAll(Dispatcher):
        def dispatch(self, x):
            splits = x.sum(dim=1).to("cpu")    # a host sync in the MoE forward (torch_xla)
            return x, splits.tolist()          # a graph break (torch.compile)
"""
MOE = """
    from dataclasses import dataclass
    import torch
    from configurable import Configurable
    from dispatchers import Dispatcher

    class Experts(torch.nn.Module, Configurable):
        @dataclass
        class Config(Configurable.Config):
            dispatcher: Dispatcher.Config

        def __init__(self, config: Config):
            super().__init__()
            self.dispatcher = config.dispatcher.build()

        def forward(self, x):
            return self.dispatcher.dispatch(x)
"""


def test_a_component_built_from_a_config_field_reaches_its_subclasses_methods():
    # torchtitan: RoutedExperts builds its token dispatcher from a config field annotated
    # with the base's nested Config; the config may name any subclass (AllToAll...).
    found = lint({"configurable.py": CONFIGURABLE, "dispatchers.py": DISPATCHERS, "moe.py": MOE})
    # Neither backend is found, so both count: the copy syncs on torch_xla, the read of the
    # copy breaks the graph under torch.compile.
    assert found == [("dispatchers.py", 15, "RC001"), ("dispatchers.py", 16, "RC001")]
    # Built from the base class itself: the exact type, its own dispatch only.
    exact = MOE.replace("config.dispatcher.build()", "Dispatcher()")
    assert lint({"configurable.py": CONFIGURABLE, "dispatchers.py": DISPATCHERS, "moe.py": exact}) == []
