"""Roots entered only from eager code: nn.Modules and autograd Functions whose every
entrance in the project is in a scope that is never compiled or traced where the project
runs it.

A module's ``forward`` is a root because the class is an nn.Module, wherever it is built.
Its *entrances* are the calls that build it (``Tacotron2(hparams)``; ``cls(...)`` in one of
its classmethods makes that classmethod's callers entrances too); an autograd Function's
``forward``/``backward`` are entered only by ``Fn.apply(...)``. A class is *eager-only*
when it has at least one entrance and every entrance is in:

- a scope that needs CUDA (:mod:`detective.lint.cuda_only`), or a construction moved
  straight to CUDA (``Decoder(path).cuda()``, ``.to("cuda")``, through ``.eval()``-like
  calls): eager on a GPU, never on an XLA host. Not when the project targets torch.compile
  and the entrance's file uses it (the instance may be compiled on the GPU);
- a scope excluded from compilation (``@torch.compiler.disable``, ``@torch._dynamo.disable``
  or a project function returning one of those, such as DeepSpeed's ``compiler.disable``;
  not ``recursive=False``), in a project that does not target torch_xla: the lazy tensor
  traces everything, ``disable`` changes nothing there;
- an instance method of a class that is itself eager-only (Tacotron2 builds its Encoder);
- a scope that runs only in the project's programs that use neither torch_xla nor a compiler
  (fairseq's ``SpeechDLMTask.build_generator``, called only by the generation CLIs; see
  :mod:`detective.lint.programs`), in a whole-project run.

A module class whose own ``__init__`` needs a CUDA device on every way through it
(``torch.cuda.current_device()``, ``.cuda()``, or building such a class) has no instance on an
XLA host: it is eager-only whatever its entrances, and its methods never run there, also
when a parent's forward calls them (gpt-neox's megablocks MLP).

In a project that does not target torch_xla, a module class whose ``compile`` override (its
own or a project base's) compiles its parts and never the module itself (no
``super().compile(...)``, no ``torch.compile(self)``) is eager too: DeepSpeed's
``PipelineModule.compile`` compiles each layer, so the pipeline's ``forward`` runs eagerly
around them. What it builds is not made eager by it (the layers are what is compiled). The
same holds for models compiled block by block or method by method
(:mod:`detective.lint.compiled_parts`).

A class defined in a test file and built or named in no other file is eager-only when
neither that file nor any scope it reaches through calls imports torch_xla or calls a
compiler (the ``compiles`` scope tag): the test runs it eagerly. In a test that does use
torch_xla, a module class defined in a test file is eager-only when every construction of it
is in a test file and none puts it on a device the code names by a value (``M().to(device)``,
``M(device=d)``, ``m = M()`` then ``m.to(d)`` in the same block; a ``"cpu"``/``"cuda"``
literal or a dtype is no such device), nor one of its subclasses, and no scope the test
reaches compiles: the XLA side of such a test is a library model, this one its CPU
reference (neuronx-distributed's ``CPUMoE`` golden models). Limits: an instance handed to a
wrapper that moves it (``FSDP(M())``, a trainer given ``device=``) is not followed; a
trainer that may compile keeps the class a root through the ``compiles`` reach.

Entrances the call graph cannot see make a class *unknown*, never eager-only: the class
named anywhere as a value (a registry, ``getattr`` target, an argument, a
``Fn.apply`` taken as a value, a member such as ``Model.Config(...)``), a decorated class
(``@register_model``), a class with a nested class (a config whose ``build()`` makes it), a
class a package ``__init__`` re-exports by name, a ``cls(...)`` factory nobody in the project
calls. A base class of project classes is eager-only only when they all are too (their
instances enter its ``forward``).
Only CamelCase and ``_Private`` names are followed as values (PEP 8 class names). A
module class with no entrance at all is library code users build: a normal root. An
autograd Function with none (nothing in the project applies, names or subclasses it) is
eager-only in a whole-project run: it runs only from code outside the project.

A finding is reached only through such roots when every traced path to its scope starts
at an eager-only root or passes through a scope excluded from compilation (the same
reachability :meth:`~detective.lint.cuda_reach.CudaReach.cuda_only_via` uses); it is ``info``,
with the scope that decides it named. Facts are recorded in the shared walk
(:class:`~detective.lint.entrance_facts.EntranceFacts`); the decision is made across
files (:class:`EagerRoots`).

Limits: an instance built plainly and moved later (``m = M(); m.cuda()``) counts only when
its scope needs CUDA; a plain ``device = "cuda"`` is no evidence; a helper that builds a
class and is called only from eager code is not followed (its callers are not entrances).
"""

