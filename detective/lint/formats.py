"""Output formats CI systems read: SARIF 2.1.0, GitHub workflow commands, JUnit XML, JSON lines.

``text`` and ``json`` stay in :mod:`detective.lint.cli` unchanged (tests and users
depend on them byte for byte).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from detective import __version__
from detective.formats import Case, Suite, github_command, junit_xml
from detective.lint.rule import Rule, all_rules

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/recompile-detective/recompile-detective"
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
SARIF_LEVELS = {"warning": "warning", "info": "note"}
GITHUB_LEVELS = {"warning": "warning", "info": "notice"}


def project_root(start: Path | None = None) -> Path:
    """The repository root (nearest directory with .git), else the working directory."""
    start = (start or Path.cwd()).resolve()
    for directory in [start, *start.parents]:
        if (directory / ".git").exists():
            return directory
    return start


def relative_uri(path: str, root: Path) -> str:
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_uri()


def doc_sections(rule: type[Rule]) -> dict[str, str]:
    doc = textwrap.dedent(rule.doc).strip()
    parts = _SECTION.split(doc)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def _plain(markdown: str) -> str:
    return re.sub(r"```\w*\n?", "", markdown).strip()


def sarif(findings, errors, root: Path | None = None) -> dict:
    root = root or project_root()
    rules = list(all_rules())
    index = {rule.code: i for i, rule in enumerate(rules)}
    descriptors = []
    for rule in rules:
        sections = doc_sections(rule)
        what = sections.get("What it does", rule.summary)
        why = sections.get("Why is this bad?", "")
        descriptors.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": _plain(f"{what}\n\n{why}".strip())},
            "help": {"text": _plain(rule.documentation()), "markdown": rule.documentation()},
            "defaultConfiguration": {"level": "warning"},
            "properties": {"tags": ["recompilation", "torch_xla"], "appliesTo": rule.applies_to,
                           "fixable": rule.fixable},
        })
    results = []
    for f in findings:
        uri = relative_uri(f.path, root)
        location = {"artifactLocation": {"uri": uri, **({"uriBaseId": "%SRCROOT%"} if "://" not in uri else {})},
                    "region": {"startLine": max(f.line, 1), "startColumn": max(f.column, 1)}}
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": SARIF_LEVELS[f.severity],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": location}],
            "properties": {"name": f.name, "region": f.region, "chain": [str(link) for link in f.chain],
                           "severity": f.severity},
        }
        if f.fix:
            result["fixes"] = [{
                "description": {"text": f.fix_title or "apply the suggested fix"},
                "artifactChanges": [{
                    "artifactLocation": location["artifactLocation"],
                    "replacements": [
                        {"deletedRegion": {"charOffset": start, "charLength": end - start},
                         "insertedContent": {"text": new}}
                        for start, end, new in f.fix
                    ],
                }],
            }]
        results.append(result)
    notifications = [
        {"level": "error", "message": {"text": problem},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": relative_uri(path, root)}}}]}
        for path, problem in errors
    ]
    run = {
        "tool": {"driver": {"name": "detective", "version": __version__, "semanticVersion": __version__,
                            "informationUri": INFORMATION_URI, "rules": descriptors}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def github(findings, errors) -> str:
    """GitHub Actions workflow commands: annotations on the changed lines of a PR."""
    lines = [github_command(GITHUB_LEVELS[f.severity], f.message, file=f.path, line=f.line, col=f.column, title=f"{f.code} {f.name}")
             for f in findings]
    lines += [github_command("error", problem, file=path, title="detective") for path, problem in errors]
    return "\n".join(lines)


def junit(findings, errors, files_checked: int) -> str:
    """A suite per file with one failing case per finding; unlintable files as errors."""
    by_path: dict[str, list] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    suites = []
    if not findings and not errors:
        suites.append(Suite("detective lint", [Case(f"{files_checked} files checked", "detective")]))
    for path, items in sorted(by_path.items()):
        suites.append(Suite(path, [
            Case(f"{f.code} {f.name} at {f.line}:{f.column}", path, file=path, line=f.line,
                 failure=(f.message, f.code, f"{f.path}:{f.line}:{f.column}: {f.code} [{f.name}] {f.message}"))
            for f in items
        ]))
    if errors:
        suites.append(Suite("unlintable files", [Case(path, "detective", error=(problem, "unlintable", None))
                                                 for path, problem in errors]))
    return junit_xml("detective", suites).rstrip("\n")


def json_lines(findings) -> str:
    return "\n".join(json.dumps(f.to_json(), ensure_ascii=False) for f in findings)


def dumps_sarif(findings, errors) -> str:
    return json.dumps(sarif(findings, errors), indent=2, ensure_ascii=False)
