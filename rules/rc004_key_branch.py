"""RC004 key-branch: control flow on which keys a batch/inputs mapping happens to carry."""

from __future__ import annotations

import libcst as cst

from detective.lint import tensors as T
from detective.lint.project_facts import OPTIONAL_KEY
from detective.lint.rule import Rule
from detective.lint.walker import syntax_children
from detective.rules import _rc004_examples as examples
from detective.rules._key_facts import OptionalKeys


class KeyBranch(Rule):
    code = "RC004"
    name = "key-branch"
    summary = "Branch on dict-key presence of a batch/inputs mapping (if \"mask\" in batch) in a traced region"
    facts = (OptionalKeys,)  # keys the project sets, and those it makes optional
    doc = """
    ## What it does
    Flags `if`/`while`/ternaries whose condition tests whether an input mapping carries a
    key: `"mask" in batch`, `"mask" not in inputs`, `batch.get("mask") is not None`,
    `if batch.get("mask"):`, `batch.pop("mask", None)`, also on nested mappings
    (`"attention_mask" in batch["encoder"]`). The mapping must be data that comes in per
    call: a parameter of the function or the loop variable of a step loop. `hasattr(obj,
    "name")` is not a key test (it asks about a module, weight or config attribute). Each
    mapping and key is reported once per function (a second test has the first one's
    answer), and `if state.get("k") is None: state["k"] = ...` is not reported (the branch
    fills the key it lacked, so later code sees one key set). Nor is an `if` (not an
    `elif`) whose other side only raises: a step that raises makes no second program. Nor
    an `if` with no `else` that only does host bookkeeping (binds the element, reads its
    shape, counts in Python; nothing after it reads the element): no tensor op, one graph.
    A key test is `info` unless the project makes that key optional somewhere (removes it
    with `del`/`.pop`, or sets it only under a condition on data; not a write that updates
    the key it reads, `m["k"] = f(m["k"])`, a `del` the same block sets again, a removal on
    every call from a mapping the function built itself, a conditional write of a key the
    mapping already holds, or a write under `if v is not None` of a value made from `v`):
    a task's collater gives every batch of a run the same keys, so the run takes one side,
    one program. For a batch mapping the evidence is in the code that builds the batches:
    files named inside a project read it as context, but a few files linted with
    `--no-project` (or files in no project) usually lack it, and their key tests are `info`
    with a note saying so. A key no file sets (a tokenizer's `attention_mask`, a `"|" in
    name` test on a string) is no evidence either: nothing shows batches of one run
    differing in it. A test on `**kwargs` needs the same evidence: each call site passes the
    same keyword arguments every time.

    ## Why is this bad?
    The Python path taken depends on which optional keys this batch has, so when batches
    of one run differ in a key, every distinct subset of keys traces its own graph. Across a
    shuffled dataset that is a long tail of one-shot programs; in the seed model,
    canonicalising the batch removed about a dozen recompiles per epoch. A key that every
    batch of a run has (or none has) costs nothing: that is why the rule asks for evidence.

    ## Example
    ```python
    def collate(samples):
        batch = {"input_ids": pad([s["ids"] for s in samples])}
        if all("doc" in s for s in samples):   # only some batches get the key
            batch["doc_ids"] = pad([s["doc"] for s in samples])
        return batch

    def forward(self, batch):
        x = self.embed(batch["input_ids"])
        if "doc_ids" in batch:
            x = x + self.doc_embed(batch["doc_ids"])
    ```

    ## Use instead
    Canonicalise the batch in the collater: every optional field always present, with a
    fixed shape and dtype, and a mask that says what is live:
    ```python
    def collate(samples):
        batch = {"input_ids": pad([s["ids"] for s in samples])}
        batch["doc_ids"], batch["doc_mask"] = pad_or_zeros(samples, "doc")  # every batch

    def forward(self, batch):
        x = self.embed(batch["input_ids"])
        x = x + self.doc_embed(batch["doc_ids"]) * batch["doc_mask"][..., None]
    ```
    """

    VALID = examples.VALID
    INVALID = examples.INVALID

    def _check(self, test: cst.BaseExpression) -> None:
        key = key_test(self.context, test)
        if key is not None:
            container, name = key
            # The same key tested again in this function forks no new graph: its answer
            # is the first test's (a write-back `if "k" in batch:` after the real branch).
            seen = (self.context.scope.qualname, container, name)
            if seen in self._tested:
                return
            self._tested.add(seen)
            if container == self._kwargs[-1]:
                # Keyword arguments: each call site passes the same ones every time. A warning
                # only where the project makes the key optional (see rules/_key_facts.py).
                self.report(test, f"branch on whether keyword arguments `**{container}` include {name!r}: "
                            "each key subset traces its own graph", subject=container,
                            needs=(OPTIONAL_KEY + name,))
                return
            # A batch mapping: a warning where the project makes the key optional (the code that
            # builds the batches must be in view: with --no-project it usually is not).
            self.report(
                test,
                f"branch on whether `{container}` has key {name!r}: each key subset traces its own graph",
                subject=container, needs=(OPTIONAL_KEY + name,),
            )

    def __init__(self, context):
        super().__init__(context)
        self._tested: set[tuple[str, str, str]] = set()
        self._elifs: set[int] = set()  # ids of `elif` branches (If nodes in an orelse)
        self._kwargs: list[str | None] = [None]  # each function's `**kwargs` parameter
        self._blocks: list = []  # statements of the blocks on the walk's path

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node.body)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def _read_after(self, node: cst.If, names: set[str]) -> bool:
        """Does a statement after ``node`` in its block read one of ``names``?"""
        body = self._blocks[-1] if self._blocks else ()
        after = next((body[i + 1:] for i, s in enumerate(body) if s is node), ())
        stack = list(after)
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Name) and current.value in names:
                return True
            stack.extend(syntax_children(current))
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        star = node.params.star_kwarg
        self._kwargs.append(star.name.value if isinstance(star, cst.Param) else None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._kwargs.pop()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self._elifs.add(id(node.orelse))
        if self._fills_missing_key(node):
            return
        if id(node) not in self._elifs and (_only_raises(node.body) or (
                isinstance(node.orelse, cst.Else) and _only_raises(node.orelse.body))):
            # One side ends the step with an exception: no second program. (An `elif`
            # whose `else` raises still picks among the chain's key sets.)
            return
        bound: set[str] = set()
        if node.orelse is None and _host_bookkeeping(node.body, set(), bound) and not self._read_after(node, bound):
            # if "input_ids" in inputs: tokens += inputs["input_ids"].numel(): shapes and Python
            # counters only, no tensor op on either side: one graph.
            return
        self._check(node.test)

    def _fills_missing_key(self, node: cst.If) -> bool:
        """``if state.get("k") is None: state["k"] = []``: the branch gives the mapping the key
        it lacked (setdefault), so later code sees one key set, not a new one per batch."""
        key = key_test(self.context, node.test)
        if key is None or node.orelse is not None or not _tests_absence(node.test):
            return False
        container, name = key
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Subscript) and T.literal_string(
                            t.target.slice[0].slice.value if isinstance(t.target.slice[0].slice, cst.Index) else None
                        ) == name and data_mapping(self.context, t.target.value) == container
                        for t in small.targets
                    ):
                        return True
        return False

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test)


