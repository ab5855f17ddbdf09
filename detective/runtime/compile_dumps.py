"""Diagnose mode's graphs, taken from XLA's compile-time dump: paid only by steps that compile.

torch_xla's own graph dump (XLA_SAVE_TENSORS_FILE) writes the IR text of every graph at every
sync, before its compile-cache lookup, and its path is read once per thread: it cannot be
limited to compiles, and it costs a multiple of a small step. XLA instead dumps a module when it
compiles one (``--xla_dump_to=DIR --xla_dump_hlo_as_text``; torch_xla leaves the dump flags out
of its graph hash and of its persistent-cache key, runtime/env_hash.cpp). With XLA_HLO_DEBUG=1
every instruction carries its IR op and source line (report/hlo.py reads it).

After a step whose compile counter moved, the tracer pairs the step's compiled executions, in
order, with the modules dumped since the last look (file names ``module_<N>.<name>.*``, N in
compile order), checks each pair by the number of graph inputs when PT_XLA_DEBUG gave it, keeps
``before_optimizations.txt`` as ``graphs/<hash>.hlo.txt`` and deletes the module's other files.
"""

from __future__ import annotations

import os

DUMP_TO = "--xla_dump_to="
AS_TEXT = "--xla_dump_hlo_as_text"
MODULE_SUFFIX = ".before_optimizations.txt"
GRAPH_SUFFIX = ".hlo.txt"
HASH_PREFIX = "# Graph Hash: "
MODULE_PREFIX = "# XLA dump file: "  # module_<N> counts XLA's compiles in this process
FUNCTION_PREFIX = "# function "  # "# function <line> <function> <source_file>"


def dump_dir_of(flags: str) -> str | None:
    """The --xla_dump_to directory XLA_FLAGS names (the last one wins, as in XLA), or None."""
    found = None
    for flag in flags.split():
        if flag.startswith(DUMP_TO):
            found = flag[len(DUMP_TO):]
    return found


def with_dump_flags(flags: str, dump_dir: str) -> str:
    """The user's XLA_FLAGS plus what diagnose mode needs; a dump directory of their own is kept."""
    parts = flags.split()
    if dump_dir_of(flags) is None:
        parts.append(DUMP_TO + dump_dir)
    if AS_TEXT not in parts and f"{AS_TEXT}=true" not in parts:
        parts.append(AS_TEXT)
    return " ".join(parts)


def _module_number(name: str) -> int | None:
    if not name.startswith("module_"):
        return None
    head = name[len("module_"):].split(".", 1)[0]
    return int(head) if head.isdigit() else None


class CompileDumps:
    """The modules XLA dumped into one directory, taken in compile order."""

    def __init__(self, path: str, owned: bool, since: float | None = None):
        self.path = path
        self.owned = owned  # ours: delete what was read; the user's own --xla_dump_to: leave it
        self.since = since  # the user's directory: files older than this are another run's
        self._taken = -1  # highest module number already looked at

    def take(self) -> list[str]:
        """Paths of the before-optimizations modules dumped since the last call, in compile order."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return []
        modules: dict[int, str] = {}
        for name in names:
            number = _module_number(name)
            if number is not None and number > self._taken and name.endswith(MODULE_SUFFIX):
                path = os.path.join(self.path, name)
                if self.since is None or _mtime(path) >= self.since:
                    modules[number] = path
        if not modules:
            return []
        self._taken = max(modules)
        return [modules[n] for n in sorted(modules)]

    def discard(self) -> None:
        """Delete every file of the modules taken so far (LLVM IR, objects, ...): disk stays flat."""
        if not self.owned:
            return
        try:
            names = os.listdir(self.path)
        except OSError:
            return
        for name in names:
            number = _module_number(name)
            if number is not None and number <= self._taken:
                try:
                    os.remove(os.path.join(self.path, name))
                except OSError:
                    pass

    def clear(self) -> None:
        """Drop whatever was dumped so far, unread (output from before a watch, thread ranks' compiles)."""
        self.take()
        self.discard()


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def entry_parameters(text: str) -> int:
    """How many parameters the module's entry computation takes (the graph's inputs)."""
    start = text.find("\nENTRY ")
    if start < 0:
        return -1
    end = text.find("\n}", start)
    return text.count(" parameter(", start, end if end >= 0 else len(text))


def pair_modules(compiled: list[dict], modules: list[tuple[str, str]]) -> list[tuple[dict, str, str]]:
    """(execution event, module path, module text) for each compiled execution whose module is found, in order.

    Modules are skipped over while their input count disagrees with the event's (a compile
    torch_xla did not report as one); an event with no count takes the next module.
    """
    pairs = []
    queue = list(modules)
    for event in compiled:
        while queue:
            path, text = queue.pop(0)
            inputs = event.get("inputs")
            if inputs is None or entry_parameters(text) == inputs:
                pairs.append((event, path, text))
                break
    return pairs


def graph_file_text(graph_hash: str, module_path: str, module_text: str, functions) -> str:
    """Header (hash, XLA's dump file, the function around each source line) and XLA's module
    text, verbatim."""
    header = ["# detective: the graph as XLA compiled it (its before-optimizations HLO module)",
              HASH_PREFIX + graph_hash, MODULE_PREFIX + os.path.basename(module_path)]
    header += [f"{FUNCTION_PREFIX}{line} {function} {path}" for (path, line), function in sorted(functions.items())]
    return "\n".join(header) + "\n" + module_text


def source_functions(module_text: str) -> dict[tuple[str, int], str]:
    """(source_file, source_line) -> name of the function around it, read from the sources now
    (HLO metadata has no function names; the report must work where the sources are gone)."""
    from detective.report.sources import enclosing_function

    out: dict[tuple[str, int], str] = {}
    pos = 0
    marker = 'source_file="'
    while True:
        start = module_text.find(marker, pos)
        if start < 0:
            return out
        start += len(marker)
        end = module_text.find('"', start)
        line_at = module_text.find("source_line=", end)
        pos = end
        if end < 0 or line_at < 0 or line_at - end > 3:
            continue
        digits = module_text[line_at + len("source_line="):].split(None, 1)[0].rstrip("}")
        if not digits.isdigit():
            continue
        key = (module_text[start:end], int(digits))
        if key not in out:
            out[key] = enclosing_function(key[0], key[1]) or "?"
