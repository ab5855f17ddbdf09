"""The one walk every rule shares, and the API rules see.

``Context`` walks a module once (:mod:`detective.lint.walker`). On the way into each
node it first updates the semantic model (:mod:`detective.lint.semantic`: imports,
scopes, bindings) and the step regions (:mod:`detective.lint.regions`), then the facts
rules share (:class:`~detective.lint.rule.Facts`, e.g. the accumulation facts of
RC101/RC102), then calls the rules' ``visit_<Node>`` methods. On the way out the order
is reversed: rules' ``leave_<Node>`` first, so they still see the state inside the node
(the loop being left is still the current region; an assignment's targets are not yet
rebound), then facts, then regions and the model.

Rule-facing API (kept stable; see :mod:`detective.lint.rule`):
``resolve``, ``call_target``, ``is_tensor``, ``is_bool_tensor``, ``is_mask``, ``reads_in_operator``, ``reads_tensor_value``,
``is_host_value``, ``on_host``, ``through_numpy``, ``made_on_cpu``, ``weigh_receiver``, ``library_function``, ``after_sync()``, ``scope``, ``function`` (its ``data_names``), ``functions``, ``cls``
(``tensor_attrs``, ``number_attrs``), ``class_stack``, ``current_region()``,
``region_is_step()``, ``facts[FactsClass]`` and ``report`` (through ``Rule.report``).
Whether a candidate's scope is traced is decided later, across files, in
:mod:`detective.lint.callgraph`.
"""

from __future__ import annotations

import libcst as cst

from detective.lint.regions import Regions
from detective.lint.semantic import SemanticModel
from detective.lint.walker import SKIP_CHILDREN, dispatch_tables, walk
from detective.lint.cuda_only import CudaScopes
from detective.lint.entrance_facts import EntranceFacts
from detective.lint.param_guards import ParamGuards


class Context:
    def __init__(self, module_name: str, is_package: bool, rule_classes, extra_roots=()):
        model = self.model = SemanticModel(module_name, is_package, extra_roots)
        regions = self.regions = Regions(model)
        guards = self.guards = ParamGuards(model, regions)
        infer = model.infer
        # The rule-facing API, bound once (rules call these on every node).
        self.resolve = model.resolve
        self.call_target = model.call_target
        self.is_tensor = infer.is_tensor
        self.is_bool_tensor = infer.is_bool_tensor
        self.is_mask = infer.is_mask
        self.mask_by_name_only = infer.mask_by_name_only
        self.is_numeric_tensor = infer.is_numeric_tensor
        self.reads_in_operator = infer.reads_in_operator
        self.reads_tensor_value = lambda node: infer.reads_tensor_value(node, regions.dead)
        self.is_host_value = infer.is_host_value
        self.on_host = infer.on_host
        self.through_numpy = infer.through_numpy
        self.made_on_cpu = infer.made_on_cpu
        self.weigh_receiver = infer.weigh_receiver
        self.library_function = model.library_function
        self.current_region = regions.current
        self.after_sync = regions.after_sync
        self.region_is_step = regions.is_step
        self.functions = model.functions
        self.class_stack = model.class_stack
        self._assumed = infer.assumed
        self.facts = {}
        for rule_class in rule_classes:
            for facts_class in rule_class.facts:
                if facts_class not in self.facts:
                    self.facts[facts_class] = facts_class(self)
        self.rules = [rule_class(self) for rule_class in rule_classes]
        # visit: model, regions, guards, cuda, facts, rules; leave: the reverse.
        cuda = CudaScopes(model)
        entrances = self.entrances = EntranceFacts(model)
        self._visit, _ = dispatch_tables([model, regions, guards, cuda, entrances, *self.facts.values(),
                                          *self.rules])
        _, self._leave = dispatch_tables([*self.rules, *self.facts.values(), entrances, cuda, guards,
                                          regions, model])

    @property
    def function(self):
        return self.model.functions[-1]

    @property
    def scope(self):
        return self.model.functions[-1].scope

    @property
    def cls(self):
        return self.model.cls

    def report(self, code: str, node: cst.CSTNode, message: str, scope: str | None = None, *,
               replace=None, fix_title: str = "", after_calls=(), at_index: int | None = None,
               subject: str = "", severity: str = "warning", project=((), ()), guarded_by=(),
               assumes=()) -> None:
        """Record a candidate; see :meth:`detective.lint.rule.Rule.report`."""
        if self.regions.dead_depth:
            return  # never runs traced on XLA (see Regions.silenced)
        extras = (replace, fix_title, tuple(after_calls)) if replace or after_calls else None
        assumes = tuple(dict.fromkeys((*assumes, *self._assumed)))
        guarded = self.guards.guarded_by() if self.guards.active else ()
        if guarded_by:  # the evidence was made under these guards (a value set in `if P:`)
            guarded = tuple(dict.fromkeys((*guarded, *guarded_by)))
        rests_on = self.model.infer.rests_on.pop(id(node), ()) if self.model.infer.rests_on else ()
        cuda_why = self.regions.cuda_why[-1] if self.regions.cuda_depth else self.regions.cuda.get(id(node))
        if cuda_why:  # inside a CUDA-only side, or a test that reads tensors only with CUDA
            severity = "info"
            message += f" ({cuda_why}: not on an XLA host, but real on a GPU)"
        if self.regions.uncompiled_depth:  # torch.compile never traces this side: XLA's cost only
            costs_on, needs = project
            if costs_on and "xla" not in costs_on:
                return
            project = (("xla",), needs)
        self.regions.report((code, message, node, extras, subject, assumes, severity, (guarded, rests_on), project),
                            scope, at_index)

    def assumptions(self) -> tuple[str, ...]:
        """What the tensor evidence read since this visit began rests on (``#helper``: the
        project's helper returns a tensor), for a rule that reports later (``assumes=``)."""
        return tuple(dict.fromkeys(self._assumed))

    # ------------------------------------------------------------------ the walk
    def run(self, module: cst.Module) -> None:
        walk(module, self._on_visit, self._on_leave)

    def close(self) -> None:
        """Drop the walk's state once the file is summarised. Rules and facts point back at
        the context, the model at its inference: left to the cyclic GC, every file's tree
        waited for a full collection over a heap that grows with the run (1.5 of 13 CPU-s
        linting torch nn + distributed); with the cycles cut it is freed at once."""
        owners = {id(fn.__self__): fn.__self__ for table in (self._visit, self._leave)
                  for fns in table.values() for fn in fns}
        for owner in (*owners.values(), self.model.infer, self):
            owner.__dict__.clear()

    def _on_visit(self, node: cst.CSTNode) -> bool:
        name = type(node).__name__
        self.regions.track(node)
        if self.guards.cond:
            self.guards.track(node)
        assumed = self._assumed
        for fn in self._visit.get(name, ()):
            if assumed:
                assumed.clear()
            fn(node)
        return name not in SKIP_CHILDREN

    def _on_leave(self, node: cst.CSTNode) -> None:
        assumed = self._assumed
        for fn in self._leave.get(type(node).__name__, ()):
            if assumed:
                assumed.clear()
            fn(node)
        if self.regions.dead_depth or self.regions.cuda_depth or self.regions.uncompiled_depth:
            self.regions.untrack(node)
        if self.guards.active:
            self.guards.untrack(node)
