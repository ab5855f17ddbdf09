"""`detective run` (the report command lives in detective.report.cli).

Exit codes: 0 ok; 1 reserved for gates and findings; 2 usage or internal error (command not
found, unwritable output directory, torch_xla missing); a traced command's own non-zero exit
code is passed through unchanged.
"""

from __future__ import annotations

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
    """Run COMMAND (e.g. -- python train.py ARGS...) and record programs compiled per step.

    \b
    Exit status: the command's own; 2 when detective cannot run it (command
    not found, output directory not writable, torch_xla not installed).
    """
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
