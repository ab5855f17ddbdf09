"""Read Dynamo's guard-failure text: which guards failed, what kind of change, and which user line.

Dynamo (torch 2.9) records why a frame recompiled as ``CompilationMetrics.recompile_reason``:
``"<compile id>: <failure>[; <failure>...]"`` for the most recent cache entry, where a failure is
the guard's code and, for guards built from user code, ``# <source line>  # <file>:<line> in <fn>``
(the file shortened by ``torch.utils._traceback.shorten_filename``). Tensor size/dtype/device
failures name the argument instead (``tensor 'x' size mismatch at index 0. expected 4, actual 12``).
This module turns that text, and the two other texts Dynamo records (the compile's call stack,
the name of the function it resumes after a graph break), into fields; it imports nothing from torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHAPE, CONSTANT, DTYPE, DEVICE, IDENTITY, GLOBAL, AUTO_DYNAMIC, OTHER = (
    "shape", "constant", "dtype", "device", "identity", "global", "automatic dynamic", "other",
)
KINDS = (SHAPE, CONSTANT, DTYPE, DEVICE, IDENTITY, GLOBAL, AUTO_DYNAMIC, OTHER)

_COMPILE_ID = re.compile(r"^\s*!?[\d/]+:\s*")
# "<code>  # <file>:<line> in <function>": a guard's user line; a symbolic-shape guard can carry
# several, joined as "... # <code1>  # <loc1> (<note>) and <code2>  # <loc2>".
_USER_LOC = re.compile(r"\s{2}#\s(?P<file>[^\s#:][^\s:]*):(?P<line>\d+) in (?P<function>[\w<>.]+)")
_CODE_START = re.compile(r"(?:#\s|\)\sand\s)")
_FRAMEWORK_NOTE = "the guard itself is not due user code"
_TENSOR = re.compile(r"tensor '(?P<name>[^']+)' (?P<what>[\w ]+?) mismatch")
_BARE_NAME_VALUE = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*==\s*")
_SIZED = re.compile(r"(?P<name>[\w.\[\]'\"]+)\.(?:size|stride|storage_offset)\(|(?P<alt>[\w.]+)\.shape\b")
_VALUE = re.compile(r"^\s*(?P<source>[^=<>!]+?)\s*(==|!=)\s*")


@dataclass(frozen=True)
class UserLocation:
    file: str  # as Dynamo printed it: possibly cut at the front (resolve with resolve_file)
    line: int
    function: str
    code: str


@dataclass(frozen=True)
class GuardFailure:
    text: str  # one failing guard, without the compile id
    kind: str
    source: str | None  # what the guard checks: an argument, attribute or global
    location: UserLocation | None


def split_reason(reason: str | None) -> list[str]:
    """The failing guard(s) of one recompile_reason, without the leading compile id.

    Outside TORCH_LOGS=recompiles_verbose Dynamo reports one failing guard per cache entry
    (``get_guard_fail_reason_helper`` stops at the first), so there is nothing to split: a "; "
    inside the text belongs to the user's source line.
    """
    if not reason:
        return []
    body = re.sub(r"[ \t]{3,}", "  ", _COMPILE_ID.sub("", reason, count=1)).strip()
    return [body] if body else []


def user_location(text: str) -> UserLocation | None:
    """The user line a guard came from; a line Dynamo marks as only a first use comes last."""
    found = []
    markers = list(_USER_LOC.finditer(text))
    for i, m in enumerate(markers):
        before = text[markers[i - 1].end() if i else 0: m.start()]
        starts = list(_CODE_START.finditer(before))
        code = before[starts[-1].end():] if starts else before
        after = text[m.end(): markers[i + 1].start() if i + 1 < len(markers) else len(text)]
        if m["file"].startswith(("_dynamo/", "fx/", "_inductor/", "utils/")):
            continue  # torch's own frames, shortened relative to torch's directory
        found.append((_FRAMEWORK_NOTE in after,
                      UserLocation(m["file"], int(m["line"]), m["function"], code.strip())))
    if not found:
        return None
    found.sort(key=lambda pair: pair[0])  # stable: the first location not marked as a framework guard
    return found[0][1]


def classify(text: str) -> tuple[str, str | None]:
    """(kind, source) of one failing guard's text (automatic dynamic is decided by the caller)."""
    head = text.split("#", 1)[0].strip()
    tensor = _TENSOR.search(head)
    if tensor:
        what = tensor["what"]
        if "dtype" in what:
            return DTYPE, tensor["name"]
        if "device" in what or "dispatch key" in what:
            return DEVICE, tensor["name"]
        if "size" in what or "stride" in what or "dimensionality" in what:
            return SHAPE, tensor["name"]
        return OTHER, tensor["name"]
    lowered = head.lower()
    if "global_state" in lowered or "global state" in lowered or "grad_mode" in lowered or "torch_function_mode" in lowered \
            or "___check_current_backend" in head or "config" in lowered:
        return GLOBAL, None
    sized = _SIZED.search(head)
    if sized:
        return SHAPE, sized["name"] or sized["alt"]
    if "___check_obj_id" in head or "___check_type_id" in head or " is " in head:
        return IDENTITY, _source_of(head.replace("___check_obj_id(", "").replace("___check_type_id(", ""))
    if head.startswith("G[") or "G['" in head:
        return GLOBAL, _source_of(head)
    if "==" in head or "!=" in head:
        return CONSTANT, _source_of(head)
    return OTHER, None


