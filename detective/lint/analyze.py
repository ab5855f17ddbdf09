"""Per-file pass: source text -> FileSummary (scopes, calls, classes, candidates).

Runs in worker processes; everything it returns is plain data. Names that refer to
this file are resolved here (``local:helper`` -> ``#helper``), so the cross-file pass
only has to follow imports.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys

import libcst as cst

from detective.lint.cache import paused_gc
from detective.lint.callgraph import UNLINKED_METHODS
from detective.lint.context import Context
from detective.lint.importable import generated_from
from detective.lint.model import COMPILED, GENERATED_FROM_FACT, UNKNOWN_RECEIVER, Candidate, CallRef, FileSummary

_LIVENESS = {"": 0, "once": 1, "dead": 2}
from detective.lint.positions import LineIndex, code_at, resolve_offsets
from detective.lint.rule import all_rules
from detective.lint.semantic import SemanticModel
from detective.lint.syntax import block_statements, dotted_name, ends_in_exit
from detective.lint.signatures import call_shape

_SUPPRESS = re.compile(
    r"#\s*(?:noqa(?::\s*(?P<noqa>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
    r"|detective:\s*ignore(?:\[(?P<ignore>[^\]]*)\])?)",
    re.IGNORECASE,
)


_BUILTINS = frozenset(dir(builtins))  # object, Exception, dict...: resolved, never a module


class SourceError(Exception):
    """The file cannot be linted; the message is one line for the user."""


def decode(raw: bytes) -> str:
    if b"\0" in raw:
        raise SourceError("cannot read: binary file (contains NUL bytes)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def analyze(source: str, path: str, module: str, root: str, is_package: bool = False,
            extra_roots=()) -> FileSummary:
    # Once the context is closed the tree and the walk's state are acyclic, freed by
    # reference counting when _analyze returns: collections while a file is analysed only
    # walked its tree, and the summaries of every file before it (a tenth of a run).
    with paused_gc():
        return _analyze(source, path, module, root, is_package, extra_roots)


def _analyze(source: str, path: str, module: str, root: str, is_package: bool, extra_roots) -> FileSummary:
    try:
        tree = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SourceError(f"cannot parse: {_syntax_error(source, exc)}") from None
    except (RecursionError, MemoryError) as exc:
        raise SourceError(f"cannot parse: {type(exc).__name__}") from None

    context = Context(module, is_package, all_rules(), extra_roots=extra_roots)
    context.run(tree)
    summary = _summarise(context, tree, source, path, module, root, is_package)
    context.close()
    return summary


def _summarise(context: Context, tree: cst.Module, source: str, path: str, module: str,
               root: str, is_package: bool) -> FileSummary:
    model, regions = context.model, context.regions
    candidates = [i for i in regions.items if i.kind == "candidate"]
    wanted = list(model.anchors.values()) + [i.payload[2] for i in candidates]
    replaced = [i.payload[3][0][0] for i in candidates if i.payload[3] and i.payload[3][0]]
    offsets, spans = resolve_offsets(tree, wanted, replaced)
    lines = LineIndex(source)

    def where(node) -> tuple[int, int]:
        offset = offsets.get(id(node))
        return lines.position(offset) if offset is not None else (0, 0)

    summary = FileSummary(path=path, module=module, root=root, is_package=is_package,
                          imports=dict(model.imports), imports_xla=model.imports_xla,
                          module_imports=sorted(set(model.module_imports)),
                          star_imports=list(dict.fromkeys(model.star_imports)),
                          relative_imports=_relative_imports(tree),
                          top_imports=_top_imports(tree, module, is_package),
                          xla_optional=model.imports_xla and not _imports_xla_at_top(tree),
                          facts=sorted(set(model.project_facts) | _generation_facts(source)))
    for qualname, scope in model.scopes.items():
        scope.return_calls = [t for t in (_resolve_assumption(model, c, qualname) for c in scope.return_calls) if t]
        scope.return_items = [item if item in ("", "tensor") else "|".join(
            t for t in (_resolve_assumption(model, c, qualname) for c in item.split("|")) if t)
            for item in scope.return_items]
        anchor = model.anchors.get(qualname)
        if anchor is not None:
            scope.line = where(anchor)[0]
        summary.scopes[qualname] = scope
    for qualname, info in model.classes.items():
        info.line = where(model.anchors[f"class:{qualname}"])[0]
        info.bases = [_resolve_base(model, b) for b in info.bases if b.removeprefix("local:") not in _BUILTINS]
        info.attr_types = {
            attr: resolved
            for attr, target in info.attr_types.items()
            if (resolved := _resolve_local(model, target, "<module>"))
        }
        info.field_types = {name: resolved for name, target in info.field_types.items()
                            if (resolved := _resolve_local(model, target, "<module>"))}
        info.built_attrs = {attr: f"{resolved}|{name}" for attr, entry in info.built_attrs.items()
                            for config, _, name in [entry.rpartition("|")]
                            if (resolved := _resolve_local(model, config, "<module>"))}
        summary.classes[qualname] = info

    # One CallRef per (scope, target), the most live way it is called ("" < "once" < "dead").
    # self.x.m(...) with x's class maybe unknown: the shapes of its arguments, so that the
    # cross-file pass links only the project's methods named m that can take them.
    kinds: dict[tuple[str, str], str] = {}
    shapes: dict[tuple[str, str], dict[str, None]] = {}
    guards: dict[tuple[str, str], set[str]] = {}  # the guards every such call is under
    guarded = context.guards.guarded_calls
    by_name: dict[str, dict[str, None]] = {}
    for item in regions.items:
        if item.kind != "call":
            continue
        target = _resolve_local(model, item.payload[0], item.scope)
        if target is None and item.payload[2] != "dead":
            # task.build_model(cfg): a method of a receiver this file cannot name, by name
            # (programs.py dispatches it to the project's classes that may exist)
            method = item.payload[0].rpartition(".")[2]
            if method != item.payload[0] and not method.startswith("__") and method not in UNLINKED_METHODS:
                by_name.setdefault(item.scope, {})[method] = None
        if target:
            key, kind = (item.scope, target), item.payload[2]
            if key not in kinds or _LIVENESS[kind] < _LIVENESS[kinds[key]]:
                kinds[key] = kind
            if target.startswith("self.") and target.count(".") == 2:
                shapes.setdefault(key, {})[call_shape(item.payload[1])] = None
            entries = set(guarded.get(id(item.payload[1]), ()))
            guards[key] = guards[key] & entries if key in guards else entries
    for scope, methods in by_name.items():
        summary.scopes[scope].method_calls = sorted(methods)
    for (scope, target), kind in kinds.items():
        summary.scopes[scope].calls.append(CallRef(target, kind, "/".join(shapes.get((scope, target), ())),
                                                   guard=min(guards.get((scope, target)) or [""])))
    for scope, target in regions.step_closures:
        resolved = _resolve_local(model, target, scope)
        if resolved and resolved.startswith("#") and resolved[1:] in summary.scopes:
            summary.scopes[resolved[1:]].tags.append("step-closure")  # runs after the step
    regions.one_time_hooks()
    for scope, ref, _node, reason in regions.compile_targets:
        target = _resolve_local(model, ref.target, scope) or _unknown_receiver(ref.target, reason)
        if target:
            summary.compile_targets.append((scope, CallRef(target), reason))

    for item in candidates:
        code, message, node, extras, subject, assumes, severity, (guarded, rests_on), (costs_on, needs) = item.payload
        line, column = where(node)
        fix, title, after = (), "", ()
        if extras is not None:
            replace, title, after_calls = extras
            if replace is not None and id(replace[0]) in spans:
                start, end, indent = spans[id(replace[0])]
                new_text = code_at(tree, replace[1], indent)
                if new_text != source[start:end]:
                    fix = ((start, end, new_text),)
            after = tuple(t for t in (_resolve_local(model, c, item.scope) for c in after_calls) if t)
            if after_calls and not after:
                continue  # it depended on calls, and none can lead into the project
        trusted = ()
        if assumes:
            trusted = tuple(t for t in (_resolve_assumption(model, a, item.scope) for a in assumes) if t)
            if not trusted:
                continue  # it took for tensors only calls that cannot lead into the project
        summary.candidates.append(Candidate(code, message, line, column, item.scope, fix=fix,
                                            fix_title=title if fix else "", after_calls=after,
                                            subject=subject, assumes=trusted, severity=severity,
                                            guarded_by=guarded, rests_on=rests_on, costs_on=costs_on,
                                            needs=needs))
    guards = context.guards
    summary.keyword_passes = {scope: {name: "".join(sorted(kinds)) for name, kinds in names.items()}
                              for scope, names in guards.keyword_passes.items()}
    summary.forwards = sorted(guards.forwards)
    summary.attr_kinds = {name: "".join(sorted(kinds)) for name, kinds in guards.attr_kinds.items()}
    summary.attr_params = sorted(guards.attr_params)
    summary.setters_called = sorted(guards.setters_called)
    # Deduplicated, and interned so that the pickled cache stores each string once.
    summary.positional_passes = list(dict.fromkeys(
        (sys.intern(scope), sys.intern(target), sys.intern(places))
        for scope, call, places in guards.positional_passes if (target := _resolve_local(model, call, scope))))
    entrances = context.entrances
    summary.value_refs = entrances.value_refs(model.classes)
    summary.cuda_built = [(scope, resolved) for scope, target in entrances.cuda_built()
                          if (resolved := _resolve_local(model, target, scope))]
    summary.device_built = [(scope, resolved) for scope, target in entrances.device_built()
                            if (resolved := _resolve_local(model, target, scope))]
    summary.candidates.sort(key=lambda c: (c.line, c.column, c.code))
    summary.suppressions = parse_suppressions(source)
    return summary


def _generation_facts(source: str) -> set[str]:
    named = generated_from(source)
    return {GENERATED_FROM_FACT + named} if named else set()


def _imports_xla_at_top(tree: cst.Module) -> bool:
    """Does a top-level statement (not under ``if``/``try``, not in a function) import torch_xla?"""
    for statement in tree.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import) and any(
                    dotted_name(a.name).split(".", 1)[0] == "torch_xla" for a in small.names):
                return True
            if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None \
                    and dotted_name(small.module).split(".", 1)[0] == "torch_xla":
                return True
    return False


def _relative_imports(tree: cst.Module) -> list[str]:
    """``from ..a.b import x`` among the module's own top-level statements (not under a
    ``try`` or an ``if``, where a failed import may be expected): ``["2:a.b"]``."""
    found = []
    for statement in tree.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and small.relative and small.module is not None:
                found.append(f"{len(small.relative)}:{dotted_name(small.module)}")
    return found


def _top_imports(tree: cst.Module, module: str, is_package: bool) -> list[str]:
    """Modules the top-level statements import (not under ``if``, nor under a ``try`` one of
    whose handlers lets the program go on), relative ones
    resolved against ``module``: ``from .ring import f`` in ``pkg.nn.attention`` gives
    ``pkg.nn.ring`` and ``pkg.nn.ring.f`` (``f`` may be a submodule)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[str] = []
    lines = []
    for statement in tree.body:
        if isinstance(statement, cst.SimpleStatementLine):
            lines.append(statement)
        elif isinstance(statement, cst.Try) and statement.handlers and all(
                ends_in_exit(h.body, raise_only=True) for h in statement.handlers):
            # try: from deep_ep import Buffer / except ImportError: raise ImportError(...):
            # the import is required all the same
            lines += [s for s in block_statements(statement.body) if isinstance(s, cst.SimpleStatementLine)]
    for statement in lines:
        for small in statement.body:
            if isinstance(small, cst.Import):
                found += [dotted_name(a.name) for a in small.names]
            elif isinstance(small, cst.ImportFrom):
                level = len(small.relative)
                if level and level - 1 > len(package):
                    continue  # above the top package: importable.py's concern
                base = package[: len(package) - (level - 1)] if level else []
                head = ".".join([*base, *([dotted_name(small.module)] if small.module is not None else [])])
                if not head:
                    continue
                found.append(head)
                if not isinstance(small.names, cst.ImportStar):
                    found += [f"{head}.{a.name.value}" for a in small.names if isinstance(a.name, cst.Name)]
    return list(dict.fromkeys(found))


