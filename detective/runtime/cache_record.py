"""torch_xla's persistent compilation cache, as seen from inside a traced process.

torch_xla 2.9 (``runtime/cache.h``, ``PersistentCache::Get``) looks a program up on disk before
compiling it: ``PersistentCacheMiss`` (no file), ``PersistentCacheHit`` (loaded; the execution
then counts as ``CachedCompile``), ``PersistentCacheDeserializeFailure`` (file present, load
failed; the program is compiled and counts as ``UncachedCompile``); timer ``PersistentCacheLoad``.
One file per program, named by the decimal value of the graph hash that torch_xla's debug output
prints in hex, so a program's file can be looked up by the hash we already record.

The hash includes a compile-environment hash (``runtime/env_hash.cc``): the ``--xla*`` flags of
``XLA_FLAGS``/``LIBTPU_INIT_ARGS`` minus dump flags, sorted; the raw ``TPU_MEGACORE``,
``XLA_HLO_DEBUG``, ``XLA_IR_DEBUG``; and the torch/torch_xla git revisions built into torch_xla.
Only those enter the record: no other variable of the environment.
"""

from __future__ import annotations

import os
import sys
import time

ENV_PATH = "XLA_PERSISTENT_CACHE_PATH"
ENV_READ_ONLY = "XLA_PERSISTENT_CACHE_READ_ONLY"
# set by `detective cache-check`: the cache directory every initialize_cache call is sent to
ENV_REDIRECT = "DETECTIVE_CACHE_DIR"

KEY_FLAG_VARS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
KEY_RAW_VARS = ("TPU_MEGACORE", "XLA_HLO_DEBUG", "XLA_IR_DEBUG")
KEY_VARS = KEY_FLAG_VARS + KEY_RAW_VARS
# torch_xla leaves these out of the key (its list, taken from JAX's cache_key.py)
EXCLUDED_FLAGS = frozenset(
    "--xla_" + name
    for name in (
        "dump_compress_protos", "dump_module_metadata", "dump_max_hlo_modules", "dump_include_timestamp",
        "dump_hlo_pass_re", "dump_hlo_module_re", "dump_hlo_snapshots", "dump_fusion_visualization",
        "dump_hlo_as_url", "dump_hlo_as_proto", "dump_hlo_as_text", "dump_hlo_as_long_text",
        "dump_hlo_as_html", "dump_hlo_as_dot", "dump_to", "force_host_platform_device_count",
        "dump_disable_metadata", "dump_hlo_pipeline_re", "tpu_sdc_checker_streamz_metric",
        "tpu_sdc_checker_enable_sdc_event_callbacks",
    )
)

COUNTERS = (
    ("hits", "PersistentCacheHit"),
    ("misses", "PersistentCacheMiss"),
    ("deserialize_failures", "PersistentCacheDeserializeFailure"),
)
LOAD_TIMER = "PersistentCacheLoad"

# what happened to one program the process had not compiled before
LOADED, MISS, LOAD_FAILED = "loaded", "miss", "load-failed"
OUTCOMES = (LOADED, MISS, LOAD_FAILED)

# torch_xla's warning (pjrt_computation_client.cpp) when a cache file does not load; it goes
# to the process's stderr only, so `detective run` picks it out of the stream it passes on.
DESERIALIZE_MESSAGE = "Failed to deserialize executable"


def key_flags(value: str | None) -> list[str]:
    """The flags of XLA_FLAGS/LIBTPU_INIT_ARGS that enter the key, as torch_xla reads them."""
    flags = []
    for flag in (value or "").split(" "):
        if flag.startswith("--xla") and flag.split("=", 1)[0] not in EXCLUDED_FLAGS:
            flags.append(flag)
    return sorted(flags)


def configured(environ=os.environ) -> dict | None:
    """{path, read_only} when a persistent cache is set for this process, else None."""
    path = environ.get(ENV_PATH)
    if not path:
        return None
    return {"path": os.path.abspath(path), "read_only": environ.get(ENV_READ_ONLY, "0") not in ("", "0")}


def file_name(graph_hash: str | None) -> str | None:
    """The cache file torch_xla writes for a program (decimal of the hex graph hash)."""
    try:
        return str(int(graph_hash, 16)) if graph_hash else None
    except ValueError:
        return None


def list_files(path: str) -> set[str] | None:
    try:
        return set(os.listdir(path))
    except OSError:
        return None


def compile_env(environ=os.environ) -> dict:
    """The variables and versions that enter the cache key (values as set; None when unset)."""
    env: dict = {name: environ.get(name) for name in KEY_VARS}
    env.update({"torch_gitrev": None, "torch_xla_gitrev": None, "device_type": None, "devices": None})
    version = sys.modules.get("torch_xla.version")
    if version is not None:
        env["torch_gitrev"] = getattr(version, "__torch_gitrev__", None)
        env["torch_xla_gitrev"] = getattr(version, "__xla_gitrev__", None)
    xr = sys.modules.get("torch_xla.runtime")
    xla = sys.modules.get("torch_xla")
    # called at exit: the runtime is up if anything ran here; never start it (a process that only
    # watched xmp.spawn's workers could not spawn again)
    if xr is not None and xla is not None and xla._XLAC._xla_runtime_is_initialized():
        try:
            env["device_type"] = xr.device_type()
            env["devices"] = xr.global_runtime_device_count()
        except Exception:
            pass
    return env


