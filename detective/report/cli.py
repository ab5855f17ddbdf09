"""`detective report RUN_DIR [--lint PATHS] [--format text|json|markdown|html] [--no-lint]`.

The per-step table of any run, plus (for diagnose runs) each new program after warm-up
attributed to a source line and joined with the linter's static findings.
Exit codes: 0 ok; 2 usage error or not a run directory.
"""

from __future__ import annotations

import json
import sys

import click

EXIT_USAGE = 2


@click.command()
@click.argument("run_dir", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown", "html"]), default="text",
              show_default=True)
@click.option("--lint", "lint_paths", multiple=True, type=click.Path(),
              help="Files or folders to lint for the join [default: the files the recompiles point at]. Repeatable.")
@click.option("--no-lint", is_flag=True, help="Do not run the linter (no static findings in the report).")
@click.option("--rank", type=int, help="Show this rank's steps and recompiles [default: the lowest recorded rank].")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--all-steps", is_flag=True,
              help="Print every step in the text table [default: quiet runs of steps collapse into one row]. "
                   "JSON and HTML always keep every step.")
def report(run_dir, fmt, lint_paths, no_lint, rank, output, all_steps):
    """Report a recorded run: programs per step and, for diagnose runs, the line behind each recompile."""
    from detective.report.attribution import attribute_run
    from detective.report.model import Links
    from detective.report.html_page import html_page
    from detective.report.markdown_page import markdown
    from detective.report.render import as_json, build, text
    from detective.runtime.record import RunNotFound, load_run

    try:
        run = load_run(run_dir)
    except RunNotFound as exc:
        click.echo(f"detective: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if rank is not None:
        try:
            run = run.for_rank(rank)
        except KeyError:
            recorded = ", ".join(map(str, run.ranks)) or "none"
            click.echo(f"detective: rank {rank} recorded no steps in {run_dir} (ranks recorded: {recorded})", err=True)
            sys.exit(EXIT_USAGE)
    from detective.report.rank_text import rank_sections

    ranks = rank_sections(run, lint=not no_lint, lint_paths=list(lint_paths))
    for warning in run.warnings:
        click.echo(f"detective: warning: {warning}", err=True)
    from detective.report.dynamo_steps import is_dynamo_run

    dynamo = is_dynamo_run(run)
    if dynamo:  # torch.compile: Dynamo recorded the guard and line of each recompile itself
        from detective.report.dynamo import attribute_dynamo, files_to_lint, join_graph_breaks

        attribution = attribute_dynamo(run)
        lint_paths = list(lint_paths) or files_to_lint(attribution)
    else:
        attribution = attribute_run(run)
    lint_errors, linted, links = [], [], Links()
    if attribution.available and not no_lint and (attribution.recompiles or attribution.host_syncs
                                                   or dynamo and lint_paths):
        from detective.report.join import join, lint_files  # the linter (libcst) only when joining

        try:
            findings, lint_errors = lint_files(attribution, list(lint_paths), run.meta.get("cwd"))
        except Exception as exc:  # the attribution stands on its own: report it without the join
            findings, lint_errors = [], [("linter", f"failed ({type(exc).__name__}: {exc}); no static findings joined")]
        linted = sorted({f.path for f in findings})
        links = join(attribution, findings)
        if dynamo:
            links = join_graph_breaks(attribution, findings, links)
    if not attribution.available:
        click.echo(f"detective: note: {attribution.reason}", err=True)
    rendered = build(run, attribution, links, lint_errors, linted, ranks)
    if fmt == "json":
        body = json.dumps(as_json(rendered), indent=2)
    elif fmt == "markdown":
        body = markdown(rendered)
    elif fmt == "html":
        body = html_page(rendered)
    else:
        body = text(rendered, all_steps=all_steps)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(body if body.endswith("\n") else body + "\n")
        click.echo(f"detective: report written to {output}", err=True)
    else:
        click.echo(body.rstrip("\n"))
