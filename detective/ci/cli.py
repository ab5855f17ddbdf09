"""``detective gate``, ``detective bisect`` and ``detective bisect-steps``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from detective.ci.gate import UNUSABLE

GATE_FORMATS = ["text", "junit", "github"]


def budget_options(fn):
    for option in reversed([
        click.option("--after-step", type=click.IntRange(min=0),
                     help="First step that must not compile new programs (warm-up ends before it)."),
        click.option("--max-new-programs", "--max-recompiles", "max_new_programs", type=click.IntRange(min=0),
                     help="Recompiles allowed from --after-step on [default: 0]; new call sites and "
                          "optimizer warm-up are not counted here."),
        click.option("--max-new-call-sites", type=click.IntRange(min=0),
                     help="First programs of new call sites (eval loop, checkpoint, final reduce) allowed "
                          "from --after-step on [default: no limit]."),
        click.option("--max-unique-programs", type=click.IntRange(min=0), help="Cap on unique programs in the run."),
        click.option("--max-compile-seconds", type=click.FloatRange(min=0), help="Cap on total compile time."),
        click.option("--min-cache-hit-rate", type=click.FloatRange(min=0, max=1),
                     help="Least share of persistent-cache lookups that must load (gate a warm restart)."),
    ]):
        fn = option(fn)
    return fn


def resolve_budget(after_step, max_new_programs, max_unique_programs, max_compile_seconds,
                   min_cache_hit_rate=None, script=None, config_path=None, max_new_call_sites=None):
    """Command-line values over ``[tool.detective.gate]`` of the nearest pyproject.toml."""
    from detective.ci.gate import budget_from_config
    from detective.lint.config import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    table = config.raw.get("gate", {})
    overrides = dict(after_step=after_step, max_new_programs=max_new_programs,
                     max_unique_programs=max_unique_programs, max_compile_seconds=max_compile_seconds,
                     min_cache_hit_rate=min_cache_hit_rate, max_new_call_sites=max_new_call_sites)
    try:
        return budget_from_config(table, script, overrides)
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None


def emit_verdict(verdict, run_dir: str, fmt: str) -> None:
    from detective.ci import formats

    if fmt == "junit":
        click.echo(formats.junit(verdict, run_dir), nl=False)
    elif fmt == "github":
        click.echo(formats.github(verdict), nl=False)
    else:
        click.echo(verdict.message())


def gate_run(run_dir: str, budget_args: dict, fmt: str, config_path=None, allow_rank_divergence: bool = False):
    from detective.ci.gate import Budget, Verdict, script_of
    from detective.ci.rank_gate import evaluate_ranks
    from detective.runtime.record import RunNotFound, load_run

    try:
        run = load_run(run_dir)
    except RunNotFound as exc:
        budget = Budget(after_step=budget_args.get("after_step") or 0)
        verdict = Verdict(UNUSABLE, budget, problems=[str(exc)])
        emit_verdict(verdict, run_dir, fmt)
        return verdict
    for warning in run.warnings:
        click.echo(f"detective: warning: {warning}", err=True)
    budget = resolve_budget(**budget_args, script=script_of(run), config_path=config_path)
    verdict = evaluate_ranks(run, budget, _attributions, allow_rank_divergence)
    emit_verdict(verdict, run_dir, fmt)
    return verdict


def _attributions(run) -> dict[int, list[dict]] | None:
    """Source lines per step from the attribution report, when the run has them."""
    from detective.report.attribution import attributions_by_step

    return attributions_by_step(run)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=str))
@budget_options
@click.option("--format", "fmt", type=click.Choice(GATE_FORMATS), default="text", show_default=True)
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="pyproject.toml with [tool.detective.gate] (default: the nearest one).")
@click.option("--allow-rank-divergence", is_flag=True, help="Do not fail when ranks executed different graphs.")
def gate(run_dir, after_step, max_new_programs, max_new_call_sites, max_unique_programs, max_compile_seconds,
         min_cache_hit_rate, fmt, config_path, allow_rank_divergence):
    """Fail when RUN_DIR recompiled after warm-up.

    Counted against --max-new-programs: recompiles (a computation that compiled before compiles
    again, changed). Not counted: first programs of new call sites (their own budget,
    --max-new-call-sites) and optimizer warm-up proven from a diagnose run's graphs.

    Exit status: 0 within budget; 1 budget exceeded; 2 the run cannot be judged (missing,
    no steps, never reached --after-step) or a usage error.
    """
    budget_args = dict(after_step=after_step, max_new_programs=max_new_programs,
                       max_unique_programs=max_unique_programs, max_compile_seconds=max_compile_seconds,
                       min_cache_hit_rate=min_cache_hit_rate, max_new_call_sites=max_new_call_sites)
    verdict = gate_run(run_dir, budget_args, fmt, config_path, allow_rank_divergence)
    sys.exit(verdict.status)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--good", required=True, help="A commit that passes the gate.")
@click.option("--bad", required=True, help="A commit that fails it (storms).")
@budget_options
@click.option("--mode", type=click.Choice(["count", "diagnose"]), default="count", show_default=True)
@click.option("--out", "out_root", type=click.Path(file_okay=False), help="Keep each commit's run here.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def bisect(good, bad, after_step, max_new_programs, max_new_call_sites, max_unique_programs, max_compile_seconds,
           min_cache_hit_rate,
           mode, out_root, command):
    """Find the first commit whose COMMAND fails the compile-budget gate.

    Drives `git bisect run` with `detective run` + the gate as the test, and restores the
    repository afterwards. Exit status: 0 a first bad commit was named; 2 it could not be
    (dirty tree, swapped endpoints, a command that does not run, not a git repository).
    """
    from detective.ci.bisect import BisectError
    from detective.ci.bisect import bisect as run_bisect

    budget = resolve_budget(after_step, max_new_programs, max_unique_programs, max_compile_seconds,
                            min_cache_hit_rate, max_new_call_sites=max_new_call_sites)
    try:
        outcome = run_bisect(".", good, bad, list(command), budget, mode=mode, out_root=out_root,
                             echo=lambda text: click.echo(text, err=True))
    except BisectError as exc:
        click.echo(f"detective bisect: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("detective bisect: interrupted; the repository was restored", err=True)
        sys.exit(130)
    click.echo(f"first bad commit: {outcome.sha} {outcome.subject}")
    click.echo(f"tested: {', '.join(f'{sha[:10]} {verdict}' for sha, verdict in outcome.tested)}")
    click.echo(f"its run: {outcome.run_dir}")
    click.echo(outcome.verdict_message)


@click.command("bisect-steps")
@click.argument("run_dir", type=click.Path(path_type=str))
@click.option("--quiet-steps", type=click.IntRange(min=1), default=5, show_default=True,
              help="Steps without a new program that count as settled.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def bisect_steps(run_dir, quiet_steps, fmt):
    """Find the step where a long run started compiling new programs and never settled.

    Exit status: 0 no storm; 1 a storm was found; 2 the run cannot be read or has no steps.
    """
    import dataclasses
    import json

    from detective.ci.storm_scan import find_storm
    from detective.runtime.record import RunNotFound, load_run

    try:
        run = load_run(run_dir)
    except RunNotFound as exc:
        click.echo(f"detective: {exc}", err=True)
        sys.exit(2)
    finding = find_storm(run, quiet=quiet_steps)
    if fmt == "json":
        click.echo(json.dumps(dataclasses.asdict(finding), indent=2, default=str))
    else:
        click.echo(finding.message(quiet_steps))
    sys.exit(2 if finding.steps_recorded == 0 else 1 if finding.storming else 0)
