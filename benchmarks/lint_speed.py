"""Lint speed: bare libcst parsing, detective cold/warm/pre-commit, and optionally Fixit, in one run.

    .venv/bin/python benchmarks/lint_speed.py [--tree DIR ...] [--jobs N] [--vs fixit]

Default tree: the PyTorch sources installed with the ``xla`` extra (torch/nn, torch/optim,
torch/distributed, torch/ao, torch/_dynamo), copied to a scratch directory first so that
both linters see the same plain tree (Fixit skips anything a .gitignore above it names,
and our virtualenv is git-ignored) and our cache lands in the copy, not in the venv.

Rows:
  bare parse         libcst.parse_module of every file, one process (the floor)
  lint 1 proc        detective, no cache, one process
  cold               detective, empty cache, --jobs processes (the cache is written)
  warm               same again, nothing changed (every summary from the cache)
  warm CLI           `detective lint TREE` as a fresh process (start-up and imports included),
                     --repeat times: fastest, median and slowest
  pre-commit         5 files changed, `detective lint --project TREE f1..f5` as a fresh
                     process: the 5 are re-analysed, the rest of the project's summaries
                     come from the cache so chains and XLA reachability stay whole-project;
                     --repeat times with a different edit each time (so never a whole-result
                     hit), wall and CPU seconds
  one file named     `detective lint f` as a fresh process with the tree marked as a project
                     (setup.cfg): the rest of the project is read as context, from the cache
  environment        in process, the cross-file pass over the tree's summaries with
                     installed-base resolution from scratch, with parsed installed modules
                     cached, and with its answers cached (what a warm or pre-commit run does)
  fixit (--vs fixit) `fixit lint TREE` (Fixit 2.2.1, its default rules and its own process
                     pool), installed on first use into a throwaway virtualenv under
                     ~/.cache/detective-bench/ (never a dependency of this project)
  installed bases    (--installed-bases) generated files whose models subclass transformers
                     classes (transformers installed with --no-deps into a scratch virtualenv
                     under ~/.cache/detective-bench/, put on the linter's path with PYTHONPATH,
                     never imported), linted cold as a CLI with guess-modules = false: with the
                     package on the path (bases followed to nn.Module through its source) and
                     without it (nothing resolves, nothing is found); the difference is what
                     environment resolution costs. Then one file edited (answers cached), and
                     the in-process environment rows above for these files

Targets on a 2-core machine: cold >= 8x Fixit's lines/s, warm >= 20x faster than cold,
pre-commit under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import libcst

from detective.lint.config import Config
from detective.lint.discovery import discover
from detective.lint.engine import findings_for, lint_paths, summarise
from detective.lint.environment import Environment
from detective.lint.rule import expand_selectors

DEFAULT_SUBTREES = ("nn", "optim", "distributed", "ao", "_dynamo")
FIXIT_VERSION = "2.2.1"
FIXIT_VENV = Path.home() / ".cache" / "detective-bench" / f"fixit-{FIXIT_VERSION}"
TRANSFORMERS_VENV = Path.home() / ".cache" / "detective-bench" / "transformers-src"
# (module, class) pairs the generated files subclass: the top-level lazy re-exports and the
# model modules themselves.
INSTALLED_BASES = [
    ("transformers", "PreTrainedModel"), ("transformers", "BertPreTrainedModel"),
    ("transformers", "LlamaForCausalLM"), ("transformers.models.bert.modeling_bert", "BertLayer"),
    ("transformers.models.llama.modeling_llama", "LlamaDecoderLayer"),
    ("transformers.models.gpt2.modeling_gpt2", "GPT2PreTrainedModel"),
    ("transformers.models.t5.modeling_t5", "T5PreTrainedModel"),
    ("transformers.models.whisper.modeling_whisper", "WhisperPreTrainedModel"),
]


def default_trees() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: pass --tree DIR, or install the xla extra")
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    return [torch_dir / sub for sub in DEFAULT_SUBTREES if (torch_dir / sub).is_dir()]


def copy_trees(trees: list[Path], scratch: Path) -> Path:
    root = scratch / "tree"
    for tree in trees:
        shutil.copytree(tree, root / tree.parent.name / tree.name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def bare_parse(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        try:
            libcst.parse_module(path.read_bytes().decode("utf-8"))
        except (libcst.ParserSyntaxError, UnicodeDecodeError):
            pass
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (pool workers, Fixit and its pool)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed_lint(tree: Path, jobs: int, use_cache: bool) -> tuple[float, object]:
    start = time.perf_counter()
    result = lint_paths([str(tree)], Config(), jobs=jobs, use_cache=use_cache)
    return time.perf_counter() - start, result


def children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def timed_cli(args: list[str], cwd: Path, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    elapsed, _cpu, proc = timed_cli_cpu(args, cwd, env)
    return elapsed, proc


def timed_cli_cpu(args: list[str], cwd: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds of one ``detective lint`` process."""
    cpu0, start = children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "detective", "lint", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    elapsed, cpu = time.perf_counter() - start, children_cpu() - cpu0
    if proc.returncode not in (0, 1):
        sys.exit(f"detective lint failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, cpu, proc


def spread(values: list[float]) -> str:
    """fastest / median / slowest of repeated timings."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return f"{ordered[0]:.3f} s"
    return (f"{ordered[0]:.3f} / {statistics.median(ordered):.3f} / {ordered[-1]:.3f} s "
            f"(fastest / median / slowest of {len(ordered)})")


def environment_cost(label: str, summaries: list, config: Config, search_path: list[str] | None = None) -> None:
    """The cross-file pass in process, with installed-base resolution from scratch, from
    parsed modules, and from cached answers: the differences are what resolution costs."""
    enabled = expand_selectors(config.select)
    good = [s for s in summaries if not s.error]

    def cross_file(make_environment) -> tuple[float, Environment, list]:
        start = time.perf_counter()
        environment = make_environment()
        found = findings_for(good, config, enabled, environment=environment)
        return time.perf_counter() - start, environment, found

    cross_file(lambda: Environment(search_path=search_path))  # warm-up: file system, lazy imports
    scratch_s, fresh, found = cross_file(lambda: Environment(search_path=search_path))
    store_s, _, again = cross_file(lambda: Environment(search_path=search_path, store=dict(fresh.store)))
    answers_s, reused, last = cross_file(lambda: Environment(search_path=search_path, store=dict(fresh.store),
                                                             answers=fresh.answers()))
    assert found == again == last, "environment caches changed the findings"
    assert reused.answered == 0, "cached answers were not used"
    print(f"environment ({label}): cross-file pass {answers_s:.3f} s with answers cached "
          f"({len(fresh.lookups)} module lookups re-checked); resolution adds "
          f"{scratch_s - answers_s:+.3f} s from scratch ({fresh.parsed} installed modules parsed), "
          f"{store_s - answers_s:+.3f} s with parsed modules cached", flush=True)


def ensure_fixit(venv_dir: Path) -> Path:
    fixit = venv_dir / "bin" / "fixit"
    if not fixit.exists():
        print(f"installing fixit=={FIXIT_VERSION} into {venv_dir} (throwaway, benchmark only) ...", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q",
                        f"fixit=={FIXIT_VERSION}"], check=True)
    return fixit


def run_fixit(fixit: Path, tree: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run([str(fixit), "lint", str(tree)], cwd=tree, capture_output=True, text=True,
                          check=False)
    elapsed = time.perf_counter() - start
    # Fixit's exit status is a bit mask: 1 = lint errors found (expected), 2 = a file raised while
    # being linted. A timing over files Fixit gave up on would flatter our ratio, so refuse it.
    if proc.returncode < 0 or proc.returncode & ~1:
        crashed = [line for line in (proc.stdout + proc.stderr).splitlines() if ": EXCEPTION: " in line]
        sys.exit(f"fixit did not lint the tree cleanly (exit {proc.returncode}, {len(crashed)} files raised): "
                 f"{(crashed[0] if crashed else proc.stderr.strip()[-500:])}")
    summary = [line for line in proc.stderr.splitlines() if "files" in line]
    print(f"  fixit: {summary[-1].strip() if summary else proc.stderr.strip()[-200:]}")
    return elapsed


def ensure_transformers(venv_dir: Path) -> Path:
    """site-packages of a scratch virtualenv holding transformers' source (no dependencies)."""
    found = sorted(venv_dir.glob("lib/python3*/site-packages"))
    if not found or not (found[0] / "transformers").is_dir():
        print(f"installing transformers (--no-deps) into {venv_dir} (benchmark only) ...", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                        "transformers"], check=True)
        found = sorted(venv_dir.glob("lib/python3*/site-packages"))
    return found[0]


