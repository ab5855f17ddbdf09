"""Linter precision and recall on hand-labelled sites in public model code.

The labelled set (``benchmarks/lint_accuracy/manifest.csv``) names sites by repository,
commit, path and line, with a hash of the line and no source text. This script checks out
each (repository, commit) from fetched snapshots (``--mirrors DIR``, holding
``DIR/<owner>+<name>/repo`` git directories), verifies the line hashes, lints

  (a) the labelled files of each repository named alone, as ``detective lint a.py b.py``
      runs them by default: reported on alone, with the rest of their project read as
      context (what the pre-commit hook's ``--project .`` also does);
  (b) the same files with ``--no-project``: nothing else read, as if the rest of the
      repository were not there;
  (c) each whole repository,

with ``detective lint --format json`` (the CLI of whichever interpreter ``--python`` names,
so another worktree's linter can be measured), and prints precision and recall per rule
for both settings. A finding counts for a site when its code is one of the site's codes
and its line falls in the site's statement (the header of an ``if``/``while``/``for``, or
the whole simple statement), so a multi-line condition reported on any of its lines
matches.

``benchmarks/lint_accuracy/sample*.csv`` hold findings drawn at random from
whole-repository runs and judged by reading the code, one file per sample; the precision
of each sample is printed apart, with the linter commit it was drawn from (samples of
different linter commits are never pooled). Only findings shown by default (severity
``warning``) are scored or drawn; the labelled sets' precision and recall are also printed
with ``info`` findings counted, to show what is found but shown only on request. ``--draw-sample N`` draws a fresh sample
(fixed ``--seed``) from this run's whole-repository findings into a CSV to be judged,
leaving out findings (repo, path, line, code) already in a sample file.

Exit status: 0 scored, 1 some snapshot missing, drifted or a lint run failed (the rest is
still scored), 2 nothing could be scored or bad usage.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module below, however this is loaded
from judged_samples import (SAMPLE_GLOB, census, heldout_repos, judge_agreement, read_sample,  # noqa: E402
                            sample_groups, sample_paths, sample_precision)
from relabelled import agreement, read_relabel, relabel_sites  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_MANIFEST = HERE / "lint_accuracy" / "manifest.csv"
DEFAULT_RELABEL = HERE / "lint_accuracy" / "relabel.csv"
SAMPLE_DIR = HERE / "lint_accuracy"
SETTINGS = ("files", "alone", "repo")
SETTING_TITLES = {"files": "labelled files named (their project read as context)",
                  "alone": "labelled files alone (--no-project)", "repo": "whole repositories"}
# extra lint arguments per setting; the targets are the labelled files except for "repo"
SETTING_ARGS = {"files": [], "alone": ["--no-project"], "repo": []}


@dataclass(frozen=True)
class Site:
    repo: str
    commit: str
    path: str
    line: int
    codes: tuple[str, ...]
    verdict: str  # "trigger" | "silent"
    line_sha256: str
    note: str
    split: str = "dev"

    @property
    def rule(self) -> str:
        return self.codes[0]

    def where(self) -> str:
        return f"{self.repo}:{self.path}:{self.line}"


@dataclass
class Snapshot:
    repo: str
    commit: str
    root: Path | None = None  # checked-out .py tree
    problem: str | None = None
    spans: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)


def line_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()


def read_manifest(path: Path) -> list[Site]:
    sites = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            sites.append(
                Site(
                    repo=row["repo"],
                    commit=row["commit"],
                    path=row["path"],
                    line=int(row["line"]),
                    codes=tuple(row["rule"].split("|")),
                    verdict=row["verdict"],
                    line_sha256=row["line_sha256"],
                    note=row["note"],
                    split=row.get("split") or "dev",
                )
            )
    return sites


# --- snapshots ---------------------------------------------------------------------------


def git_dir(mirrors: Path, repo: str) -> Path:
    return mirrors / repo.replace("/", "+") / "repo"


# Top-level files that mark a project root (detective.lint.discovery.PROJECT_MARKERS), checked
# out with the sources so that a snapshot is a project as its clone is.
ROOT_MARKERS = (b"pyproject.toml", b"setup.cfg")


def checkout_python_files(gdir: Path, commit: str, dest: Path) -> None:
    """Write every ``.py`` blob of ``commit`` under ``dest`` (snapshots may lack large blobs),
    the top-level project files, and an empty ``.git`` directory where a clone has its own."""
    listing = subprocess.run(
        ["git", f"--git-dir={gdir}", "ls-tree", "-r", "-z", commit],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    entries = []
    for item in listing:
        if not item:
            continue
        meta, _, name = item.partition(b"\t")
        mode, kind, sha = meta.split()
        if kind == b"blob" and (name.endswith(b".py") or name in ROOT_MARKERS) and mode != b"120000":
            entries.append((sha.decode(), name.decode("utf-8", "surrogateescape")))
    batch = subprocess.Popen(
        ["git", f"--git-dir={gdir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert batch.stdin and batch.stdout
    batch.stdin.write("".join(f"{sha}\n" for sha, _ in entries).encode())
    batch.stdin.close()
    for sha, name in entries:
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    batch.wait()
    (dest / ".git").mkdir(parents=True, exist_ok=True)


def prepare(mirrors: Path, repo: str, commit: str, workdir: Path) -> Snapshot:
    snap = Snapshot(repo, commit)
    gdir = git_dir(mirrors, repo)
    if not gdir.is_dir():
        snap.problem = f"snapshot missing: {repo} (no git directory at {gdir}; fetch github:{repo})"
        return snap
    has = subprocess.run(
        ["git", f"--git-dir={gdir}", "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
    )
    if has.returncode != 0:
        snap.problem = f"snapshot missing: {repo}@{commit[:12]} is not in {gdir} (fetch a snapshot holding it)"
        return snap
    dest = workdir / repo.replace("/", "+")
    checkout_python_files(gdir, commit, dest)
    snap.root = dest
    return snap


def statement_span(tree: ast.Module, line: int) -> tuple[int, int]:
    """Lines of the innermost statement holding ``line``; for a compound one, its header."""
    best = (line, line)
    best_size = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        start, end = node.lineno, node.end_lineno or node.lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(start, body[0].lineno - 1)
            decorators = getattr(node, "decorator_list", [])
            if decorators:
                start = min(d.lineno for d in decorators)
        if start <= line <= end and (best_size is None or end - start < best_size):
            best, best_size = (start, end), end - start
    return best


def verify_sites(snap: Snapshot, sites: list[Site]) -> list[str]:
    """Check each site's line hash; record statement spans. Returns problems, one per site."""
    problems = []
    trees: dict[str, ast.Module | None] = {}
    for site in sites:
        source_path = snap.root / site.path  # type: ignore[operator]
        if not source_path.is_file():
            problems.append(f"drift: {site.where()} file not in the snapshot")
            continue
        text = source_path.read_text(encoding="utf-8", errors="surrogateescape")
        lines = text.splitlines()
        if site.line > len(lines) or line_hash(lines[site.line - 1]) != site.line_sha256:
            problems.append(f"drift: {site.where()} line hash differs from the manifest")
            continue
        if site.path not in trees:
            try:
                trees[site.path] = ast.parse(text)
            except SyntaxError:
                trees[site.path] = None
        tree = trees[site.path]
        span = statement_span(tree, site.line) if tree else (site.line, site.line)
        snap.spans[(site.path, site.line)] = span
    return problems


