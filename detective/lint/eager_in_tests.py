"""Module classes a project's tests run eagerly (see :mod:`detective.lint.entrances`).

A class defined in a test file and built or named in no other file is eager-only when
neither that file nor any scope it reaches through calls imports torch_xla or compiles. In
a test that does use torch_xla, a module class defined in a test file is eager-only when it
is built only in test files, never put on a device the code names by a value, nor is any of
its subclasses, and nothing the test reaches compiles: the test's CPU reference model.
"""

from __future__ import annotations

from detective.lint.discovery import is_test_path
from detective.lint.model import COMPILES
from detective.lint.project_facts import COMPILE_FACT

Node = tuple[str, str]  # (path, qualname)


class EagerInTests:
    def __init__(self, project, graph):
        self.project = project
        self.graph = graph
        self._verdicts: dict[str, tuple[bool, bool]] = {}

    def test_only(self, classes: set[Node], named_in: dict[Node, set[str]]) -> list[Node]:
        """Modules and Functions defined in a test file, built or named nowhere else, where
        neither that file nor anything it calls uses torch_xla or torch.compile: the test
        runs them eagerly (a test of compiled or XLA behaviour has one of those in reach)."""
        return [cls for cls in sorted(classes) if is_test_path(cls[0]) and named_in.get(cls, {cls[0]}) == {cls[0]}
                and self.reach(cls[0]) == (False, False)]

    def cpu_models(self, classes: set[Node], named_in: dict[Node, set[str]], on_device: set[Node],
                   subclassed: dict[Node, list[Node]]) -> list[Node]:
        """Modules defined in a test file and built (never named as a value) only in test files,
        never put on a device the code names by a value (``M().to(device)``, ``M(device=d)``,
        ``m = M()`` then ``m.to(d)``), nor any of their subclasses, in tests that compile
        nothing: whatever else the tests run on torch_xla, such a model stays on the CPU."""
        return [cls for cls in sorted(classes) if is_test_path(cls[0]) and self.project.class_kind(cls) != "function"
                and all(map(is_test_path, named_in.get(cls, {cls[0]})))
                and cls not in on_device and not any(sub in on_device for sub in subclassed.get(cls, ()))
                and not self.reach(cls[0])[1]]

    def reach(self, path: str) -> tuple[bool, bool]:
        """(uses torch_xla, compiles): in test file ``path`` or any scope it reaches through calls
        (what the test runs, by scope: a library's unused compile() is no reach)."""
        if path not in self._verdicts:
            files = self.project.files
            mine = [(path, q) for q in files[path].scopes]
            reached = [(p, q) for p, q in set(mine) | self.graph.descendants(mine)
                       if p in files and q in files[p].scopes]
            self._verdicts[path] = (files[path].imports_xla or any(files[p].imports_xla for p, _ in reached),
                                    COMPILE_FACT in files[path].facts
                                    or any(COMPILES in files[p].scopes[q].tags for p, q in reached))
        return self._verdicts[path]