from __future__ import annotations

from detective.lint.compiled_parts import (block_compiled_classes, method_compiled_classes, override_compiled_classes,
                                          part_compiled_classes)
from detective.lint.eager_in_tests import EagerInTests
from detective.lint.model import NEEDS, only_through
from detective.lint.observers import observer_classes
from detective.lint.program_args import ProgramGuards
from detective.lint.programs import Programs
from detective.lint.project_facts import COMPILE_FACT

Node = tuple[str, str]  # (path, qualname)

DISABLES = frozenset({"torch.compiler.disable", "torch._dynamo.disable", "torch._dynamo.eval_frame.disable"})
COMPILE_DISABLED = "compile-disabled"  # scope tag: decorated with a torch disable
DISABLES_COMPILE = "disables-compile"  # scope tag: returns torch.compiler.disable(f): a wrapper
NEEDS_DEVICE = "needs a CUDA device (torch.cuda calls or .cuda(), here or in what it builds)"
BUILDS_CLS = "builds-cls"  # scope tag: calls cls(...) (a factory classmethod)


class EagerRoots:
    """Across files: which classes are eager-only (and why), and which traced scopes are
    reached only through their roots or through scopes excluded from compilation."""

    def __init__(self, project, targets: tuple[str, ...], whole: bool = True, arg_facts=None):
        """``whole``: the summaries are the whole project (who calls a builder is in view);
        ``arg_facts``: makes the project's ArgFacts, to find calls its programs never make."""
        self.project = project
        self.targets = targets
        self.whole = whole
        self.programs: Programs | None = None
        self.cuda_init: dict[Node, Node] = {}  # module class -> its __init__, which needs CUDA
        self._moved_calls: set[tuple[Node, Node]] | None = None  # (caller, callee) whose result is moved
        graph, roots = project.graph()
        self.by_path = {}
        for summary in project.files.values():
            stem = summary.path[:-3] if summary.path.endswith(".py") else summary.path
            stem = stem[:-len("/__init__")] if stem.endswith("/__init__") else stem
            self.by_path[stem.lstrip("./").replace("/", ".")] = summary
        self.disabled = self._disabled(graph) if "xla" not in targets else {}
        self.cuda = project.needs_cuda() & set(graph)
        self.eager = self._eager_classes(graph)  # class -> why
        if "xla" not in targets:  # the lazy tensor traces a forward whatever compile() does
            self.eager.update(override_compiled_classes(project, self.eager))  # after the fixpoint: what they build is not eager
            for cls, why in [*block_compiled_classes(project).items(), *method_compiled_classes(project).items(),
                             *part_compiled_classes(project).items(), *observer_classes(project).items()]:
                self.eager.setdefault(cls, why)
        self.eager_roots = {root: cls for root, cls in project.class_roots.items() if cls in self.eager}
        # the methods of a class built only on a GPU (called from a parent's forward, too)
        self.cuda_methods = {(cls[0], qualname): cls for cls in self.cuda_init
                             for qualname, scope in project.files[cls[0]].scopes.items()
                             if scope.class_name == cls[1] and qualname != cls[1]}
        avoid = self.cuda | set(self.disabled) | set(self.cuda_methods)
        self.guards = ProgramGuards(project, arg_facts(), self.programs.reached, self.programs.names_called) \
            if self.programs is not None and arg_facts is not None else None
        self.dead_calls = self.guards.dead_edges() if self.guards is not None else {}
        if self.eager_roots or self.disabled or self.dead_calls or self.cuda_methods:
            self.free = graph.reachable([r for r in roots if r not in self.eager_roots],
                                        skip=project._untraced | set(self.dead_calls), avoid=avoid)
        else:
            self.free = None

    def _scope(self, node: Node):
        return self.project.files[node[0]].scopes[node[1]]

    def _class(self, dotted: str, origin) -> Node | None:
        """A class a dotted name means: through the project's module names, else through
        file paths (``examples.tts.tacotron2.model.Tacotron2`` imported from the repository
        root while the file's module name starts below a directory without ``__init__``)."""
        found = self.project.resolve_class(dotted, origin)
        if found is not None or dotted.startswith("#"):
            return found
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 1, -1):
            summary = self.by_path.get(".".join(parts[:cut]))
            if summary is not None:
                rest = ".".join(parts[cut:])
                if rest in summary.classes:
                    return (summary.path, rest)
                if parts[cut] in summary.imports:
                    return self.project.resolve_class(
                        ".".join([summary.imports[parts[cut]], *parts[cut + 1:]]), summary)
                return None
        return None

    def _name(self, node: Node) -> str:
        return self._scope(node).display

    # ------------------------------------------------------------------ compile-disabled scopes
    def _disabled(self, graph) -> dict[Node, str]:
        """Scopes torch.compile never traces into: node -> the decorator that says so."""
        project = self.project
        found: dict[Node, str] = {}
        for node in graph:
            scope = self._scope(node)
            if COMPILE_DISABLED in scope.tags:
                found[node] = next((d for d in scope.decorators if d in DISABLES), "torch.compiler.disable")
                continue
            for decorator in scope.decorators:
                if not decorator or decorator.startswith(("torch.", "builtins.")) or decorator in (
                        "staticmethod", "classmethod", "property"):
                    continue
                wrapper = project.resolve(decorator, project.files[node[0]], scope.class_name)
                if wrapper is not None and DISABLES_COMPILE in self._scope(wrapper).tags:
                    found[node] = decorator
                    break
        return found

    # ------------------------------------------------------------------ entrances
    def _eager_classes(self, graph) -> dict[Node, str]:
        project = self.project
        unknown: set[Node] = set()  # built where the call graph cannot see
        subclassed: dict[Node, list[Node]] = {}  # base -> its project subclasses
        entrances: dict[Node, list[tuple[Node, bool]]] = {}  # class -> (scope, moved to CUDA there)
        factories: dict[Node, Node] = {}  # classmethod calling cls(...) -> its class
        compile_files = {s.path for s in project.files.values() if COMPILE_FACT in s.facts} \
            if "compile" in self.targets else set()
        self.compile_files = compile_files
        self._callers: dict[Node, set[str]] | None = None
        named_in: dict[Node, set[str]] = {}  # class -> files that build it or name it as a value
        on_device: set[Node] = set()  # classes some construction puts on a device named by a value
        for summary in project.files.values():
            for ref in summary.value_refs:
                parts = ref.split(".")
                for cut in range(len(parts), 0, -1):  # Fn.apply, Model.Config: Fn and Model too
                    cls = self._class(".".join(parts[:cut]), summary)
                    if cls is not None:
                        unknown.add(cls)
                        named_in.setdefault(cls, set()).add(summary.path)
            for qualname, info in summary.classes.items():
                if "." in qualname:  # a nested class (Model.Config) may build its owner
                    unknown.add((summary.path, qualname.rsplit(".", 1)[0]))
                for base in info.bases:  # a subclass instance enters the base's forward
                    cls = self._class(base, summary)
                    if cls is not None:
                        subclassed.setdefault(cls, []).append((summary.path, qualname))
                        named_in.setdefault(cls, set()).add(summary.path)
            if summary.is_package:  # from .model import Tacotron2 in __init__: users build it
                for dotted in summary.imports.values():
                    cls = self._class(dotted, summary)
                    if cls is not None:
                        unknown.add(cls)
            cuda_built = {(scope, target) for scope, target in summary.cuda_built}
            device_built = {(scope, target) for scope, target in summary.device_built}
            for qualname, scope in summary.scopes.items():
                node = (summary.path, qualname)
                if BUILDS_CLS in scope.tags and scope.class_name in summary.classes:
                    factories[node] = (summary.path, scope.class_name)
                for call in scope.calls:
                    target = call.target
                    if target.endswith(".apply"):
                        cls = self._class(target[:-len(".apply")], summary)
                        if cls is not None and project.class_kind(cls) != "function":
                            cls = None
                    else:
                        cls = self._class(target, summary)
                    if cls is not None:
                        entrances.setdefault(cls, []).append((node, (qualname, target) in cuda_built))
                        named_in.setdefault(cls, set()).add(summary.path)
                        if (qualname, target) in device_built:
                            on_device.add(cls)
        if factories:
            callers: dict[Node, list[Node]] = {}
            for caller, callees in graph.succ.items():
                for callee in callees:
                    if callee in factories and self._scope(callee).parent != caller[1]:
                        callers.setdefault(callee, []).append(caller)
            for factory, cls in factories.items():
                if not callers.get(factory):
                    unknown.add(cls)  # a factory nobody here calls: its callers are elsewhere
                for caller in callers.get(factory, ()):
                    if caller[0] != cls[0] or self._scope(caller).class_name != cls[1]:
                        entrances.setdefault(cls, []).append((caller, False))
        if self.whole:
            built_in: dict[Node, set[Node]] = {}
            for cls, places in entrances.items():
                for scope, _moved in places:
                    built_in.setdefault(scope, set()).add(cls)
            programs = Programs(project, built_in, unknown, set(entrances))
            self.programs = programs if programs.active else None
        eager: dict[Node, tuple[tuple[str, ...], str]] = {}  # class -> (built by, base reason)
        self.reasons: dict[Node, str] = {}
        in_tests = EagerInTests(project, graph)
        class_roots = set(project.class_roots.values())
        for cls in in_tests.test_only(class_roots, named_in):
            eager[cls] = (), f"in {cls[0]}, a test that neither compiles nor uses torch_xla"
            self.reasons[cls] = (f"{cls[1]} is defined and used only in {cls[0]}, a test that neither "
                                 "compiles nor uses torch_xla: it runs eagerly")
        for cls in in_tests.cpu_models(class_roots - set(eager) - unknown, named_in, on_device, subclassed):
            eager[cls] = (), f"in {cls[0]}, a test"
            self.reasons[cls] = (f"{cls[1]} is a model defined in {cls[0]} and used only by tests, which never "
                                 "put it on a device nor compile, and no step loop reaches its forward: "
                                 "such a model runs eagerly on the CPU, usually as a reference")
        cuda_device = project.needs_cuda_device()
        for cls in sorted(class_roots - set(eager)):
            # Every instance runs the class's __init__: one that needs CUDA (weights made on
            # torch.cuda.current_device(), or a component whose __init__ does) is never built
            # on an XLA host, so none of its methods runs there.
            init = project.find_method(cls, "__init__") if project.class_kind(cls) == "module" else None
            if init is not None and init in cuda_device and self._not_compiled(init):
                self.cuda_init[cls] = init
                eager[cls] = (), f"on a GPU: {self._name(init)} {NEEDS_DEVICE}, so no instance exists on an XLA host"
                self.reasons[cls] = f"{cls[1]} is built only {eager[cls][1]}"
        if self.whole:  # a Function no code applies: its forward runs only from code elsewhere
            for cls in sorted(set(project.class_roots.values())):
                if cls not in entrances and cls not in unknown and cls not in subclassed \
                        and cls not in eager and project.class_kind(cls) == "function":
                    eager[cls] = (), "nowhere"
                    self.reasons[cls] = (f"{cls[1]} is applied nowhere in the project: an autograd "
                                         "Function for code outside it")
        changed = True
        while changed:  # least fixpoint: a cycle of classes building each other stays unknown
            changed = False
            for cls, places in entrances.items():
                if cls in eager or cls in unknown:
                    continue
                subclasses = subclassed.get(cls, [])  # their instances enter its forward too
                if not all(sub in eager for sub in subclasses):
                    continue
                reasons = [self._eager_entrance(scope, moved, eager) for scope, moved in places]
                if all(reasons):
                    eager[cls] = owners, base = reasons[0]
                    verb = "applied" if project.class_kind(cls) == "function" else "built"
                    if owners:
                        why = f"{cls[1]} is built only by {' ← '.join(owners)}; {owners[-1]} is built only {base}"
                    else:
                        why = f"{cls[1]} is {verb} only {base}"
                    more = len(places) - 1
                    self.reasons[cls] = why + (f"; {more} more place{'s' * (more > 1)} like it" if more else "") + (
                        f"; so {'are' if len(subclasses) > 1 else 'is'} its subclass{'es' * (len(subclasses) > 1)} "
                        + ", ".join(sorted(sub[1] for sub in subclasses)) if subclasses else "")
                    changed = True
        return self.reasons

    def _eager_entrance(self, node: Node, moved: bool, eager: dict) -> tuple[tuple[str, ...], str] | None:
        """Why an entrance is eager, as (classes it is built by, innermost first; the base reason)."""
        scope = self._scope(node)
        where = scope.display
        cuda_ok = self._not_compiled(node)
        if moved and cuda_ok:
            return (), f"in {where}, which moves it to CUDA: eager on a GPU, not on an XLA host"
        movers = self._result_movers(node)
        if movers and cuda_ok:
            return (), (f"in {where}, whose result {', '.join(movers)} move{'s' * (len(movers) == 1)} to CUDA "
                        "or the CPU: eager, not on an XLA host")
        if node in self.cuda and cuda_ok:
            return (), f"in {where}, which {NEEDS}: eager, not on an XLA host"
        if node in self.disabled:
            return (), (f"in {where}, which @{self.disabled[node]} excludes from torch.compile; "
                        "this project does not target torch_xla")
        owner = (node[0], scope.class_name) if scope.class_name else None
        if owner in eager and not any(d in ("staticmethod", "classmethod") for d in scope.decorators):
            owners, base = eager[owner]
            return (owner[1], *owners), base
        programs = self.programs
        if programs is not None and programs.outside(node):
            return (), (f"in {where}, which runs only in this project's programs that use neither "
                        "torch_xla nor a compiler")
        return None

    def _result_movers(self, node: Node, seen: frozenset = frozenset()) -> list[str]:
        """The callers that move what module-level function ``node`` returns to CUDA or the CPU
        (``vocoder = get_vocoder(...)``, then ``vocoder.cuda() if ... else vocoder.cpu()``),
        directly or by returning it to callers that do; empty unless every caller does.
        Whole-project runs only (the program pass must see every caller)."""
        programs, scope = self.programs, self._scope(node)
        if programs is None or scope.class_name is not None or scope.parent != "<module>" or node in seen:
            return []
        if self._moved_calls is None:
            self._moved_calls = set()
            for summary in self.project.files.values():
                for qualname, target in summary.cuda_built:
                    owner = summary.scopes.get(qualname)
                    callee = self.project.resolve(target, summary, owner.class_name if owner else None)
                    if callee is not None:
                        self._moved_calls.add(((summary.path, qualname), callee))
        callers = programs.callers(node)
        movers = []
        for caller in callers:
            if (caller, node) in self._moved_calls:
                movers.append(self._name(caller))
                continue
            summary = self.project.files[caller[0]]
            owner = summary.scopes[caller[1]]
            if not any(self.project.resolve(t, summary, owner.class_name) == node for t in owner.return_calls):
                return []
            further = self._result_movers(caller, seen | {node})
            if not further:
                return []
            movers.extend(further)
        return list(dict.fromkeys(movers))

    def _not_compiled(self, node: Node) -> bool:
        """Neither the file of an entrance on CUDA, nor those of its callers, nor those of what
        it calls (``apply_compile(model)``) use torch.compile (in a project that targets it):
        the instance cannot be compiled on the GPU there."""
        if not self.compile_files:
            return True
        if node[0] in self.compile_files:
            return False
        graph = self.project.graph()[0]
        if self._callers is None:
            self._callers = {}
            for caller, callees in graph.succ.items():
                for callee in callees:
                    self._callers.setdefault(callee, set()).add(caller[0])
        if self._callers.get(node, set()) & self.compile_files:
            return False
        return not any(n[0] in self.compile_files for n in graph.descendants([node]))

    # ------------------------------------------------------------------ findings
    def via(self, path: list[Node]) -> str | None:
        """For a traced chain (root ... scope): why every traced path to the scope is eager,
        or None when some root that is not eager-only reaches it outside excluded scopes."""
        if self.free is None or path[-1] in self.free:
            return None
        cls = self.eager_roots.get(path[0])
        if cls is not None:
            return self.eager[cls]
        for node in path:
            if node in self.disabled:
                return (f"only reached through {self._name(node)}, which @{self.disabled[node]} excludes "
                        "from torch.compile; this project does not target torch_xla")
            if node in self.cuda:
                return only_through(self._name(node))
            if node in self.cuda_methods:
                init = self.cuda_init[self.cuda_methods[node]]
                return (f"only reached through {self._name(node)}, whose class is built only on a GPU "
                        f"({self._name(init)} {NEEDS_DEVICE}): never on an XLA host, but real under torch.compile")
        for caller, callee in zip(path, path[1:]):
            guard = self.dead_calls.get((caller, callee))
            if guard is not None:
                return f"{self._name(caller)} calls {self._name(callee)} only when {self.guards.why(guard)}"
        return None
