"""RC109 python-constant-slice: slice bounds or tensor sizes from a Python value that changes per call."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint import policy as P
from detective.lint.api_names import STEP_CONTEXTS, STEP_TRACES
from detective.lint.rule import Rule
from detective.lint.syntax import bound_names
from detective.lint.walker import walk
from detective.rules import _rc109_examples as examples

SIZED_FACTORIES = frozenset({"arange", "zeros", "ones", "empty", "full", "randn", "rand", "randperm"})
STEPPING = STEP_CONTEXTS | STEP_TRACES
NEW_FACTORIES = frozenset({"new_zeros", "new_ones", "new_empty", "new_full"})
SWEPT_NOTE = (" (the loop takes only the {n} values of a literal list: {n} programs, each compiled once, "
              "as with bucketing)")
CPU_NOTE = " (a CPU tensor: no XLA program, but a new shape under torch.compile)"
SEQUENCE_SUFFIXES = ("list", "lens", "lengths", "items", "seqs", "names", "tokens_list")


class PythonConstantSlice(Rule):
    code = "RC109"
    name = "python-constant-slice"
    summary = "Slice bounds or arange/zeros sizes from a Python value that changes per call, in a traced region"
    doc = """
    ## What it does
    Flags, inside a traced region, slices (`x[:, :n]`) and sizes of `torch.arange`,
    `zeros`, `ones`, `empty`, `full`, `rand*` computed from a Python value that changes
    from call to call: a counter on `self` that some method increments
    (`x[:, :self.step]`), the loop counter of a step loop (`x[:step + 1]`), `len()` of a
    Python sequence passed in (a parameter named like one: `batch_list`, `lengths`,
    `seqs`, ...: `torch.arange(len(batch_list))`), or a number read from
    a tensor (`int(mask.sum())`), and names bound from those. A name bound from a
    call taken for a tensor only on trust (`math.sqrt(area)` of `area = random.uniform(...)`,
    a project helper) keeps that trust: the finding stands only if the helper returns a
    tensor, unless the bound also has a reason that needs no trust (`.item()`). Likewise a
    def nested in a function whose every call passes it such a value (a row of
    `masks = np.zeros(...)`) takes it on the same trust, so NumPy work is not flagged.

    A slice of a tensor made on the CPU in the function (`torch.zeros(n, n)` with no
    `device=`, a `.cpu()` copy, what is computed from those alone) is `info`: on XLA it is
    host work that makes no program (the tensor reaches the device as data); under
    `torch.compile` it is still a new shape. The size of such a factory stays a warning:
    `torch.arange(n).to(device)` is a device tensor of a new shape for every `n`.

    A step-loop counter that iterates a literal list of ints (`for n in (128, 256, 512):`,
    or a name bound to one and not changed) takes only those values: as many programs as the
    list is long, each compiled once, which is bucketing done by hand. It is `info`, saying so.

    A value that varies only through names bound under a parameter test (`if sigmoid:
    threshold = torch.sigmoid(threshold).item()`) carries that test: where no call in the
    project passes the parameter a true value, the bound never varies there and the finding
    is `info`, as code under the test itself is (`lint/arg_facts.py`).

    ## Why is this bad?
    A Python int in a slice or a size is a constant of the traced graph and decides
    output shapes. Every new value is a new program: torch_xla compiles once per
    distinct value (anchors: slicing with a Python counter recompiles every step). The
    seed's MoE capacity recomputed from the collator's padded size produced one dispatch
    program per distinct value until it was clamped at config time.

    ## Example
    ```python
    def forward(self, x):
        self.step += 1
        return x[:, : self.step]
    ```

    ## Use instead
    Keep shapes static and select with a mask computed on the device:
    ```python
    def forward(self, x):
        self.step.add_(1)                                   # a buffer
        keep = torch.arange(x.shape[1], device=x.device) < self.step
        return x * keep
    ```
    """

    VALID = examples.VALID
    INVALID = examples.INVALID

    def __init__(self, context):
        super().__init__(context)
        self._self_slices: list[tuple] = []  # node, attr, what, label, scope, class, on the CPU
        self._mutated: dict[int, set[str]] = {}  # id(class frame) -> attrs bumped outside __init__
        # scope -> names bound from per-call values -> the calls taken for tensors on the way
        # (reported with a finding that rests on the name, so the cross-file pass can drop it)
        self._varying: dict[str, dict[str, tuple[str, ...]]] = {}
        # scope -> name -> parameter guards every varying assignment of it was made under
        # (`if sigmoid: t = t.sigmoid().item()`): dead in the repository, the name never varies.
        self._varying_guards: dict[str, dict[str, tuple[str, ...]]] = {}
        self._loops: list[tuple[set[str], list[tuple[cst.CSTNode, str, int, str, bool]]]] = []
        self._outer_loops: list[list] = []
        self._stepping: set[int] = set()  # depths of loops whose body holds a step block
        self._swept: dict[int, int] = {}  # depth of a loop over a literal list of numbers -> its length
        self._literals: dict[str, int] = {}  # sizes = [8, 128, 256] in this function: its length
        self._outer_literals: list[dict[str, int]] = []

    # ---------------------------------------------------------------- bookkeeping
    def visit_For(self, node: cst.For) -> None:
        self._loops.append((set(bound_names(node.target)), []))
        it = node.iter
        count = _literal_numbers(it) if not isinstance(it, cst.Name) else self._literals.get(it.value)
        if count:
            self._swept[len(self._loops)] = count

    def visit_While(self, node: cst.While) -> None:
        self._loops.append((set(), []))

    def visit_With(self, node: cst.With) -> None:
        # for step, batch in ...: with xp.StepTrace(...): a loop of steps, whatever syncs
        if self._loops and any(isinstance(i.item, cst.Call) and self.context.resolve(i.item.func)
                               in STEPPING for i in node.items):
            self._stepping.add(len(self._loops))

    def leave_For(self, node) -> None:
        stepping = len(self._loops) in self._stepping
        self._stepping.discard(len(self._loops))
        swept = self._swept.pop(len(self._loops), 0)
        counters, pending = self._loops.pop()
        region = self.context.current_region()
        if region is not None and region.node is node and (self.context.region_is_step(region) or stepping):
            for target, message, index, subject, cpu in pending:
                if swept:  # for n in (128, 256, 512): a fixed set of shapes, each compiled once
                    self.report(target, message + SWEPT_NOTE.format(n=swept), subject=subject, severity="info",
                                at_index=index)
                else:
                    self._report(target, message, subject, cpu, at_index=index)

    leave_While = leave_For

    def visit_FunctionDef(self, node) -> None:
        self._outer_loops.append(self._loops)  # a nested def's loops are its own
        self._loops = []
        self._outer_literals.append(self._literals)
        self._literals = {}

    def leave_FunctionDef(self, node) -> None:
        self._loops = self._outer_loops.pop()
        self._literals = self._outer_literals.pop()

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._note_mutation(node.target)
        if isinstance(node.target, cst.Name):
            self._literals.pop(node.target.value, None)  # sizes += more: no longer the literal

    def visit_Assign(self, node: cst.Assign) -> None:
        count = _literal_numbers(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if count:
                    self._literals[target.target.value] = count
                else:
                    self._literals.pop(target.target.value, None)
        if self._loops and self._loop_counter(node.value) and not self.context.is_tensor(node.value):
            for target in node.targets:  # index = max(-step, 1): derived from the counter
                self._loops[-1][0].update(bound_names(target.target))
        for target in node.targets:
            if isinstance(node.value, cst.BinaryOperation):
                self._note_mutation(target.target)
        assumed = self.context.model.infer.assumed
        mark = len(assumed)
        why, _ = self._why(node.value)
        if why:
            scope = self.context.scope.qualname
            names = self._varying.setdefault(scope, {})
            guards = self._varying_guards.setdefault(scope, {})
            taken = tuple(assumed[mark:])
            here = self._evidence_guards(node.value)
            for target in node.targets:
                for bound in bound_names(target.target):
                    # Varying if any assignment runs: only guards common to all of them hold.
                    guards[bound] = here if bound not in names else tuple(g for g in guards.get(bound, ())
                                                                          if g in here)
                    names[bound] = taken

    def _evidence_guards(self, expr) -> tuple[str, ...]:
        """Parameter guards under which ``expr`` varies: those of the current point, and those
        every source of its variation was made under (a name assigned a host read inside
        ``if sigmoid:``). A host read made here, or any other reason, is a source with none."""
        context = self.context
        here = context.guards.guarded_by() if context.guards.active else ()
        scope = context.scope.qualname
        varying, guards = self._varying.get(scope, {}), self._varying_guards.get(scope, {})
        assumed = context.model.infer.assumed
        mark = len(assumed)
        sources: list[tuple[str, ...]] = []
        for sub in _walk(expr):
            if isinstance(sub, cst.Name) and sub.value in varying:
                sources.append(guards.get(sub.value, ()))
            elif isinstance(sub, (cst.Call, cst.Name)) and context.is_host_value(sub):
                derived = [n for n in _all_names(sub) if n in varying]  # ceil(t * n): t's guards
                sources.extend(guards.get(n, ()) for n in derived) if derived else sources.append(())
        del assumed[mark:]
        common = [g for g in sources[0] if all(g in other for other in sources[1:])] if sources else []
        return tuple(dict.fromkeys((*here, *common)))

    def _note_mutation(self, target) -> None:
        cls = self.context.cls
        attr = T.self_attr(target)
        if cls is not None and attr and not self.context.scope.qualname.endswith(".__init__"):
            self._mutated.setdefault(id(cls), set()).add(attr)

    # ---------------------------------------------------------------- matches
    def visit_Subscript(self, node: cst.Subscript) -> None:
        cpu = None  # a slice of a tensor made on the CPU makes no XLA program: info (asked once)
        for element in node.slice:
            index = element.slice
            if isinstance(index, cst.Slice):
                for bound in (index.lower, index.upper, index.step):
                    if bound is None:
                        continue
                    if cpu is None:
                        cpu = self.context.made_on_cpu(node.value)
                    if self._check(bound, node, "slice bound", "", cpu):
                        return

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in {"append", "extend", "insert"} \
                and isinstance(func.value, cst.Name):
            self._literals.pop(func.value.value, None)
        method = T.call_method_name(node)
        if method in NEW_FACTORIES and self.context.is_tensor(node.func.value):
            sizes = [a.value for a in node.args if a.keyword is None and not a.star]
            for size in sizes[:1] if method == "new_full" else sizes:
                if self._check(size, node, f"`.{method}()` size", f".{method}()"):
                    return
            return
        dotted = self.context.resolve(node.func) or ""
        if not (dotted.startswith("torch.") and dotted.count(".") == 1
                and dotted.rsplit(".", 1)[-1] in SIZED_FACTORIES):
            return
        name = dotted.rsplit(".", 1)[-1]
        sizes = [a.value for a in node.args if a.keyword is None and not a.star]
        if name == "full":
            sizes = sizes[:1]
        size_kw = P.keyword(node, "size") or P.keyword(node, "end")
        if size_kw is not None:
            sizes.append(size_kw.value)
        for size in sizes:
            if self._check(size, node, f"`torch.{name}` size", f"torch.{name}"):
                return

    def _check(self, expr, node, what: str, label: str, cpu: bool = False) -> bool:
        """``label``: the callee named in ``what`` (the finding's subject), if any; ``cpu``:
        the sliced tensor was made on the CPU."""
        attr = _uses_self_attr(expr)
        if attr is not None and self.context.cls is not None:
            self._self_slices.append((node, attr, what, label, self.context.scope.qualname,
                                      self.context.cls, cpu))
            # self.n * capacity: the attribute is judged at the end of the class; the other
            # operands still count now.
            why, name = self._why(expr)
            if why:
                self._report(node, f"{what} computed from {why}, which changes from call to call: each new "
                             "value is a new graph; pad to a fixed size or mask instead", label or name, cpu,
                             guarded_by=self._evidence_guards(expr))
            return True
        counter = self._loop_counter(expr)
        if counter is not None:
            region = self.context.current_region()
            pending = self._loops[-1][1] if self._loops else None
            if region is not None and pending is not None:
                pending.append((node, f"{what} uses the step-loop counter `{counter}`: every step is a "
                                f"new shape and a new program; keep shapes static and mask instead",
                                region.current, label or counter, cpu))
            return True
        why, name = self._why(expr)
        if why:
            self._report(node, f"{what} computed from {why}, which changes from call to call: each new "
                         "value is a new graph; pad to a fixed size or mask instead", label or name, cpu,
                         guarded_by=self._evidence_guards(expr))
            return True
        return False

    def _report(self, node, message: str, subject: str, cpu: bool, **kwargs) -> None:
        """A slice of a CPU tensor is host work on XLA (a new shape only under torch.compile): info."""
        self.report(node, message + (CPU_NOTE if cpu else ""), subject=subject,
                    severity="info" if cpu else "warning", **kwargs)

    def _loop_counter(self, expr) -> str | None:
        if not self._loops:
            return None
        counters = self._loops[-1][0]
        for name in _names(expr):
            if name in counters:
                return name
        return None

    def _why(self, expr) -> tuple[str | None, str]:
        """Why ``expr`` varies between calls, and the name quoted in that reason.

        A reason that rests on calls taken for tensors on trust (``math.ceil(n)``) leaves
        them in the inference's assumptions, for the finding to carry; a reason that rests
        on nothing (``.item()``, ``len(lengths)``) is preferred when the expression has both."""
        assumed = self.context.model.infer.assumed
        mark = len(assumed)
        trusting: tuple[tuple[str, str], list[str]] | None = None
        for sub in _walk(expr):
            before = len(assumed)
            reason = self._reason(sub)
            taken = assumed[before:]
            del assumed[before:]
            if reason is None:
                continue
            if not taken:
                return reason
            if trusting is None:
                trusting = (reason, taken)
        if trusting is None:
            return None, ""
        assumed[mark:] = trusting[1]
        return trusting[0]

    def _reason(self, sub) -> tuple[str, str] | None:
        context = self.context
        varying = self._varying.get(context.scope.qualname, {})
        if isinstance(sub, cst.Name) and sub.value in varying:
            context.model.infer.assumed.extend(varying[sub.value])
            return f"`{sub.value}`", sub.value
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value == "len" \
                and len(sub.args) == 1 and isinstance(sub.args[0].value, cst.Name):
            arg = sub.args[0].value.value
            # Only names that say they are Python sequences: len() of a tensor is its
            # static first dimension, and an unannotated parameter may be either.
            if arg in context.function.data_names and arg.lower().endswith(SEQUENCE_SUFFIXES):
                return f"`len({arg})` of a Python sequence passed in", f"len({arg})"
        if isinstance(sub, (cst.Call, cst.Name)) and context.is_host_value(sub):
            return "a value read from a tensor on the host", ""
        return None

    def leave_ClassDef(self, node) -> None:
        cls = self.context.class_stack[-1]
        mutated = self._mutated.pop(id(cls), set())
        keep = []
        for item in self._self_slices:
            target, attr, what, label, scope, owner, cpu = item
            if owner is not cls:
                keep.append(item)
                continue
            if attr in mutated and attr not in cls.tensor_attrs:
                self._report(target, f"{what} uses `self.{attr}`, a Python number that changes between "
                             "calls: each new value is a new graph; keep shapes static and mask instead",
                             label or f"self.{attr}", cpu, scope=scope)
        self._self_slices = keep


def _walk(expr):
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, cst.BinaryOperation):
            stack += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation):
            stack.append(node.expression)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in {
            "int", "min", "max", "round", "abs"
        }:
            stack += [a.value for a in node.args]


def _names(expr) -> set[str]:
    return {n.value for n in _walk(expr) if isinstance(n, cst.Name)}


def _all_names(expr) -> set[str]:
    """Every name anywhere in ``expr`` (``_names`` stops at calls other than int/min/max...)."""
    found: set[str] = set()

    def visit(node) -> bool:
        if isinstance(node, cst.Name):
            found.add(node.value)
        return True

    walk(expr, visit, lambda node: None)
    return found


def _uses_self_attr(expr) -> str | None:
    for sub in _walk(expr):
        attr = T.self_attr(sub)
        if attr is not None:
            return attr
    return None


def _literal_numbers(node: cst.BaseExpression) -> int:
    """The length of a literal list or tuple of int literals (``[8, 128, 256]``), else 0."""
    if not isinstance(node, (cst.List, cst.Tuple)) or not node.elements:
        return 0
    if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Integer) for e in node.elements):
        return len(node.elements)
    return 0