# --- running the linter ------------------------------------------------------------------


def detective_command(python: str) -> list[str]:
    script = Path(python).parent / "detective"
    if script.exists():
        return [str(script)]
    return [python, "-m", "detective"]


def linter_identity(python: str) -> dict:
    probe = subprocess.run(
        [python, "-c", "import detective, os; print(os.path.dirname(os.path.abspath(detective.__file__)))"],
        capture_output=True,
        text=True,
        cwd="/",  # not the caller's directory, whose own detective/ would shadow the one measured
    )
    ident = {"python": python, "package": probe.stdout.strip() or None}
    if ident["package"]:
        pkg = ident["package"]
        head = subprocess.run(["git", "-C", pkg, "rev-parse", "HEAD"], capture_output=True, text=True)
        branch = subprocess.run(["git", "-C", pkg, "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", pkg, "status", "--porcelain", "--", "."], capture_output=True, text=True)
        ident["commit"] = head.stdout.strip() or None
        ident["branch"] = branch.stdout.strip() or None
        ident["dirty"] = bool(dirty.stdout.strip())
    return ident


def run_lint(cmd: list[str], root: Path, targets: list[str], jobs: int, timeout: float,
             extra: list[str] = ()) -> tuple[list[dict], str | None, float]:
    """Findings as (path relative to root, line, code, severity) records, or an error line."""
    argv = cmd + ["lint", "--format", "json", "--no-cache", "--exit-zero", "--min-severity", "info",
                  "-j", str(jobs), *extra, *targets]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f}s", time.perf_counter() - start
    elapsed = time.perf_counter() - start
    try:
        raw = json.loads(proc.stdout) if proc.stdout.strip() else []
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return [], f"exit {proc.returncode}, unreadable output: {tail[0][:200]}", elapsed
    if proc.returncode not in (0, 1) and not raw:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return [], f"exit {proc.returncode}: {tail[0][:200]}", elapsed
    findings = []
    for item in raw:
        rel = os.path.normpath(item["path"])
        if os.path.isabs(rel):
            rel = os.path.relpath(rel, root)
        # linters older than the severity field report warnings only
        findings.append({"path": rel, "line": int(item["line"]), "code": item["code"],
                         "severity": item.get("severity", "warning")})
    return findings, None, elapsed