def installed_bases(scratch: Path, env: dict, files: int = 120) -> None:
    site = ensure_transformers(TRANSFORMERS_VENV)
    tree = scratch / "installed-bases"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("[tool.detective]\nguess-modules = false\n")
    for i in range(files):
        module, name = INSTALLED_BASES[i % len(INSTALLED_BASES)]
        (tree / f"model_{i}.py").write_text(
            f"from {module} import {name}\n\n\nclass Head{i}({name}):\n"
            f"    def forward(self, hidden):\n        return hidden.mean().item()\n")
    lines = sum(p.read_bytes().count(b"\n") for p in tree.glob("*.py"))
    print(f"installed bases: {files} files ({lines} lines) subclassing {len(INSTALLED_BASES)} transformers "
          f"classes; transformers from {site}")
    for label, extra in (("with transformers on the path", {"PYTHONPATH": str(site)}),
                         ("without it (nothing resolves)", {})):
        run_env = {**env, **extra, "DETECTIVE_CACHE_DIR": str(scratch / f"cache-bases-{bool(extra)}")}
        if not extra:
            run_env.pop("PYTHONPATH", None)
        seconds, proc = timed_cli(["--format", "json", "."], tree, run_env)
        found = len(json.loads(proc.stdout or "[]"))
        print(f"  cold CLI, {label:<32} {seconds:8.3f} s  {found} findings (of {files})", flush=True)
        again, _ = timed_cli(["--format", "json", "."], tree, run_env)
        print(f"  warm CLI, {label:<32} {again:8.3f} s", flush=True)
        edited = tree / "model_0.py"
        original = edited.read_bytes()
        try:
            edited.write_bytes(original + b"# edited\n")
            one, _ = timed_cli(["--format", "json", "."], tree, run_env)
        finally:
            edited.write_bytes(original)
        print(f"  1 file edited, {label:<27} {one:8.3f} s  (summaries and installed answers cached)",
              flush=True)
    summaries = summarise(sorted(tree.glob("*.py")), Config(guess_modules=False))
    environment_cost("transformers bases", summaries, Config(guess_modules=False),
                     search_path=[str(site), *sys.path])


