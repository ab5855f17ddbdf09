"""Scoring findings against labelled sites, for ``benchmarks/lint_accuracy.py``.

A finding counts for a site when its code is one of the site's codes and its line falls in
the site's statement span (recorded by ``snapshots.verify_sites``).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from snapshots import Site, Snapshot


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
