"""Judged samples of the linter's findings: reading them, one precision per sample, the
census of every current finding, and how far the judges agree with each other.

Split from ``benchmarks/lint_accuracy.py``, which runs the linter and scores the labels;
this module only reads the sample files (``benchmarks/lint_accuracy/sample*.csv``).
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from pathlib import Path

SAMPLE_GLOB = "sample*.csv"
VERDICTS = ("right", "wrong")


def read_sample(path: Path, judged_only: bool = True) -> list[dict]:
    """Rows of one sample file, each tagged with the file's stem under ``sample``."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = [dict(row, sample=path.stem) for row in csv.DictReader(f)]
    return [r for r in rows if r.get("judgement")] if judged_only else rows


def sample_groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Judged rows by (sample file, linter commit): each is one precision figure."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["sample"], row.get("linter_commit") or "")].append(row)
    return dict(sorted(groups.items()))


def sample_precision(rows: list[dict]) -> dict:
    counts: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        for key in (row["code"], "all"):
            counts[key][row["judgement"]] += 1
    out = {}
    for key, c in counts.items():
        judged = c["right"] + c["wrong"]
        out[key] = {
            "right": c["right"],
            "wrong": c["wrong"],
            "unclear": c["unclear"],
            "precision": c["right"] / judged if judged else None,
            # unclear findings counted wrong: the floor of what users meet
            "precision_strict": c["right"] / (judged + c["unclear"]) if judged + c["unclear"] else None,
        }
    return out


def sample_paths(directory: Path) -> list[Path]:
    """Sample files oldest first (sample.csv, then sample-a ... -z, -t2 after -t, then -aa, -ab ...,
    as spreadsheet columns are named): a later sample's verdict on the same finding (a re-judged
    draw, --include-judged) is the one the census keeps."""
    return sorted(directory.glob(SAMPLE_GLOB), key=_draw_order)


def _draw_order(path: Path) -> tuple:
    name = path.stem.removeprefix("sample").removeprefix("-")
    letters = name.rstrip("0123456789")
    return len(letters), letters, len(name) - len(letters), name


def census(findings: dict[str, list[dict]], rows: list[dict]) -> dict:
    """Every whole-repository finding of this linter, with the verdict any sample gave it.

    Samples exclude what earlier samples drew, so once they have covered the population
    this is precision over all findings users meet, not an estimate from a draw; the
    verdicts come from the judges of the samples named in ``by_sample`` (criteria differ
    between judges, so the split is printed with it). A finding judged in more than one
    sample (``--include-judged`` draws) keeps the verdict of the newest: ``rows`` come
    oldest first. ``majority`` counts the same findings by the majority of their judges
    (a tie keeps the newest): a second view, since judges disagree (:func:`judge_agreement`)."""
    verdicts = {(r["repo"], r["path"], int(r["line"]), r["code"]): r for r in rows}
    current = {(repo, f["path"], f["line"], f["code"]) for repo, items in findings.items() for f in items}
    total: Counter = Counter()
    by_sample: dict[str, Counter] = defaultdict(Counter)
    for key in current:
        row = verdicts.get(key)
        judgement = row["judgement"] if row else "not judged"
        total[judgement] += 1
        by_sample[row["sample"] if row else "-"][judgement] += 1
    judged = total["right"] + total["wrong"]
    majority = majority_verdicts(rows)
    by_majority = Counter(majority[key] for key in current if key in majority)
    return {"findings": len(current), "counts": dict(total), "by_sample": {k: dict(v) for k, v in sorted(by_sample.items())},
            "majority": dict(by_majority),
            "precision_majority": by_majority["right"] / sum(by_majority.values()) if by_majority else None,
            "precision": total["right"] / judged if judged else None,
            "precision_strict": total["right"] / (judged + total["unclear"] + total["not judged"])
            if current else None}


def _verdicts_by_finding(rows: list[dict]) -> dict[tuple, list[str]]:
    """Each finding's right/wrong verdicts, oldest first (``rows`` come oldest first)."""
    out: dict[tuple, list[str]] = defaultdict(list)
    for r in rows:
        if r["judgement"] in VERDICTS:
            out[(r["repo"], r["path"], int(r["line"]), r["code"])].append(r["judgement"])
    return out


def judge_agreement(rows: list[dict]) -> dict:
    """How often two judges of the same finding (re-drawn in a later sample) agree: over
    every pair of right/wrong verdicts on one finding. Judges of different samples read
    different prompts (samples m to s share one), so this is an upper bound on the noise
    of one prompt's judges only in so far as the prompts agree."""
    pairs = agree = 0
    split = 0
    for verdicts in _verdicts_by_finding(rows).values():
        n_right = verdicts.count("right")
        n = len(verdicts)
        pairs += n * (n - 1) // 2
        agree += n_right * (n_right - 1) // 2 + (n - n_right) * (n - n_right - 1) // 2
        split += 0 < n_right < n
    many = sum(1 for v in _verdicts_by_finding(rows).values() if len(v) > 1)
    return {"rejudged": many, "pairs": pairs, "agree": agree, "split": split,
            "rate": agree / pairs if pairs else None}


def majority_verdicts(rows: list[dict]) -> dict[tuple, str]:
    """Each finding's verdict by majority of its judges; a tie keeps the newest."""
    out = {}
    for key, verdicts in _verdicts_by_finding(rows).items():
        right = verdicts.count("right")
        wrong = len(verdicts) - right
        out[key] = "right" if right > wrong else "wrong" if wrong > right else verdicts[-1]
    return out


HELDOUT_DIR = "heldout_repos"  # under the sample directory: judged findings of repositories never labelled


def heldout_repos(directory: Path) -> list[dict]:
    """Findings of repositories outside the labelled set, each file one judge's verdicts on
    a draw made at one linter commit (``<name>-judge<k>.csv``). They are read, never
    re-linted: the figures belong to the commit in the rows."""
    out = []
    for path in sorted((directory / HELDOUT_DIR).glob("*.csv")):
        rows = read_sample(path)
        if not rows:
            continue
        counts = Counter(r["judgement"] for r in rows)
        judged = counts["right"] + counts["wrong"]
        out.append({"file": path.name, "repo": rows[0]["repo"], "commit": rows[0]["commit"][:12],
                    "linter_commit": rows[0]["linter_commit"][:12], "findings": len(rows),
                    "right": counts["right"], "wrong": counts["wrong"], "unclear": counts["unclear"],
                    "precision": counts["right"] / judged if judged else None})
    return out
