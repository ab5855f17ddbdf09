"""Step time of one training loop: bare vs `detective run --mode count` vs `--mode diagnose`,
with the parts of diagnose mode's cost measured apart.

    .venv/bin/python benchmarks/trace_overhead.py [--rounds 5] [--steps 300] [--hidden 512]

Variants: ``bare``; ``ir-debug`` (bare with XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1: torch_xla records a
Python frame per IR node, which diagnose mode needs for source lines); ``ir-save`` (that plus
XLA_SAVE_TENSORS_FILE: torch_xla writes the graph's IR text at every sync, which is how diagnose
mode took graphs before; kept for comparison); ``count`` and ``diagnose`` (``detective run``;
diagnose takes each new program from XLA's compile-time dump, so a step that compiles nothing
pays the IR frames and the tracer only). The timed steps compile nothing (the loop is stable
after warm-up), so they are the steps diagnose mode should not make slower.

Each round runs the variants back to back (interleaved, so drift hits all alike) in fresh
processes. A variant's step time is wall time over the timed steps, after warm-up, ending with
wait_device_ops so queued work is counted. A traced variant must have recorded every step (a
tracer that did not start would otherwise measure 1.00x), and diagnose must have saved the
graphs of the warm-up compiles and nothing after. Prints min and median per variant, and the
costs as medians of each round's difference to that round's bare run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP_STEPS = 5


def _training_step(hidden: int, batch: int):
    import torch
    import torch_xla

    device = torch_xla.device()
    model = torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(batch, hidden, generator=g), torch.randint(0, 10, (batch,), generator=g)) for _ in range(8)]

    def trace(i: int) -> None:
        x, y = data[i % len(data)]
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def step(i: int) -> None:
        trace(i)
        torch_xla.sync()

    pending = lambda: [*model.parameters(), *(p.grad for p in model.parameters())]  # noqa: E731
    return step, trace, pending


def worker(steps: int, hidden: int, batch: int) -> None:
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    step, _, _ = _training_step(hidden, batch)
    for i in range(WARMUP_STEPS):
        step(i)
    xm.wait_device_ops()
    _, compile_ns, _ = met.metric_data("CompileTime")  # the warm-up's compiles
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    xm.wait_device_ops()
    print(json.dumps({"step_ms": (time.perf_counter() - start) * 1000 / steps, "compile_s": compile_ns / 1e9}))


def floor_worker(steps: int, hidden: int, batch: int) -> None:
    """What torch_xla itself costs diagnose mode per step, in one process, interleaved step by step
    (robust to a busy machine): tracing with IR frames on vs off (``_set_ir_debug``, which torch_xla
    allows at run time and which leaves graph hashes alone), and the IR text dump torch_xla writes
    at every sync when XLA_SAVE_TENSORS_FILE is set (``_get_xla_tensors_text`` is the same dump)."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    step, trace, pending = _training_step(hidden, batch)
    for i in range(WARMUP_STEPS):
        step(i)
    xm.wait_device_ops()
    compiled = met.counter_value("UncachedCompile")
    times: dict[str, list[float]] = {"frames on": [], "frames off": [], "ir text": [],
                                     "tracing, frames on": [], "tracing, frames off": []}
    for i in range(steps):
        frames = i % 2 == 0
        torch_xla._XLAC._set_ir_debug(frames)
        start = time.perf_counter()
        trace(i)
        traced = time.perf_counter()
        if frames:
            torch_xla._XLAC._get_xla_tensors_text(pending())
            times["ir text"].append(time.perf_counter() - traced)
        dumped = time.perf_counter()
        torch_xla.sync()
        xm.wait_device_ops()
        times["frames on" if frames else "frames off"].append(traced - start + time.perf_counter() - dumped)
        times["tracing, frames on" if frames else "tracing, frames off"].append(traced - start)
    torch_xla._XLAC._set_ir_debug(True)
    assert met.counter_value("UncachedCompile") == compiled, "toggling IR frames changed the graph"
    print(json.dumps({k: statistics.median(v) * 1000 for k, v in times.items()}))


IR_DEBUG = {"XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1"}
VARIANTS = ("bare", "ir-debug", "ir-save", "count", "diagnose")


def measure(variant: str, args, tmp: Path, round_no: int) -> float:
    script = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--hidden", str(args.hidden),
              "--batch", str(args.batch)]
    env = dict(os.environ)
    out = tmp / f"{variant}-{round_no}"
    if variant in ("count", "diagnose"):
        command = [sys.executable, "-m", "detective", "run", "--quiet", "--mode", variant, "--out", str(out), "--", *script]
    else:
        command = script
        if variant in ("ir-debug", "ir-save"):
            env.update(IR_DEBUG)
        if variant == "ir-save":
            out.mkdir(parents=True)
            env.update(XLA_SAVE_TENSORS_FILE=str(out / "ir"), XLA_SAVE_TENSORS_FMT="text")
    proc = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    if variant in ("count", "diagnose"):
        _check_recorded(out, WARMUP_STEPS + args.steps, variant)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    compile_seconds.setdefault(variant, []).append(result["compile_s"])
    return result["step_ms"]


compile_seconds: dict[str, list[float]] = {}  # variant -> CompileTime of the warm-up, per round


