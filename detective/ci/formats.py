"""Gate verdicts in the formats CI systems read: JUnit XML and GitHub workflow commands."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from detective.ci.gate import FAIL, PASS, UNUSABLE, Verdict


def junit(verdict: Verdict, run_dir: str) -> str:
    """One test suite, one test case: the budget for this run."""
    suite = ET.Element("testsuite", name="detective.gate", tests="1",
                       failures="1" if verdict.status == FAIL else "0",
                       errors="1" if verdict.status == UNUSABLE else "0")
    case = ET.SubElement(suite, "testcase", classname="detective.gate",
                         name=f"compile budget: {run_dir}")
    if verdict.status != PASS:
        tag = "failure" if verdict.status == FAIL else "error"
        problem = "; ".join(verdict.problems) or "budget exceeded"
        element = ET.SubElement(case, tag, message=problem, type="CompileBudget")
        element.text = verdict.message()
    ET.SubElement(case, "system-out").text = verdict.message()
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _workspace_path(path: str) -> str:
    base = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    relative = os.path.relpath(path, base) if os.path.isabs(path) else path
    return path if relative.startswith("..") else relative


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
        for (file, line), hits in by_line.items():
            steps = ", ".join(str(offence.step) for offence, _ in hits)
            programs = sum(offence.new_programs for offence, _ in hits)
            kinds = sorted({site["kind"] for _, site in hits if site.get("kind")})
            message = f"{programs} new program(s) compiled after warm-up, in step(s) {steps}"
            if kinds:
                message += f" ({', '.join(kinds)})"
            props = (f"file={_escape_property(_workspace_path(file))},line={line},"
                     f"title={_escape_property('detective gate: recompile')}")
            lines.append(f"::error {props}::{_escape_data(message)}")
    title = _escape_property("detective gate")
    lines.append(f"::{level} title={title}::{_escape_data(verdict.message())}")
    return "\n".join(lines) + "\n"