def compile_package() -> str:
    """Write the linter's bytecode before the CLI rows. An installed package has it; an editable
    one writes it on first import, unless PYTHONDONTWRITEBYTECODE is set (as in some sandboxes
    and CI images), when every CLI run would compile ~10k lines of the linter from source
    (measured: +0.05-0.1 s a process) and the warm and pre-commit rows would time that."""
    import compileall
    import importlib.util

    dirs = []
    for name in ("detective", "detective.rules"):
        spec = importlib.util.find_spec(name)
        dirs += [Path(d) for d in (spec.submodule_search_locations or ()) if Path(d) not in dirs]
    ok = all(compileall.compile_dir(str(d), quiet=1) for d in dirs)
    return ("written for " if ok else "could not be written for ") + ", ".join(map(str, dirs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", type=Path, help="directory to lint (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--vs", choices=["fixit"], help="also time Fixit on the same tree")
    parser.add_argument("--fixit-venv", type=Path, default=FIXIT_VENV)
    parser.add_argument("--skip-single", action="store_true", help="skip the one-process lint row")
    parser.add_argument("--installed-bases", action="store_true",
                        help="also time a cold run over files subclassing transformers classes")
    parser.add_argument("--repeat", type=int, default=5, help="runs of the warm CLI and pre-commit rows")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="detective-bench-"))
    try:
        tree = copy_trees(args.tree or default_trees(), scratch)
        files, _ = discover([str(tree)], Config())
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        print(f"tree: {tree} (copied from {', '.join(str(t) for t in (args.tree or default_trees()))})")
        print(f"{len(files)} files, {lines:,} lines, {args.jobs} jobs, {os.cpu_count()} CPUs")
        env = {**os.environ, "DETECTIVE_CACHE_DIR": str(scratch / "cache")}
        os.environ["DETECTIVE_CACHE_DIR"] = env["DETECTIVE_CACHE_DIR"]
        compiled = compile_package()
        print(f"bytecode: {compiled} (the CLI rows import the linter as an installed package does)")

        def row(name: str, seconds: float, note: str = "") -> None:
            print(f"{name:<30} {seconds:8.3f} s  {lines / seconds:10,.0f} lines/s  {note}", flush=True)

        parse_s = bare_parse(files)
        row("bare libcst.parse_module (1p)", parse_s)
        if not args.skip_single:
            one_s, _ = timed_lint(tree, 1, use_cache=False)
            row("detective lint (1 proc)", one_s, f"{one_s / parse_s:.2f}x parse")
        cpu0 = cpu_seconds()
        cold_s, cold = timed_lint(tree, args.jobs, use_cache=True)
        cold_cpu = cpu_seconds() - cpu0
        row(f"detective cold ({args.jobs} procs)", cold_s,
            f"{len(cold.findings)} findings, {cold.files_checked} files")
        warm_s, warm = timed_lint(tree, args.jobs, use_cache=True)
        assert warm.findings == cold.findings, "warm run disagrees with cold run"
        row("detective warm (in process)", warm_s, f"{cold_s / warm_s:.1f}x faster than cold")
        # The first CLI run reuses every per-file summary but rebuilds the cross-file graph
        # (its whole-result key is not the in-process run's); the repeat is "nothing changed".
        first_cli_s, _ = timed_cli([str(tree)], tree, env)
        row("detective warm (CLI, 1st)", first_cli_s,
            f"{cold_s / first_cli_s:.1f}x faster than cold (summaries cached, graph rebuilt)")
        warm_cli = [timed_cli([str(tree)], tree, env)[0] for _ in range(args.repeat)]
        cli_s = statistics.median(warm_cli)
        print(f"{'detective warm (CLI process)':<30} {spread(warm_cli)}  nothing changed; median "
              f"{cold_s / cli_s:.1f}x faster than cold", flush=True)

        changed = sorted(files, key=lambda p: p.stat().st_size)[len(files) // 2:][:5]
        originals = {p: p.read_bytes() for p in changed}
        pre_wall, pre_cpu = [], []
        try:
            for run in range(args.repeat):
                for path in changed:  # a new edit each run: re-analysed, never a whole-result hit
                    path.write_bytes(originals[path] + f"\n# edited {run}\n".encode())
                wall, cpu, _ = timed_cli_cpu(["--project", str(tree), *map(str, changed)], tree, env)
                pre_wall.append(wall)
                pre_cpu.append(cpu)
        finally:
            for path, data in originals.items():
                path.write_bytes(data)
        changed_lines = sum(data.count(b"\n") for data in originals.values())
        print(f"{'pre-commit: 5 changed files':<30} {spread(pre_wall)}  ({changed_lines:,} lines changed, "
              f"{len(files)} files of project context; target < 1 s)", flush=True)
        print(f"{'pre-commit CPU time':<30} {spread(pre_cpu)}", flush=True)
        # One file named inside a project (a setup.cfg marks the tree as one just for this row):
        # the rest of the project is read as context, its summaries from the cache.
        marker = tree / "setup.cfg"
        marker.write_text("")
        try:
            named = [timed_cli([str(changed[0])], tree, env)[0] for _ in range(args.repeat)]
        finally:
            marker.unlink()
        print(f"{'one file named, project ctx':<30} {spread(named)}  ({len(files)} files of project context "
              f"from the cache; the first run in a project pays about the cold row)", flush=True)
        environment_cost("linted tree", cold.summaries, Config())

        if args.installed_bases:
            installed_bases(scratch, env)
        if args.vs == "fixit":
            fixit = ensure_fixit(args.fixit_venv)
            cpu0 = cpu_seconds()
            fixit_s = run_fixit(fixit, tree)
            fixit_cpu = cpu_seconds() - cpu0
            row(f"fixit {FIXIT_VERSION} lint", fixit_s)
            print(f"cold vs fixit: {fixit_s / cold_s:.1f}x the lines/s (target >= 8x)")
            # Wall time on a shared machine moves with other load; CPU seconds much less so.
            print(f"cold vs fixit by CPU time: {fixit_cpu / cold_cpu:.1f}x "
                  f"(detective {cold_cpu:.1f} CPU-s, fixit {fixit_cpu:.1f} CPU-s)")
            print(f"warm vs fixit: {fixit_s / warm_s:.0f}x (in process), {fixit_s / cli_s:.0f}x (CLI)")
        print(f"warm vs cold: {cold_s / warm_s:.1f}x faster in process, {cold_s / cli_s:.1f}x as a CLI "
              "(target >= 20x)")
        if not args.skip_single:
            print(f"speed-up from {args.jobs} processes: {one_s / cold_s:.2f}x (cold includes writing the cache)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
