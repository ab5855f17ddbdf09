"""Cross-file pass: which scopes are traced, by which chain of calls, and which files are XLA code.

Nodes are ``(path, qualname)`` scopes from every FileSummary. Roots are scopes traced
on their own (compile decorators and targets, nn.Module.forward, step loops,
configured roots); edges are resolved calls, kept in one :class:`CallGraph`. The
shortest path from any root gives the chain printed with a finding in a helper.
The graph itself is :class:`~detective.lint.digraph.CallGraph`.
"""

from __future__ import annotations

from dataclasses import dataclass

from detective.lint.api_names import NON_TENSOR_LIBRARIES
from detective.lint.cuda_reach import CudaReach
from detective.lint.digraph import CallGraph, CycleMemo
from detective.lint.hierarchy import MAX_DEPTH, STAR_DEPTH, ClassHierarchy, closest
from detective.lint.model import COMPILED, UNKNOWN_RECEIVER, USES_XLA, FileSummary
from detective.lint.signatures import accepts
from detective.lint.tensor_methods import TENSOR_METHODS

Node = tuple[str, str]  # (path, qualname)

TRACED_METHODS = ("forward", "__call__")
FUNCTION_METHODS = ("forward", "backward")
# Methods of list, dict and set: on an attribute of unknown type, no project namesake is meant.
CONTAINER_METHODS = frozenset({
    "append", "extend", "insert", "remove", "pop", "clear", "copy", "update", "get", "items", "keys",
    "values", "setdefault", "add", "discard", "index", "count", "sort", "reverse",
})
# Nor for a tensor's methods (self.mask.to(device), self.buf.sum()): the attribute is most
# likely a tensor, and a project's `to` (a Parameter subclass's) is not what is called.
UNLINKED_METHODS = CONTAINER_METHODS | TENSOR_METHODS
_MAX_SAME_NAMED = 3  # an unknown receiver's method: edges to at most this many namesakes


@dataclass
class Reach:
    root_reason: dict[Node, str]
    paths: dict[Node, list[Node]]  # root ... node, for every traced node


