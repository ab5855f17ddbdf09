"""Which scopes can run in the project's own XLA or compiled programs, and which classes those
programs can build: rapid type analysis (Bacon and Sweeney, 1996) over the call graph.

A module's ``forward`` is a root wherever the class is built (see :mod:`detective.lint.entrances`).
This tells whether its builders can run in a program that uses torch_xla or a compiler.
fairseq's speech_dlm generator is built only by ``SpeechDLMTask.build_generator``, which the
generation CLIs call by method name; the ``--tpu`` trainer reaches ``generator.generate(...)``,
but only on generators its own set-up builds.

Starts: scopes that drive an XLA program (sync a step, feed its device loader, spawn it: the
``drives-xla`` tag; not helpers that merely touch torch_xla when it is there, such as
``xm.set_rng_state``) or call a compiler (``compiles``), and
every scope that calls one of those through resolved calls, up to the scripts' mains. From
there, forward:

- resolved calls, set-up and lazy ones included (they build what the step runs), not calls
  made only on paths that never run on XLA;
- a class built in a reached scope is *instantiated*: its ``__init__``, ``forward`` and
  ``__call__`` run;
- a method called on a receiver no file can name (``task.build_model(cfg)``, or
  ``self.task.build_generator(...)`` with the attribute's class unknown) reaches every project
  method of that name whose class, or a subclass of it, may exist: built so far, or built
  where the call graph cannot see (a registry, a decorator, a name passed on as a value) or
  nowhere in the project (library API users build);
- ``self.m()`` also reaches the overrides of ``m`` in subclasses that may exist.

A scope is *outside* those programs when they cannot reach it and neither can an entry this
pass cannot place: a scope nothing in the project calls (public API, a test, a hook), or the
``__init__``, ``forward`` and ``__call__`` of a class built where the call graph cannot see
or nowhere in the project (``nn.SyncBatchNorm``, re-exported by ``torch.nn``: users build it). Those entries are followed
through resolved calls only: by method name they would reach every namesake in the project.
Only a whole-project run with some start answers; a partial view (a few files linted alone)
cannot see who calls a builder.
"""

from __future__ import annotations

from detective.lint.discovery import is_test_path
from detective.lint.model import COMPILES, DRIVES_XLA

Node = tuple[str, str]  # (path, qualname)

_INSTANCE_METHODS = ("__init__", "forward", "__call__")


