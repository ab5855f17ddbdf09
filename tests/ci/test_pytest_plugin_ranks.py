"""The compile-budget marker on a test that spawns ranks (xmp.spawn, fork, 2 CPU devices):
every rank is recorded and gated, and ranks that run different graphs fail the test."""

from __future__ import annotations

import pytest

pytest.importorskip("torch_xla")
pytestmark = pytest.mark.slow

TESTS = '''
import time

import pytest
import torch
import torch_xla
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr


def train(index, diverge):
    device = torch_xla.device()
    rank = xr.global_ordinal()
    if rank != 0:  # on CPU threads, let rank 0 compile first
        while torch_xla._XLAC._xla_get_num_cached_compilation_graph() == 0:
            time.sleep(0.02)
    w = torch.ones(4, 4).to(device)
    for step in range(5):
        cols = 6 if diverge and rank == 1 and step >= 3 else 4
        w = w - 0.01 * torch.ones(2, cols).to(device).sum()
        torch_xla.sync()


@pytest.mark.compile_budget(after_step=4, max_new_programs=0)
def test_ranks_alike():
    xmp.spawn(train, args=(False,), start_method="fork")


@pytest.mark.compile_budget(after_step=4, max_new_programs=0)
def test_ranks_diverge():
    xmp.spawn(train, args=(True,), start_method="fork")
'''


def test_marker_gates_every_spawned_rank(pytester, monkeypatch):
    monkeypatch.setenv("CPU_NUM_DEVICES", "2")
    monkeypatch.setenv("XLA_ENABLE_PARAM_ALIASING", "0")
    pytester.makepyfile(test_spawned=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rA", "--basetemp",
                                           str(pytester.path / "tmp"), timeout=600)
    text = result.stdout.str()
    assert result.parseoutcomes().get("passed") == 1 and result.parseoutcomes().get("failed") == 1, text
    assert "PASSED test_spawned.py::test_ranks_alike" in text
    assert "FAILED test_spawned.py::test_ranks_diverge" in text
    assert "ranks diverged: rank 1, step 3: different graph at test_spawned.py:20 in train, vs rank 0" in text
    assert "gated 2 ranks" in text