def _resolve_local(model: SemanticModel, target: str, scope_qualname: str) -> str | None:
    """``local:name.rest`` -> ``#qualname.rest`` when defined in this file, else None."""
    if not target.startswith("local:"):
        return target
    head, _, rest = target[len("local:"):].partition(".")
    scope = model.scopes.get(scope_qualname)
    while scope is not None:
        prefix = "" if scope.qualname == "<module>" else f"{scope.qualname}."
        candidate = f"{prefix}{head}"
        if candidate in model.scopes or candidate in model.classes:
            return f"#{candidate}.{rest}" if rest else f"#{candidate}"
        scope = model.scopes.get(scope.parent) if scope.parent else None
    return None


def _unknown_receiver(target: str, reason: str) -> str | None:
    """``torch.compile(policy.predict_action_chunk)`` on a local of unknown class:
    ``*.name:receiver``, a method of that name on whatever the project builds, the local's name
    kept as a hint at its class (lint/callgraph.py resolves it)."""
    head, _, method = target.removeprefix("local:").partition(".")
    if reason != COMPILED or not target.startswith("local:") or not method or "." in method:
        return None
    return f"{UNKNOWN_RECEIVER}{method}:{head}"


def _resolve_assumption(model: SemanticModel, target: str, scope_qualname: str) -> str | None:
    """A call target taken for a tensor, with its ``@position`` in a returned tuple kept."""
    veto_only = target.startswith("~")
    name, at, position = target.lstrip("~").partition("@")
    resolved = _resolve_local(model, name, scope_qualname)
    if resolved is None and veto_only:
        resolved = name.removeprefix("local:")  # unknown: a veto-only assumption holds
    return f"{'~' if veto_only else ''}{resolved}{at}{position}" if resolved else None