def _tests_absence(test: cst.BaseExpression) -> bool:
    """``"k" not in m``, ``m.get("k") is None``, ``not m.get("k")``: true when the key is missing."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return isinstance(test.expression, cst.Call)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        return isinstance(op, cst.NotIn) or (
            isinstance(op, cst.Is) and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None")
    return False


def key_test(context, test: cst.BaseExpression) -> tuple[str, str] | None:
    if isinstance(test, cst.BooleanOperation):
        return key_test(context, test.left) or key_test(context, test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return key_test(context, test.expression)
    if isinstance(test, cst.Comparison):
        for target in test.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                key = T.literal_string(test.left)
                container = data_mapping(context, target.comparator)
                if key is not None and container:
                    return container, key
            if isinstance(target.operator, (cst.Is, cst.IsNot)):
                found = _get_call(context, test.left)
                if found:
                    return found
        return None
    if isinstance(test, cst.Call):
        # hasattr(obj, "name") asks about an attribute of a module, weight or config,
        # not about a key of the input mapping: never a key branch.
        return _get_call(context, test)
    return None


def _get_call(context, node: cst.BaseExpression) -> tuple[str, str] | None:
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and (node.func.attr.value == "get" or (node.func.attr.value == "pop" and len(node.args) == 2))
        and node.args
    ):
        container = data_mapping(context, node.func.value)
        key = T.literal_string(node.args[0].value)
        if container and key is not None:
            return container, key
    return None


def data_mapping(context, node: cst.BaseExpression) -> str | None:
    """The input mapping ``node`` names: ``batch``, ``batch.keys()``, ``sample["net_input"]``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "keys":
        node = node.func.value
    keys = []
    while isinstance(node, cst.Subscript) and len(node.slice) == 1 \
            and isinstance(node.slice[0].slice, cst.Index):
        key = T.literal_string(node.slice[0].slice.value)
        if key is None:
            return None
        keys.append(key)
        node = node.value
    if isinstance(node, cst.Name) and node.value in context.function.data_names \
            and "out" not in node.value.lower():  # encoder_out, net_output: results, not inputs
        return node.value + "".join(f"[{k!r}]" for k in reversed(keys))
    return None