# --- scoring -----------------------------------------------------------------------------


def score(sites: list[Site], snaps: dict[tuple[str, str], Snapshot], findings: dict[str, list[dict]]) -> dict:
    """Each finding goes to the labelled site(s) of its code nearest to it in its statement.

    Nearest, so that in a multi-line statement holding two sites (``"loss": loss.item()``
    two lines above ``"n": x.numel()``) a finding on one line does not also count for
    the other.
    """
    spans = {(s.repo, s.path, s.line): snaps[(s.repo, s.commit)].spans.get((s.path, s.line)) for s in sites}
    by_file: dict[tuple[str, str], list[Site]] = defaultdict(list)
    for s in sites:
        if spans[(s.repo, s.path, s.line)] is not None:
            by_file[(s.repo, s.path)].append(s)
    hit: set[Site] = set()
    near: dict[Site, set[str]] = defaultdict(set)
    for repo, items in findings.items():
        for f in items:
            holding = [s for s in by_file.get((repo, f["path"]), [])
                       if spans[(s.repo, s.path, s.line)][0] <= f["line"] <= spans[(s.repo, s.path, s.line)][1]]
            same = [s for s in holding if f["code"] in s.codes]
            if same:
                best = min(abs(s.line - f["line"]) for s in same)
                hit.update(s for s in same if abs(s.line - f["line"]) == best)
            for s in holding:
                if f["code"] not in s.codes:
                    near[s].add(f["code"])
    counts: dict[str, Counter] = defaultdict(Counter)
    outcomes = []
    for site in sites:
        if spans[(site.repo, site.path, site.line)] is None or site.repo not in findings:
            continue
        flagged = site in hit
        other = sorted(near[site])
        if site.verdict == "trigger":
            outcome = "tp" if flagged else "fn"
        else:
            outcome = "fp" if flagged else "tn"
        for key in (site.rule, "all", f"repo:{site.repo}", f"split:{site.split}"):
            counts[key][outcome] += 1
        outcomes.append({"site": site, "outcome": outcome, "other_codes": other})
    table = {}
    for key, c in counts.items():
        tp, fp, fn = c["tp"], c["fp"], c["fn"]
        table[key] = {
            **{k: c[k] for k in ("tp", "fp", "fn", "tn")},
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
        }
    return {"table": table, "outcomes": outcomes}