def _source_of(head: str) -> str | None:
    m = _VALUE.match(head)
    if m:
        return m["source"].strip()
    return head.split(",", 1)[0].split(")", 1)[0].strip() or None


def can_become_dynamic(text: str) -> bool:
    """A guard Dynamo's automatic-dynamic logic widens after one recompile: a tensor size, or a
    plain int/float argument (`n == 2`). Attributes (`self.step == 3`, static on nn.Modules) and
    globals stay specialised."""
    head = text.split("#", 1)[0]
    m = _TENSOR.search(head)
    if m:
        return "size" in m["what"] or "stride" in m["what"]
    return bool(_BARE_NAME_VALUE.match(head))


def parse_failures(reason: str | None) -> list[GuardFailure]:
    out = []
    for text in split_reason(reason):
        kind, source = classify(text)
        out.append(GuardFailure(text, kind, source, user_location(text)))
    return out


def resolve_file(shown: str, candidates) -> str:
    """The full path Dynamo shortened to ``shown`` (it cuts a common prefix with torch's directory)."""
    for path in candidates:
        if path and (path == shown or path.endswith("/" + shown) or path.endswith(shown)):
            return path
    return shown


def short(text: str) -> str:
    """A guard failure without its source comment and hints: ``self.updates == 1`` or
    ``tensor 'x' size mismatch at index 0. expected 4, actual 12``."""
    return text.split("  #", 1)[0].split(" (HINT", 1)[0].strip()


_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>\w+?)_at_(?P<line>\d+)$")


def resumed_after_break(function: dict | None) -> dict | None:
    """For Dynamo's ``torch_dynamo_resume_in_<fn>_at_<line>`` (the rest of ``fn`` after a graph
    break at ``line``): that line, as a frame dict; None for any other function."""
    m = _RESUME.match((function or {}).get("function") or "")
    return {"file": function["file"], "line": int(m["line"]), "function": m["name"]} if m else None


def parse_stack(lines) -> list[dict]:
    """CompilationMetrics.stack_trace ("Line: N, Name: f, Filename: path", outermost first) as
    frames innermost first, the XLA tracer's order."""
    frames = []
    for text in lines or []:
        try:
            head, name_part = text.split(", Name: ", 1)
            name, file = name_part.split(", Filename: ", 1)
            frames.append({"file": file.strip(), "line": int(head.replace("Line:", "").strip()), "function": name})
        except ValueError:
            continue
    return frames[::-1]