def _resolve_base(model: SemanticModel, base: str) -> str:
    """A base class as the cross-file pass reads it; ``?name`` when nothing here names it
    (a star import, a name from nowhere): an unknown base, not no base."""
    return _resolve_local(model, base, "<module>") or f"?{base.removeprefix('local:')}"


def _syntax_error(source: str, exc: cst.ParserSyntaxError) -> str:
    # CPython's parser words syntax errors the way users know them; libcst's own text
    # is the fallback for code CPython accepts but libcst does not.
    try:
        ast.parse(source)
    except SyntaxError as error:
        return f"{error.msg} (line {error.lineno}, column {error.offset or 0})"
    except (ValueError, RecursionError, MemoryError):
        pass
    return f"{exc.message} (line {exc.raw_line}, column {exc.raw_column + 1})"


def parse_suppressions(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> suppressed codes (None: every code) from noqa / detective: ignore comments."""
    found: dict[int, frozenset[str] | None] = {}
    if "noqa" not in source and "detective:" not in source:
        return found
    for number, text in enumerate(source.splitlines(), start=1):
        if "#" not in text:
            continue
        for match in _SUPPRESS.finditer(text):
            codes_text = match.group("noqa") or match.group("ignore")
            if codes_text is None or not codes_text.strip():
                found[number] = None
                continue
            codes = frozenset(c.upper() for c in re.split(r"[\s,]+", codes_text.strip()) if c)
            previous = found.get(number, frozenset())
            found[number] = None if previous is None else previous | codes
    return found