def label_conflicts(sites: list[Site], snaps: dict[tuple[str, str], Snapshot], rows: list[dict],
                    outcomes: list[dict]) -> dict:
    """Labelled sites the samples' judges contradict, by the newest verdict on a finding in
    the site's statement (labels are never changed by this): triggers judged wrong, and
    look-alikes judged right (flagged at some earlier linter commit). ``outcomes``: the
    whole-repository scoring of the current linter, to show recall with both set apart."""
    newest = {(r["repo"], r["path"], int(r["line"]), r["code"]): r for r in rows}
    by_verdict: dict[str, dict[str, list[dict]]] = {"right": defaultdict(list), "wrong": defaultdict(list)}
    for (repo, path, line, code), row in newest.items():
        if row["judgement"] in by_verdict:
            by_verdict[row["judgement"]][repo].append({"path": path, "line": line, "code": code})
    judged = {verdict: {o["site"]: o["outcome"] for o in score(sites, snaps, found)["outcomes"]}
              for verdict, found in by_verdict.items()}
    wrong = {site for site, outcome in judged["wrong"].items() if outcome == "tp" and judged["right"].get(site) != "tp"}
    right = {site for site, outcome in judged["right"].items() if outcome == "fp" and judged["wrong"].get(site) != "fp"}
    tp = sum(1 for o in outcomes if o["outcome"] == "tp" and o["site"] not in wrong)
    fn = sum(1 for o in outcomes if o["outcome"] == "fn" and o["site"] not in wrong) + \
        sum(1 for o in outcomes if o["outcome"] == "tn" and o["site"] in right)
    tp += sum(1 for o in outcomes if o["outcome"] == "fp" and o["site"] in right)
    fp = sum(1 for o in outcomes if o["outcome"] == "fp" and o["site"] not in right) + \
        sum(1 for o in outcomes if o["outcome"] == "tp" and o["site"] in wrong)
    now = {o["site"]: o["outcome"] for o in outcomes}
    return {"triggers_judged_wrong": sorted((s.where() + " " + "|".join(s.codes), now.get(s, "")) for s in wrong),
            "silent_judged_right": sorted((s.where() + " " + "|".join(s.codes), now.get(s, "")) for s in right),
            "recall_set_apart": tp / (tp + fn) if tp + fn else None,
            "precision_set_apart": tp / (tp + fp) if tp + fp else None, "tp": tp, "fn": fn, "fp": fp}


def check_sample_hashes(rows: list[dict], snaps: dict[tuple[str, str], Snapshot]) -> list[str]:
    problems = []
    for row in rows:
        snap = snaps.get((row["repo"], row["commit"]))
        if snap is None or snap.root is None:
            continue
        target = snap.root / row["path"]
        lines = target.read_text(encoding="utf-8", errors="surrogateescape").splitlines() if target.is_file() else []
        line = int(row["line"])
        if line > len(lines) or line_hash(lines[line - 1]) != row["line_sha256"]:
            problems.append(f"sample drift: {row['repo']}:{row['path']}:{line}")
    return problems


def draw_sample(
    n: int, seed: int, findings: dict[str, list[dict]], snaps: dict[tuple[str, str], Snapshot], out: Path, linter: dict,
    exclude: set[tuple[str, str, int, str]] = frozenset(),
) -> int:
    """Draw ``n`` findings at random; ``exclude`` holds (repo, path, line, code) already judged."""
    pool = []
    for (repo, commit), snap in sorted(snaps.items()):
        for f in sorted(findings.get(repo, []), key=lambda f: (f["path"], f["line"], f["code"])):
            if (repo, f["path"], f["line"], f["code"]) not in exclude:
                pool.append((repo, commit, snap, f))
    rng = random.Random(seed)
    chosen = rng.sample(pool, min(n, len(pool)))
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["repo", "commit", "path", "line", "code", "line_sha256", "linter_commit", "seed", "judgement", "error_class", "note"])
        for repo, commit, snap, f in chosen:
            text = (snap.root / f["path"]).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
            w.writerow([repo, commit, f["path"], f["line"], f["code"], line_hash(text[f["line"] - 1]),
                        linter.get("commit") or "", seed, "", "", ""])
    return len(chosen)


