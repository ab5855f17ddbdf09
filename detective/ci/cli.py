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
        click.option("--max-new-programs", type=click.IntRange(min=0),
                     help="New programs allowed from --after-step on [default: 0]."),
        click.option("--max-unique-programs", type=click.IntRange(min=0), help="Cap on unique programs in the run."),
        click.option("--max-compile-seconds", type=click.FloatRange(min=0), help="Cap on total compile time."),
    ]):
        fn = option(fn)
    return fn


def resolve_budget(after_step, max_new_programs, max_unique_programs, max_compile_seconds, script=None,
                   config_path=None):
    """Command-line values over ``[tool.detective.gate]`` of the nearest pyproject.toml."""
    from detective.ci.gate import budget_from_config
    from detective.lint.config import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    table = config.raw.get("gate", {})
    overrides = dict(after_step=after_step, max_new_programs=max_new_programs,
                     max_unique_programs=max_unique_programs, max_compile_seconds=max_compile_seconds)
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


def gate_run(run_dir: str, budget_args: dict, fmt: str, config_path=None):
    from detective.ci.gate import Budget, Verdict, evaluate, script_of
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
    verdict = evaluate(run, budget, attributions=_attributions(run))
    emit_verdict(verdict, run_dir, fmt)
    return verdict


def _attributions(run) -> dict[int, list[dict]] | None:
    """Source lines per step from the attribution report, when the run has them."""
    try:
        from detective.report.attribution import attributions_by_step
    except ImportError:
        return None
    return attributions_by_step(run)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=str))
@budget_options
@click.option("--format", "fmt", type=click.Choice(GATE_FORMATS), default="text", show_default=True)
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="pyproject.toml with [tool.detective.gate] (default: the nearest one).")
def gate(run_dir, after_step, max_new_programs, max_unique_programs, max_compile_seconds, fmt, config_path):
    """Fail when RUN_DIR compiled new programs after warm-up.

    Exit status: 0 within budget; 1 budget exceeded; 2 the run cannot be judged (missing,
    no steps, never reached --after-step) or a usage error.
    """
    budget_args = dict(after_step=after_step, max_new_programs=max_new_programs,
                       max_unique_programs=max_unique_programs, max_compile_seconds=max_compile_seconds)
    verdict = gate_run(run_dir, budget_args, fmt, config_path)
    sys.exit(verdict.status)
