"""Bootstrap that `detective run` puts first on the child's PYTHONPATH.

Runs any other sitecustomize first (ours shadows it), then arms the torch_xla import hook.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _chain_other_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _arm():
    try:
        from detective.runtime.child import activate
    except ImportError:
        # The traced interpreter may not have detective installed: use the copy that launched it.
        home = os.environ.get("DETECTIVE_HOME")
        if not home:
            return
        sys.path.append(home)
        from detective.runtime.child import activate
    activate()


_chain_other_sitecustomize()
_arm()