def _check_recorded(out: Path, steps: int, variant: str) -> None:
    from detective.runtime.record import load_run

    run = load_run(out)
    recorded = [s for s in run.step_events if s.get("complete")]
    assert len(recorded) == steps, f"{variant}: the tracer recorded {len(recorded)} of {steps} steps in {out}"
    late = [s["step"] for s in recorded[WARMUP_STEPS:] if s["new_programs"]]
    assert not late, f"{variant}: steps {late} compiled: the timed steps must compile nothing"
    if variant == "diagnose":
        graphs = sorted(p.name for p in (out / "graphs").glob("*.hlo.txt"))
        wanted = sorted(f"{e['graph_hash']}.hlo.txt" for e in run.execution_events if e["new"])
        assert graphs and graphs == wanted, f"diagnose: graphs saved {graphs}, new programs {wanted} in {out}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true",
                        help="only torch_xla's own per-step cost of diagnose mode, in one process")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated subset of {','.join(VARIANTS)} (bare is always run)")
    parser.add_argument("--floor-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_worker:
        floor_worker(args.steps, args.hidden, args.batch)
        return
    if args.worker:
        worker(args.steps, args.hidden, args.batch)
        return
    if args.floor:
        env = {**os.environ, **IR_DEBUG}
        script = [sys.executable, __file__, "--floor-worker", "--steps", str(args.steps), "--hidden", str(args.hidden),
                  "--batch", str(args.batch)]
        proc = subprocess.run(script, capture_output=True, text=True, check=True, env=env)
        ms = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"torch_xla's per-step cost in diagnose mode (MLP hidden={args.hidden}, batch={args.batch}, "
              f"medians of {args.steps // 2} interleaved steps):")
        print(f"  step without IR frames {ms['frames off']:7.3f} ms")
        print(f"  step with IR frames    {ms['frames on']:7.3f} ms  (+{ms['frames on'] - ms['frames off']:.3f} ms: "
              "what diagnose mode pays on a step that compiles nothing, besides the tracer)")
        print(f"  IR text dump per sync  {ms['ir text']:7.3f} ms  (XLA_SAVE_TENSORS_FILE, every sync, compiled or not: "
              "what diagnose mode paid before)")
        on, off = ms["tracing, frames on"], ms["tracing, frames off"]
        print(f"  tracing the step alone {off:7.3f} ms without IR frames, {on:.3f} ms with (+{on - off:.3f} ms, "
              "the frames' own cost without the sync's noise)")
        return
    variants = ("bare", *(v for v in VARIANTS[1:] if v in args.variants.split(",")))
    times: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="trace-overhead-") as tmp:
        for r in range(args.rounds):
            for v in variants:
                times[v].append(measure(v, args, Path(tmp), r))
            print(f"round {r}: " + "  ".join(f"{v} {times[v][-1]:.3f} ms" for v in variants), file=sys.stderr)
    print(f"step time after {WARMUP_STEPS} warm-up steps, {args.rounds} rounds x {args.steps} steps "
          f"(MLP hidden={args.hidden}, batch={args.batch}); min is the least noisy on a shared machine:")
    for stat in (min, statistics.median):
        bare = stat(times["bare"])
        for v in variants:
            t = stat(times[v])
            print(f"  {stat.__name__:6s} {v:9s} {t:8.3f} ms/step   ratio to bare {t / bare:5.3f}   "
                  f"({(t - bare) * 1000:+.0f} us/step)")
    print(breakdown(times))


def breakdown(times: dict[str, list[float]]) -> str:
    """Each cost as the median over rounds of (variant - baseline) within the round."""
    def cost(variant: str, baseline: str) -> tuple[float, float]:
        diffs = [a - b for a, b in zip(times[variant], times[baseline])]
        ratios = [a / b for a, b in zip(times[variant], times["bare"])]
        return statistics.median(diffs), statistics.median(ratios)

    rows = [("IR frames (ir-debug - bare)", "ir-debug", "bare"),
            ("old per-sync IR text (ir-save - ir-debug)", "ir-save", "ir-debug"),
            ("tracer, count mode (count - bare)", "count", "bare"),
            ("diagnose mode (diagnose - bare)", "diagnose", "bare")]
    lines = ["cost per step that compiles nothing (median over rounds of the in-round difference):"]
    for label, variant, baseline in rows:
        if variant not in times or baseline not in times:
            continue
        ms, ratio = cost(variant, baseline)
        lines.append(f"  {label:43s} {ms * 1000:+6.0f} us/step   ({variant} / bare {ratio:5.3f})")
    if "diagnose" not in times:
        return "\n".join(lines)
    ms, ratio = cost("diagnose", "bare")
    bare = statistics.median(times["bare"])
    lines.append(f"  target for diagnose: at most +15% (at ~6 ms steps) and +0.3 ms (at ~1.6 ms steps); "
                 f"here bare {bare:.2f} ms: {ratio:.3f}x, {ms * 1000:+.0f} us")
    if compile_seconds:
        lines.append("what a step that compiles pays instead (CompileTime of the warm-up's compiles, median):")
        lines.append("  " + "  ".join(f"{v} {statistics.median(compile_seconds[v]):.3f} s" for v in times))
        if "ir-debug" in times:
            dump = statistics.median(a / b for a, b in zip(compile_seconds["diagnose"], compile_seconds["ir-debug"]))
            lines.append(f"  XLA's dump at each compile: diagnose / ir-debug {dump:.2f} (median in-round ratio)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