def _only_raises(block: cst.BaseSuite) -> bool:
    """A block that ends in ``raise`` with only simple statements before it (a message built)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    if not body or not all(isinstance(s, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for s in body):
        return False
    return isinstance(body[-1].body[-1], cst.Raise)


_METADATA_CALLS = frozenset({"isinstance", "len", "hasattr", "getattr", "int", "float", "str", "bool"})
_METADATA_METHODS = frozenset({"numel", "size", "dim", "ndimension", "nelement"})


def _host_bookkeeping(block: cst.BaseSuite, names: set[str], bound: set[str]) -> bool:
    """Does the block only bind elements of mappings, read shapes and count in Python? ``names``
    collects the names it binds to Python values (counts, sizes), which arithmetic may use;
    ``bound``, the names it binds to elements of mappings (the caller checks that nothing after
    the branch reads them)."""
    for statement in block.body if isinstance(block, cst.IndentedBlock) else [block]:
        if isinstance(statement, cst.If):
            if not _metadata(statement.test, names) or not _host_bookkeeping(statement.body, names, bound) or (
                    statement.orelse is not None and not (isinstance(statement.orelse, cst.Else)
                                                          and _host_bookkeeping(statement.orelse.body, names, bound))):
                return False
            continue
        if not isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if not isinstance(small, (cst.Assign, cst.AugAssign)):
                return False
            value = small.value
            if isinstance(small, cst.Assign) and not all(
                    isinstance(t.target, cst.Name) or T.self_attr(t.target) is not None for t in small.targets):
                return False  # w2v_args["corpus_key"] = ...: a key set passed on, not bookkeeping
            if isinstance(value, cst.Subscript) and isinstance(small, cst.Assign):
                # ids = inputs["input_ids"]: a binding, no op, if nothing after the branch reads it
                bound.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
                continue
            if not _metadata(value, names):
                return False
            if isinstance(small, cst.Assign):
                names.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
    return True



def _metadata(node: cst.BaseExpression, names: set[str]) -> bool:
    """Shape metadata, a Python count or setting, a None or type test: no tensor op."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in names or node.value in ("None", "True", "False")
    if isinstance(node, cst.Subscript):  # ids.shape[0]
        return _metadata(node.value, names)
    if isinstance(node, cst.Attribute) and node.attr.value == "shape":
        return True
    if isinstance(node, cst.Attribute):  # self.seq_length, torch.Tensor: settings and types
        return isinstance(node.value, (cst.Name, cst.Attribute)) and (
            not isinstance(node.value, cst.Name) or node.value.value in ("self", "torch"))
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in _METADATA_CALLS:
            return True
        return isinstance(func, cst.Attribute) and func.attr.value in _METADATA_METHODS
    if isinstance(node, cst.Comparison):
        if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons):
            return True  # x is None: identity, no op
        return _metadata(node.left, names) and all(_metadata(c.comparator, names) for c in node.comparisons)
    if isinstance(node, cst.BooleanOperation):
        return _metadata(node.left, names) and _metadata(node.right, names)
    if isinstance(node, cst.BinaryOperation):
        return _metadata(node.left, names) and _metadata(node.right, names)
    if isinstance(node, cst.UnaryOperation):
        return _metadata(node.expression, names)
    return False