class Programs:
    """``reached``: scopes that may run in one of the project's XLA or compiled programs;
    :meth:`outside`: scopes that run only in the project's other programs."""

    def __init__(self, project, built_in: dict[Node, set[Node]], hidden: set[Node], explicit: set[Node]):
        """``built_in``: scope -> classes constructed there; ``hidden``: classes also built where
        the call graph cannot see; ``explicit``: classes with some construction in view."""
        self.project = project
        graph, _ = project.graph()
        self.graph = graph
        files = project.files
        starts = [n for n in graph if (tags := files[n[0]].scopes[n[1]].tags) and (
            DRIVES_XLA in tags or COMPILES in tags)]
        self.active = bool(starts)
        self.reached: set[Node] = set()
        self._elsewhere: set[Node] = set()
        if not self.active:
            return
        classes = [(s.path, q) for s in files.values() for q in s.classes]
        hidden = {c for c in hidden if c[0] in files and c[1] in files[c[0]].classes}
        self._children: dict[Node, list[Node]] = {}
        for cls in classes:
            for base in project.bases(cls):
                self._children.setdefault(base, []).append(cls)
        self._module_calls: dict[str, set[Node]] = {}
        self._callers = _reverse(graph)
        self._alive: set[Node] = set()  # classes with a subclass (or themselves) that may exist
        self._built: set[Node] = set()
        self._names_called: set[str] = set()
        self._self_called: dict[Node, set[str]] = {}  # class -> names it calls on self
        self._work: list[Node] = []
        self._built_in = built_in
        unseen = hidden | (set(classes) - explicit)
        for cls in sorted(unseen):
            self._make_alive(cls)
        self._by_name: dict[str, list[Node]] = {}  # method name -> scopes calling it by name
        for s in files.values():
            for qualname, scope in s.scopes.items():
                for name in scope.method_calls:
                    self._by_name.setdefault(name, []).append((s.path, qualname))
                for call in scope.calls:
                    if call.target.startswith("self.") and call.target.count(".") == 2:
                        self._by_name.setdefault(call.target.rsplit(".", 1)[1], []).append((s.path, qualname))
        for node in self._ancestors(starts):
            self._add(node)
        self._run()
        # Entries this pass cannot place, followed through resolved calls only.
        entries = [n for n in graph if n not in self.reached and not self._called(n)]
        entries += [m for cls in sorted(unseen) for name in _INSTANCE_METHODS
                    if (m := project.find_method(cls, name)) is not None]
        self._elsewhere = graph.reachable(entries, skip=project._untraced_dead)

    @property
    def names_called(self) -> set[str]:
        """Method names reached scopes call on receivers no file can name."""
        return self._names_called

    def callers(self, node: Node) -> list[Node]:
        """The scopes that call ``node`` through resolved calls (a module merely defining it
        is no caller)."""
        return [c for c in self._callers.get(node, ()) if not self._defines_only(c, node)]

    def outside(self, node: Node) -> bool:
        """Does ``node`` run only in programs of the project that neither use torch_xla nor
        compile (the generation CLIs that call ``task.build_generator``)?"""
        return self.active and node not in self.reached and node not in self._elsewhere

    def _called(self, node: Node) -> bool:
        """Does some project scope call ``node`` (not just define it), or is it a module's
        top level (run by the interpreter)?"""
        if node[1] == "<module>":
            return True
        if any(not self._defines_only(caller, node) for caller in self._callers.get(node, ())):
            return True
        return bool(self._name_callers(node))

    def _name_callers(self, node: Node) -> list[Node]:
        """Scopes calling a method of ``node``'s name on a receiver they cannot name."""
        if self.project.files[node[0]].scopes[node[1]].class_name is None:
            return []
        return self._by_name.get(node[1].rsplit(".", 1)[1], [])

    def _ancestors(self, starts: list[Node]) -> set[Node]:
        """The starts and their callers (by name too: ``trainer.train_step(...)``), up to the
        mains; not into tests, which are programs of their own (one that trains, then
        generates on the CPU, makes generation no XLA code)."""
        seen = set(starts)
        stack = list(starts)
        while stack:
            node = stack.pop()
            for caller in [*self._callers.get(node, ()), *self._name_callers(node)]:
                if caller not in seen and not is_test_path(caller[0]) and not self._defines_only(caller, node):
                    seen.add(caller)
                    stack.append(caller)
        return seen

    def _defines_only(self, caller: Node, callee: Node) -> bool:
        """Is the edge only a module defining a function (importing a script runs no main)?"""
        if caller[1] != "<module>" or caller[0] != callee[0]:
            return False
        summary = self.project.files[caller[0]]
        if summary.scopes[callee[1]].parent != "<module>":
            return False
        calls = self._module_calls.get(caller[0])
        if calls is None:
            calls = self._module_calls[caller[0]] = {
                self.project.resolve(c.target, summary) for c in summary.scopes["<module>"].calls}
        return callee not in calls

    def _add(self, node: Node) -> None:
        if node not in self.reached:
            self.reached.add(node)
            self._work.append(node)

    def _run(self) -> None:
        project, files = self.project, self.project.files
        dead = project._untraced_dead
        while self._work:
            node = self._work.pop()
            for callee in self.graph.succ.get(node, ()):
                if (node, callee) not in dead and not self._defines_only(node, callee):
                    self._add(callee)
            for cls in self._built_in.get(node, ()):
                self._build(cls)
            scope = files[node[0]].scopes[node[1]]
            for name in scope.method_calls:
                self._call_by_name(name)
            for call in scope.calls:
                target = call.target
                if call.kind == "dead" or not target.startswith("self."):
                    continue
                if target.count(".") == 2 and project.resolve(target, files[node[0]], scope.class_name) is None:
                    self._call_by_name(target.rsplit(".", 1)[1])  # self.task.build_generator(...)
                elif target.count(".") == 1 and scope.class_name:
                    self._overrides((node[0], scope.class_name), target[5:])

    def _call_by_name(self, name: str) -> None:
        if name in self._names_called:
            return
        self._names_called.add(name)
        for method in self.project.methods_named(name):
            cls = (method[0], self.project.files[method[0]].scopes[method[1]].class_name)
            if cls in self._alive:
                self._add(method)

    def _overrides(self, cls: Node, name: str) -> None:
        """``self.name()`` in ``cls``: the overrides in subclasses that may exist run too
        (and those of subclasses found to exist later: see _make_alive)."""
        called = self._self_called.setdefault(cls, set())
        if name in called:
            return
        called.add(name)
        stack = list(self._children.get(cls, ()))
        seen = set(stack)
        while stack:
            sub = stack.pop()
            if sub in self._alive and f"{sub[1]}.{name}" in self.project.files[sub[0]].scopes:
                self._add((sub[0], f"{sub[1]}.{name}"))
            for child in self._children.get(sub, ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)

    def _build(self, cls: Node) -> None:
        """``cls`` is built in a reached scope: its ``__init__``, ``forward`` and ``__call__`` run."""
        if cls in self._built or cls[0] not in self.project.files or cls[1] not in self.project.files[cls[0]].classes:
            return
        self._built.add(cls)
        for name in _INSTANCE_METHODS:
            method = self.project.find_method(cls, name)
            if method is not None:
                self._add(method)
        self._make_alive(cls)

    def _make_alive(self, cls: Node) -> None:
        """``cls`` may exist: the methods it has answer calls by name and ``self`` calls."""
        if cls[0] not in self.project.files or cls[1] not in self.project.files[cls[0]].classes:
            return
        for owner in self.project.mro(cls):
            if owner in self._alive:
                continue
            self._alive.add(owner)
            summary = self.project.files[owner[0]]
            overridden = set()
            for base in self.project.mro(owner)[1:]:
                overridden |= self._self_called.get(base, set())
            for name in summary.classes[owner[1]].methods:
                if (name in self._names_called or name in overridden) and f"{owner[1]}.{name}" in summary.scopes:
                    self._add((owner[0], f"{owner[1]}.{name}"))


def _reverse(graph) -> dict[Node, list[Node]]:
    callers: dict[Node, list[Node]] = {}
    for caller, callees in graph.succ.items():
        for callee in callees:
            callers.setdefault(callee, []).append(caller)
    return callers
