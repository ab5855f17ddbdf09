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
@click.option("--backend", type=click.Choice(["auto", "xla", "dynamo"]), default="auto", show_default=True,
              help="What to record: xla (torch_xla programs), dynamo (torch.compile compiles, recompiles, graph "
                   "breaks), auto (dynamo unless torch_xla runs; both with torch.compile(backend='openxla')).")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True,
              help="Steps allowed to compile new programs; later ones are flagged.")
@click.option("--quiet", is_flag=True, help="Do not print the per-step table at the end.")
@click.option("--gate-after-step", type=click.IntRange(min=0),
              help="Gate the run: fail (exit 1) when new programs compile from this step on.")
@click.option("--max-new-programs", "--max-recompiles", "max_new_programs", type=click.IntRange(min=0),
              help="With the gate: recompiles allowed [default: 0].")
@click.option("--max-new-call-sites", type=click.IntRange(min=0),
              help="With the gate: first programs of new call sites allowed [default: no limit].")
@click.option("--max-unique-programs", type=click.IntRange(min=0), help="With the gate: cap on unique programs.")
@click.option("--max-compile-seconds", type=click.FloatRange(min=0), help="With the gate: cap on compile time.")
@click.option("--gate-format", type=click.Choice(["text", "junit", "github"]), default="text", show_default=True,
              help="Format of the gate's verdict (printed on stdout).")
@click.option("--allow-rank-divergence", is_flag=True, help="With the gate: do not fail when ranks ran different graphs.")
@click.option("--stall-timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="When no rank completes a step for S seconds: record every rank's Python stack and stop the job.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.pass_context
def run(ctx, out_dir, mode, backend, warmup, quiet, gate_after_step, max_new_programs, max_new_call_sites,
        max_unique_programs, max_compile_seconds, gate_format, allow_rank_divergence, stall_timeout, command):
    """Run COMMAND (e.g. -- python train.py ARGS...) and record programs compiled per step.

    \b
    Exit status: the command's own; 2 when detective cannot run it (command
    not found, output directory not writable, torch_xla not installed).
    With --gate-after-step: 1 when the gate fails, 2 when the run cannot be
    judged (no steps, never reached the step), else the command's own.
    """
    from detective.runtime.launcher import LaunchError
    from detective.runtime.launcher import run as launch

    budget_args = dict(after_step=gate_after_step, max_new_programs=max_new_programs,
                       max_unique_programs=max_unique_programs, max_compile_seconds=max_compile_seconds,
                       max_new_call_sites=max_new_call_sites)
    gating = any(value is not None for value in budget_args.values())
    if gating and ctx.get_parameter_source("warmup") == click.core.ParameterSource.DEFAULT \
            and gate_after_step is not None:
        warmup = gate_after_step  # the table's "new after warm-up" marks match the gate
    try:
        exit_code, out_dir = launch(list(command), out_dir, mode, warmup, backend=backend, stall_timeout=stall_timeout)
    except LaunchError as exc:
        _fail(str(exc))
    if not quiet:
        from detective.report.rank_text import run_text
        from detective.runtime.record import load_run

        click.echo(run_text(load_run(out_dir)), err=True)
    click.echo(f"detective: record in {out_dir} (detective report {out_dir})", err=True)
    if gating:
        from detective.ci.cli import gate_run
        from detective.ci.gate import PASS

        verdict = gate_run(out_dir, budget_args, gate_format, allow_rank_divergence=allow_rank_divergence)
        if verdict.status != PASS:
            sys.exit(verdict.status)
    sys.exit(exit_code)
