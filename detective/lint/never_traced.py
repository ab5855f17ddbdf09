"""Code that never runs traced on XLA, found during the walk: the branch sides a step skips.

A mixin of :class:`detective.lint.regions.Regions` (it shares the walk's block stack with
the step-region logic, which reads the sync index it keeps per block). Marked as ``dead``
(node ids; the walk counts how deep it is inside them):

- the side of a test that is never taken on XLA (``xla_sense``: ``is_xla_tensor(x)``,
  ``x.device.type == "xla"``, a flag bound from such a test, a name an XLA branch set to
  None, a key test on a mapping whose key an earlier statement of the block reads on XLA),
  and the right side of ``and``/``or`` that short-circuits on XLA;
- the body of one-time lazy set-up (``if not self._initialized:``; also counted as
  ``once``: it runs, but once), the rest of a block after ``if self.initted: return`` where
  that block sets the flag, of a cache fill (``if L not in self.ops: ...
  self.ops[L] = build(L)``: once per key, such as each new sequence length), and of a state
  undone by its own method (``if self.merged: self.unmerge()``);
- the side of ``if __name__ == "__main__":`` inside a function (a self-test of the file);
- error paths: blocks ending in ``raise``, assert messages, the exception raised,
  arguments of error logs and ``warnings.warn``; the rest of a block after an XLA early
  ``return``.

The sides of flash-attention tests are marked ``cuda``: they run only with CUDA kernels.
"""

from __future__ import annotations

from collections import ChainMap

import libcst as cst

from detective.lint import tensors as T
from detective.lint.literal_flags import LiteralFlags, function_flags
from detective.lint.once_branches import done_setup_guard, runs_once
from detective.lint.syntax import bound_names, ends_in_exit
from detective.lint.xla_branches import CUDA_BRANCH, CUDA_TEST, FLASH_BRANCH, GENERATOR_BLOCK, bindings, block_calls, \
    compile_sense, cuda_flag_sense, cuda_sense, device_generator, lazy_init_test, set_to_none, xla_sense


_SETTING_ROOTS = frozenset({"self", "args", "cfg", "config", "flags", "opt", "opts", "hparams"})


