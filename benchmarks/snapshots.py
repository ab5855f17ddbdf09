"""Labelled sites and the snapshots they live in, for ``benchmarks/lint_accuracy.py``.

The manifest names each site by repository, commit, path and line, with a hash of the line
and no source text. A snapshot is the ``.py`` tree of one (repository, commit), checked out
from a fetched git directory; sites and judged sample rows are verified against it by hash.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


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
