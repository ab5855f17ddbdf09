"""RC108 env-bf16: XLA_USE_BF16=1 (the env-driven bf16 cast)."""

from __future__ import annotations

import libcst as cst

from detective.lint import policy as P
from detective.lint.rule import Invalid, Rule, Valid

KEY = "XLA_USE_BF16"


class EnvBf16(Rule):
    code = "RC108"
    name = "env-bf16"
    summary = "XLA_USE_BF16=1 set anywhere (cast the model to bf16 instead)"
    applies_to = "any"
    doc = """
    ## What it does
    Flags `XLA_USE_BF16` turned on anywhere in Python: `os.environ["XLA_USE_BF16"] = "1"`,
    `os.environ.setdefault/update`, `os.putenv`, and `{"XLA_USE_BF16": "1"}` in an
    environment mapping handed to a subprocess or launcher. It is not fixed
    automatically: removing it changes the numerics, so the model has to be cast
    explicitly in the same change.

    ## Why is this bad?
    The variable silently stores every float32 tensor as bf16 at the runtime level. It
    is deprecated, it does not compose with current Pallas kernels (flash/splash
    attention), and it causes an extra set of fallback graphs. The seed runs with
    `XLA_USE_BF16=0` and casts the model to bf16 itself.

    ## Example
    ```python
    os.environ["XLA_USE_BF16"] = "1"
    model = Net().to(device)
    ```

    ## Use instead
    ```python
    model = Net().to(device, dtype=torch.bfloat16)
    ```
    """

    VALID = [
        Valid(
            """
import os

os.environ["XLA_USE_BF16"] = "0"
env = {"XLA_USE_FP32": "1"}
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import os

os.environ["XLA_USE_BF16"] = "1"
""",
            line=4,
        ),
        Invalid(
            """
import subprocess

subprocess.run(["python", "train.py"], env={"PJRT_DEVICE": "TPU", "XLA_USE_BF16": "1"})
""",
            line=4,
        ),
    ]

    MESSAGE = ("`XLA_USE_BF16=1` casts every float tensor to bf16 behind the model's back: it breaks "
               "current Pallas kernels and adds fallback graphs; cast the model instead "
               "(model.to(dtype=torch.bfloat16)) and drop the variable (not auto-fixed: numerics change)")

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def _check(self, node) -> None:
        for key, value, anchor in P.env_writes(node, self.context):
            # Dict literals (os.environ.update({...})) are reported by visit_Dict.
            if key == KEY and P.truthy_setting(value) and _not_from_dict(node, value):
                self.report(anchor, self.MESSAGE, subject="XLA_USE_BF16=1")

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement) and P.dict_items(cst.Dict([element])) == [
                (KEY, element.value)
            ] and P.truthy_setting(element.value):
                self.report(element, self.MESSAGE, subject="XLA_USE_BF16=1")


def _not_from_dict(node, value) -> bool:
    if not isinstance(node, cst.Call):
        return True
    return not any(isinstance(arg.value, cst.Dict) and any(
        isinstance(e, cst.DictElement) and e.value is value for e in arg.value.elements) for arg in node.args)
