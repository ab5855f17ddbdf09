"""Run a callback the moment a script imports one module, without importing it ourselves."""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the bootstrap imports this in every traced process: keep it light
    from types import ModuleType
    from typing import Callable


class ImportHook:
    """A meta-path finder that only answers for ``module``, then steps aside.

    The module's own loader runs first; ``on_import(module)`` runs right after, so the
    callback sees a fully initialised module and the script's import is otherwise untouched.
    """

    def __init__(self, module: str, on_import: Callable[[ModuleType], object]):
        self.module = module
        self.on_import = on_import

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_call(module):
            exec_module(module)
            self.on_import(module)

        spec.loader.exec_module = exec_then_call
        return spec

    def install(self) -> None:
        sys.meta_path.insert(0, self)
