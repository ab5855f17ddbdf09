"""What one Dynamo compile or graph break becomes as an event: the compiled function, the call
site, the failing guard located in user code, the kind of change, and fallbacks to eager.

Keeps what it learns across compiles: each frame's function and last call site (later compiles of
a frame can lack them), compiles per frame (for the recompile-limit headline) and the guards Dynamo
may already have widened to dynamic.
"""

from __future__ import annotations

from detective.runtime import dynamo_guards as guards
from detective.runtime.library import is_library

LIMIT_FAILS = ("RecompileLimitExceeded", "CacheLimitExceeded")


class CompileEvents:
    def __init__(self):
        self._frames: dict[str, dict] = {}  # frame id -> function and last call site
        self._widened: set = set()  # (function, guard source) Dynamo has made dynamic
        self._compiles: dict[str, int] = {}  # frame id -> compiles (for the fallback headline)

    def compile_event(self, m, live_stack: list[dict] | None) -> dict:
        """The fields of one forward compile (``CompilationMetrics``); the recorder adds event kind,
        step, index and pid. ``live_stack``: the call stack seen when the compile started."""
        compile_id = str(m.compile_id or "?")
        frame_id = compile_id.rsplit("/", 1)[0]
        frame = self._frames.setdefault(frame_id, {"function": None, "stack": []})
        stack = guards.parse_stack(m.stack_trace)
        if live_stack and len(live_stack) > len(stack):
            stack = [f for f in live_stack if not self._is_library(f["file"])]
        if m.co_name:
            frame["function"] = {"file": m.co_filename, "line": m.co_firstlineno, "function": m.co_name}
        if stack:
            frame["stack"] = stack
        function, stack = frame["function"], frame["stack"]
        total = m.entire_frame_compile_time_s
        if total is None:
            total = (m.dynamo_cumulative_compile_time_us or 0) / 1e6
        backend = m.backend_compile_time_s or 0.0
        failures = guards.parse_failures(m.recompile_reason)
        fallback = m.fail_type in LIMIT_FAILS or "cache limit" in (m.fail_reason or "").lower()
        recompile = m.recompile_reason is not None and not fallback and not m.fail_type
        self._compiles[frame_id] = self._compiles.get(frame_id, 0) + (not fallback)
        kind, first_change = self._kind(function, failures) if failures else (None, False)
        # the call site: the innermost user frame outside the function being compiled
        trigger = self._user_frame([f for f in stack if function is None or not (
            f["file"] == function["file"] and f["function"] == function["function"])])
        guard_line = self._located(failures[0].location if failures else None, function, stack)
        resumed = guards.resumed_after_break(function)  # the rest of a function after a graph break
        site = guard_line or resumed or trigger or function
        if fallback:
            cause = (f"recompile limit hit after {self._compiles[frame_id]} compiles: "
                     "Dynamo runs this function in eager from now on")
        elif m.fail_type:
            cause = f"compile failed: {m.fail_type}: {(m.fail_reason or '').splitlines()[0] if m.fail_reason else ''}"
        elif recompile:
            cause = "recompile: " + (failures[0].text if failures else m.recompile_reason)
        else:
            cause = "first compile of this function"
        return {
            "graph_hash": compile_id,
            "compiled": not fallback,
            "new": bool(m.has_guarded_code) and not fallback,
            "compile_seconds": total,
            "cause": cause,
            "graph_name": (function or {}).get("function"),
            "frames": stack,
            "frames_truncated": False,
            "site": site,
            "inputs": None,
            "outputs": None,
            "unexpected": False,
            "rank": None,
            "backend": "dynamo",
            "compile_id": compile_id,
            "function": function,
            "trigger": trigger,
            "recompile": recompile,
            "kind": kind,
            "guard_source": failures[0].source if failures else None,
            "first_change": first_change,
            "guards": [f.text for f in failures],
            "guard_line": guard_line,
            "resumes_after_break": resumed,
            "fallback": fallback,
            "compiles_of_function": self._compiles[frame_id],
            "failed": m.fail_type if m.fail_type and not fallback else None,
            "dynamo_seconds": max(total - backend, 0.0),
            "backend_seconds": backend,
            "restarts": len(m.restart_reasons or ()),
        }

    def _kind(self, function: dict | None, failures: list) -> tuple[str, bool]:
        """(kind, first_change): the first failure of a guard Dynamo may widen to dynamic. Whether it
        did shows only later (no further recompile on it), so the report decides."""
        first = failures[0]
        key = ((function or {}).get("file"), (function or {}).get("line"), first.source)
        if first.source and guards.can_become_dynamic(first.text) and key not in self._widened:
            self._widened.add(key)
            return first.kind, True
        return first.kind, False

    def _located(self, location, function: dict | None, stack: list[dict]) -> dict | None:
        if location is None:
            return None
        candidates = [(function or {}).get("file")] + [f["file"] for f in stack]
        return {"file": guards.resolve_file(location.file, candidates), "line": location.line,
                "function": location.function}

    def break_event(self, reason) -> dict:
        """The fields of one graph break (``GraphCompileReason``); the recorder adds event kind, step and pid."""
        user = [f for f in reason.user_stack or [] if not self._is_library(f.filename)]
        frame = (user or list(reason.user_stack or []) or [None])[-1]
        return {
            "reason": (reason.reason or "").strip().splitlines()[0] if reason.reason else None,
            "file": frame.filename if frame else None,
            "line": frame.lineno if frame else None,
            "function": frame.name if frame else None,
            "code": (frame.line or "").strip() if frame else None,
        }

    def _user_frame(self, stack: list[dict]) -> dict | None:
        for frame in stack:
            if not self._is_library(frame["file"]):
                return frame
        return None

    @staticmethod
    def _is_library(file: str) -> bool:
        return not file or file.startswith("<") or is_library(file)
