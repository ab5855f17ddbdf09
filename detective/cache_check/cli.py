"""`detective cache-check [--cache DIR] [--keep] [--format text|json] -- CMD`.

Exit codes: 0 reuse proven; 1 not reused (the reasons are printed); 2 could not run (usage, the
command failed or could not start, torch_xla missing, nothing compiled).
"""

from __future__ import annotations

import json
import sys

import click

from detective.runtime.child import MODES

EXIT_REUSED, EXIT_NOT_REUSED, EXIT_ERROR = 0, 1, 2


def _env_pair(ctx, param, values):
    out = {}
    for value in values:
        name, sep, val = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {value!r}")
        out[name] = val
    return out


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False),
              help="Cache directory to test [default: a fresh temporary one].")
@click.option("--keep", is_flag=True, help="Keep the cache and both run records (printed at the end).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--mode", type=click.Choice(MODES),
              help="diagnose [default with a fresh cache] names the line of a changed graph; count "
                   "[default with --cache] keeps the key your training writes (diagnose's XLA_IR_DEBUG/"
                   "XLA_HLO_DEBUG enter the key).")
@click.option("--warm-env", multiple=True, callback=_env_pair, metavar="NAME=VALUE",
              help="Change a variable for the warm run only: would the cache survive it?")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def cache_check(cache_dir, keep, fmt, mode, warm_env, command):
    """Run COMMAND twice, cold then warm, and prove the warm restart loads its programs
    from torch_xla's persistent compilation cache, or say why not.

    \b
    Exit status: 0 reuse proven, 1 not reused, 2 could not run.
    """
    from detective.cache_check.pair import run_pair
    from detective.cache_check.render import as_json, as_text, error_json
    from detective.cache_check.verdict import REUSED, CannotJudge, judge
    from detective.runtime.launcher import LaunchError

    mode = mode or ("count" if cache_dir else "diagnose")
    stdout = 2 if fmt == "json" else None  # the command's stdout goes to stderr: ours is the JSON

    def fail(message: str, pair=None) -> None:
        if fmt == "json":
            click.echo(json.dumps(error_json(message, pair), indent=2))
        click.echo(f"detective: {message}", err=True)
        sys.exit(EXIT_ERROR)

    try:
        pair = run_pair(list(command), cache_dir, mode, warm_env, stdout=stdout)
    except LaunchError as exc:
        fail(str(exc))
    try:
        verdict, cold, warm, reasons = judge(pair)
    except CannotJudge as exc:
        if not keep:
            pair.cleanup()
        fail(str(exc) if keep else str(exc).split("; see")[0], pair if keep else None)
    if fmt == "json":
        click.echo(json.dumps(as_json(pair, verdict, cold, warm, reasons, keep), indent=2, ensure_ascii=False))
    else:
        click.echo(as_text(pair, verdict, cold, warm, reasons, keep))
    if not keep:
        pair.cleanup()
    sys.exit(EXIT_REUSED if verdict == REUSED else EXIT_NOT_REUSED)
