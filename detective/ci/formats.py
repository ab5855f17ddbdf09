"""Gate verdicts in the formats CI systems read: JUnit XML and GitHub workflow commands."""

from __future__ import annotations

import os

from detective.ci.gate import FAIL, PASS, UNUSABLE, Verdict
from detective.formats import Case, Suite, github_command, junit_xml
from detective.paths import short_path


def junit(verdict: Verdict, run_dir: str) -> str:
    """One test suite, one test case: the budget for this run."""
    case = Case(f"compile budget: {run_dir}", "detective.gate", output=verdict.message())
    if verdict.status != PASS:
        problem = ("; ".join(verdict.problems) or "budget exceeded", "CompileBudget", verdict.message())
        if verdict.status == FAIL:
            case.failure = problem
        else:
            case.error = problem
    return junit_xml("detective", [Suite("detective.gate", [case])])


def github(verdict: Verdict) -> str:
    """Workflow commands: an annotation on each attributed line, then the verdict."""
    level = {PASS: "notice", FAIL: "error", UNUSABLE: "error"}[verdict.status]
    lines = []
    if verdict.status == FAIL:
        # One annotation per source line, naming every step it recompiled in.
        by_line: dict[tuple[str, int], list] = {}
        for offence in verdict.offences:
            for site in offence.sites:
                if site.get("file"):
                    by_line.setdefault((site["file"], site.get("line") or 1), []).append((offence, site))
        base = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
        for (file, line), hits in by_line.items():
            steps = ", ".join(str(offence.step) for offence, _ in hits)
            programs = sum(offence.new_programs for offence, _ in hits)
            kinds = sorted({site["kind"] for _, site in hits if site.get("kind")})
            message = f"{programs} {hits[0][0].kind}(s) after warm-up, in step(s) {steps}"
            if kinds:
                message += f" ({', '.join(kinds)})"
            lines.append(github_command("error", message, file=short_path(file, base), line=line,
                                        title="detective gate: recompile"))
    lines.append(github_command(level, verdict.message(), title="detective gate"))
    return "\n".join(lines) + "\n"
