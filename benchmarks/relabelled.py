"""The blind relabelling of the labelled set: two independent labellers per site.

``benchmarks/lint_accuracy/relabel.csv`` holds, for every site of ``manifest.csv``, the
verdicts and notes of two labellers who saw neither the original labels nor any linter
output (their prompt: ``relabel_prompt.md``). The adoption rule was fixed before any of
their verdicts was read: a site takes the labellers' verdict where both give the same
``trigger``/``silent`` verdict; otherwise (they differ, or either is ``unclear``) the
original verdict stays. ``manifest.csv`` is never rewritten: both label sets are scored.
"""

from __future__ import annotations

import csv
import dataclasses
from collections import Counter
from pathlib import Path

LABELS = ("trigger", "silent")


def read_relabel(path: Path) -> dict[tuple[str, str, int, str], tuple[str, str]]:
    """(repo, path, line, rule) -> (labeller a's verdict, labeller b's verdict)."""
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        return {(r["repo"], r["path"], int(r["line"]), r["rule"]): (r["verdict_a"].strip(), r["verdict_b"].strip())
                for r in csv.DictReader(f)}


def adopted_verdict(original: str, a: str, b: str) -> str:
    return a if a == b and a in LABELS else original


def relabel_sites(sites: list, relabel: dict) -> tuple[list, list[dict]]:
    """The sites with the adopted verdicts, and every site whose verdict changed."""
    out, changed = [], []
    for site in sites:
        pair = relabel.get((site.repo, site.path, site.line, "|".join(site.codes)))
        verdict = adopted_verdict(site.verdict, *pair) if pair else site.verdict
        if verdict != site.verdict:
            changed.append({"site": site.where(), "rule": "|".join(site.codes), "from": site.verdict, "to": verdict})
        out.append(dataclasses.replace(site, verdict=verdict) if verdict != site.verdict else site)
    return out, changed


def agreement(sites: list, relabel: dict) -> dict:
    """How often the labellers agree with each other and with the original labels."""
    pairs = Counter()
    for site in sites:
        pair = relabel.get((site.repo, site.path, site.line, "|".join(site.codes)))
        if not pair:
            pairs["missing"] += 1
            continue
        a, b = pair
        pairs["sites"] += 1
        pairs["labellers_agree"] += a == b and a in LABELS
        pairs["unclear"] += "unclear" in pair or not all(pair)
        for v in (a, b):
            if v in LABELS:
                pairs["labeller_verdicts"] += 1
                pairs["labeller_agrees_with_original"] += v == site.verdict
        if site.verdict == "trigger":
            pairs["original_triggers"] += 1
            pairs["triggers_both_silent"] += a == b == "silent"
        else:
            pairs["original_silent"] += 1
            pairs["silent_both_trigger"] += a == b == "trigger"
    return dict(pairs)
