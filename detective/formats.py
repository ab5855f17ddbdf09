"""Writers shared by every command's CI output: GitHub workflow commands and JUnit XML.

The lint, gate and report commands build their own records; only the syntax lives here.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


# -- GitHub workflow commands ------------------------------------------------------------------

def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(level: str, message: str, **properties) -> str:
    """``::level file=..,line=..,title=..::message``, escaped; properties that are None are left out
    (given in the order GitHub documents: file, line, col, title)."""
    props = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items()
                     if value is not None)
    return f"::{level}{' ' + props if props else ''}::{_escape_data(message)}"


# -- JUnit XML ---------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    classname: str
    file: str | None = None
    line: int | None = None
    failure: tuple[str, str, str | None] | None = None  # (message, type, text)
    error: tuple[str, str, str | None] | None = None
    output: str | None = None  # system-out


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)


def junit_xml(name: str, suites: list[Suite]) -> str:
    """One ``<testsuites>`` document with counts on every level."""
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in suites:
        counts = {"tests": len(suite.cases), "failures": sum(c.failure is not None for c in suite.cases),
                  "errors": sum(c.error is not None for c in suite.cases)}
        element = ET.SubElement(root, "testsuite", name=suite.name, **{k: str(v) for k, v in counts.items()})
        for key, value in counts.items():
            totals[key] += value
        for case in suite.cases:
            attrs = {"name": case.name, "classname": case.classname}
            if case.file is not None:
                attrs["file"] = case.file
            if case.line is not None:
                attrs["line"] = str(case.line)
            node = ET.SubElement(element, "testcase", **attrs)
            for tag, problem in (("failure", case.failure), ("error", case.error)):
                if problem is not None:
                    message, kind, text = problem
                    child = ET.SubElement(node, tag, message=message, type=kind)
                    child.text = text
            if case.output is not None:
                ET.SubElement(node, "system-out").text = case.output
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
