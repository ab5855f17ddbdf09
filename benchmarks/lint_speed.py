"""Lint speed against bare libcst parsing of the same files, in the same run.

    .venv/bin/python benchmarks/lint_speed.py [--tree DIR ...] [--jobs N]

Default tree: the PyTorch sources installed with the ``xla`` extra (torch/nn,
torch/optim, torch/distributed, torch/ao, torch/_dynamo): a large real PyTorch code base
that every development environment of this project already has. Prints lines/s for
bare ``libcst.parse_module`` (one process), ``detective lint`` on one process, and on
``--jobs`` processes, with the ratios. Target: one-process lint within 3x of bare parsing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import libcst

from detective.lint.config import Config
from detective.lint.engine import discover, lint_paths

DEFAULT_SUBTREES = ("nn", "optim", "distributed", "ao", "_dynamo")


def default_trees() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: pass --tree DIR, or install the xla extra")
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    return [torch_dir / sub for sub in DEFAULT_SUBTREES if (torch_dir / sub).is_dir()]


def bare_parse(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        try:
            libcst.parse_module(path.read_bytes().decode("utf-8"))
        except (libcst.ParserSyntaxError, UnicodeDecodeError):
            pass
    return time.perf_counter() - start


def lint(trees: list[Path], jobs: int) -> tuple[float, int, int]:
    start = time.perf_counter()
    result = lint_paths([str(t) for t in trees], Config(), jobs=jobs)
    return time.perf_counter() - start, len(result.findings), result.files_checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", type=Path, help="directory to lint (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    trees = args.tree or default_trees()
    files, _ = discover([str(t) for t in trees], Config())
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    print(f"tree: {', '.join(str(t) for t in trees)}")
    print(f"{len(files)} files, {lines:,} lines, {args.jobs} jobs available")

    parse_s = bare_parse(files)
    one_s, findings, checked = lint(trees, jobs=1)
    many_s, _, _ = lint(trees, jobs=args.jobs) if args.jobs > 1 else (one_s, 0, 0)

    def row(name: str, seconds: float) -> str:
        return f"{name:<34} {seconds:8.2f} s  {lines / seconds:10,.0f} lines/s"

    print(row("bare libcst.parse_module (1 proc)", parse_s))
    print(row("detective lint (1 proc)", one_s))
    print(row(f"detective lint ({args.jobs} procs)", many_s))
    print(f"ratio lint/parse, one process: {one_s / parse_s:.2f}x  (target <= 3x)")
    print(f"speed-up from {args.jobs} processes: {one_s / many_s:.2f}x")
    print(f"({checked} files linted, {findings} findings)")


if __name__ == "__main__":
    main()