# --- output ------------------------------------------------------------------------------


def short_commit(commit: str) -> str:
    head, plus, rest = commit.partition("+")
    return head[:12] + plus + rest


def fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def print_table(title: str, table: dict, by_repo: bool = False) -> None:
    print(f"\n{title}")
    print(f"  {'rule':6} {'prec':>5} {'recall':>6} {'tp':>4} {'fp':>4} {'fn':>4} {'tn':>4}")
    rules = sorted(k for k in table if k != "all" and ":" not in k)
    for key in rules + ["all"]:
        if key not in table:
            continue
        r = table[key]
        print(f"  {key:6} {fmt(r['precision']):>5} {fmt(r['recall']):>6} {r['tp']:4} {r['fp']:4} {r['fn']:4} {r['tn']:4}")
    splits = sorted(k for k in table if k.startswith("split:"))
    if len(splits) > 1:
        for key in splits:
            r = table[key]
            print(f"  {fmt(r['precision']):>5} {fmt(r['recall']):>6} {r['tp']:4} {r['fp']:4} {r['fn']:4} {r['tn']:4}  {key[6:]} sites only")
    if by_repo:
        for key in sorted(k for k in table if k.startswith("repo:")):
            r = table[key]
            print(f"  {fmt(r['precision']):>5} {fmt(r['recall']):>6} {r['tp']:4} {r['fp']:4} {r['fn']:4} {r['tn']:4}  {key[5:]}")


def print_outcomes(setting: str, outcomes: list[dict]) -> None:
    for kind, title in (("fn", "missed triggers"), ("fp", "false positives")):
        rows = [o for o in outcomes if o["outcome"] == kind]
        if not rows:
            continue
        print(f"\n{title} ({SETTING_TITLES[setting]}): {len(rows)}")
        for o in sorted(rows, key=lambda o: (o["site"].rule, o["site"].where())):
            s = o["site"]
            extra = f" [flagged as {','.join(o['other_codes'])}]" if o["other_codes"] else ""
            print(f"  {'|'.join(s.codes):11} {s.where()}  {s.note}{extra}")


