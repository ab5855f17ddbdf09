"""Classes across the project and the installed packages: bases, lookup order, which are
nn.Modules or autograd Functions, which attributes are tensors. A mixin of
:class:`~detective.lint.callgraph.Project`, which holds the state it reads (``files``,
``by_module``, ``environment`` and the memo dicts)."""

from __future__ import annotations

import os

from detective.lint.model import FileSummary

Node = tuple[str, str]  # (path, qualname)

# External classes known to be nn.Module subclasses without reading them.
MODULE_BASES = (
    "torch.nn.", "lightning.", "pytorch_lightning.", "transformers.PreTrainedModel",
    "transformers.modeling_utils.PreTrainedModel",
)
FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")
MAX_DEPTH = 8  # re-export hops and inheritance depth; guards against import cycles
# Star imports are followed this deep: each hop tries every star import of a module, so
# packages that star-import each other would otherwise cost (stars per module) ** MAX_DEPTH.
STAR_DEPTH = 3


class ClassHierarchy:
    def resolve_class(self, target: str, origin: FileSummary, depth: int = 0) -> Node | None:
        if depth > MAX_DEPTH:
            return None
        if target.startswith("#"):
            name = target[1:]
            return (origin.path, name) if name in origin.classes else None
        parts = target.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            candidates = self.modules_named(".".join(parts[:cut]))
            if candidates:
                summary = closest(candidates, origin)
                rest = ".".join(parts[cut:])
                if rest in summary.classes:
                    return (summary.path, rest)
                if parts[cut] in summary.imports:
                    again = ".".join([summary.imports[parts[cut]], *parts[cut + 1:]])
                    return self.resolve_class(again, summary, depth + 1)
                for module in summary.star_imports if depth < STAR_DEPTH else ():  # from .generator import *
                    found = self.resolve_class(f"{module}.{rest}", summary, depth + 1)
                    if found is not None:
                        return found
                return None
        return None

    def bases(self, cls: Node) -> list[Node]:
        found = self._bases.get(cls)
        if found is None:
            summary = self.files[cls[0]]
            found = self._bases[cls] = []
            for base in summary.classes[cls[1]].bases:
                resolved = self.resolve_class(base, summary)
                if resolved is not None and resolved != cls:
                    found.append(resolved)
        return list(found)

    def mro(self, cls: Node) -> list[Node]:
        """Project classes in lookup order (memoised: every self.method call walks it)."""
        order = self._mro.get(cls)
        if order is None:
            order, stack, seen = [], [cls], set()
            while stack and len(order) < 64:
                current = stack.pop(0)
                if current in seen:
                    continue
                seen.add(current)
                order.append(current)
                stack = self.bases(current) + stack
            self._mro[cls] = order
        return order

    def find_method(self, cls: Node, method: str) -> Node | None:
        for path, qualname in self.mro(cls):
            candidate = f"{qualname}.{method}"
            if candidate in self.files[path].scopes:
                return (path, candidate)
        return None

    def attr_built_by(self, cls: Node, attr: str) -> tuple[str, FileSummary] | None:
        """What builds ``self.<attr>`` in the class or its nearest project base (``self.rng =
        np.random.default_rng()``: ``numpy.random.default_rng``), with that class's file."""
        for path, qualname in self.mro(cls):
            summary = self.files[path]
            target = summary.classes[qualname].attr_types.get(attr)
            if target is not None:
                return target, summary
        return None

    def _attr_class(self, cls: Node, attr: str) -> Node | None:
        built = self.attr_built_by(cls, attr)
        return self.resolve_class(*built) if built is not None else self.built_class(cls, attr)

    def built_class(self, cls: Node, attr: str) -> Node | None:
        """The class ``self.<attr> = config.<f>.build()`` declares: ``config: C`` and C's
        field ``f: Dispatcher.Config`` say Dispatcher (a config builds the class it is nested
        in), or a subclass of it (see :meth:`overrides`)."""
        for path, qualname in self.mro(cls):
            summary = self.files[path]
            entry = summary.classes[qualname].built_attrs.get(attr)
            if entry is None:
                continue
            config, _, name = entry.rpartition("|")
            config_class = self.resolve_class(config, summary)
            for field_path, field_owner in self.mro(config_class) if config_class else ():
                annotated = self.files[field_path].classes[field_owner].field_types.get(name)
                nested = self.resolve_class(annotated, self.files[field_path]) if annotated else None
                if nested is not None and "." in nested[1]:
                    owner = (nested[0], nested[1].rsplit(".", 1)[0])
                    return owner if owner[1] in self.files[owner[0]].classes else None
            return None
        return None

    def overrides(self, cls: Node, method: str) -> list[Node]:
        """``method`` as the project's subclasses of ``cls`` (at any depth) define it."""
        if self._subclasses is None:
            self._subclasses = {}
            for summary in self.files.values():
                for qualname in summary.classes:
                    for base in self.bases((summary.path, qualname)):
                        self._subclasses.setdefault(base, []).append((summary.path, qualname))
        found, stack, seen = [], list(self._subclasses.get(cls, ())), {cls}
        while stack:
            sub = stack.pop()
            if sub in seen:
                continue
            seen.add(sub)
            if f"{sub[1]}.{method}" in self.files[sub[0]].scopes:
                found.append((sub[0], f"{sub[1]}.{method}"))
            stack.extend(self._subclasses.get(sub, ()))
        return found

    def _external_attr(self, cls: Node, attr: str) -> bool:
        """Was ``self.<attr>`` built by a call into code outside the project?"""
        built = self.attr_built_by(cls, attr)
        return built is not None and not built[0].startswith("local:") and self.module_file(*built) is None

    def class_kind(self, cls: Node, depth: int = 0) -> str | None:
        """"module" (nn.Module), "function" (autograd.Function), "other", or None: unknown."""
        if cls in self._class_kind:
            return self._class_kind[cls]
        self._class_kind[cls] = "other"  # breaks inheritance cycles
        summary = self.files[cls[0]]
        kinds = [self._base_kind(base, summary, depth) for base in summary.classes[cls[1]].bases]
        result = next((k for k in ("module", "function") if k in kinds), None)
        if result is None:
            result = None if None in kinds else "other"
        self._class_kind[cls] = result
        return result

    def _base_kind(self, base: str, summary: FileSummary, depth: int) -> str | None:
        if base.startswith("?"):
            return None  # a name this file does not define or import (star import, builtins aside)
        if base.startswith(MODULE_BASES) or base == "torch.nn.Module":
            return "module"
        if base in FUNCTION_BASES:
            return "function"
        resolved = self.resolve_class(base, summary)
        if resolved is not None:
            return self.class_kind(resolved, depth + 1) if depth < MAX_DEPTH else None
        if base.startswith("#") or self.environment is None:
            return None
        try:
            return self.environment.kind(base)
        except (RecursionError, OSError, ValueError):
            return None

    def is_module_class(self, cls: Node) -> bool:
        return self.class_kind(cls) == "module"

    def tensor_attrs(self, cls: Node) -> set[str]:
        """Buffers and parameters registered by the class or any base, project or installed."""
        names: set[str] = set()
        for path, qualname in self.mro(cls):
            summary = self.files[path]
            info = summary.classes[qualname]
            names.update(info.tensor_attrs)
            if self.environment is not None:
                for base in info.bases:
                    if not base.startswith(("#", "?")) and self.resolve_class(base, summary) is None:
                        try:
                            names |= self.environment.tensor_attrs(base)
                        except (RecursionError, OSError, ValueError):
                            pass
        return names

    def _defines(self, cls: Node, method: str) -> bool:
        return self.find_method(cls, method) is not None

    def modules_named(self, dotted: str) -> list[FileSummary]:
        """The files of module ``dotted``. A directory without ``__init__.py`` inside a package
        is a namespace subpackage to Python (fairseq's ``examples.hubert.simple_kmeans``), while
        its files were named from their own directory (``dump_km_label``): matched by path too."""
        found = self.by_module.get(dotted)
        if found or "." not in dotted:
            return found or []
        memo = self._named_by_path  # asked ~50 times a module in a run
        if dotted not in memo:
            tail = "/" + dotted.replace(".", "/") + ".py"
            memo[dotted] = [s for s in self.by_module.get(dotted.rsplit(".", 1)[1], ())
                            if ("/" + s.path.replace(os.sep, "/")).endswith(tail)]
            if not memo[dotted]:
                # A namespace directory above the top package (Megatron-LM's megatron/, no
                # __init__.py, over the package core/): its files were named from inside it
                # (core.transformer.router), the project imports megatron.core.transformer.router.
                head, rest = dotted.split(".", 1)
                memo[dotted] = [s for s in self.by_module.get(rest, ())
                                if os.path.basename(os.path.normpath(s.root)) == head]
        return memo[dotted]

    def module_file(self, dotted: str, origin: FileSummary) -> FileSummary | None:
        """The project file an imported dotted name lives in (longest module prefix)."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            candidates = self.modules_named(".".join(parts[:cut]))
            if candidates:
                return closest(candidates, origin)
        return None


def closest(candidates: list[FileSummary], origin: FileSummary) -> FileSummary:
    """Among same-named modules, the one nearest the importing file (scripts dirs)."""
    if len(candidates) == 1:
        return candidates[0]

    def shared(summary: FileSummary) -> int:
        return len(os.path.commonpath([os.path.abspath(summary.root), os.path.abspath(origin.root)]))

    return max(candidates, key=shared)
