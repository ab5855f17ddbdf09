"""Run SCRIPT and write torch_xla's own compile counters after every sync to COUNTS (JSON).

    python count_compiles.py COUNTS SCRIPT [ARGS...]

The record the tracer is checked against, taken without the tracer's help: a profile hook notes
UncachedCompile and CachedCompile each time torch_xla's sync or mark_step returns. (A profile
hook, not a wrapper around sync, so no frame of this file sits between the user's line and
torch_xla's when torch_xla captures the stack.)
"""

import json
import os
import runpy
import sys

counts_path, script = sys.argv[1], sys.argv[2]
import torch_xla  # noqa: E402 - under `detective run`, the tracer starts here
import torch_xla.debug.metrics as met  # noqa: E402

ROOT = os.path.dirname(torch_xla.__file__)
records: list[list[int]] = []


def _profile(frame, event, arg):
    code = frame.f_code
    if event == "return" and code.co_name in ("sync", "mark_step") and code.co_filename.startswith(ROOT):
        records.append([met.counter_value("UncachedCompile") or 0, met.counter_value("CachedCompile") or 0])


sys.argv = [script, *sys.argv[3:]]
sys.setprofile(_profile)
try:
    runpy.run_path(script, run_name="__main__")
finally:
    sys.setprofile(None)
    with open(counts_path, "w") as f:
        json.dump(records, f)
