"""What a boolean-mask fill costs on each target the linter knows (``xla``, ``compile``).

    PJRT_DEVICE=CPU python benchmarks/target_costs.py [--json OUT] [--only masks|adamw|bounded] [--steps N]

For a few one-line operations, on a small tensor:

- torch_xla (PJRT CPU): the ``aten::*`` CPU fallbacks torch_xla counts and the device->host
  transfers (``TransferFromDeviceTime`` samples) between two syncs;
- torch.compile: whether ``torch.compile(fullgraph=True, backend="aot_eager")`` makes one
  graph of the function (a graph break raises under ``fullgraph=True``).

The linter's targets model (``detective.lint.project_facts``) rests on the result: a
bool-mask assignment of a scalar (``x[m] = 0``) costs a ``nonzero`` fallback and a transfer
on XLA and nothing under torch.compile, so in a project that targets only torch.compile
RC005 reports it as ``info``; a mask read (``x[m]``) and ``.item()`` cost on both.

And RC104's version threshold: ``torch.optim.AdamW`` on torch_xla with ``capturable=False``
and ``True``, a sync per step: the programs compiled at each step and the device->host
transfers. RC104 is ``info`` below torch 2.12 because on the installed torch no step after the
first two compiles anything (``tests/lint/test_rc104_runtime.py`` asserts it).

And RC005 under ``XLA_EXPERIMENTAL``: ``nonzero`` over four different counts, in a process
without the flag and in one with ``XLA_EXPERIMENTAL=nonzero:masked_select`` (torch_xla reads
it once per process): programs compiled per count and ``aten::nonzero`` fallbacks. With the
flag only the first count compiles and the others compile nothing, so RC005 on ``nonzero`` in a file that runs with it is
``info`` (``tests/lint/test_bounded_dynamic.py`` asserts it).
"""

from __future__ import annotations

import argparse
from importlib import metadata
import json
import os
import subprocess
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


def adamw_on_xla(steps: int = 20) -> dict[str, dict]:
    """Per ``capturable``: programs compiled at each step (a sync per step) and transfers."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    device = torch_xla.device()
    results = {}
    for capturable in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 8).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=capturable)
        x = torch.randn(4, 8, device=device)
        torch_xla.sync()
        met.clear_all()
        per_step = []
        for _ in range(steps):
            before = _compiles(met)
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            torch_xla.sync()
            per_step.append(_compiles(met) - before)
        transfers = met.metric_data("TransferFromDeviceTime")
        results[str(capturable)] = {"compiles_per_step": per_step,
                                    "transfers": transfers[0] if transfers else 0}
    return results


def nonzero_counts() -> dict:
    """In this process (its XLA_EXPERIMENTAL as set): ``nonzero`` of 16 values with 1, 3, 5, 7
    of them set; the programs compiled for each and the CPU fallbacks."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    device = torch_xla.device()
    inputs = []
    for count in (1, 3, 5, 7):
        x = torch.zeros(16)
        x[:count] = 1
        inputs.append(x.to(device))  # made on the host: no program per count before nonzero
    torch_xla.sync()
    met.clear_all()
    per_count, sums = [], []
    for x in inputs:
        before = _compiles(met)
        sums.append(torch.nonzero(x.int()).float().sum())
        torch_xla.sync()
        per_count.append(_compiles(met) - before)
    return {"compiles_per_count": per_count, "fallbacks": met.counter_value("aten::nonzero") or 0,
            "sums": [float(t) for t in sums]}


def bounded() -> dict[str, dict]:
    """:func:`nonzero_counts` in a fresh process without and with the flag."""
    results = {}
    for flag in ("", "nonzero:masked_select"):
        env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_EXPERIMENTAL": flag}
        done = subprocess.run([sys.executable, __file__, "--only", "nonzero-counts"], env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        results[flag] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def _compiles(met) -> int:
    data = met.metric_data("CompileTime")
    return data[0] if data else 0


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
    ap.add_argument("--only", choices=("masks", "adamw", "bounded", "nonzero-counts"),
                    help="measure only these cases (nonzero-counts: one process, prints JSON)")
    ap.add_argument("--steps", type=int, default=20, help="AdamW steps (default 20)")
    args = ap.parse_args(argv)
    if args.only == "nonzero-counts":
        print(json.dumps(nonzero_counts()))
        return 0
    report: dict[str, dict] = {}
    if args.only in (None, "bounded"):  # first: its children start torch_xla on their own
        report["bounded"] = bounded()
    if args.only in (None, "masks"):
        report["xla"], report["compile"] = on_xla(), under_compile()
    if args.only in (None, "adamw"):
        report["adamw"] = adamw_on_xla(args.steps)

    print(f"torch {metadata.version('torch')}, torch_xla {metadata.version('torch_xla')}")
    if "xla" in report:
        xla, compiled = report["xla"], report["compile"]
        print(f"{'operation':22} {'torch_xla (PJRT CPU)':44} torch.compile(fullgraph=True)")
        for name in CASES:
            fallbacks = ", ".join(f"{k} x{v}" for k, v in xla[name]["fallbacks"].items()) or "no fallback"
            on_x = f"{fallbacks}, {xla[name]['transfers']} transfer(s)"
            on_c = "one graph" if compiled[name]["one_graph"] else compiled[name]["error"][:60]
            print(f"{name:22} {on_x:44} {on_c}")
    for capturable, row in report.get("adamw", {}).items():
        per_step = row["compiles_per_step"]
        print(f"AdamW(capturable={capturable}), {len(per_step)} steps with a sync each: {sum(per_step)} "
              f"program(s) compiled (per step {per_step}), {row['transfers']} transfer(s)")
    for flag, row in report.get("bounded", {}).items():
        print(f"nonzero over 4 counts, XLA_EXPERIMENTAL={flag!r}: {sum(row['compiles_per_count'])} program(s) "
              f"(per count {row['compiles_per_count']}), aten::nonzero fallback x{row['fallbacks']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