def key_differences(old: dict, new: dict) -> list[tuple[str, object, object]]:
    """(name, old, new) for each key input that differs as torch_xla hashes it."""
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if name in KEY_FLAG_VARS:
            same = key_flags(a) == key_flags(b)
        elif name in KEY_RAW_VARS:
            same = (a or "") == (b or "")
        elif name in ("device_type", "devices") and (a is None or b is None):
            same = True  # one run never started the runtime: nothing to compare
        else:
            same = a == b
        if not same:
            out.append((name, a, b))
    return out


class CacheRecorder:
    """Per-step persistent-cache counts and the outcome of each program a step compiled or loaded."""

    def __init__(self, met):
        self._met = met
        self.files_before: set[str] | None = None  # the directory when the cache was set up
        self.loaded: set[str] = set()
        self.inits: list[dict] = []
        self.take_snapshot()

    def take_snapshot(self) -> None:
        cache = configured()
        if cache is not None and self.files_before is None:
            self.files_before = list_files(cache["path"]) or set()

    def counts(self, previous: dict | None = None) -> dict:
        """torch_xla's cache counters now; the load timer is read only when a load happened since `previous`."""
        if not os.environ.get(ENV_PATH):
            return dict(previous) if previous else {key: 0 for key, _ in COUNTERS} | {"load_seconds": 0.0}
        out = {key: self._met.counter_value(name) or 0 for key, name in COUNTERS}
        loads = out["hits"] + out["deserialize_failures"]
        if previous is not None and loads == previous["hits"] + previous["deserialize_failures"]:
            out["load_seconds"] = previous["load_seconds"]
        elif loads:
            data = self._met.metric_data(LOAD_TIMER)
            out["load_seconds"] = data[1] / 1e9 if data else 0.0
        else:
            out["load_seconds"] = 0.0
        return out

    def step_cache(self, before: dict, now: dict) -> dict | None:
        """The step's deltas, or None when no cache is set and nothing was looked up."""
        if not os.environ.get(ENV_PATH) and now == before:
            return None
        return {k: now[k] - before[k] for k in now}

    def classify(self, executions: list[dict], delta: dict, seen: set[str]) -> None:
        """Set ``cache`` on compiled executions and on persistent hits; None when it cannot be told."""
        compiled = [e for e in executions if e["compiled"]]
        files = self.files_before
        guess: dict[int, str | None] = {}
        for e in compiled:
            name = file_name(e["graph_hash"])
            guess[id(e)] = None if files is None or name is None else (LOAD_FAILED if name in files else MISS)
        kinds = list(guess.values())
        if kinds.count(LOAD_FAILED) != delta["deserialize_failures"] or kinds.count(MISS) != delta["misses"]:
            # the directory changed under us (another writer) or was never listed: only a
            # step whose lookups were all of one kind can still be told
            one = None
            if delta["misses"] == len(compiled) and not delta["deserialize_failures"]:
                one = MISS
            elif delta["deserialize_failures"] == len(compiled) and not delta["misses"]:
                one = LOAD_FAILED
            guess = {id(e): one for e in compiled}
        for e in compiled:
            e["cache"] = guess[id(e)]
        hits = delta["hits"]
        for e in executions:
            if hits <= 0:
                break
            h = e["graph_hash"]
            if not e["compiled"] and h is not None and h not in seen and h not in self.loaded:
                e["cache"] = LOADED
                self.loaded.add(h)
                hits -= 1

    # -- xr.initialize_cache, wrapped: where it was called, and whether it was too late --
    def wrap_initialize_cache(self, xr, user_frame, on_event) -> None:
        original = getattr(xr, "initialize_cache", None)
        if original is None or getattr(original, "__detective__", False):
            return
        recorder = self

        def initialize_cache(path, readonly=False):
            import torch_xla

            too_late = bool(torch_xla._XLAC._xla_computation_cache_is_initialized())
            redirect = os.environ.get(ENV_REDIRECT)
            record = {
                "event": "cache_init",
                "pid": os.getpid(),
                "path": os.path.abspath(redirect or path),
                "requested_path": os.fspath(path),
                "read_only": bool(readonly),
                "too_late": too_late,
                "site": user_frame(sys._getframe(1)),
                "time": time.time(),
            }
            recorder.inits.append(record)
            on_event(record)  # before the call: torch_xla raises when it is too late
            result = original(redirect or path, readonly)
            recorder.take_snapshot()
            return result

        initialize_cache.__detective__ = True
        initialize_cache.__wrapped__ = original
        xr.initialize_cache = initialize_cache
