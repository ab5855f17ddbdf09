"""Plain data passed between the per-file pass and the cross-file pass.

Everything here is picklable and JSON-friendly: per-file summaries cross process
boundaries and may be cached; the cross-file pass only ever sees these records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# How much a finding matters to a torch_xla user, lowest first. "warning": a trigger on
# the device (shown by default); "info": real, but it rarely costs an XLA run anything
# (a value read from a tensor made on the CPU: no device sync on XLA, a graph break
# under torch.compile). `detective lint --min-severity info` shows both.
SEVERITIES = ("info", "warning")
DEFAULT_MIN_SEVERITY = "warning"


# Scope tag: every way through the function needs a CUDA device (detective.lint.cuda_only).
NEEDS_CUDA = "needs-cuda"
# Of those, the ones that need the CUDA device itself (torch.cuda.current_device(), .cuda()),
# not a kernel package that also takes CPU tensors: a class whose __init__ has it is never built
# on an XLA host.
NEEDS_CUDA_DEVICE = "needs-cuda-device"
# A FileSummary fact: a module the project's setup.py builds from C++/CUDA sources; its
# functions run on CPU or CUDA memory only, like a kernel package's.
EXTENSION_FACT = "extension:"
# "generated-from:<path>": the file's header says a tool wrote it from <path> (transformers'
# modular_*.py sources; see detective.lint.importable.generation_sources).
GENERATED_FROM_FACT = "generated-from:"
# What such a function needs, as findings say it ("... which needs CUDA or ...").
NEEDS = "needs CUDA or a CPU/CUDA-only kernel"


# Candidate.assumes entry "%k": the evidence took parameter k for a device tensor; the
# candidate stands when some call the project makes hands it one (lint/arg_facts.py).
HANDED_DEVICE = "%"


def only_through(name: str) -> str:
    """Why a finding reached only through ``name`` (tagged needs-cuda) is info."""
    return f"only reached through {name}, which {NEEDS}: never on an XLA host, but real under torch.compile"


# Scope tag: the function calls a compiler (torch.compile, torch._dynamo.optimize,
# torch_xla.compile, module.compile(backend=...)): lint/bindings.py.
COMPILES = "compiles"
# Scope tag: the method compiles its own module (super().compile(...), torch.compile(self)):
# a class whose ``compile`` override lacks it compiles only its parts (lint/entrances.py).
COMPILES_SELF = "compiles-self"
# Scope tag prefix: the method compiles a component of its module, "compiles-part:<attr>"
# (torch.compile(self.encoder.forward), self.encoder.compile(...)): lint/compiled_parts.py.
COMPILES_PART = "compiles-part:"
COMPILED = "passed to a compile call"  # compile_targets reason of a compiled function
UNKNOWN_RECEIVER = "*."  # compile_targets: "*.act" is method act of a local of unknown class
# Scope tag: the function calls a torch_xla API (xm.xla_device(), torch_xla.sync()): in a file
# that imports torch_xla only optionally, such scopes start the XLA code (lint/bindings.py).
USES_XLA = "uses-xla"
# Scope tag: the function guards values with torch._check* or branches with torch.cond, as
# code written for torch.export does (lint/bindings.py, read by lint/export_code.py).
EXPORT_CHECKS = "export-checks"
# Scope tag: the function drives an XLA program: syncs a step, feeds the device loader,
# spawns, compiles (api_names.XLA_PROGRAM_CALLS; lint/bindings.py, read by lint/programs.py).
DRIVES_XLA = "drives-xla"


def at_least(severity: str, minimum: str) -> bool:
    return SEVERITIES.index(severity) >= SEVERITIES.index(minimum)


@dataclass(frozen=True)
class Candidate:
    """A rule match in some scope, before we know whether the scope is traced."""

    code: str
    message: str
    line: int
    column: int  # 1-based, like Ruff
    scope: str  # qualname of the enclosing scope in its file
    end_line: int = 0
    # A behaviour-keeping fix as text edits (start, end, replacement) on the decoded
    # source: offsets travel through the process pool and the cache as plain data.
    fix: tuple[tuple[int, int, str], ...] = ()
    fix_title: str = ""
    # Call targets made before the match in the same scope; the rule's cross-file check
    # decides whether any of them matters (RC106: a helper that creates XLA tensors).
    after_calls: tuple[str, ...] = ()
    # What the finding is about, as shown in its message (`.item()`, `batch`,
    # `self.steps`): the end of a printed chain, and what the report joins on.
    subject: str = ""
    # Call targets whose result the evidence took for a tensor (`if is_padded(m):`): the
    # candidate stands when one of them returns a tensor (see Project.returns_tensor).
    assumes: tuple[str, ...] = ()
    severity: str = "warning"  # see SEVERITIES
    # Parameters (default None) whose `is not None` test guards the match: it never runs on
    # XLA when one of them is None there across calls (see detective.lint.xla_params).
    # entries "P" (P must not be None) and "P+" (P must be true); see detective.lint.arg_facts.
    guarded_by: tuple[str, ...] = ()
    # Parameters taken for tensors by guess alone that the match reads (`x if normalize
    # else y`): it stands unless the project passes them only Python values (arg_facts).
    rests_on: tuple[str, ...] = ()
    # Project-level conditions, decided across files (detective.lint.project_facts): the
    # backends ("xla", "compile") where the match costs anything (empty: every one), and
    # project facts of which one must hold for a warning ("optional-key:mask"). Failing
    # either makes the finding "info".
    costs_on: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()


@dataclass
class CallRef:
    """A call (or a compile target) as written, to be resolved across files.

    ``target`` is a dotted name already expanded through the file's imports
    (``pkg.utils.loss_fn``), or ``self.<method>`` / ``self.<attr>.<method>`` for
    calls on the instance, resolved later through the class hierarchy.
    """

    target: str
    # "" runs whenever the caller runs; "once": in one-time lazy set-up; "dead": never on
    # XLA or only on an error path (an except block that re-raises). Only "" calls make a
    # callee traced; a hook registered by a scope that only "dead" calls reach is no root.
    kind: str = ""
    shapes: str = ""  # self.x.m(...): its calls' argument shapes (see detective.lint.signatures)
    # A guard every such call is under ("self.mini_batches+", "mask"): the callee is not
    # traced through it where no call the project makes can satisfy it (arg_facts).
    guard: str = ""


@dataclass
class Scope:
    """A function, method or step-loop body: a node of the call graph."""

    qualname: str  # "Model.forward", "train.<loop:40>", "<module>"
    display: str  # "forward", "train [step loop]"
    line: int
    class_name: str | None = None  # enclosing class qualname, for self.* calls
    parent: str | None = None  # lexically enclosing scope
    root_reason: str | None = None  # why this scope is traced on its own
    decorators: list[str] = field(default_factory=list)  # resolved dotted names
    calls: list[CallRef] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # facts rules record ("creates-xla-tensors")
    # Return summary: "tensor" when some `return` gives a tensor; otherwise the calls whose
    # results it returns (`return helper(x)`), decided across files.
    returns: str = ""  # "tensor" | "python" (every return a plain value) | "" (unknown)
    return_calls: list[str] = field(default_factory=list)
    # Methods called on a receiver the file cannot name (`task.build_model(cfg)`), by name
    method_calls: list[str] = field(default_factory=list)
    # Imported functions called on every way through it (see detective.lint.cuda_only)
    must_calls: list[str] = field(default_factory=list)
    tensor_calls: list[str] = field(default_factory=list)  # those of them some call hands a tensor
    # `return x, n`: by position, "tensor", or "a|b" (the calls whose results it returns)
    return_items: list[str] = field(default_factory=list)
    none_params: dict[str, int] = field(default_factory=dict)  # default None -> place (-1 keyword-only)
    signature: str = ""  # a function's parameters (see detective.lint.signatures)
    # Defaults other than None by kind: "z" a false literal, "l" another literal, "o" anything
    # else (see detective.lint.arg_facts).
    defaults: dict[str, str] = field(default_factory=dict)


@dataclass
class ClassInfo:
    qualname: str
    line: int
    bases: list[str]  # resolved dotted names
    methods: list[str]
    attr_types: dict[str, str] = field(default_factory=dict)  # self.x = Foo() -> Foo
    # Class-level annotations (a config dataclass's fields): name -> annotated class
    field_types: dict[str, str] = field(default_factory=dict)
    # self.x = config.f.build(): x -> "ConfigClass|f" (config: ConfigClass); the class is
    # the one whose nested class f is annotated with, or any subclass (lint/hierarchy.py)
    built_attrs: dict[str, str] = field(default_factory=dict)
    tensor_attrs: list[str] = field(default_factory=list)  # buffers/parameters it registers


@dataclass
class FileSummary:
    path: str  # as given on the command line / discovered
    module: str  # dotted module name ("pkg.utils" or "train" for scripts)
    root: str  # directory the module name is relative to
    is_package: bool = False
    imports: dict[str, str] = field(default_factory=dict)  # module-level alias -> dotted
    scopes: dict[str, Scope] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    # Functions traced because they are passed by name: (scope, ref, why), e.g.
    # torch_xla.compile(step) -> COMPILED, m.register_forward_hook(fn). A method of a local
    # of unknown class (torch.compile(policy.act)) is UNKNOWN_RECEIVER + its name + ":policy".
    compile_targets: list[tuple[str, CallRef, str]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    suppressions: dict[int, frozenset[str] | None] = field(default_factory=dict)  # None = all
    error: str | None = None
    imports_xla: bool = False  # imports torch_xla (anywhere in the file)
    # Every torch_xla import sits under an `if`/`try` or in a function: the file supports
    # XLA among other backends (accelerate, transformers), so only its scopes that use
    # torch_xla (the `uses-xla` tag) and what they call are XLA code (Project.is_xla_code).
    xla_optional: bool = False
    module_imports: list[str] = field(default_factory=list)  # every imported dotted name
    star_imports: list[str] = field(default_factory=list)  # modules of `from m import *`, in order
    # Relative imports among the file's top-level statements, as "LEVEL:module" ("3:activations"
    # for `from ...activations import X`): a module the project lacks makes the file
    # unimportable (see detective.lint.importable).
    relative_imports: list[str] = field(default_factory=list)
    # Modules the file's top-level statements import, relative ones resolved ("a.b" and
    # "a.b.c" for `from a.b import c`; not under `try`/`if`): a package that needs CUDA
    # among them, directly or through a project module, makes the file CUDA-only.
    top_imports: list[str] = field(default_factory=list)
    # What this file tells about the whole project ("target:compile": it uses torch.compile;
    # "optional-key:mask": it removes key "mask" or sets it only for some data).
    facts: list[str] = field(default_factory=list)
    content_hash: str = ""  # of the raw bytes, so a fix never lands on a changed file
    # What calls here pass (see detective.lint.xla_params): scope -> keyword / dict key ->
    # kinds of value, and (scope, call target, kinds by place) for positional arguments.
    keyword_passes: dict[str, dict[str, str]] = field(default_factory=dict)
    positional_passes: list[tuple[str, str, str]] = field(default_factory=list)
    forwards: list[tuple[str, str]] = field(default_factory=list)  # (scope, P) passing its P on as P=P
    # What `x.A = v` assigns, by attribute name; `self.A = P` from a parameter defaulting to
    # None/false (scope, A, P); set_* methods this file calls (see detective.lint.arg_facts).
    attr_kinds: dict[str, str] = field(default_factory=dict)
    attr_params: list[tuple[str, str, str]] = field(default_factory=list)
    setters_called: list[str] = field(default_factory=list)
    # Where classes may be entered (see detective.lint.entrances): names used as values
    # (a registry, an argument, a base: entrances the call graph cannot see), and
    # (scope, call target) pairs whose every construction there is moved straight to CUDA,
    # and those with a construction put on a device the code names by a value.
    value_refs: list[str] = field(default_factory=list)
    cuda_built: list[tuple[str, str]] = field(default_factory=list)
    device_built: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        data = asdict(self)
        data["suppressions"] = {
            str(k): (sorted(v) if v is not None else None) for k, v in self.suppressions.items()
        }
        return data

    @classmethod
    def from_json(cls, data: dict) -> "FileSummary":
        summary = cls(**{k: v for k, v in data.items() if k not in {"scopes", "classes"}})
        summary.scopes = {
            k: Scope(**{**v, "calls": [CallRef(**c) for c in v["calls"]]})
            for k, v in data["scopes"].items()
        }
        summary.classes = {k: ClassInfo(**v) for k, v in data["classes"].items()}
        summary.compile_targets = [(s, CallRef(**r), why) for s, r, why in data["compile_targets"]]
        summary.positional_passes = [tuple(p) for p in data.get("positional_passes", ())]
        summary.forwards = [tuple(p) for p in data.get("forwards", ())]
        summary.attr_params = [tuple(p) for p in data.get("attr_params", ())]
        summary.cuda_built = [tuple(p) for p in data.get("cuda_built", ())]
        summary.device_built = [tuple(p) for p in data.get("device_built", ())]
        summary.candidates = [
            Candidate(**{**c, "fix": tuple(tuple(e) for e in c.get("fix", ())),
                         "after_calls": tuple(c.get("after_calls", ())),
                         "assumes": tuple(c.get("assumes", ())),
                         "guarded_by": tuple(c.get("guarded_by", ())),
                         "rests_on": tuple(c.get("rests_on", ())),
                         "costs_on": tuple(c.get("costs_on", ())), "needs": tuple(c.get("needs", ()))})
            for c in data["candidates"]
        ]
        summary.suppressions = {
            int(k): (frozenset(v) if v is not None else None)
            for k, v in data["suppressions"].items()
        }
        return summary


@dataclass(frozen=True)
class ChainLink:
    """One traced scope on the way from a region's root to a finding."""

    path: str
    function: str  # the scope as shown ("Model.forward", "train [step loop]")
    line: int

    def __str__(self) -> str:
        return f"{self.function} ({self.path}:{self.line})"


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    code: str
    name: str
    message: str
    chain: tuple[ChainLink, ...] = ()
    region: str = ""  # why the chain's root is traced ("nn.Module.forward", ...)
    fix: tuple[tuple[int, int, str], ...] = field(default=(), compare=False)
    fix_title: str = field(default="", compare=False)
    subject: str = ""  # what the finding is about (see Candidate.subject)
    severity: str = "warning"  # see SEVERITIES
    # The backends where it costs anything ("xla", "compile"; see Candidate.costs_on).
    costs_on: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "chain": [str(link) for link in self.chain],
            "region": self.region,
            "severity": self.severity,
            "costs_on": list(self.costs_on),
        }