class Project(ClassHierarchy, CudaReach):
    def __init__(self, summaries: list[FileSummary], environment=None, guess_modules: bool = True):
        """``environment``: a :class:`~detective.lint.environment.Environment` for bases that
        are not in the project; ``guess_modules``: a class whose bases cannot be resolved
        at all and that defines ``forward`` is taken for an nn.Module."""
        self.files = {s.path: s for s in summaries}
        self.environment = environment
        self.guess_modules = guess_modules
        self.by_module: dict[str, list[FileSummary]] = {}
        for summary in summaries:
            self.by_module.setdefault(summary.module, []).append(summary)
        self._named_by_path: dict[str, list[FileSummary]] = {}  # modules_named's path matches
        self._resolved: dict[tuple[str, str, str | None], Node | None] = {}  # resolve() at depth 0
        self._class_kind: dict[Node, str | None] = {}
        self._bases: dict[Node, list[Node]] = {}
        self._mro: dict[Node, list[Node]] = {}
        self._methods: dict[str, list[Node]] | None = None
        self._subclasses: dict[Node, list[Node]] | None = None
        self._returns = CycleMemo()  # (function, unresolved) -> returns_tensor
        self._xla_called: set[Node] | None = None
        self._graph: tuple[dict, dict] | None = None
        self._cuda: set[Node] = set()  # scopes that need CUDA, and what the roots reach without them
        self._cuda_free: set[Node] | None = None
        self._needs_cuda: set[Node] | None = None
        self._needs_cuda_device: set[Node] | None = None
        self._must_callers: dict[Node, list[Node]] | None = None
        # (summary, scope, guard) -> the guard never holds in the repository, so a call made
        # under it traces nothing (set by the engine; see detective.lint.arg_facts)
        self.guard_dead = None

    # ------------------------------------------------------------------ resolution
    def resolve(self, target: str, origin: FileSummary, class_name: str | None = None,
                depth: int = 0) -> Node | None:
        """A call target (``#q``, ``self.m``, ``pkg.mod.f``) -> scope node, if in the project."""
        if depth == 0:  # the graph, the argument facts and the rules ask about the same calls
            key = (target, origin.path, class_name)
            if key not in self._resolved:
                self._resolved[key] = self._resolve(target, origin, class_name, 0)
            return self._resolved[key]
        return self._resolve(target, origin, class_name, depth)

    def _resolve(self, target: str, origin: FileSummary, class_name: str | None, depth: int) -> Node | None:
        if depth > MAX_DEPTH:
            return None
        if target.startswith("#"):
            return self._in_file(origin, target[1:].split("."), depth)
        if target.startswith("self."):
            if class_name is None:
                return None
            parts = target.split(".")[1:]
            if len(parts) == 1:
                method = self.find_method((origin.path, class_name), parts[0])
                if method is not None:
                    return method
                parts = [parts[0], "__call__"]  # self.block(x): a callable attribute
            attr_class = self._attr_class((origin.path, class_name), parts[0])
            if attr_class is None:
                # self.dispatcher.dispatch(x) with the dispatcher built elsewhere: the one
                # project method of that name, if there is exactly one. Not for list/dict
                # methods (self._times.append(t)), tensor methods (self.mask.to(d)) nor an
                # attribute made outside the project.
                if parts[1] in UNLINKED_METHODS or self._external_attr((origin.path, class_name), parts[0]):
                    return None
                found = self.methods_named(parts[1])
                return found[0] if len(found) == 1 else None
            method = parts[1]
            found = self.find_method(attr_class, method)
            if found is None and method == "__call__":
                found = self.find_method(attr_class, "forward")
            return found
        if target.startswith("super."):
            if class_name is None:
                return None
            for base in self.bases((origin.path, class_name)):
                found = self.find_method(base, target.split(".", 1)[1])
                if found is not None:
                    return found
            return None
        return self._dotted(target, origin, depth)

    def _dotted(self, dotted: str, origin: FileSummary, depth: int) -> Node | None:
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            candidates = self.modules_named(".".join(parts[:cut]))
            if candidates:
                return self._in_file(closest(candidates, origin), parts[cut:], depth)
        return None

    def _in_file(self, summary: FileSummary, parts: list[str], depth: int) -> Node | None:
        head = parts[0]
        joined = ".".join(parts)
        if joined in summary.scopes:
            return (summary.path, joined)
        if head in summary.classes:
            cls = (summary.path, head)
            return self.find_method(cls, parts[1] if len(parts) > 1 else "__init__")
        if head in summary.imports:  # re-export: from .utils import loss_fn
            return self.resolve(".".join([summary.imports[head], *parts[1:]]), summary,
                                depth=depth + 1)
        for module in summary.star_imports if depth < STAR_DEPTH else ():  # from .utils import *
            found = self.resolve(".".join([module, *parts]), summary, depth=depth + 1)
            if found is not None:
                return found
        return None

    def returns_tensor(self, target: str, origin: FileSummary, class_name: str | None = None,
                       depth: int = 0) -> bool:
        """Does the project function a call target names return a tensor (its return
        summary, following `return helper(x)` through other files)?"""
        veto_only = target.startswith("~")  # evidence stands unless this says "no tensor"
        target, _, position = target.lstrip("~").partition("@")
        unresolved = veto_only or target.startswith("?")  # ?self.proj: a tensor unless a method says no
        node = self.resolve(target.lstrip("?"), origin, class_name)
        if depth > MAX_DEPTH:
            self._returns.cut()
        if node is None or depth > MAX_DEPTH:
            # self.rng.choice(...) with self.rng = np.random.default_rng(): the attribute's library
            parts = target.lstrip("?").split(".")
            built = self.attr_built_by((origin.path, class_name), parts[1]) \
                if class_name is not None and parts[0] == "self" and len(parts) > 2 else None
            library = (built[0] if built is not None else target).split(".", 1)[0]
            return unresolved and library not in NON_TENSOR_LIBRARIES
        summary = self.files[node[0]]
        scope = summary.scopes[node[1]]
        if position and scope.return_items:  # x, pad = helper(...)
            index = int(position) if position.isdigit() else len(scope.return_items)
            item = scope.return_items[index] if index < len(scope.return_items) else ""
            return item == "tensor" or any(
                self.returns_tensor(t, summary, scope.class_name, depth + 1) for t in item.split("|") if t)
        if position and scope.return_calls:
            # return _impl_cuda(...) / return _impl_cpu(...): the position of what they return.
            prefix = "~" if veto_only else ""
            return any(self.returns_tensor(f"{prefix}{t}@{position}", summary, scope.class_name, depth + 1)
                       for t in scope.return_calls)
        def answer() -> bool:
            result = scope.returns == "tensor" or any(
                self.returns_tensor(t, summary, scope.class_name, depth + 1) for t in scope.return_calls)
            if not result and unresolved and scope.returns != "python" and not scope.return_calls:
                result = True  # self.block(x) whose forward says nothing either way: keep the guess
            return result

        return self._returns.ask((node, unresolved), answer)

    def _declared_overrides(self, target: str, origin: FileSummary, class_name: str | None) -> list[Node]:
        """``self.x.m`` / ``self.x`` where ``x`` is built from a config field (only its class
        is declared, see :meth:`built_class`): the overrides of ``m`` / ``forward`` in the
        project's subclasses of that class, which the config may name instead."""
        parts = target.split(".")
        if class_name is None or parts[0] != "self" or len(parts) not in (2, 3):
            return []
        cls = (origin.path, class_name)
        if self.find_method(cls, parts[1]) is not None or any(
                parts[1] in self.files[path].classes[qualname].attr_types for path, qualname in self.mro(cls)):
            return []
        declared = self.built_class(cls, parts[1])
        return self.overrides(declared, parts[2] if len(parts) == 3 else "forward") if declared else []

    def methods_named(self, method: str) -> list[Node]:
        """Project methods called ``method`` (none for dunders and forward/__call__)."""
        if method.startswith("__") or method in TRACED_METHODS:
            return []
        if self._methods is None:
            self._methods = {}
            for summary in self.files.values():
                for qualname, info in summary.classes.items():
                    for name in set(info.methods):
                        if f"{qualname}.{name}" in summary.scopes:
                            self._methods.setdefault(name, []).append((summary.path, f"{qualname}.{name}"))
        return self._methods.get(method, [])

    def _named_like(self, method: Node, hint: str) -> bool:
        """Does the receiver's name (``optimizer``, ``opt``, ``policy``) name the class of this
        method or one of its bases, in the project or outside (``torch.optim.Optimizer``)?"""
        key = hint.lower().replace("_", "")
        if len(key) < 3:
            return False
        path, qualname = method
        names = []
        for cls in self.mro((path, qualname.rsplit(".", 1)[0])):
            names.append(cls[1])
            names.extend(self.files[cls[0]].classes[cls[1]].bases)
        return any(key in name.rsplit(".", 1)[-1].lower() for name in names)

    # ------------------------------------------------------------------ graph
    def graph(self):
        """The call graph and traced roots with reasons."""
        if self._graph is not None:
            return self._graph
        edges = CallGraph()
        roots: dict[Node, str] = {}
        traced: set[tuple[Node, Node]] = set()
        untraced: set[tuple[Node, Node]] = set()
        live: set[tuple[Node, Node]] = set()  # called on some path that can run on XLA
        dead: set[tuple[Node, Node]] = set()
        callers: dict[Node, list[Node]] = {}  # callee -> scopes that call it whenever they run
        dead_callers: dict[Node, list[Node]] = {}  # callee -> scopes that call it on an error path
        registrations = []
        class_roots: dict[Node, Node] = {}  # roots only because their class is a module/Function
        for summary in self.files.values():
            path = summary.path
            memo: dict[tuple[str, str | None], Node | None] = {}  # a file calls the same names often
            for qualname, scope in summary.scopes.items():
                node = (path, qualname)
                edges.add_node(node)
                if scope.root_reason:
                    roots[node] = scope.root_reason
                if scope.parent is not None and "step-closure" not in scope.tags:
                    # Nested defs and step loops run when their enclosing scope runs.
                    edges.add_edge((path, scope.parent), node)
                for call in scope.calls:
                    key = (call.target, scope.class_name if call.target.startswith(("self.", "super.")) else None)
                    if key in memo:
                        callee = memo[key]
                    else:
                        callee = memo[key] = self.resolve(call.target, summary, scope.class_name)
                    if callee is not None:
                        never = call.kind == "dead" or bool(call.guard and self.guard_dead is not None
                                                            and self.guard_dead(summary, qualname, call.guard))
                        # self.dispatcher.dispatch(x) with a declared class: its subclasses' too
                        for target in (callee, *self._declared_overrides(call.target, summary, scope.class_name)):
                            edges.add_edge(node, target)
                            (dead if never else live).add((node, target))
                            if call.kind or never:
                                untraced.add((node, target))  # once / dead: the callee is not traced
                            else:
                                traced.add((node, target))
                            (dead_callers if call.kind == "dead" else callers).setdefault(target, []).append(node)
                    elif call.target.count(".") == 2 and call.target.startswith("self.") \
                            and call.target.rsplit(".", 1)[1] not in UNLINKED_METHODS and not (
                                scope.class_name in summary.classes and self._external_attr(
                                    (path, scope.class_name), call.target.split(".")[1])):
                        # self.segmenter.logit_segment(...) with the attribute's class
                        # unknown and a few same-named methods: any of them may run.
                        # Not those whose parameters cannot take the call's arguments.
                        candidates = self.methods_named(call.target.rsplit(".", 1)[1])
                        if 1 < len(candidates) <= _MAX_SAME_NAMED:
                            for candidate in candidates:
                                if accepts(self.files[candidate[0]].scopes[candidate[1]].signature, call.shapes):
                                    edges.add_edge(node, candidate)
                for wrapper in self._decorator_wrappers(scope, summary):
                    # @capture_outputs: the decorator ran once where the def is; the
                    # @functools.wraps wrapper it made runs at every call instead of the def.
                    edges.add_edge(node, wrapper)
                    live.add((node, wrapper))
                    traced.add((node, wrapper))
                    callers.setdefault(wrapper, []).append(node)
            registrations.extend((summary, scope_name, ref, reason)
                                 for scope_name, ref, reason in summary.compile_targets)
            for qualname in summary.classes:
                cls = (path, qualname)
                kind = self.class_kind(cls)
                if kind is None and self.guess_modules and self._defines(cls, "forward"):
                    kind, guessed = "module", " (base not found: guessed from forward)"
                else:
                    guessed = ""
                if kind not in ("module", "function"):
                    continue
                for method in TRACED_METHODS if kind == "module" else FUNCTION_METHODS:
                    name = f"{qualname}.{method}"
                    scope = summary.scopes.get(name)
                    if scope is not None and "cuda-graph" not in scope.tags:
                        owner = "nn.Module." if kind == "module" else "autograd.Function."
                        if (path, name) not in roots:
                            roots[(path, name)] = owner + method + guessed
                            class_roots[(path, name)] = cls
        memo = CycleMemo()  # _error_only answers
        compiled: set[Node] = set()  # scopes passed to a compile call
        for summary, scope_name, ref, reason in registrations:
            # A hook or compile target registered only on error paths (NanDetector built in
            # an except block that re-raises) never runs in a healthy step.
            if _error_only((summary.path, scope_name), callers, dead_callers, memo):
                continue
            class_name = summary.scopes[scope_name].class_name if scope_name in summary.scopes else None
            if ref.target.startswith(UNKNOWN_RECEIVER):  # policy.act of a policy of any class
                method, _, hint = ref.target[len(UNKNOWN_RECEIVER):].partition(":")
                targets = [] if method in UNLINKED_METHODS else self.methods_named(method)
                # optimizer.step: the optimizers' step, not a scheduler's, when the name says so
                targets = [t for t in targets if self._named_like(t, hint)] or targets
            else:
                targets = [t for t in [self.resolve(ref.target, summary, class_name)] if t is not None]
            for target in targets:
                roots.setdefault(target, reason)
                class_roots.pop(target, None)  # also compiled or hooked by name
                if reason == COMPILED:
                    compiled.add(target)
        self.class_roots = class_roots
        self.compiled = compiled
        self._untraced = untraced - traced
        self._untraced_dead = dead - live  # never called where the project runs XLA
        self._graph = (edges, roots)
        return self._graph

    def _decorator_wrappers(self, scope, summary) -> list[Node]:
        """The ``@functools.wraps`` defs nested in the project functions that decorate ``scope``."""
        found: list[Node] = []
        for decorator in scope.decorators:
            if not decorator or decorator.startswith(("torch.", "functools.", "builtins.")) \
                    or decorator in ("staticmethod", "classmethod", "property"):
                continue
            target = (summary.path, decorator) if decorator in summary.scopes \
                else self.resolve(decorator, summary, scope.class_name)  # a def of this file, or imported
            if target is None or target[0] not in self.files:
                continue
            prefix = target[1] + "."
            found.extend((target[0], q) for q, inner in self.files[target[0]].scopes.items()
                         if q.startswith(prefix) and any(d.endswith("wraps") for d in inner.decorators))
        return found

    def reach(self) -> Reach:
        """Shortest chain from some root to every traced scope (breadth-first, roots in order)."""
        graph, roots = self.graph()
        # Calls made in one-time set-up or on error paths do not carry a region on.
        return Reach(roots, graph.shortest_paths(roots, skip=self._untraced))

    def reaches_tag(self, starts: list[Node], tag: str) -> bool:
        """Does any scope run by ``starts`` (themselves or what they call) carry ``tag``?"""
        graph, _ = self.graph()
        reached = set(starts) | graph.descendants(starts)
        return any(tag in scope.tags for path, qualname in reached
                   if (scope := self.files[path].scopes.get(qualname)) is not None)

    # ------------------------------------------------------------------ XLA code
    def is_xla_code(self, path: str, qualname: str) -> bool:
        """Policy rules' scope: the file imports torch_xla, or this scope is run (through
        calls) by a scope of such a file. Where every torch_xla import of a file is optional
        (under ``if``/``try`` or in a function: a library with XLA among its backends), only
        its scopes that call torch_xla start XLA code. Importing a module does not make it XLA code:
        a library imported by an XLA script (or a test reached by a same-named guess) has
        only the scopes the XLA code calls checked."""
        if self._xla_called is None:
            graph, _ = self.graph()
            starts = [n for n in graph if n[0] in self.files and self.files[n[0]].imports_xla and (
                not self.files[n[0]].xla_optional or _tagged(self.files[n[0]], n[1], USES_XLA))]
            self._xla_called = set(starts) | graph.descendants(starts)
        summary = self.files.get(path)
        return (summary is not None and summary.imports_xla and not summary.xla_optional) \
            or (path, qualname) in self._xla_called


def _tagged(summary: FileSummary, qualname: str, tag: str) -> bool:
    scope = summary.scopes.get(qualname)
    return scope is not None and tag in scope.tags


def _error_only(node: Node, callers: dict, dead_callers: dict, memo: CycleMemo | None = None) -> bool:
    """Is ``node`` reached only from error paths: called on one, or only by scopes that are?"""
    memo = CycleMemo() if memo is None else memo
    live = callers.get(node, [])
    return memo.ask(node, lambda: all(_error_only(caller, callers, dead_callers, memo) for caller in live)
                    if live else node in dead_callers)
