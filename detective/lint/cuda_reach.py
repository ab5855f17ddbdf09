"""Which scopes cannot run on an XLA host, across files (a mixin of :class:`~detective.lint.callgraph.Project`).

The walk tags a scope ``needs-cuda`` in its own file (:mod:`detective.lint.cuda_only`); here the
tag spreads to callers that call such a scope on every way through them, and to scopes that
call a C++/CUDA extension the project's ``setup.py`` builds. A traced chain runs through such
a scope only when every traced path to the finding does.
"""

from __future__ import annotations

from detective.lint.model import EXTENSION_FACT, NEEDS_CUDA, NEEDS_CUDA_DEVICE

Node = tuple[str, str]  # (path, qualname)


class CudaReach:
    def cuda_only_via(self, path: list[Node]) -> Node | None:
        """For a traced chain ``path`` (root ... scope): the scope on it that needs CUDA, when
        every traced path to that scope runs through one (see :mod:`detective.lint.cuda_only`)."""
        if self._cuda_free is None:
            graph, roots = self.graph()
            self._cuda = self.needs_cuda()
            self._cuda_free = graph.reachable(roots, skip=self._untraced, avoid=self._cuda) \
                if self._cuda else set()
        if not self._cuda or path[-1] in self._cuda_free:
            return None
        return next((n for n in path if n in self._cuda), None)

    def needs_cuda(self) -> set[Node]:
        """Scopes that cannot run on an XLA host: tagged ``needs-cuda`` in their file, or calling
        on every way through them (``Scope.must_calls``) one in another file that needs CUDA or
        a module the project's setup.py builds from C++/CUDA sources."""
        if self._needs_cuda is None:
            needs = {(s.path, q) for s in self.files.values() for q, scope in s.scopes.items()
                     if NEEDS_CUDA in scope.tags}
            extensions = tuple(fact[len(EXTENSION_FACT):] for s in self.files.values() for fact in s.facts
                               if fact.startswith(EXTENSION_FACT))
            if extensions:
                needs |= {(s.path, q) for s in self.files.values() for q, scope in s.scopes.items()
                          if any(t == e or t.startswith(e + ".") for t in scope.tensor_calls for e in extensions)}
            self._needs_cuda = self._with_callers(needs)
        return self._needs_cuda

    def needs_cuda_device(self) -> set[Node]:
        """Of :meth:`needs_cuda`, the scopes that need the CUDA device itself on every way through
        them (``needs-cuda-device``: ``torch.cuda.current_device()``, ``.cuda()``), here or in
        what they must call in other files."""
        if self._needs_cuda_device is None:
            self._needs_cuda_device = self._with_callers(
                {(s.path, q) for s in self.files.values() for q, scope in s.scopes.items()
                 if NEEDS_CUDA_DEVICE in scope.tags})
        return self._needs_cuda_device

    def _with_callers(self, needs: set[Node]) -> set[Node]:
        """``needs`` and every scope that must call one of them (``Scope.must_calls``; building a
        class runs its ``__init__``)."""
        if self._must_callers is None:
            self._must_callers = {}
            for summary in self.files.values():
                for qualname, scope in summary.scopes.items():
                    for target in scope.must_calls:
                        callee = self.resolve(target, summary, scope.class_name)
                        if callee is not None and callee[1] in self.files[callee[0]].classes:
                            callee = self.find_method(callee, "__init__")  # building it runs __init__
                        if callee is not None:
                            self._must_callers.setdefault(callee, []).append((summary.path, qualname))
        needs = set(needs)
        stack = list(needs)
        while stack:
            for caller in self._must_callers.get(stack.pop(), ()):
                if caller not in needs:
                    needs.add(caller)
                    stack.append(caller)
        return needs
