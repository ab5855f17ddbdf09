"""``detective lint`` and ``detective rules``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import click

from detective.lint.config import ConfigError, load_config
from detective.lint.discovery import default_project
from detective.lint.model import SEVERITIES
from detective.lint.rule import all_rules

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(values) -> list[str]:
    return [code for value in values for code in value.split(",") if code.strip()]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--select", multiple=True, help="Codes or prefixes to check (comma-separated; default: all).")
@click.option("--ignore", multiple=True, help="Codes or prefixes to skip (comma-separated).")
@click.option("--format", "output_format",
              type=click.Choice(["text", "json", "json-lines", "sarif", "github", "junit"]),
              default="text", show_default=True, help="Output format.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of each finding.")
@click.option("--fix", is_flag=True, help="Apply behaviour-keeping fixes in place, then report what is left.")
@click.option("--diff", is_flag=True, help="Print the fixes --fix would apply as a unified diff; change nothing.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the per-file cache (.detective/cache).")
@click.option("--project", "project", multiple=True, type=click.Path(path_type=str),
              help="Also read these paths (not reported on) for cross-file chains and XLA reachability: "
                   "lint a few changed files with the whole project's context (pre-commit). "
                   "Default: the project the paths belong to (nearest pyproject.toml, setup.py, setup.cfg or .git).")
@click.option("--no-project", is_flag=True,
              help="Read no file but those named: lint them alone, without their project as context.")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="pyproject.toml to read [tool.detective] from (default: the nearest one).")
@click.option("--min-severity", type=click.Choice(list(SEVERITIES)),
              help="Show findings of this severity and above (default: min-severity in the config, else "
                   "warning; info adds reads of tensors made on the CPU).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPU count).")
def lint(paths, select, ignore, output_format, exit_zero, statistics, fix, diff, no_cache, project,
         no_project, config_path, min_severity, jobs):
    """Flag recompile and host-sync triggers inside compiled or traced regions,
    and whole-program XLA policies in code that uses torch_xla.

    Exit status: 0 no findings, 1 findings (with --diff: fixes to apply), 2 usage
    error or nothing could be linted.
    """
    from detective.lint.engine import lint_paths

    paths = list(paths) or ["."]
    if fix and diff:
        raise click.UsageError("--fix and --diff are exclusive: --diff previews what --fix writes")
    if project and no_project:
        raise click.UsageError("--project and --no-project are exclusive")
    notice = None
    if not project and not no_project:
        project = default_project(paths)
        if project:
            def notice(to_parse: int, total: int) -> None:
                click.echo(f"detective: reading {total:,} files of {project[0]} as context for the files named "
                           f"({to_parse:,} not in the cache yet; --no-project lints them alone)", err=True)
    try:
        config = load_config(config_path, start=Path(paths[0]))
        select_codes, ignore_codes = _codes(select), _codes(ignore)  # lint_paths checks them

        def run():
            return lint_paths(paths, config, select=select_codes or None, ignore=ignore_codes, jobs=jobs,
                              use_cache=not no_cache, project=list(project) or None,
                              min_severity=min_severity, notice=notice)

        result = run()
    except (ConfigError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None

    for path, problem in result.errors:
        click.echo(f"{path}: {problem}", err=True)
    if diff:
        _print_diff(result)
    if fix:
        result = _apply_fixes(result, run)
    findings = result.findings
    if statistics:
        _print_statistics(findings, output_format)
    elif output_format == "json":
        click.echo(json.dumps([f.to_json() for f in findings], indent=2))
    elif output_format == "text":
        for f in findings:
            level = "" if f.severity == "warning" else f"({f.severity}) "
            click.echo(f"{f.path}:{f.line}:{f.column}: {f.code} [{f.name}] {level}{f.message}")
    else:
        from detective.lint import formats

        if output_format == "sarif":
            text = formats.dumps_sarif(findings, result.errors)
        elif output_format == "github":
            text = formats.github(findings, result.errors)
        elif output_format == "junit":
            text = formats.junit(findings, result.errors, result.files_checked)
        else:
            text = formats.json_lines(findings)
        if text:
            click.echo(text)
    if output_format == "text":
        _print_summary(result)
    if result.files_checked == 0 and result.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN)


def _print_diff(result) -> None:
    from detective.lint.fix import plan_fixes

    plans = plan_fixes(result.findings, result.summaries)
    for plan in plans:
        click.echo(plan.diff(), nl=False)
    count = sum(len(p.fixed) for p in plans)
    if plans:
        click.echo(f"Would fix {count} finding{'s' if count != 1 else ''} "
                   f"in {len(plans)} file{'s' if len(plans) != 1 else ''}.", err=True)
    sys.exit(EXIT_FINDINGS if plans else EXIT_CLEAN)


def _apply_fixes(result, run):
    """Fix, re-lint, repeat until nothing is left to fix (overlapping edits wait a round)."""
    from detective.lint.fix import plan_fixes

    fixed_count, fixed_files = 0, set()
    for _ in range(4):
        plans = plan_fixes(result.findings, result.summaries)
        if not plans:
            break
        for plan in plans:
            plan.write()
            fixed_count += len(plan.fixed)
            fixed_files.add(plan.path)
        result = run()
    if fixed_count:
        click.echo(f"Fixed {fixed_count} finding{'s' if fixed_count != 1 else ''} "
                   f"in {len(fixed_files)} file{'s' if len(fixed_files) != 1 else ''}.", err=True)
    return result


def _print_statistics(findings, output_format) -> None:
    counts = Counter((f.code, f.name) for f in findings)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if output_format == "json":
        click.echo(json.dumps([{"code": c, "name": n, "count": k} for (c, n), k in rows], indent=2))
        return
    for (code, name), count in rows:
        click.echo(f"{count:>5}  {code}  {name}")


def _print_summary(result) -> None:
    files = f"{result.files_checked} file{'s' if result.files_checked != 1 else ''} checked"
    problems = f", {len(result.errors)} could not be linted" if result.errors else ""
    if result.findings:
        n = len(result.findings)
        click.echo(f"Found {n} finding{'s' if n != 1 else ''} ({files}{problems}).")
    elif result.files_checked:
        click.echo(f"All checks passed! ({files}{problems})")
    if result.hidden:
        click.echo(f"{result.hidden} lower-severity finding{'s' if result.hidden != 1 else ''} not shown "
                   "(--min-severity info shows them).")


@click.command()
@click.argument("code", required=False)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def rules(code, output_format):
    """List the rules, or print the documentation of one (by code or name)."""
    known = all_rules()
    if code is None:
        if output_format == "json":
            click.echo(json.dumps([{"code": r.code, "name": r.name, "summary": r.summary} for r in known],
                                  indent=2))
            return
        for rule in known:
            click.echo(f"{rule.code}  {rule.name:<22} {rule.summary}")
        return
    wanted = code.strip()
    for rule in known:
        if wanted.upper() == rule.code or wanted.lower() == rule.name:
            if output_format == "json":
                click.echo(json.dumps({"code": rule.code, "name": rule.name, "summary": rule.summary,
                                       "doc": rule.documentation()}, indent=2))
            else:
                click.echo(rule.documentation())
            return
    raise click.UsageError(f"unknown rule {code!r}; `detective rules` lists them")
