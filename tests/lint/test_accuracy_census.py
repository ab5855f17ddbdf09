"""benchmarks/lint_accuracy.py census: each current finding takes the verdict a sample gave it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lint_accuracy.py"


def _module():
    spec = importlib.util.spec_from_file_location("lint_accuracy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_census_joins_current_findings_with_sample_verdicts():
    census = _module().census
    findings = {"o/r": [{"path": "a.py", "line": 3, "code": "RC001"}, {"path": "a.py", "line": 3, "code": "RC001"},
                        {"path": "b.py", "line": 9, "code": "RC005"}, {"path": "c.py", "line": 1, "code": "RC002"}]}
    rows = [
        {"repo": "o/r", "path": "a.py", "line": "3", "code": "RC001", "judgement": "right", "sample": "s1"},
        {"repo": "o/r", "path": "b.py", "line": "9", "code": "RC005", "judgement": "wrong", "sample": "s2"},
        # judged once, no longer reported: not part of the population
        {"repo": "o/r", "path": "gone.py", "line": "1", "code": "RC001", "judgement": "wrong", "sample": "s2"},
    ]
    c = census(findings, rows)
    assert c["findings"] == 3  # one per (repo, path, line, code)
    assert c["counts"] == {"right": 1, "wrong": 1, "not judged": 1}
    assert c["by_sample"] == {"s1": {"right": 1}, "s2": {"wrong": 1}, "-": {"not judged": 1}}
    assert c["precision"] == 0.5
    assert abs(c["precision_strict"] - 1 / 3) < 1e-9


def test_a_finding_judged_twice_keeps_the_newest_samples_verdict(tmp_path):
    module = _module()
    for name in ("sample-b.csv", "sample.csv", "sample-k.csv", "sample-a.csv", "sample-aa2.csv", "sample-z.csv",
                 "sample-aa.csv", "sample-k2.csv", "sample-ab.csv"):
        (tmp_path / name).write_text("")
    assert [p.name for p in module.sample_paths(tmp_path)] == [  # after -z come -aa, -ab (drawn later)
        "sample.csv", "sample-a.csv", "sample-b.csv", "sample-k.csv", "sample-k2.csv", "sample-z.csv",
        "sample-aa.csv", "sample-aa2.csv", "sample-ab.csv"]
    findings = {"o/r": [{"path": "a.py", "line": 3, "code": "RC001"}]}
    rows = [{"repo": "o/r", "path": "a.py", "line": "3", "code": "RC001", "judgement": j, "sample": s}
            for s, j in (("sample-a", "right"), ("sample-k", "wrong"))]
    assert module.census(findings, rows)["by_sample"] == {"sample-k": {"wrong": 1}}


def test_label_conflicts_set_judged_labels_apart_without_changing_them():
    module = _module()
    Site, Snapshot = module.Site, module.Snapshot
    site = lambda line, verdict, code="RC001": Site("o/r", "c", "a.py", line, (code,), verdict, "", "")  # noqa: E731
    found_trigger, judged_trigger, missed_trigger = site(3, "trigger"), site(10, "trigger"), site(20, "trigger")
    judged_silent = site(30, "silent")
    sites = [found_trigger, judged_trigger, missed_trigger, judged_silent]
    snap = Snapshot("o/r", "c", spans={("a.py", s.line): (s.line, s.line + 1) for s in sites})
    rows = [  # oldest first: the newest verdict on a finding counts
        {"repo": "o/r", "path": "a.py", "line": "11", "code": "RC001", "judgement": "right"},
        {"repo": "o/r", "path": "a.py", "line": "11", "code": "RC001", "judgement": "wrong"},
        {"repo": "o/r", "path": "a.py", "line": "30", "code": "RC001", "judgement": "right"},
    ]
    outcomes = [{"site": found_trigger, "outcome": "tp"}, {"site": judged_trigger, "outcome": "tp"},
                {"site": missed_trigger, "outcome": "fn"}, {"site": judged_silent, "outcome": "tn"}]
    k = module.label_conflicts(sites, {("o/r", "c"): snap}, rows, outcomes)
    assert k["triggers_judged_wrong"] == [("o/r:a.py:10 RC001", "tp")]
    assert k["silent_judged_right"] == [("o/r:a.py:30 RC001", "tn")]
    # the judged trigger found now counts against precision; the judged look-alike, silent now, is a miss
    assert (k["tp"], k["fp"], k["fn"]) == (1, 1, 2)
    assert judged_trigger.verdict == "trigger"  # the labels themselves are untouched


def test_judges_agreement_counts_pairs_and_the_majority_breaks_ties_by_the_newest():
    module = _module()
    row = lambda line, j, s: {"repo": "o/r", "path": "a.py", "line": str(line), "code": "RC001",  # noqa: E731
                              "judgement": j, "sample": s}
    rows = [row(1, "right", "sample-a"), row(1, "wrong", "sample-b"), row(1, "wrong", "sample-c"),  # 3 judges, 1 of 3 pairs agree
            row(2, "right", "sample-a"), row(2, "wrong", "sample-b"),  # a tie: the newest (wrong)
            row(3, "right", "sample-a"), row(3, "right", "sample-b"), row(3, "unclear", "sample-c"),  # unclear left out
            row(4, "wrong", "sample-a")]  # judged once: no pair
    a = module.judge_agreement(rows)
    assert (a["pairs"], a["agree"], a["split"], a["rejudged"]) == (5, 2, 2, 3)
    import judged_samples  # lint_accuracy's sibling, importable once it is loaded

    assert judged_samples.majority_verdicts(rows) == {("o/r", "a.py", 1, "RC001"): "wrong", ("o/r", "a.py", 2, "RC001"): "wrong",
                                              ("o/r", "a.py", 3, "RC001"): "right", ("o/r", "a.py", 4, "RC001"): "wrong"}
    findings = {"o/r": [{"path": "a.py", "line": n, "code": "RC001"} for n in (1, 2, 3, 5)]}
    c = module.census(findings, rows)
    assert c["majority"] == {"wrong": 2, "right": 1}
    assert abs(c["precision_majority"] - 1 / 3) < 1e-9


def test_heldout_repositories_are_read_per_judge_file(tmp_path):
    _module()
    import judged_samples

    (tmp_path / "heldout_repos").mkdir()
    header = "repo,commit,path,line,code,line_sha256,linter_commit,seed,judgement,error_class,note\n"
    (tmp_path / "heldout_repos" / "x-judge1.csv").write_text(
        header + "o/x,abcdef0123456789,a.py,3,RC001,h,0123456789abcdef,-,right,,\n"
        + "o/x,abcdef0123456789,b.py,4,RC005,h,0123456789abcdef,-,wrong,dead-code,never imported\n")
    (tmp_path / "heldout_repos" / "y-judge1.csv").write_text(header)  # nothing judged: left out
    (h,) = judged_samples.heldout_repos(tmp_path)
    assert (h["repo"], h["commit"], h["linter_commit"]) == ("o/x", "abcdef012345", "0123456789ab")
    assert (h["right"], h["wrong"], h["findings"], h["precision"]) == (1, 1, 2, 0.5)


def test_relabelling_adopts_only_the_labellers_shared_verdict(tmp_path):
    module = _module()
    import relabelled  # the benchmark put its directory on sys.path

    site = lambda line, verdict: module.Site("o/r", "c", "a.py", line, ("RC001",), verdict, "h", "")  # noqa: E731
    sites = [site(1, "trigger"), site(2, "trigger"), site(3, "silent"), site(4, "trigger"), site(5, "silent")]
    path = tmp_path / "relabel.csv"
    path.write_text("repo,path,line,rule,verdict_a,verdict_b\n"
                    "o/r,a.py,1,RC001,silent,silent\n"     # both say silent: adopted
                    "o/r,a.py,2,RC001,silent,trigger\n"    # they differ: the original stays
                    "o/r,a.py,3,RC001,trigger,trigger\n"   # both say trigger: adopted
                    "o/r,a.py,4,RC001,unclear,unclear\n")  # unclear is never adopted; 5 is not relabelled
    relabel = relabelled.read_relabel(path)
    new, changed = relabelled.relabel_sites(sites, relabel)
    assert [s.verdict for s in new] == ["silent", "trigger", "trigger", "trigger", "silent"]
    assert [(c["site"], c["to"]) for c in changed] == [("o/r:a.py:1", "silent"), ("o/r:a.py:3", "trigger")]
    assert [s.verdict for s in sites] == ["trigger", "trigger", "silent", "trigger", "silent"]  # input untouched
    agree = relabelled.agreement(sites, relabel)
    assert agree["labellers_agree"] == 2 and agree["missing"] == 1 and agree["unclear"] == 1
    assert agree["triggers_both_silent"] == 1 and agree["silent_both_trigger"] == 1
