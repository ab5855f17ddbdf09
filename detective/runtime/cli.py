"""`detective run` and `detective report`.

Exit codes: 0 ok; 1 reserved for gates and findings; 2 usage or internal error (command not
found, unwritable output directory, torch_xla missing, not a run directory); a traced
command's own non-zero exit code is passed through unchanged.
"""

from __future__ import annotations

import json
import sys

import click

from detective.runtime.child import MODES

EXIT_USAGE = 2


def _fail(message: str) -> None:
    click.echo(f"detective: {message}", err=True)
    sys.exit(EXIT_USAGE)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run directory [default: .detective/runs/<timestamp>].")
@click.option("--mode", type=click.Choice(MODES), default="count", show_default=True,
              help="count: cheap, hashes and counts; diagnose: also IR debug info and the IR of each new graph.")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True,
              help="Steps allowed to compile new programs; later ones are flagged.")
@click.option("--quiet", is_flag=True, help="Do not print the per-step table at the end.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(out_dir, mode, warmup, quiet, command):
    """Run COMMAND (e.g. -- python train.py ARGS...) and record programs compiled per step."""
    from detective.runtime.launcher import LaunchError
    from detective.runtime.launcher import run as launch

    try:
        exit_code, out_dir = launch(list(command), out_dir, mode, warmup)
    except LaunchError as exc:
        _fail(str(exc))
    if not quiet:
        from detective.runtime.record import load_run
        from detective.runtime.report import text_report

        click.echo(text_report(load_run(out_dir)), err=True)
    click.echo(f"detective: record in {out_dir} (detective report {out_dir})", err=True)
    sys.exit(exit_code)


@click.command()
@click.argument("run_dir", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def report(run_dir, fmt):
    """Print the per-step table of a recorded run."""
    from detective.runtime.record import RunNotFound, load_run
    from detective.runtime.report import json_report, text_report

    try:
        loaded = load_run(run_dir)
    except RunNotFound as exc:
        _fail(str(exc))
    for warning in loaded.warnings:
        click.echo(f"detective: warning: {warning}", err=True)
    if fmt == "json":
        click.echo(json.dumps(json_report(loaded), indent=2))
    else:
        click.echo(text_report(loaded))
