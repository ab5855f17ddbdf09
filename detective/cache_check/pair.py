"""Run a command twice against one persistent cache: cold, then a warm restart.

Each run is a full ``detective run`` record. Every ``xr.initialize_cache(path)`` in the command
is sent to the cache under test (and ``XLA_PERSISTENT_CACHE_PATH`` too, when the environment
already sets it), so a script that hard-codes its cache path is still tested cold. The
directory is listed before and after each run: a program's file is named by its graph hash.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

from detective.runtime.cache_record import ENV_PATH, ENV_REDIRECT
from detective.runtime.cache_summary import cache_files
from detective.runtime.launcher import LaunchError, run as launch
from detective.runtime.record import Run, load_run


@dataclass
class Pair:
    cache_dir: str
    temporary: bool  # we made the directory (and remove it unless kept)
    runs_dir: str
    files_before: set[str] | None = None
    files_after_cold: set[str] | None = None
    files_after_warm: set[str] | None = None
    cold: Run | None = None
    warm: Run | None = None
    cold_exit: int | None = None
    warm_exit: int | None = None
    warm_env: dict[str, str] = field(default_factory=dict)

    def cleanup(self) -> None:
        shutil.rmtree(self.runs_dir, ignore_errors=True)
        if self.temporary:
            shutil.rmtree(self.cache_dir, ignore_errors=True)


def run_pair(command: list[str], cache_dir: str | None, mode: str, warm_env: dict[str, str],
             stdout: int | None = None, runs_dir: str | None = None) -> Pair:
    """Both runs; raises LaunchError when detective cannot start the command."""
    temporary = cache_dir is None
    if cache_dir is None:
        cache_dir = tempfile.mkdtemp(prefix="detective-cache-")
    cache_dir = os.path.abspath(cache_dir)
    runs_dir = runs_dir or tempfile.mkdtemp(prefix="detective-cache-check-")
    os.makedirs(runs_dir, exist_ok=True)
    pair = Pair(cache_dir, temporary, runs_dir, warm_env=dict(warm_env))
    env = {ENV_REDIRECT: cache_dir}
    if os.environ.get(ENV_PATH):
        env[ENV_PATH] = cache_dir
    pair.files_before = cache_files(cache_dir)
    for name in ("cold", "warm"):
        extra = dict(env, **(warm_env if name == "warm" else {}))
        try:
            code, out = launch(list(command), os.path.join(runs_dir, name), mode, warmup=0,
                               progress=False, extra_env=extra, stdout=stdout)
        except LaunchError:
            pair.cleanup()
            raise
        setattr(pair, f"{name}_exit", code)
        setattr(pair, name, load_run(out))
        setattr(pair, f"files_after_{name}", cache_files(cache_dir))
        if code != 0:
            break  # a failed cold run is the answer already; a restart would fail the same way
        if name == "cold" and not pair.files_after_cold:
            break  # the cache is empty after the cold run: a restart has nothing to load
    return pair
