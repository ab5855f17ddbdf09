"""pytest plugin: compile budgets as test assertions.

    @pytest.mark.compile_budget(after_step=5, max_new_programs=0)
    def test_train_loop_is_stable():
        for _ in range(8):
            train_step()
            torch_xla.sync()

The steps a marked test runs on XLA are recorded (as ``detective.watch`` does; with torch.compile
and no torch_xla, or ``backend="dynamo"``, as ``detective.watch_compile`` does) and the
test fails with the gate's message when the budget is exceeded. Tests that want the
numbers use the ``detective_watch`` fixture: ``detective_watch.run.steps`` is the table.
Registered through the ``pytest11`` entry point as ``detective``.
"""

from __future__ import annotations

import contextlib

import pytest

MARKER = "compile_budget"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(after_step=None, max_new_programs=0, max_unique_programs=None, max_compile_seconds=None, "
        "min_cache_hit_rate=None, backend='auto', max_new_call_sites=None): fail when the steps this test runs "
        "(torch_xla, or torch.compile with backend='dynamo' or without torch_xla) recompile from after_step on "
        "(max_new_programs counts recompiles; first programs of new call sites have their own budget), compile "
        "longer, or load too few programs from the persistent cache",
    )


def _budget(marker):
    from detective.ci.gate import Budget

    kwargs = {k: v for k, v in marker.kwargs.items() if k != "backend"}
    if not marker.args and "after_step" not in kwargs:
        if kwargs.get("min_cache_hit_rate") is None and kwargs.get("max_compile_seconds") is None:
            raise pytest.UsageError(f"@pytest.mark.{MARKER}: give after_step, or a restart-time budget "
                                    "(max_compile_seconds, min_cache_hit_rate)")
        kwargs["after_step"] = None
    try:
        return Budget(*marker.args, **kwargs)
    except TypeError as exc:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: {exc}") from None


def _warmup(budget) -> int:
    return 2 if budget.after_step is None else budget.after_step


def _watch(marker, out, warmup):
    """torch_xla's watch, or the torch.compile one (``backend="dynamo"``, or when torch_xla is not
    imported by the test)."""
    import sys

    backend = (marker.kwargs.get("backend") if marker else None) or "auto"
    if backend == "auto":
        backend = "xla" if "torch_xla" in sys.modules else "dynamo"
    if backend == "dynamo":
        from detective.runtime.dynamo_watch import watch_compile

        return watch_compile(out=out, warmup=warmup)
    if backend != "xla":
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: backend must be 'auto', 'xla' or 'dynamo', not {backend!r}")
    from detective.runtime.watch import watch

    return watch(out=out, warmup=warmup)


@pytest.fixture
def detective_run_dir(tmp_path):
    """Where a marked test's steps are recorded: inside the test's own tmp_path."""
    return tmp_path / "detective-run"


@pytest.fixture
def detective_watch(request, detective_run_dir):
    """A running ``detective.watch`` recording into the test's tmp_path."""
    marker = request.node.get_closest_marker(MARKER)
    warmup = _warmup(_budget(marker)) if marker else 2
    with _watch(marker, detective_run_dir, warmup) as active:
        yield active


def pytest_collection_modifyitems(items):
    # A marked test records into its tmp_path: request that fixture for it, as if it named it.
    for item in items:
        if item.get_closest_marker(MARKER) is not None and "detective_run_dir" not in getattr(item, "fixturenames", ()):
            item.fixturenames.append("detective_run_dir")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    budget = _budget(marker)
    funcargs = getattr(item, "funcargs", {})
    active = funcargs.get("detective_watch")
    with contextlib.ExitStack() as stack:
        if active is None:
            active = stack.enter_context(_watch(marker, funcargs.get("detective_run_dir"), _warmup(budget)))
        result = yield
    from detective.ci.gate import PASS
    from detective.ci.rank_gate import evaluate_ranks

    verdict = evaluate_ranks(active.run, budget)
    item.user_properties.append(("detective_gate", verdict.message()))
    if verdict.status != PASS:
        pytest.fail(verdict.message(), pytrace=False)
    return result
