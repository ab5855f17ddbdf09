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
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module below, however this is loaded
from judged_samples import (SAMPLE_GLOB, census, heldout_repos, judge_agreement, read_sample,  # noqa: E402
                            sample_groups, sample_paths, sample_precision)
from relabelled import agreement, read_relabel, relabel_sites  # noqa: E402
from site_scoring import label_conflicts, score  # noqa: E402
from snapshots import Site, Snapshot, check_sample_hashes, line_hash, prepare, read_manifest, verify_sites  # noqa: E402
from accuracy_output import (print_any_severity, print_census, print_heldout, print_label_conflicts,  # noqa: E402
                             print_outcomes, print_relabelled, print_sample, print_table)

HERE = Path(__file__).resolve().parent
DEFAULT_MANIFEST = HERE / "lint_accuracy" / "manifest.csv"
DEFAULT_RELABEL = HERE / "lint_accuracy" / "relabel.csv"
SAMPLE_DIR = HERE / "lint_accuracy"
SETTINGS = ("files", "alone", "repo")
SETTING_TITLES = {"files": "labelled files named (their project read as context)",
                  "alone": "labelled files alone (--no-project)", "repo": "whole repositories"}
# extra lint arguments per setting; the targets are the labelled files except for "repo"
SETTING_ARGS = {"files": [], "alone": ["--no-project"], "repo": []}


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


# --- scoring and drawing ------------------------------------------------------------------


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


def score_relabelled(usable: list[Site], snaps: dict, relabel: dict, all_findings: dict, all_every: dict) -> dict:
    """The same findings scored against the relabelled verdicts (``benchmarks/relabelled.py``)."""
    sites, changed = relabel_sites(usable, relabel)
    out = {"changed": changed, "agreement": agreement(usable, relabel), "settings": {}}
    for setting, findings in all_findings.items():
        table = score(sites, snaps, findings)["table"]
        any_severity = score(sites, snaps, all_every[setting])["table"].get("all", {})
        out["settings"][setting] = {"table": table, "table_any_severity": any_severity}
    print_relabelled(out, sites, SETTING_TITLES)
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
            print_any_severity(any_severity)
            if args.list:
                print_outcomes(SETTING_TITLES[setting], scored["outcomes"])

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
            print_sample(results["samples"][-1], len(rows))

        if "repo" in all_findings and sample_rows:
            results["census"] = census(all_findings["repo"], sample_rows)
            results["judge_agreement"] = judge_agreement(sample_rows)
            print_census(results["census"], results["judge_agreement"])

        results["heldout_repos"] = heldout_repos(SAMPLE_DIR)
        print_heldout(results["heldout_repos"])

        if "repo" in results["settings"] and sample_rows:
            repo_outcomes = score(usable, snaps, all_findings["repo"])["outcomes"]
            results["label_conflicts"] = label_conflicts(usable, snaps, sample_rows, repo_outcomes)
            print_label_conflicts(results["label_conflicts"])

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
