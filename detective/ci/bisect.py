"""Find the commit that started a compile storm: ``git bisect run`` with the gate as the test.

The bisection runs in the user's repository, so it refuses a dirty working tree, checks
the endpoints first (a --good commit that fails the gate means good and bad are swapped;
a command that crashes at --good would make every answer meaningless), and always ends
with ``git bisect reset`` — also on Ctrl-C or an error — so the repository is left as it
was found. Each tested commit is recorded under one directory (``<sha>/``, with the
command's output in ``<sha>/output.log``), so the first bad commit's report is on hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from detective.ci.gate import FAIL, PASS, Budget

GOOD, BAD, SKIP = 0, 1, 125  # git bisect run's protocol


class BisectError(Exception):
    """The bisection cannot start or cannot conclude; the message says why."""


@dataclass
class Outcome:
    sha: str
    subject: str
    verdict_message: str
    run_dir: str
    tested: list[tuple[str, str]]  # (sha, good|bad|skip) in test order


def git(repo: str, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise BisectError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def repository_root(path: str) -> str:
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BisectError(f"{os.path.abspath(path)} is not inside a git repository")
    return proc.stdout.strip()


def test_commit(repo: str, command: list[str], budget: Budget, mode: str, out_root: str) -> tuple[int, str]:
    """Run the command at the checked-out commit under the tracer; GOOD, BAD or SKIP."""
    from detective.ci.gate import evaluate
    from detective.runtime.record import RunNotFound, load_run

    sha = git(repo, "rev-parse", "HEAD")
    run_dir = os.path.join(out_root, sha)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "output.log"), "w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "detective", "run", "--quiet", "--mode", mode,
             "--warmup", str(2 if budget.after_step is None else budget.after_step), "--out", run_dir, "--", *command],
            cwd=repo, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        verdict = evaluate(load_run(run_dir), budget)
    except RunNotFound:
        return SKIP, run_dir
    if verdict.status == FAIL:
        return BAD, run_dir
    if verdict.status == PASS and proc.returncode == 0:
        return GOOD, run_dir
    return SKIP, run_dir  # crashed for another reason, or could not be judged


def bisect(repo: str, good: str, bad: str, command: list[str], budget: Budget, mode: str = "count",
           out_root: str | None = None, echo=print) -> Outcome:
    repo = repository_root(repo)
    if git(repo, "status", "--porcelain", "--untracked-files=no"):
        raise BisectError("the working tree has uncommitted changes; commit or stash them first "
                          "(bisect checks out other commits)")
    if os.path.exists(os.path.join(git(repo, "rev-parse", "--absolute-git-dir"), "BISECT_LOG")):
        raise BisectError("a git bisect is already in progress here; finish it with `git bisect reset`")
    good_sha = _commit(repo, good, "--good")
    bad_sha = _commit(repo, bad, "--bad")
    out_root = out_root or tempfile.mkdtemp(prefix="detective-bisect-")
    start = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False) or git(repo, "rev-parse", "HEAD")
    tested: list[tuple[str, str]] = []
    try:
        for sha, flag, expected in ((good_sha, "--good", GOOD), (bad_sha, "--bad", BAD)):
            git(repo, "checkout", "--quiet", "--detach", sha)
            echo(f"detective bisect: checking {flag} {sha[:12]} {_subject(repo, sha)}")
            result, run_dir = test_commit(repo, command, budget, mode, out_root)
            tested.append((sha, _name(result)))
            if result != expected:
                raise BisectError(_endpoint_problem(flag, sha, result, run_dir))
        git(repo, "checkout", "--quiet", start)
        git(repo, "bisect", "start", bad_sha, good_sha)
        step = [sys.executable, "-m", "detective.ci.bisect_test_commit", "--out-root", out_root, "--mode", mode,
                "--budget", json.dumps(budget.__dict__), "--", *command]
        proc = subprocess.run(["git", "bisect", "run", *step], cwd=repo, capture_output=True, text=True)
        log = git(repo, "bisect", "log", check=False)
        first_bad = _first_bad(proc.stdout)
        if first_bad is None:
            raise BisectError("git bisect could not name a first bad commit:\n" + proc.stdout.strip()[-2000:])
    finally:
        git(repo, "bisect", "reset", check=False)
        git(repo, "checkout", "--quiet", start, check=False)  # back on the branch, not a detached twin
    for line in log.splitlines():
        if line.startswith(("git bisect good", "git bisect bad", "git bisect skip")):
            _, _, verb, sha = (line.split() + [""])[:4]
            if sha and (sha, verb) not in tested:
                tested.append((sha, verb))
    return _outcome(repo, first_bad, budget, out_root, tested)


def _outcome(repo: str, sha: str, budget: Budget, out_root: str, tested) -> Outcome:
    from detective.ci.gate import evaluate
    from detective.runtime.record import load_run

    run_dir = os.path.join(out_root, sha)
    message = evaluate(load_run(run_dir), budget).message() if os.path.isdir(run_dir) else ""
    return Outcome(sha, _subject(repo, sha), message, run_dir, tested)


def _first_bad(output: str) -> str | None:
    for line in output.splitlines():
        if line.endswith(" is the first bad commit"):
            return line.split()[0]
    return None


def _commit(repo: str, rev: str, flag: str) -> str:
    sha = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if not sha:
        raise BisectError(f"{flag} {rev!r} is not a commit of this repository")
    return sha


def _subject(repo: str, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%s", sha)


def _name(result: int) -> str:
    return {GOOD: "good", BAD: "bad"}.get(result, "skip")


def _endpoint_problem(flag: str, sha: str, result: int, run_dir: str) -> str:
    log = os.path.join(run_dir, "output.log")
    if flag == "--good" and result == BAD:
        return (f"the --good commit {sha[:12]} already fails the gate: are --good and --bad swapped? "
                f"(its run: {run_dir})")
    if flag == "--bad" and result == GOOD:
        return f"the --bad commit {sha[:12]} passes the gate: there is no storm to bisect (its run: {run_dir})"
    return (f"the command did not run cleanly at the {flag} commit {sha[:12]} (no gate verdict); "
            f"fix the command first — its output is in {log}")