def score_relabelled(usable: list[Site], snaps: dict, relabel: dict, all_findings: dict, all_every: dict) -> dict:
    """The same findings scored against the relabelled verdicts (``benchmarks/relabelled.py``)."""
    sites, changed = relabel_sites(usable, relabel)
    agree = agreement(usable, relabel)
    print(f"\nrelabelled set: two blind labellers per site; their shared verdict replaces the original on "
          f"{len(changed)} sites ({sum(c['to'] == 'silent' for c in changed)} triggers -> silent, "
          f"{sum(c['to'] == 'trigger' for c in changed)} silent -> trigger); "
          f"{sum(s.verdict == 'trigger' for s in sites)} triggers")
    if agree.get("labeller_verdicts"):
        print(f"  labellers agree with each other on {agree.get('labellers_agree', 0)} of {agree.get('sites', 0)} "
              f"sites; with the original labels on {agree.get('labeller_agrees_with_original', 0)} of "
              f"{agree['labeller_verdicts']} verdicts; {agree.get('missing', 0)} sites not relabelled")
    out = {"changed": changed, "agreement": agree, "settings": {}}
    for setting, findings in all_findings.items():
        table = score(sites, snaps, findings)["table"]
        any_severity = score(sites, snaps, all_every[setting])["table"].get("all", {})
        out["settings"][setting] = {"table": table, "table_any_severity": any_severity}
        a = table.get("all", {})
        if a:
            print(f"  {SETTING_TITLES[setting]}: precision {fmt(a['precision'])}, recall {fmt(a['recall'])} "
                  f"(tp {a['tp']}, fp {a['fp']}, fn {a['fn']})"
                  + (f"; with info findings counted too: precision {fmt(any_severity['precision'])}, recall "
                     f"{fmt(any_severity['recall'])}" if any_severity else ""))
    for c in changed:
        print(f"  relabelled {c['from']} -> {c['to']}: {c['site']} {c['rule']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="directory of fetched snapshots (<owner>+<name>/repo)")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    ap.add_argument("--sample", type=Path, action="append",
                    help=f"judged random sample of findings (repeatable; default: every {SAMPLE_GLOB} in {SAMPLE_DIR})")
    ap.add_argument("--relabel", type=Path, default=DEFAULT_RELABEL,
                    help="two blind labellers' verdicts per site; scored as a second label set")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose detective is measured")
    ap.add_argument("--settings", default="files,alone,repo", help="any of files, alone, repo (comma-separated)")
    ap.add_argument("--repos", default="", help="only these owner/name (comma-separated)")
    ap.add_argument("--split", default="", help="only sites of this split (dev, heldout)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per lint run")
    ap.add_argument("--list", action="store_true", help="print every miss and false positive")
    ap.add_argument("--by-repo", action="store_true", help="also print precision and recall per repository")
    ap.add_argument("--json", type=Path, help="also write the full results as JSON here")
    ap.add_argument("--draw-sample", type=int, metavar="N", help="write N whole-repository findings drawn at random to --sample-out, leaving out those already in a sample file")
    ap.add_argument("--include-judged", action="store_true",
                    help="with --draw-sample: draw from every current finding, judged before or not (a fresh "
                         "estimate under one judge's criterion; the census keeps the newest verdict)")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--sample-out", type=Path, help=f"where --draw-sample writes (default: {SAMPLE_DIR}/sample_draw.csv)")
    ap.add_argument("--keep", type=Path, help="check out into this directory and keep it")
    args = ap.parse_args(argv)

    settings = [s for s in args.settings.split(",") if s]
    if not settings or any(s not in SETTINGS for s in settings):
        print(f"error: --settings takes {', '.join(SETTINGS)}", file=sys.stderr)
        return 2
    if not args.mirrors.is_dir():
        print(f"error: mirrors directory not found: {args.mirrors} (it should hold <owner>+<name>/repo git directories, "
              "as the fetch tool writes them)", file=sys.stderr)
        return 2
    if not args.manifest.is_file():
        print(f"error: manifest not found: {args.manifest}", file=sys.stderr)
        return 2
    if args.draw_sample and "repo" not in settings:
        print("error: --draw-sample needs the repo setting", file=sys.stderr)
        return 2
    draw_out = args.sample_out or SAMPLE_DIR / "sample_draw.csv"
    if args.draw_sample and read_sample(draw_out):
        print(f"error: {draw_out} holds judged findings; --draw-sample would overwrite them (name a new --sample-out)",
              file=sys.stderr)
        return 2
    sites = read_manifest(args.manifest)
    if args.repos:
        wanted = set(args.repos.split(","))
        sites = [s for s in sites if s.repo in wanted]
    if args.split:
        sites = [s for s in sites if s.split == args.split]
    sample_files = args.sample or sample_paths(SAMPLE_DIR)
    sample_rows = [row for p in sample_files for row in read_sample(p)]
    if args.repos:
        sample_rows = [r for r in sample_rows if r["repo"] in wanted]

    linter = linter_identity(args.python)
    cmd = detective_command(args.python)
    print(f"linter: {linter.get('package')} commit {linter.get('commit')} ({linter.get('branch')}"
          f"{', uncommitted changes' if linter.get('dirty') else ''})")

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="lint_accuracy_"))
    workdir.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    snaps: dict[tuple[str, str], Snapshot] = {}
    results: dict = {"linter": linter, "settings": {}, "problems": problems, "timings_s": {}}
    try:
        pairs = sorted({(s.repo, s.commit) for s in sites} | {(r["repo"], r["commit"]) for r in sample_rows})
        for repo, commit in pairs:
            snap = prepare(args.mirrors, repo, commit, workdir)
            snaps[(repo, commit)] = snap
            if snap.problem:
                print(snap.problem, file=sys.stderr)
                problems.append(snap.problem)
                continue
            problems.extend(verify_sites(snap, [s for s in sites if (s.repo, s.commit) == (repo, commit)]))
        for p in problems:
            if p.startswith("drift"):
                print(p, file=sys.stderr)
        problems.extend(check_sample_hashes(sample_rows, snaps))
        usable = [s for s in sites if (s.path, s.line) in snaps[(s.repo, s.commit)].spans]
        if not usable:
            print("error: no labelled site could be checked out and verified", file=sys.stderr)
            return 2
        print(f"sites: {len(usable)} of {len(sites)} verified "
              f"({sum(s.verdict == 'trigger' for s in usable)} trigger, {sum(s.verdict == 'silent' for s in usable)} silent) "
              f"in {len({(s.repo, s.path) for s in usable})} files from {len({s.repo for s in usable})} repositories")

        all_findings: dict[str, dict[str, list[dict]]] = {}
        all_every: dict[str, dict[str, list[dict]]] = {}
        for setting in settings:
            findings: dict[str, list[dict]] = {}  # what a user sees by default: warnings
            every: dict[str, list[dict]] = {}  # info findings too (--min-severity info)
            for (repo, commit), snap in sorted(snaps.items()):
                if snap.root is None:
                    continue
                files = sorted({s.path for s in usable if s.repo == repo})
                if setting != "repo" and not files:
                    continue
                targets = files if setting != "repo" else ["."]
                items, error, elapsed = run_lint(cmd, snap.root, targets, args.jobs, args.timeout, SETTING_ARGS[setting])
                results["timings_s"][f"{setting}:{repo}"] = round(elapsed, 2)
                if error:
                    msg = f"lint failed ({SETTING_TITLES[setting]}) on {repo}: {error}"
                    print(msg, file=sys.stderr)
                    problems.append(msg)
                    continue
                every[repo] = items
                findings[repo] = [f for f in items if f["severity"] == "warning"]
            all_findings[setting] = findings
            all_every[setting] = every
            scored = score(usable, snaps, findings)
            any_severity = score(usable, snaps, every)["table"].get("all", {})
            results["settings"][setting] = {
                "table": scored["table"],
                "table_any_severity": any_severity,
                "findings": sum(len(v) for v in findings.values()),
                "all_findings": findings,
                "misses": [o["site"].where() + " " + o["site"].rule for o in scored["outcomes"] if o["outcome"] == "fn"],
                "false_positives": [o["site"].where() + " " + o["site"].rule for o in scored["outcomes"] if o["outcome"] == "fp"],
            }
            print_table(f"{SETTING_TITLES[setting]}: precision and recall on labelled sites "
                        f"({results['settings'][setting]['findings']} findings in all)", scored["table"], args.by_repo)
            if any_severity:
                print(f"  with info findings counted too (--min-severity info): precision "
                      f"{fmt(any_severity['precision'])}, recall {fmt(any_severity['recall'])} "
                      f"(tp {any_severity['tp']}, fp {any_severity['fp']}, fn {any_severity['fn']})")
            if args.list:
                print_outcomes(setting, scored["outcomes"])

        relabel = read_relabel(args.relabel)
        if relabel:
            results["relabelled"] = score_relabelled(usable, snaps, relabel, all_findings, all_every)

        results["samples"] = []
        groups = sample_groups(sample_rows)
        if groups:
            print("\nrandom samples of whole-repository findings, judged by reading "
                  "(one precision per sample and linter commit, never pooled)")
        for (name, commit), rows in groups.items():
            sp = sample_precision(rows)
            seeds = sorted({r.get("seed", "") for r in rows})
            results["samples"].append({"sample": name, "linter_commit": commit, "seeds": seeds, "table": sp})
            print(f"\n{name}.csv: {len(rows)} findings, linter {short_commit(commit) or '?'}, seed {', '.join(seeds)}")
            print(f"  {'rule':6} {'prec':>5} {'right':>5} {'wrong':>5} {'unclr':>5}")
            for key in sorted(k for k in sp if k != "all") + ["all"]:
                r = sp[key]
                print(f"  {key:6} {fmt(r['precision']):>5} {r['right']:5} {r['wrong']:5} {r['unclear']:5}")
            a = sp["all"]
            judged = a["right"] + a["wrong"]
            if judged:
                print(f"  precision {a['right']}/{judged} = {a['precision']:.3f} (unclear left out); "
                      f"{a['right']}/{judged + a['unclear']} = {a['precision_strict']:.3f} with unclear counted wrong")

        if "repo" in all_findings and sample_rows:
            c = results["census"] = census(all_findings["repo"], sample_rows)
            counts = c["counts"]
            print(f"\ncensus: {c['findings']} whole-repository findings of this linter; verdicts from the samples: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            for name, cs in c["by_sample"].items():
                print(f"  {name:10} " + ", ".join(f"{k} {v}" for k, v in sorted(cs.items())))
            if c["precision"] is not None:
                print(f"  precision {counts.get('right', 0)}/{counts.get('right', 0) + counts.get('wrong', 0)} = "
                      f"{c['precision']:.3f} (unclear and not judged left out); {c['precision_strict']:.3f} with "
                      "both counted wrong")
            m = c["majority"]
            if c["precision_majority"] is not None:
                print(f"  by the majority of each finding's judges (a tie keeps the newest; a second view): "
                      f"{m.get('right', 0)}/{m.get('right', 0) + m.get('wrong', 0)} = {c['precision_majority']:.3f}")
            a = results["judge_agreement"] = judge_agreement(sample_rows)
            if a["rate"] is not None:
                print(f"  judges of the same finding agree on {a['agree']} of {a['pairs']} pairs of verdicts "
                      f"({a['rate']:.3f}); {a['split']} of the {a['rejudged']} findings judged more than once have both verdicts")

        held = results["heldout_repos"] = heldout_repos(SAMPLE_DIR)
        if held:
            print("\nrepositories outside the labelled set, judged by reading (read from the files, not re-linted; "
                  "each at the linter commit it names)")
            for h in held:
                print(f"  {h['file']:26} {h['repo']}@{h['commit']} linter {h['linter_commit']}: "
                      f"{h['right']} right, {h['wrong']} wrong, {h['unclear']} unclear of {h['findings']}"
                      + (f" = {h['precision']:.3f}" if h["precision"] is not None else ""))

        if "repo" in results["settings"] and sample_rows:
            repo_outcomes = score(usable, snaps, all_findings["repo"])["outcomes"]
            k = results["label_conflicts"] = label_conflicts(usable, snaps, sample_rows, repo_outcomes)
            print(f"\nlabels the samples' judges contradict (newest verdict on a finding in the site's statement; "
                  f"the labels stay as they are): {len(k['triggers_judged_wrong'])} triggers judged wrong, "
                  f"{len(k['silent_judged_right'])} look-alikes judged right")
            for where, outcome in k["triggers_judged_wrong"]:
                print(f"  trigger judged wrong: {where} (now {'found' if outcome == 'tp' else 'not shown'})")
            for where, outcome in k["silent_judged_right"]:
                print(f"  look-alike judged right: {where} (now {'shown' if outcome == 'fp' else 'silent'})")
            if k["recall_set_apart"] is not None and k["precision_set_apart"] is not None:
                print(f"  whole repositories with the judges' verdicts in place of those labels (a second view, "
                      f"not the target's): precision {k['tp']}/{k['tp'] + k['fp']} = {k['precision_set_apart']:.3f}, "
                      f"recall {k['tp']}/{k['tp'] + k['fn']} = {k['recall_set_apart']:.3f}")

        if args.draw_sample:
            out = draw_out
            judged = set() if args.include_judged else {
                (r["repo"], r["path"], int(r["line"]), r["code"])
                for p in sample_files if p.resolve() != out.resolve() for r in read_sample(p, judged_only=False)}
            n = draw_sample(args.draw_sample, args.seed, all_findings["repo"], snaps, out, linter, judged)
            print(f"\ndrew {n} findings at random (seed {args.seed}) into {out}: judge each by reading the code")

        if problems:
            print(f"\n{len(problems)} problem(s): " + "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 1 if problems else 0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
