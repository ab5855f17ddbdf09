"""Optimizer warm-up, learned from the graphs: state created at an optimizer's first steps.

A stateful optimizer's first steps trace different graphs: SGD with momentum clones the
gradient into ``momentum_buffer`` at its first ``step()`` and multiplies-and-adds into it from
the second; Adam/AdamW create ``exp_avg``/``exp_avg_sq`` (and, with ``capturable=True``, a
``step`` tensor that starts as the special scalar 0); with ``zero_grad(set_to_none=False)`` the
first backward creates the gradients and the next ones accumulate into the zeroed ones. Each is
one extra program, once.

A recompile (diagnose mode, compared with the closest earlier graph of its call stack) is
optimizer warm-up when every op that differs was made in torch's optimizer code (``torch/optim``,
torch_xla's ``amp/syncfree`` optimizers) or has no source location at all (autograd's own ops),
at least one was made in optimizer code, the earlier graph already ran an optimizer step (so the
optimizer's state, not its first appearance, is what changed: a graph that adds the optimizer
step to micro-steps that had none is a new phase, not warm-up), and its call stack had run at
most ``EARLY_STEPS`` steps before. It is never warm-up when a differing op comes from a user line, or when a later
recompile of the same call stack changes ops at the same optimizer lines again (a change that
recurs is a real one, e.g. a schedule that rewrites a hyper-parameter).
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from functools import lru_cache

from detective.report.callsites import RECOMPILE, SURE, WARMUP, stack_key

EARLY_STEPS = 2  # state is created at the first optimizer step and used from the second
_OPTIMIZER_DIRS = (("torch", "optim"), ("torch_xla", "amp", "syncfree"))


@lru_cache(maxsize=1)
def optimizer_files() -> dict[str, str]:
    """basename -> full path of the library's optimizer sources."""
    from detective.report.sources import library_roots

    out: dict[str, str] = {}
    for root in library_roots()[0]:
        for parts in _OPTIMIZER_DIRS:
            if os.path.basename(os.path.normpath(root)) != parts[0]:
                continue
            folder = os.path.join(root, *parts[1:])
            if os.path.isdir(folder):
                for name in sorted(os.listdir(folder)):
                    if name.endswith(".py") and name != "__init__.py":
                        out.setdefault(name, os.path.join(folder, name))
    return out


