"""Lint cache: ``.detective/cache/`` next to the config (or the working directory).

Two levels. Per-file summaries: when any file changed, the cross-file pass (call graph,
XLA reachability, chains) reruns over all summaries, so a change in one file that makes a
chain appear or disappear in another is seen without invalidating the other file. An entry
is used only when the file's content hash, its module name and root, the linter's own
source (code and rules) and the config that shapes per-file analysis (``roots``) all match.
Whole results: when no file, setting or linter source changed at all, the findings of the
last identical run are returned as they were (``get_result``/``put_result``).

One pickle file holds every entry of one linter build and config (loading one file is
much cheaper than hundreds of small ones); it is replaced atomically, so concurrent
runs at worst redo work. A run that changed few entries (a pre-commit run) writes them to
a small delta file beside it instead of rewriting the whole file; a run that changed many
folds the delta back in. Every entry is checked by content hash when read, so a delta
from another run's main file is at worst a miss.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import tempfile
from contextlib import contextmanager
from pathlib import Path

from detective import __version__
from detective.lint.model import FileSummary

CACHE_DIR = ".detective/cache"
_FORMAT = 92  # 92: comprehension targets are bound inside the comprehension, fields of a data mapping iterated item by item hold no tensors, a guessed parameter read by string keys is a mapping; 91: kernels built with torch.utils.cpp_extension.load from .cu sources need CUDA, Fn.apply of a Function of the file runs Fn.forward for must-calls; 90: `self.training` and float(...) passed are Python values, locals made from guessed parameters rest on them, `k in batch` on an argument read by string keys is no tensor read, tuple-unpacked self attributes hold tensors, cupy/pynvrtc/pycuda kernels need CUDA; 89: a lazy set-up side (if self._ops is None: self._ops = build()) counts for must-calls; 88: guarded_by keeps every parameter name a test needs; 87: a parameter used as a slice bound (or a term of one) holds a Python value; 86: the side where isinstance(p, torch.Tensor) is false holds no tensor; 85: a call to a function that needs a kernel on every way counts under a test only where it is made; 84: k2, fast_rnnt, optimized_transducer and warp-rnnt kernels are CPU/CUDA-only; 83: `if __name__ == "__main__":` inside a function never runs in a program that imports the file; 82: names fixed by the code (`merge = False`, a module's `DEBUG = False`) decide their tests; 81: must_calls follow an `if` that returns the call and count ways that raise as error paths; 80: `if isinstance(p, int):` sides read p as a Python number; 79: the rest of a block after `if self.initted: return` that sets the flag runs once; 78: an isinstance test against Python scalars narrows the other operand of or/and; 77: a CUDA-only package's own calls into itself are no kernel calls; 76: `attn_impl == "te"` sides are CUDA-only attention sides; 75: top_imports include a try whose every handler raises; 74: a parameter an if/elif chain compares with two or more integers holds a Python value; 73: tensors made on a device named "cuda" need CUDA like .cuda(); 72: launches of a Triton kernel of the file need a GPU, a nested def's return is no early exit of its enclosing function; 71: FileSummary.top_imports (files that import a CUDA-only package at module level, directly or through project modules); 70: `attn_impl == "flash"` sides are flash-attention sides; 69: returns of functions annotated -> int/float/bool/str and of shape metadata (x.size(1)) are "python", values of Optional[Dict[str, int]] are ints, parameters passed as sizes to x.view(B, H, W, C) are Python values; 68: "needs-cuda-device" scope tags; must_calls hold "#Cls" for a class of the file built on every path; 67: unknown-receiver compile targets keep the receiver's name ("*.step:optimizer"); 66: compile targets on a local bound to a class instance (model = Train(...); torch.compile(model)); 65: a name bound to a Python value (multi = n > 2 and flag) returned is no tensor; 64: a self attribute built by a non-tensor library (self.rng = np.random.default_rng()) vetoes receivers through it; 63: reads of NumPy values made from a host copy are not host-copy reads; 62: "compiles-part:<attr>" scope tags; 61: on_host follows operators inside a call chain ((u != -1).any()); 60: no "key-set:" facts (RC004 needs an optional key in every view); 59: compile targets on a local of unknown class kept as "*.method"; 58: RC005 fills computed from Python numbers (int params, range indices, arithmetic) and torch.tensor(scalar, **kw); 57: indices (argsort, topk(...).indices) and slices of numeric tensors are numeric, numeric_names also for values not followed as tensors; 56: a mapping read with a Python literal default (`kwargs.pop("k", False)`) passes a flag, a subscript assigned to is no key read; 55: decorator expressions run once where the def is; 54: lazy message lambdas are dead, names bound to slice(...) are no masks; 53: "generated-from:" facts (a generated file's header names its source); 52: a constructor's **kwargs are options, not batch fields; 51: a nested train loop knows the loader its callers pass, enumerate(loader) loops, reads after a fully synced loader loop, RC006 keeps the assumptions of its evidence; 50: layout and flag queries (is_coalesced(), is_signed(), ...) give Python bools; 49: module names run through a namespace directory between two packages; 48: RC105 reads XLA_DISABLE_FUNCTIONALIZATION as read per use; 47: a subscript of a config-named mapping is no batch field; 46: FileSummary.device_built (constructions put on a device named by a value); 45: RC004 skips key tests whose branch only does host bookkeeping; 44: `if self.X is None: ... self.X = v` runs once; 43: a sync under a flag fixed per call ends the step for the reads after it; 42: FunctionFrame.numeric_names (no mask by name), gathers by two integer indices; 41: "zero-grad:keeps-grads" facts, RC101 candidates that need their absence; 40: names zipped from named_*()/items()/keys()/range() are not input data; 39: a self-method guess rests on the method alone, not on what its arguments were assumed to be; 38: optional-key facts leave out removals from mappings a function builds itself and replacements of keys it holds; 37: hooks removed by the function that registers them are calls, not roots; 36: "compiled-parts:<attr>" facts; 35: ClassFrame.plain_attrs (fields annotated as Python scalars); 34: "export-checks" scope tags; 33: return_items list every position of a returned tuple; 32: optimizer param_groups entries hold Python hyperparameters; 31: compiles-self only for self and self.forward; 30: .copy()/.index()/.count() give no tensor; 29: FileSummary.xla_optional, "uses-xla" scope tags; 28: RC007 candidates; 27: RC102 skips a sync on an if side that leaves the loop; 26: CPU factories with device="cpu", self.method returns that follow their inputs; 25: FileSummary.relative_imports; 24: "compiles-self" scope tags; 23: optional-key facts leave out updates, replacements and passed-on values; 22: ClassInfo.field_types and built_attrs (components built from config fields); 21: "t" passes (a device tensor handed to a parameter), "%k" assumptions; 20: cuda_built holds callees whose results are moved to CUDA or the CPU; 19: Scope.tensor_calls; 18: setup.py extension facts, Scope.tensor_calls; 17: RC002 candidates guarded by `P and ...`; 16: Scope.must_calls, needs-cuda for .cuda() under tests that choose no device and globals() picks; 15: keyword passes per scope, "**@" for a function's own **kwargs passed on; 14: Scope.method_calls; value_refs leave out base classes (read from ClassInfo.bases); 13: RC109 candidates guarded by the tests their varying names were bound under; 12: Scope.returns "python" for `return t.numpy()`; 11: needs-cuda from kernel attributes (self.asg = ASGLoss(...)); 10: "compiles" scope tags; 9: value_refs, cuda_built, compile-disable tags; 8: Candidate.rests_on, Scope.defaults, passes with keywords and literal kinds; 7: needs-cuda tags; 6: CallRef.shapes, Scope.signature; 5: guarded_by, none_params, keyword/positional passes; 4: Candidate/Finding.severity; 2: Finding.chain as ChainLink records, subject fields; 3: ClassInfo.tensor_attrs, reasons


def content_hash(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def linter_fingerprint() -> str:
    """Version plus the source of the linter and its rules: any edit invalidates the cache."""
    import detective.lint as lint_package
    import detective.rules as rules_package

    digest = hashlib.blake2b(f"{__version__}:{_FORMAT}".encode(), digest_size=16)
    for package in (lint_package, rules_package):
        for directory in package.__path__:
            for path in sorted(Path(directory).glob("*.py")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


class SummaryCache:
    def __init__(self, directory: Path, roots=()):
        self.directory = directory
        key = hashlib.blake2b(
            f"{linter_fingerprint()}|roots={sorted(roots)}".encode(), digest_size=8
        ).hexdigest()
        self.key = key
        self.file = directory / f"summaries-{key}.pickle"
        self.results_file = directory / f"results-{key}.pickle"
        self.delta_file = directory / f"delta-{key}.pickle"  # entries changed since self.file
        self.rules_file = directory / f"rules-{key}.pickle"  # rule codes of this linter build
        self.environment_file = directory / "environment.pickle"  # installed modules, by content
        self.answers_file = directory / "environment-answers.pickle"  # their answers, by lookups
        self._entries: dict[str, tuple[str, FileSummary]] | None = None
        self._delta: dict[str, tuple[str, FileSummary]] = {}  # in the delta file, or new
        self._has_main = False
        self._dirty = False
        self.hits = 0
        self.misses = 0

    @staticmethod
    def entry_key(summary_path: str, module: str, root: str, is_package: bool) -> str:
        return f"{summary_path}\0{module}\0{root}\0{int(is_package)}"

    def _load(self) -> dict[str, tuple[str, FileSummary]]:
        if self._entries is None:
            with paused_gc():
                self._entries = _read_dict(self.file)
                # They live as long as the run: later collections skip them. Frozen before
                # collection resumes, or the first one walks every entry just loaded.
                if self._entries:
                    gc.freeze()
            self._has_main = self._entries is not None
            self._entries = self._entries or {}
            if self._has_main:
                self._delta = _read_dict(self.delta_file) or {}
                self._entries.update(self._delta)
        return self._entries

    def get(self, key: str, digest: str) -> FileSummary | None:
        entry = self._load().get(key)
        if entry is not None and entry[0] == digest:
            self.hits += 1
            return entry[1]
        self.misses += 1
        return None

    def put(self, key: str, digest: str, summary: FileSummary) -> None:
        entries = self._load()
        entries[key] = self._delta[key] = (digest, summary)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ignore = self.directory / ".gitignore"  # inside the cache: never ignores anything else
            if not ignore.exists():
                ignore.write_text("# written by detective lint\n*\n")
            entries = self._entries or {}
            if self._has_main and len(self._delta) * 8 < len(entries):
                self._write(self.delta_file, self._delta)  # a few files changed
                self._dirty = False
                return
            for key in [k for k in entries if not os.path.exists(k.split("\0", 1)[0])]:
                del entries[key]  # files deleted or renamed since
            for stale in [*self.directory.glob("summaries-*.pickle"), *self.directory.glob("results-*.pickle"),
                          *self.directory.glob("delta-*.pickle"), *self.directory.glob("rules-*.pickle")]:
                if stale not in (self.file, self.results_file, self.rules_file):
                    stale.unlink(missing_ok=True)  # another linter build or config, or folded in
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".pickle")
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(self._entries, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
            self._has_main, self._delta = True, {}
        except OSError:
            pass  # a read-only tree still lints, just without a cache
        self._dirty = False

    # ------------------------------------------------------------------ rule codes
    # The codes of this build's rules (the key covers the rules' source), so that a run
    # answered from the cache selects rules without importing them (and libcst).
    def rule_codes(self) -> list[str] | None:
        try:
            with open(self.rules_file, "rb") as handle:
                codes = pickle.load(handle)
        except Exception:  # noqa: BLE001 - any unreadable file is just a miss
            return None
        return codes if isinstance(codes, list) and all(isinstance(c, str) for c in codes) else None

    def save_rule_codes(self, codes: list[str]) -> None:
        self._write(self.rules_file, list(codes))

    # ------------------------------------------------------------------ installed modules
    # Parsed installed modules (detective.lint.environment), keyed by path and checked by
    # content hash; independent of the linter build except for the format.
    def environment(self) -> dict:
        try:
            with open(self.environment_file, "rb") as handle:
                data = pickle.load(handle)
            if isinstance(data, tuple) and data[0] == _FORMAT and isinstance(data[1], dict):
                return data[1]
        except Exception:  # noqa: BLE001 - any unreadable file is just a miss
            pass
        return {}

    def save_environment(self, store: dict) -> None:
        self._write(self.environment_file, (_FORMAT, store))

    # Answers about installed classes (Environment.answers) with the lookups they rest on;
    # the Environment checks those lookups before using them. Tied to this linter build.
    def environment_answers(self) -> dict | None:
        try:
            with open(self.answers_file, "rb") as handle:
                data = pickle.load(handle)
            if isinstance(data, tuple) and data[0] == self.key and isinstance(data[1], dict):
                return data[1]
        except Exception:  # noqa: BLE001 - any unreadable file is just a miss
            pass
        return None

    def save_environment_answers(self, answers: dict) -> None:
        self._write(self.answers_file, (self.key, answers))

    def _write(self, target: Path, value) -> None:
        """Atomically replace ``target`` (a read-only cache directory is not an error)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".pickle")
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, target)
        except OSError:
            pass

    # ------------------------------------------------------------------ whole results
    # When no file, no setting and no linter source changed, the findings of the last
    # identical run are the answer: no summary is loaded and no call graph is built.
    def get_result(self, key: str):
        try:
            with open(self.results_file, "rb") as handle:
                return pickle.load(handle).get(key)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
                TypeError, ValueError):
            return None

    def put_result(self, key: str, value) -> None:
        try:
            with open(self.results_file, "rb") as handle:
                results = pickle.load(handle)
        except Exception:  # noqa: BLE001 - any unreadable file is just a miss
            results = {}
        results.pop(key, None)
        results[key] = value
        while len(results) > 8:  # a few configurations (select, --project) side by side
            results.pop(next(iter(results)))
        self._write(self.results_file, results)


def _read_dict(path: Path) -> dict | None:
    """A pickled dict, or None when the file is missing or unreadable (just a miss)."""
    try:
        with open(path, "rb") as handle:
            data = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError,
            ValueError):
        return None
    return data if isinstance(data, dict) else None


# Python's cyclic garbage collector runs every few hundred new objects and, in its oldest
# generation, walks every object alive. Loading thousands of summaries or parsing an
# installed module allocates hundreds of thousands of objects (acyclic: freed by reference
# counting), so collections there are pure cost: a third of the time or more.
@contextmanager
def paused_gc():
    """No collection while a large acyclic structure is built."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