class NeverTraced:
    """State and walk hooks for dead, once-only and CUDA-only code (see the module doc)."""

    def _init_never_traced(self) -> None:
        # Blocks on the walk's path: [statement index map, current index, index of a sync,
        # rest of the block dead (after an XLA early return),
        # rest of the block never traced by torch.compile (after `if is_compiling(): return`),
        # the block's statements, rest of the block one-time set-up (after `if self.initted: return`)]
        self._blocks: list[list] = [[{}, -1, None, False, False, (), False]]
        self.dead: set[int] = set()  # nodes that never run traced on XLA (or run once only)
        self.once: set[int] = set()  # of those, one-time lazy initialisation (runs, once)
        self.once_depth = 0
        self.decorator_depth = 0  # inside a decorator expression (Regions.visit_Decorator)
        self._xla_names: dict[str, int] = {}  # names bound from XLA tests, with their sense
        # Names fixed by the code (`merge = False`, a module's `DEBUG = False`), per scope on
        # the walk's path (each decided when a test first reads it).
        self._flags: list[LiteralFlags] = [LiteralFlags(())]
        # `if self.tpu: mask = None` -> name: the block holding that `if` (mask is None on XLA
        # for the rest of that block, until it is bound again)
        self._none_on_xla: dict[str, list] = {}
        # (mapping, key) read or set as m["k"] by a statement that runs on XLA -> the block
        # holding it: for the rest of that block, `"k" in m` is true there
        self._keys_on_xla: dict[tuple[str, str], list] = {}
        self._maybe_depth = 0  # inside a lambda, a comprehension or an and/or: may not run
        self._if_blocks: dict[int, list | None] = {}  # id of an if's body -> its block, once left
        self.dead_depth = 0
        # Blocks that run only off XLA, with why: sides of flash-attention tests (`if
        # ..._attn_implementation == "flash_attention_2":`), which need the CUDA flash_attn
        # package, and blocks that build a torch.Generator on a tensor's device. What they
        # read is reported as info.
        self.cuda: dict[int, str] = {}
        self.cuda_why: list[str] = []
        self.cuda_depth = 0
        # Sides torch.compile never traces (`if torch.compiler.is_compiling(): return x` and
        # what follows it): they run eagerly or under torch_xla, which is where they cost.
        self.uncompiled: set[int] = set()
        self.uncompiled_depth = 0
        self._compiling_helpers: set[str] = set()  # module functions returning is_compiling()

    def visit_Module(self, node: cst.Module) -> None:
        self._flags = [LiteralFlags(node.body, module=node)]

    def enter_flags(self, node: cst.FunctionDef) -> None:
        self._flags.append(function_flags(node, self._flags[-1]))

    def leave_flags(self) -> None:
        self._flags.pop()

    def silenced(self) -> bool:
        """Code that never runs traced on XLA: an XLA-unreachable branch, one-time lazy
        initialisation, a lambda handed to ``xm.add_step_closure``."""
        return self.dead_depth > 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        # A block that ends in `raise` is an error path: what it reads runs once, failing.
        failing = ends_in_exit(node, raise_only=True)
        self._blocks.append([{id(s): i for i, s in enumerate(node.body)}, -1, None, failing, False, node.body, False])
        if failing:
            self.dead_depth += 1

    def visit_Assert(self, node: cst.Assert) -> None:
        if node.msg is not None:
            self.dead.add(id(node.msg))  # assert ok, f"{x.tolist()}": only when failing

    def visit_Raise(self, node: cst.Raise) -> None:
        if node.exc is not None:
            self.dead.add(id(node.exc))

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        block = self._blocks.pop()
        if id(node) in self._if_blocks:
            self._if_blocks[id(node)] = block  # for leave_If: the keys read on the taken side
        if block[3]:
            self.dead_depth -= 1
        if block[4]:
            self.uncompiled_depth -= 1
        if block[6]:
            self.dead_depth -= 1
            self.once_depth -= 1

    def untrack(self, node: cst.CSTNode) -> None:
        """Called on leaving every node while some node is marked dead or CUDA-only."""
        if id(node) in self.dead:
            self.dead_depth -= 1
            if id(node) in self.once:
                self.once_depth -= 1
        if id(node) in self.cuda:
            self.cuda_depth -= 1
            self.cuda_why.pop()
        if id(node) in self.uncompiled:
            self.uncompiled_depth -= 1

    def call_kind(self) -> str:
        """How a call made here runs: "" every time, "once" (lazy initialisation), "dead"
        (never on XLA, or only on an error path). Only "" calls carry a traced region on."""
        if not self.dead_depth:
            return "once" if self.decorator_depth else ""  # a decorator runs where the def is
        return "once" if self.dead_depth == self.once_depth else "dead"

    def visit_If(self, node: cst.If) -> None:
        self._if_blocks[id(node.body)] = None
        if isinstance(node.orelse, cst.Else):
            self._if_blocks[id(node.orelse.body)] = None
        sense = self.sense(node.test)
        if sense < 0:
            self.dead.add(id(node.body))
            if lazy_init_test(node.test):
                self.once.add(id(node.body))
        elif sense == 0 and runs_once(node):
            self.dead.add(id(node.body))  # a cache miss, an unmerge: once, set-up like lazy init
            self.once.add(id(node.body))
        elif sense > 0 and node.orelse is not None:
            self.dead.add(id(node.orelse))
        self._mark_cuda(node.test, node.body, node.orelse)
        self._mark_uncompiled(node.test, node.body, node.orelse)
        self._mark_short_circuit(node.test)
        for side in (node.body, node.orelse.body if isinstance(node.orelse, cst.Else) else None):
            if side is not None and id(side) not in self.cuda and any(
                    device_generator(call, self.model.resolve) for call in block_calls(side)):
                self.cuda[id(side)] = GENERATOR_BLOCK

    def visit_Return(self, node: cst.Return) -> None:
        """``def _is_compiling(): ... return torch.compiler.is_compiling()`` (timm's optimizers):
        a test of the helper is a test of the call."""
        scope = self.model.scope.qualname
        if node.value is not None and "." not in scope and scope != "<module>" \
                and compile_sense(node.value, self.model.resolve) > 0:
            self._compiling_helpers.add(scope)

    def _mark_uncompiled(self, test: cst.BaseExpression, body: cst.CSTNode, orelse: cst.CSTNode | None) -> None:
        """The side of a ``torch.compiler.is_compiling()`` test that torch.compile never traces."""
        compiling = compile_sense(test, self.model.resolve, self._compiling_helpers)
        if compiling > 0 and orelse is not None:
            self.uncompiled.add(id(orelse))
        elif compiling < 0:
            self.uncompiled.add(id(body))

    def _mark_cuda(self, test: cst.BaseExpression, body: cst.CSTNode, orelse: cst.CSTNode | None) -> None:
        """The side of a flash-attention test that needs CUDA (and the rest of an `and` after it);
        the side of a test of the project's CUDA switch that runs only with CUDA."""
        why, sense = FLASH_BRANCH, cuda_sense(test, self.model.resolve)
        if not sense:
            why, sense = CUDA_BRANCH, cuda_flag_sense(test, self.model.resolve)
        if sense > 0:
            self.cuda[id(body)] = why
        elif sense < 0 and orelse is not None:
            self.cuda[id(orelse)] = why
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            if cuda_sense(test.left, self.model.resolve) > 0:
                self.cuda[id(test.right)] = FLASH_BRANCH  # is_flash_attn_2_available() and mask.any()
            elif cuda_flag_sense(test.left, self.model.resolve) > 0:
                # use_cuda and mask.any(): the right side, and the test as a whole (read for
                # truth), read tensors only with CUDA; the left side is the switch itself
                self.cuda[id(test.right)], self.cuda[id(test)] = CUDA_BRANCH, CUDA_TEST

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``m["k"]`` evaluated whenever this block runs on XLA: the key is there for the rest
        of the block (not under a lambda, a comprehension or a conditional expression)."""
        if self.dead_depth or self._maybe_depth or len(node.slice) != 1 \
                or not isinstance(node.slice[0].slice, cst.Index):
            return
        key = T.literal_string(node.slice[0].slice.value)
        mapping = _chain(node.value) if key else None
        if mapping:
            self._keys_on_xla[(mapping, key)] = self._blocks[-1]

    def leave_Del(self, node: cst.Del) -> None:
        stack = [node.target]
        while stack:  # del m["k"], del (a["x"], b["y"]): gone from here on
            target = stack.pop()
            if isinstance(target, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in target.elements)
            elif isinstance(target, cst.Subscript) and len(target.slice) == 1 \
                    and isinstance(target.slice[0].slice, cst.Index):
                self._keys_on_xla.pop((_chain(target.value), T.literal_string(target.slice[0].slice.value)), None)

    def visit_Lambda(self, node) -> None:
        self._maybe_depth += 1

    def leave_Lambda(self, node) -> None:
        self._maybe_depth -= 1

    # (a one-line body, `if c: x = m["k"]`, pushes no block of its own: it may not run either)
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_BooleanOperation = visit_Lambda
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = leave_BooleanOperation = leave_Lambda
    visit_SimpleStatementSuite = visit_Lambda
    leave_SimpleStatementSuite = leave_Lambda

    def leave_If(self, node: cst.If) -> None:
        sense = self.sense(node.test)
        taken = node.body if sense > 0 else (node.orelse.body if sense < 0 and isinstance(node.orelse, cst.Else)
                                             else None)
        if taken is not None:
            for name in set_to_none(taken):
                self._none_on_xla[name] = self._blocks[-1]  # after the walk of every branch
            # `if self.xla: mi = batch["mask"]...`: the key is there on XLA after the `if` too
            inner = self._if_blocks.get(id(taken))
            if inner is not None and not self.dead_depth:
                for key, where in list(self._keys_on_xla.items()):
                    if where is inner:
                        self._keys_on_xla[key] = self._blocks[-1]
        inner = self._if_blocks.get(id(node.body))
        if node.orelse is None and inner is not None and inner[2] is not None and self._fixed_per_call(node.test):
            # if use_zero1: xm.mark_step(): the flag is the same every iteration, so what
            # follows is read after the step's sync, or is itself the loop's only sync.
            block = self._blocks[-1]
            block[2] = block[1]
        self._if_blocks.pop(id(node.body), None)
        if isinstance(node.orelse, cst.Else):
            self._if_blocks.pop(id(node.orelse.body), None)
        # if x.device.type == "xla": return ...  -> the rest of this block never runs on XLA.
        if node.orelse is None and self.sense(node.test) > 0 and ends_in_exit(node.body):
            block = self._blocks[-1]
            if not block[3]:
                block[3] = True
                self.dead_depth += 1
        # if self.initted: return ... self.initted.fill_(True) -> the rest is one-time set-up.
        block = self._blocks[-1]
        index = block[0].get(id(node))
        if not block[6] and index is not None and done_setup_guard(node, block[5][index + 1:]):
            block[6] = True
            self.dead_depth += 1
            self.once_depth += 1
        # if torch.compiler.is_compiling(): return x -> the rest is never traced by torch.compile.
        if node.orelse is None and compile_sense(node.test, self.model.resolve, self._compiling_helpers) > 0 and ends_in_exit(node.body):
            block = self._blocks[-1]
            if not block[4]:
                block[4] = True
                self.uncompiled_depth += 1

    def _fixed_per_call(self, test: cst.BaseExpression) -> bool:
        """A condition with the same value on every iteration of a loop in this function: a
        parameter it never rebinds, or a setting (``self.zero1``, ``args.sync``)."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._fixed_per_call(test.expression)
        if isinstance(test, cst.BooleanOperation):
            return self._fixed_per_call(test.left) and self._fixed_per_call(test.right)
        function = self.model.function
        if isinstance(test, cst.Name):
            if test.value in function.params and test.value not in function.locals:
                return True
            frames = getattr(self, "frames", None)  # the loops of this function (Regions)
            loop = frames[-1][-1].node if frames and frames[-1] else None
            return isinstance(loop, (cst.For, cst.While)) and test.value not in bindings([loop])
        root = test
        while isinstance(root, cst.Attribute):
            root = root.value
        return isinstance(test, cst.Attribute) and isinstance(root, cst.Name) \
            and root.value in _SETTING_ROOTS and root.value not in function.locals

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._maybe_depth -= 1

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._maybe_depth += 1  # one side runs: a key read in either may not happen
        sense = self.sense(node.test)
        if sense:
            self.dead.add(id(node.body if sense < 0 else node.orelse))
        self._mark_cuda(node.test, node.body, node.orelse)
        self._mark_uncompiled(node.test, node.body, node.orelse)
        self._mark_short_circuit(node.test)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            for name in bound_names(target.target):
                self._none_on_xla.pop(name, None)
        # is_tpu = x.device.type == "xla"; self.xla = is_xla_tensor(x)
        if self.dead_depth:
            return  # a binding that never runs on XLA does not change what the name holds there
        sense = self.sense(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if sense:
                    self._xla_names[target.target.value] = sense
                else:
                    self._xla_names.pop(target.target.value, None)

    def _mark_short_circuit(self, test: cst.BaseExpression) -> None:
        """``is_xla_tensor(x) or m.any()``: the right side never runs on XLA."""
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if isinstance(test, cst.BooleanOperation):
            left = self.sense(test.left)
            if (left > 0 and isinstance(test.operator, cst.Or)) or (left < 0 and isinstance(test.operator, cst.And)):
                self.dead.add(id(test.right))
            self._mark_short_circuit(test.left)
            self._mark_short_circuit(test.right)

    def sense(self, test: cst.BaseExpression, also_none=frozenset()) -> int:
        """``xla_sense`` here; ``also_none``: names to take for None on XLA as well. A key test
        on a mapping whose key an earlier statement of this block read on XLA is decided
        (``if self.xla: batch["mask"]...`` then ``elif "mask" in batch:`` always wins)."""
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, (cst.In, cst.NotIn)):
            key, mapping = T.literal_string(test.left), _chain(test.comparisons[0].comparator)
            if key and mapping and self._keys_on_xla.get((mapping, key)) is self._blocks[-1]:
                return 1 if isinstance(test.comparisons[0].operator, cst.In) else -1
        if len(self._flags) > 1:
            main = _main_test(test)
            if main:
                return main
        flags = self._flags[-1]
        names = ChainMap(self._xla_names, flags) if flags else self._xla_names
        return xla_sense(test, self.model.resolve, names, self.xla_nones() | also_none)

    def xla_nones(self) -> set[str]:
        """Names an XLA branch of the enclosing block set to None (and not rebound since)."""
        block = self._blocks[-1]
        return {name for name, where in self._none_on_xla.items() if where is block}


def _main_test(test: cst.BaseExpression) -> int:
    """``__name__ == "__main__"`` tested inside a function: -1 (+1 for ``!=``). The side runs
    only when the file itself is the program (icefall's self-tests inside ``forward``); a
    program that imports the file never takes it."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.Equal, cst.NotEqual))):
        return 0
    sides = {T.literal_string(test.left), T.literal_string(test.comparisons[0].comparator)}
    names = {side.value for side in (test.left, test.comparisons[0].comparator) if isinstance(side, cst.Name)}
    if "__main__" not in sides or names != {"__name__"}:
        return 0
    return -1 if isinstance(test.comparisons[0].operator, cst.Equal) else 1


def _chain(expr: cst.BaseExpression) -> str | None:
    """``sample["net_input"]``, ``self.batch``, ``batch`` as text; None for anything else."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = _chain(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        base, key = _chain(expr.value), T.literal_string(expr.slice[0].slice.value)
        return f"{base}[{key!r}]" if base and key else None
    return None
