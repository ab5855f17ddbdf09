"""What a boolean-mask fill costs on each target the linter knows (``xla``, ``compile``).

    PJRT_DEVICE=CPU python benchmarks/target_costs.py [--json OUT]

For a few one-line operations, on a small tensor:

- torch_xla (PJRT CPU): the ``aten::*`` CPU fallbacks torch_xla counts and the device->host
  transfers (``TransferFromDeviceTime`` samples) between two syncs;
- torch.compile: whether ``torch.compile(fullgraph=True, backend="aot_eager")`` makes one
  graph of the function (a graph break raises under ``fullgraph=True``).

The linter's targets model (``detective.lint.project_facts``) rests on the result: a
bool-mask assignment of a scalar (``x[m] = 0``) costs a ``nonzero`` fallback and a transfer
on XLA and nothing under torch.compile, so in a project that targets only torch.compile
RC005 reports it as ``info``; a mask read (``x[m]``) and ``.item()`` cost on both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def fill_zero(x, m):
    x[m] = 0
    return x


def fill_float(x, m):
    x[m] = float("-inf")
    return x


def fill_rows(x, m):
    x[m[:, 0]] = 0.5
    return x


def read_masked(x, m):
    return x[m]


def add_masked(x, m):
    x[m] += 1
    return x


def item(x, m):
    return (x.sum() > 0).item()


CASES = {
    "x[m] = 0": fill_zero,
    'x[m] = float("-inf")': fill_float,
    "x[m_rows] = 0.5": fill_rows,
    "x[m] (read)": read_masked,
    "x[m] += 1": add_masked,
    ".item()": item,
}


def on_xla() -> dict[str, dict]:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    device = torch_xla.device()
    results = {}
    for name, fn in CASES.items():
        x = torch.randn(8, 4, device=device)
        m = torch.randn(8, 4, device=device) > 0
        torch_xla.sync()
        met.clear_all()
        fn(x, m)
        torch_xla.sync()
        fallbacks = {k: met.counter_value(k) for k in met.counter_names() if k.startswith("aten::")}
        transfers = met.metric_data("TransferFromDeviceTime")
        results[name] = {"fallbacks": fallbacks, "transfers": transfers[0] if transfers else 0}
    return results


def under_compile() -> dict[str, dict]:
    import torch

    results = {}
    for name, fn in CASES.items():
        torch._dynamo.reset()
        x, m = torch.randn(8, 4), torch.randn(8, 4) > 0
        try:
            torch.compile(fn, fullgraph=True, backend="aot_eager")(x, m)
            results[name] = {"one_graph": True, "error": ""}
        except Exception as exc:  # torch._dynamo.exc.Unsupported: a graph break
            results[name] = {"one_graph": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    import torch

    xla, compiled = on_xla(), under_compile()
    import torch_xla

    print(f"torch {torch.__version__}, torch_xla {torch_xla.__version__}")
    print(f"{'operation':22} {'torch_xla (PJRT CPU)':44} torch.compile(fullgraph=True)")
    for name in CASES:
        fallbacks = ", ".join(f"{k} x{v}" for k, v in xla[name]["fallbacks"].items()) or "no fallback"
        on_x = f"{fallbacks}, {xla[name]['transfers']} transfer(s)"
        on_c = "one graph" if compiled[name]["one_graph"] else compiled[name]["error"][:60]
        print(f"{name:22} {on_x:44} {on_c}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"xla": xla, "compile": compiled}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
