"""What ``benchmarks/lint_accuracy.py`` prints: one writer per section of its results.

Each function takes the structured result a scorer returned (the same record that goes to
``--json``) and only formats it.
"""

from __future__ import annotations


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


def print_any_severity(any_severity: dict) -> None:
    if any_severity:
        print(f"  with info findings counted too (--min-severity info): precision "
              f"{fmt(any_severity['precision'])}, recall {fmt(any_severity['recall'])} "
              f"(tp {any_severity['tp']}, fp {any_severity['fp']}, fn {any_severity['fn']})")


def print_outcomes(setting_title: str, outcomes: list[dict]) -> None:
    for kind, title in (("fn", "missed triggers"), ("fp", "false positives")):
        rows = [o for o in outcomes if o["outcome"] == kind]
        if not rows:
            continue
        print(f"\n{title} ({setting_title}): {len(rows)}")
        for o in sorted(rows, key=lambda o: (o["site"].rule, o["site"].where())):
            s = o["site"]
            extra = f" [flagged as {','.join(o['other_codes'])}]" if o["other_codes"] else ""
            print(f"  {'|'.join(s.codes):11} {s.where()}  {s.note}{extra}")


def print_relabelled(out: dict, sites: list, setting_titles: dict) -> None:
    changed, agree = out["changed"], out["agreement"]
    print(f"\nrelabelled set: two blind labellers per site; their shared verdict replaces the original on "
          f"{len(changed)} sites ({sum(c['to'] == 'silent' for c in changed)} triggers -> silent, "
          f"{sum(c['to'] == 'trigger' for c in changed)} silent -> trigger); "
          f"{sum(s.verdict == 'trigger' for s in sites)} triggers")
    if agree.get("labeller_verdicts"):
        print(f"  labellers agree with each other on {agree.get('labellers_agree', 0)} of {agree.get('sites', 0)} "
              f"sites; with the original labels on {agree.get('labeller_agrees_with_original', 0)} of "
              f"{agree['labeller_verdicts']} verdicts; {agree.get('missing', 0)} sites not relabelled")
    for setting, scored in out["settings"].items():
        a, any_severity = scored["table"].get("all", {}), scored["table_any_severity"]
        if a:
            print(f"  {setting_titles[setting]}: precision {fmt(a['precision'])}, recall {fmt(a['recall'])} "
                  f"(tp {a['tp']}, fp {a['fp']}, fn {a['fn']})"
                  + (f"; with info findings counted too: precision {fmt(any_severity['precision'])}, recall "
                     f"{fmt(any_severity['recall'])}" if any_severity else ""))
    for c in changed:
        print(f"  relabelled {c['from']} -> {c['to']}: {c['site']} {c['rule']}")


def print_sample(entry: dict, n_rows: int) -> None:
    sp = entry["table"]
    print(f"\n{entry['sample']}.csv: {n_rows} findings, linter {short_commit(entry['linter_commit']) or '?'}, "
          f"seed {', '.join(entry['seeds'])}")
    print(f"  {'rule':6} {'prec':>5} {'right':>5} {'wrong':>5} {'unclr':>5}")
    for key in sorted(k for k in sp if k != "all") + ["all"]:
        r = sp[key]
        print(f"  {key:6} {fmt(r['precision']):>5} {r['right']:5} {r['wrong']:5} {r['unclear']:5}")
    a = sp["all"]
    judged = a["right"] + a["wrong"]
    if judged:
        print(f"  precision {a['right']}/{judged} = {a['precision']:.3f} (unclear left out); "
              f"{a['right']}/{judged + a['unclear']} = {a['precision_strict']:.3f} with unclear counted wrong")


def print_census(c: dict, agreement: dict) -> None:
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
    a = agreement
    if a["rate"] is not None:
        print(f"  judges of the same finding agree on {a['agree']} of {a['pairs']} pairs of verdicts "
              f"({a['rate']:.3f}); {a['split']} of the {a['rejudged']} findings judged more than once have both verdicts")


def print_heldout(held: list[dict]) -> None:
    if not held:
        return
    print("\nrepositories outside the labelled set, judged by reading (read from the files, not re-linted; "
          "each at the linter commit it names)")
    for h in held:
        print(f"  {h['file']:26} {h['repo']}@{h['commit']} linter {h['linter_commit']}: "
              f"{h['right']} right, {h['wrong']} wrong, {h['unclear']} unclear of {h['findings']}"
              + (f" = {h['precision']:.3f}" if h["precision"] is not None else ""))


def print_label_conflicts(k: dict) -> None:
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
