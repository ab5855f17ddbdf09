"""``[tool.detective]`` in the nearest pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from detective.lint.model import DEFAULT_MIN_SEVERITY, SEVERITIES
from detective.lint.project_facts import TARGETS

OPTIONS = {"select", "ignore", "exclude", "per-file-ignores", "roots", "gate", "guess-modules",
           "min-severity", "targets", "torch-version"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)  # extra decorator/function names traced
    # A class whose bases are found neither in the project nor installed, and that defines
    # forward(self, ...), is taken for an nn.Module (its forward is traced).
    guess_modules: bool = True
    # Findings below this severity are not shown (see detective.lint.model.SEVERITIES).
    min_severity: str = DEFAULT_MIN_SEVERITY
    # Backends the project runs on ("xla", "compile"); empty: found in the sources (see
    # detective.lint.project_facts).
    targets: list[str] = field(default_factory=list)
    # The torch the project runs ("2.12"); "": the installed torch's (see
    # detective.lint.project_facts: costs recorded only from some torch on).
    torch_version: str = ""
    base: Path = field(default_factory=Path.cwd)  # patterns are relative to this
    source: Path | None = None
    raw: dict = field(default_factory=dict)  # the whole table, for other commands (gate)


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            if "detective" in data.get("tool", {}):
                return candidate
    return None


def load_config(path: Path | None = None, start: Path | None = None) -> Config:
    """Config from ``path``, or from the nearest pyproject.toml above ``start``; defaults if none."""
    if path is None:
        path = find_pyproject(start or Path.cwd())
        if path is None:
            return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    table = data.get("tool", {}).get("detective", {})
    normalised = {key.replace("_", "-"): value for key, value in table.items()}
    unknown = sorted(set(normalised) - OPTIONS)
    if unknown:
        raise ConfigError(f"{path}: [tool.detective] has unknown option(s): {', '.join(unknown)}")

    def strings(key: str) -> list[str]:
        value = normalised.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tool.detective] {key} must be a list of strings")
        return value

    per_file = normalised.get("per-file-ignores", {})
    if not isinstance(per_file, dict) or not all(
        isinstance(v, list) and all(isinstance(c, str) for c in v) for v in per_file.values()
    ):
        raise ConfigError(f"{path}: [tool.detective] per-file-ignores must map globs to lists of codes")
    guess = normalised.get("guess-modules", True)
    if not isinstance(guess, bool):
        raise ConfigError(f"{path}: [tool.detective] guess-modules must be true or false")
    min_severity = normalised.get("min-severity", DEFAULT_MIN_SEVERITY)
    if min_severity not in SEVERITIES:
        raise ConfigError(f"{path}: [tool.detective] min-severity must be one of {', '.join(SEVERITIES)}")
    targets = normalised.get("targets", [])
    if "targets" in normalised and (not isinstance(targets, list) or not targets
                                    or not all(isinstance(t, str) and t in TARGETS for t in targets)):
        raise ConfigError(f"{path}: [tool.detective] targets must be a non-empty list of "
                          f"{', '.join(repr(t) for t in TARGETS)} (got {targets!r})")
    torch_version = normalised.get("torch-version", "")
    if "torch-version" in normalised and not (isinstance(torch_version, str)
                                              and re.fullmatch(r"\d+\.\d+(\.\d+)?", torch_version)):
        raise ConfigError(f"{path}: [tool.detective] torch-version must be a quoted version like \"2.12\" "
                          f"(got {torch_version!r})")
    return Config(
        targets=list(dict.fromkeys(targets)),
        torch_version=".".join(torch_version.split(".")[:2]),
        guess_modules=guess,
        min_severity=min_severity,
        select=strings("select") or ["ALL"],
        ignore=strings("ignore"),
        exclude=strings("exclude"),
        per_file_ignores=per_file,
        roots=strings("roots"),
        base=path.parent.resolve(),
        source=path,
        raw=table,
    )
