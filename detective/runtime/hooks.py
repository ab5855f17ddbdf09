"""Find step boundaries without touching the frames torch_xla inspects.

Every ``torch_xla.sync()`` (also ``xm.mark_step``, ``torch_xla.compile``'s syncs and
``MpDeviceLoader``'s) ends by calling ``xm._run_step_closures()``. Wrapping that one function
sees them all, and runs after the execution so the debug blocks torch_xla wrote for it are
already on disk. Wrapping ``sync`` itself would push our frame under torch_xla's, which makes
it report ``user torch_xla.sync`` for compile and loader syncs.
"""

from __future__ import annotations

import sys
from typing import Callable

# Function that called torch_xla's sync -> boundary kind; None means "not a step boundary".
_CALLERS = {
    "_clear_pending_ops_before_compile": None,  # inside the step, before the compiled call
    "_compile": "compile",
    "next": "loader",  # MpDeviceLoader / ParallelLoader per-device iterator
    "mark_step": "mark_step",
}


def classify(sync_frame) -> str | None:
    if sync_frame is None or sync_frame.f_code.co_name != "sync":
        return "sync"
    caller = sync_frame.f_back
    if caller is None:
        return "sync"
    return _CALLERS.get(caller.f_code.co_name, "sync")


def install(xm, on_boundary: Callable[[str], None]) -> Callable[[], None]:
    """Call ``on_boundary(kind)`` after each step's sync. Returns a function that undoes it."""
    original = xm._run_step_closures

    failed = []

    def _run_step_closures():
        devctx = original()
        kind = classify(sys._getframe(1))
        if kind is not None and not failed:
            try:
                on_boundary(kind)
            except Exception as exc:  # the tracer must never break the user's training
                failed.append(exc)
                print(f"detective: tracing stopped after an internal error: {exc!r}", file=sys.stderr)
        return devctx

    _run_step_closures.__wrapped__ = original
    xm._run_step_closures = _run_step_closures

    def uninstall() -> None:
        if xm._run_step_closures is _run_step_closures:
            xm._run_step_closures = original

    return uninstall
