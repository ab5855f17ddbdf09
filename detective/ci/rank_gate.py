"""The gate over every rank: each rank's budget, and no cross-rank divergence.

Each rank is gated as a run of its own (:func:`detective.ci.gate.evaluate`); the verdict is the
worst of them (a rank that never reached step N makes it 2), with identical problems collapsed
across ranks. Ranks that execute different graphs fail the gate unless allowed: on a real job
that is a hang or silently different training.
"""

from __future__ import annotations

from detective.ci.gate import FAIL, PASS, UNUSABLE, Verdict, evaluate


def _label(ranks: list[int], world: int) -> str:
    if len(ranks) == world and world > 1:
        return f"all {world} ranks"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def evaluate_ranks(run, budget, attributions_for=None, allow_divergence: bool = False) -> Verdict:
    ranks = list(run.ranks)
    attributions_for = attributions_for or (lambda _run: None)
    if len(ranks) < 2:
        return evaluate(run, budget, attributions_for(run))
    verdicts = {}
    for rank in ranks:
        view = run.for_rank(rank)
        verdicts[rank] = evaluate(view, budget, attributions_for(view))
    worst = max(verdicts.values(), key=lambda v: (v.status == UNUSABLE, v.status == FAIL))
    first = verdicts[ranks[0]]
    verdict = Verdict(worst.status, budget, offences=worst.offences, steps_recorded=first.steps_recorded,
                      total_unique_programs=max(v.total_unique_programs for v in verdicts.values()),
                      total_compile_seconds=sum(v.total_compile_seconds for v in verdicts.values()),
                      new_after=worst.new_after)
    by_problem: dict[str, list[int]] = {}
    for rank, v in verdicts.items():
        for problem in v.problems:
            by_problem.setdefault(problem, []).append(rank)
    verdict.problems = [f"{_label(rs, len(ranks))}: {p}" for p, rs in by_problem.items()]
    by_note: dict[str, list[int]] = {}
    for rank, v in verdicts.items():
        for note in v.notes:
            by_note.setdefault(note, []).append(rank)
    verdict.notes = [f"{_label(rs, len(ranks))}: {n}" for n, rs in by_note.items()]
    if worst.offences and worst is not first:
        bad = [r for r, v in verdicts.items() if v is worst][0]
        verdict.notes.append(f"the steps listed are rank {bad}'s")

    from detective.report.rank_text import divergence_line
    from detective.report.ranks import attribute_divergences, find_divergences, find_hang

    divergences = find_divergences(run)
    if divergences:
        attribute_divergences(run, divergences)
        lines = [divergence_line(d) for d in divergences]
        if allow_divergence:
            verdict.notes += [f"ranks diverged (allowed): {line}" for line in lines]
        else:
            verdict.problems += [f"ranks diverged: {line}" for line in lines]
            if verdict.status == PASS:
                verdict.status = FAIL
    hang = find_hang(run)
    if hang["detected"]:
        verdict.notes.append(f"the job hung: {hang['reason']}")
    verdict.notes.append(f"gated {len(ranks)} ranks; every rank's budget applies")
    return verdict