@lru_cache(maxsize=32)
def _state_keys(path: str) -> dict[int, str]:
    """line -> key of each ``state["key"] = ...`` in an optimizer source (multi-line statements
    cover all their lines)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                        and isinstance(target.slice.value, str)
                        and isinstance(target.value, ast.Name) and target.value.id == "state"):
                    for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                        out[line] = target.slice.value
    return out


def _changed_nodes(diff) -> list:
    return [c.node for c in diff.changes]


def _classify_nodes(nodes, resolver) -> tuple[list, list, list]:
    """(in optimizer code, without a location, elsewhere: user or other library code)."""
    optimizer, unlocated, other = [], [], []
    files = optimizer_files()
    for node in nodes:
        loc = node.location
        if loc is None:
            unlocated.append(node)
        elif loc.file in files and resolver.resolve(loc.function, loc.file, loc.line) is None:
            optimizer.append(node)
        else:
            other.append(node)
    return optimizer, unlocated, other


def _ops(nodes, sign: str) -> str:
    """Computations first: graph inputs and constants say less about what changed."""
    counts = Counter(n.op for n in nodes)
    plain = {n.op for n in nodes if n.is_input or n.is_constant}
    ordered = sorted(counts.items(), key=lambda oc: (oc[0] in plain, -oc[1]))[:4]
    return ", ".join(f"{sign}{op}" + (f" ×{c}" if c > 1 else "") for op, c in ordered)


def evidence(diff, optimizer_nodes, unlocated) -> str:
    """``momentum_buffer created: +aten::mul ×4, +aten::add ×4 in sgd.py:361 (_single_tensor_sgd)``."""
    locs = Counter((n.location.file, n.location.line, n.location.function) for n in optimizer_nodes)
    files = optimizer_files()
    keys = {k for (f, line, _) in locs for k in [_state_keys(files[f]).get(line)] if k}
    functions = {fn for (_, _, fn) in locs}
    if keys:
        what = f"{', '.join(sorted(keys))} created at the previous optimizer step, in use from this one"
    elif "zero_grad" in functions:
        what = "gradients accumulated into zeroed ones (the first backward created them)"
    else:
        state = {k for f, _, _ in locs for k in _state_keys(files[f]).values()}
        what = (f"{', '.join(sorted(state))} created at the previous optimizer step, in use from this one"
                if state else "optimizer state in use")
    added, removed = {id(n) for n in diff.added}, {id(n) for n in diff.removed}
    new_nodes = [n for n in optimizer_nodes + unlocated if id(n) in added]
    old_nodes = [n for n in optimizer_nodes + unlocated if id(n) in removed]
    changed = [n for n in optimizer_nodes if id(n) not in added and id(n) not in removed]
    parts = [p for p in (_ops(new_nodes, "+"), _ops(old_nodes, "-")) if p]
    if changed:
        parts.append(f"{len(changed)} constant(s) now device data")
    where = ", ".join(f"{f}:{line} ({fn})" for (f, line, fn), _ in locs.most_common(2))
    text = f"{what}: {'; '.join(parts)} in {where}"
    if unlocated:
        text += f" (+{len(unlocated)} op(s) without a source location: autograd's)"
    return text


def mark_warmup(classes: list, new_events: list[dict], graphs) -> None:
    """Turn sure recompiles that only differ in optimizer code, early in their stack, into WARMUP."""
    runs_before = _steps_before(graphs.run, {c.stack for c in classes if c.kind == RECOMPILE})
    touched: dict[int, set] = {}  # class index -> optimizer lines its diff changed
    for i, (item, event) in enumerate(zip(classes, new_events)):
        if item.kind != RECOMPILE or item.confidence != SURE or item.previous_step is None:
            continue
        prev = _event_at(new_events[:i], item)
        d = graphs.diff(prev, event) if prev is not None else None
        if d is None:
            continue
        optimizer, unlocated, other = _classify_nodes(_changed_nodes(d), graphs.resolver)
        touched[i] = {(n.location.file, n.location.line) for n in optimizer}
        if other or not optimizer:
            continue
        if not _steps_optimizer(d.old):
            item.evidence += ("; the ops it adds are optimizer code, but the previous graph ran no optimizer step: "
                              "a new phase of this call stack (e.g. the step at the end of an accumulation cycle), "
                              "not warm-up")
            continue
        early = runs_before.get((item.stack, item.step), 0) <= EARLY_STEPS
        if not early:
            item.evidence += f"; the change is inside optimizer code but {runs_before[(item.stack, item.step)]} " \
                             "steps after this call stack first ran: not warm-up"
            continue
        item.kind = WARMUP
        item.evidence = evidence(d, optimizer, unlocated) + f" (vs step {item.previous_step})"
    for i, item in enumerate(classes):
        if item.kind != WARMUP:
            continue
        again = [c for j, c in enumerate(classes[i + 1:], i + 1)
                 if c.kind == RECOMPILE and c.stack == item.stack and touched.get(j, set()) & touched[i]]
        if again:
            item.kind = RECOMPILE
            item.evidence = (f"changes inside optimizer code, and the same optimizer lines change again at step "
                             f"{again[0].step}: a recurring change, not warm-up ({item.evidence})")


def _steps_optimizer(graph) -> bool:
    """The graph already ran an optimizer step: some computation was made in optimizer code."""
    files = optimizer_files()
    return any(n.location is not None and n.location.file in files and not (n.is_input or n.is_constant)
               for n in graph.nodes)


def _event_at(events: list[dict], item) -> dict | None:
    for e in reversed(events):
        if e["step"] == item.previous_step and stack_key(e) == item.stack:
            return e
    return next((e for e in reversed(events) if e["step"] == item.previous_step), None)


def _steps_before(run, stacks: set) -> dict:
    """(stack, step) -> how many earlier steps ran a graph from that stack, for steps with new programs."""
    seen: dict = {}
    out: dict = {}
    for e in run.execution_events:
        key = stack_key(e)
        if key not in stacks:
            continue
        steps = seen.setdefault(key, [])
        if e.get("new"):
            out[(key, e["step"])] = len([s for s in steps if s < e["step"]])
        if not steps or steps[-1] != e["step"]:
            steps.append(e["step"])
    return out
