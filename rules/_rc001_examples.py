"""RC001's VALID/INVALID example programs (run by tests/lint/test_rule_examples.py), kept
apart from the rule's logic in :mod:`detective.rules.rc001_host_sync` for length."""

from detective.lint.config import Config
from detective.lint.rule import Invalid, Valid

CLIP = """
import torch

class Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.scale = x.abs().max().item()  # autograd.Function.forward is traced
        return x / ctx.scale
"""

SPLIT_COPIES = """
import torch

class Dispatch(torch.nn.Module):
    def forward(self, counts):
        input_splits = counts.sum(dim=1).to(torch.device("cpu"), non_blocking=True)
        output_splits = counts.sum(dim=0).to(torch.device("cpu"), non_blocking=False)
        return input_splits.tolist(), output_splits.tolist()

block = torch.compile(Dispatch())
"""

LORA_LAYER = """
import torch

class LoraLinear(torch.nn.Module):
    @property
    def merged(self):
        return bool(self.merged_adapters)

    def unmerge(self):
        while self.merged_adapters:
            name = self.merged_adapters.pop()
            weight = self.base.weight.data - self.delta(name)
            self.base.weight.data = weight.to("cpu").to(self.base.weight.device)

    def forward(self, x):
        if self.disable_adapters:
            if self.merged:
                self.unmerge()      # once, on the first call after a merge: not every step
            return self.base(x)
        return self.base(x) + self.lora(x)
"""

BLOCKWISE = """
import torch
from torch import nn

def positions(grid):
    return grid.tolist()

class Block(nn.Module):
    def forward(self, x):
        return x * float(x.sum())

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleDict({str(i): Block() for i in range(n)})

    def forward(self, x, grid):
        sizes = positions(grid)
        for layer in self.layers.values():
            x = layer(x)
        return x[: sizes[0]]

def apply_compile(model):
    for _, block in model.layers.named_children():
        block.compile(fullgraph=True)
"""

# LeRobot's rollout compiles a policy's inference method on whatever policy it built
# (``policy.predict_action_chunk = torch.compile(...)``), never the policy: the training
# forward and its loss logging run eagerly.
METHODWISE = """
import torch
from torch import nn

class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 4)

    def forward(self, batch):
        loss = self.net(batch).sum()
        return loss, {"loss": loss.item()}

    def predict_action_chunk(self, obs):
        return self.net(obs)

def rollout(policy, obs):
    policy.predict_action_chunk = torch.compile(policy.predict_action_chunk)
    return policy.predict_action_chunk(obs)
"""

# A whole epoch compiled with torch_xla.compile around a loop over MpDeviceLoader, leaving
# early by a break ({leave}): with or without a sync before it.
PARTWISE = """
import torch
import torch.nn as nn

class Base(nn.Module):
    def __init__(self, encoder, compile_encoder=False):
        super().__init__()
        self.encoder = encoder
        if compile_encoder:
            self.encoder.forward = torch.compile(self.encoder.forward)

class Train(Base):
    def forward(self, x, ids):
        for i in ids.tolist():
            x = x + i
        return self.encoder(x)
"""

COMPILED_EPOCH = """
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl

def train(model, optimizer, train_loader, steps):
    def train_loop_fn(model, optimizer, loader):
        running = torch.zeros(1, device=xm.xla_device())
        for i, (data, target) in enumerate(loader):
            loss = model(data).sum()
            loss.backward()
            optimizer.step()
            running += loss.detach()
            if i >= steps:
{leave}
        return running.cpu().item()

    train_loop_fn = torch_xla.compile(train_loop_fn)
    device_loader = pl.MpDeviceLoader(train_loader, xm.xla_device())
    return train_loop_fn(model, optimizer, device_loader)
"""


SPMD_GMM = """
import torch
import torch_xla.distributed.spmd as xs

class Gmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mesh = xs.get_global_mesh()
        device_ids = mesh.get_logical_mesh()              # torch_xla's Mesh: a NumPy array
        device_ids = device_ids.reshape(-1, device_ids.shape[-1])
        ctx.device_ids = device_ids
        return reduce_scatter(x, device_ids.shape[-1], device_ids.tolist())

    @staticmethod
    def backward(ctx, grad):
        device_ids = ctx.device_ids.T
        return reduce_scatter(grad, device_ids.shape[-1], device_ids.tolist())

class Experts(torch.nn.Module):
    def forward(self, x):
        return Gmm.apply(x)
"""

VALID = [
    # A membership test whose side reads the container by that same key: a mapping
    # (detectron2's FPN: `bottom_up_features = self.bottom_up(x)` is a dict of features).
    Valid(
        """
import torch

class FPN(torch.nn.Module):
    def forward(self, x):
        feats = self.bottom_up(x)
        if self.top_block.in_feature in feats:
            top = feats[self.top_block.in_feature]
        else:
            top = x
        extra = feats[self.name] if self.name in feats else None
        return top, extra
"""
    ),
    # torchprime's Mixtral GMM: replica groups from the SPMD mesh, saved on ctx for backward.
    Valid(SPMD_GMM),
    # SAM2's training model draws frames with a NumPy generator kept on self: no tensor.
    Valid("""
import numpy as np
import torch

class Sampler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rng = np.random.default_rng(seed=42)

    def forward(self, x, start: int, n: int):
        frames = [start] + self.rng.choice(range(start + 1, n), 2, replace=False).tolist()
        return x[:, frames]
"""),
    # A NumPy value made from the host copy: reading it is NumPy's (and the copy costs only on
    # torch_xla; this project only compiles).
    Valid(SPLIT_COPIES.replace("return input_splits.tolist(), output_splits.tolist()",
                               "host = output_splits.numpy()\n        return int(host[0]), host.tolist()")),
    # A decorator factory runs once, where the def is (transformers' @auto_docstring).
    Valid("""
import torch

def documented(checkpoint=None):
    def decorate(fn):
        fn.__doc__ = f"example output: {torch.ones(2, device=\"xla\").sum().item()}"
        return fn
    return decorate

class Head(torch.nn.Module):
    @documented(checkpoint="org/model")
    def forward(self, x):
        return x * 2
"""),
    # A lazy message, built only when the check fails (transformers' idefics3).
    Valid("""
import torch

class Merge(torch.nn.Module):
    def forward(self, embeds, image_mask, features):
        torch._check(
            image_mask.sum() * embeds.shape[-1] == features.numel(),
            lambda: f"tokens: {image_mask.sum()}, features: {features.shape[0]}",
        )
        return embeds.masked_scatter(image_mask.unsqueeze(-1), features)
"""),
    # The whole epoch is compiled, but MpDeviceLoader syncs before it stops and the break
    # follows a sync: the read after the loop is materialised (aws-neuron-samples' BERT).
    Valid(COMPILED_EPOCH.format(leave="                xm.mark_step()\n                break")),
    Valid("""
import torch
import torch_xla.core.xla_model as xm

def run(params, optimizer, steps):
    sharded = hasattr(optimizer, "shard")   # set once, before the loop
    for i in range(steps):
        optimizer.step()
        if sharded:
            xm.mark_step()
        print(params[0].detach().cpu().norm())
"""),
    # A sync under a flag that is the same every iteration: the read after it is either
    # after the step's sync or, with the flag off, the loop's only sync.
    Valid("""
import torch
import torch_xla.core.xla_model as xm

def run(params, optimizer, use_zero1, steps):
    res = []
    for i in range(steps):
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer.step()
        if use_zero1:
            xm.mark_step()
        norm = sum(p.detach().cpu().norm() for p in params)   # after the step's sync when it runs
        res.append(norm)
    return res
"""),
    # A hook whose handle the registering function removes runs only while that function
    # runs: one calibration pass, not every step.
    Valid("""
import torch

@torch.no_grad()
def calibrate(model, run_model):
    def hook(module, inputs, output):
        if torch.isnan(output).any():
            raise ValueError("invalid input")
        module.scale = output.abs().max().item()

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_hook(hook))
    try:
        run_model()
    finally:
        for handle in handles:
            handle.remove()
"""),
    Valid(
        """
import torch
import torch_xla

for step in range(10):
    loss = (torch.ones(3, device=torch_xla.device()) * step).sum()
    torch_xla.sync()
    print(loss.item())  # after the sync: the value is already computed
"""
    ),
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        n = int(x.shape[0])  # shapes are static metadata, not a value read
        return x.view(n, -1)

def report(t):
    return t.item()  # never called from a traced region
"""
    ),
    Valid(
        """
import numpy as np
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        scale = np.ones(3).sum().item()  # NumPy: no device read
        return x * scale
""",
    ),
    Valid(
        """
import torch_xla
import torch_xla.core.xla_model as xm

def train(model, loader):
    for batch in loader:
        loss = model(batch)
        xm.add_step_closure(lambda: print(loss.item()))  # runs after the step
        torch_xla.sync()
        print(loss.item())  # right after the sync: already materialised
""",
    ),
    Valid(
        """
import torch
import torch_xla.core.xla_model as xm

class Net(torch.nn.Module):
    def forward(self, x):
        if not xm.is_xla_tensor(x):
            print(x.sum().item())  # never runs on XLA
        if x.device.type == "xla":
            return x
        return x.tolist()  # after the XLA early return
""",
    ),
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 2, f"bad input {x.tolist()}"  # only when failing
        if x.numel() == 0:
            raise ValueError(f"empty: {x.sum().item()}")
        return x
""",
    ),
    Valid(
        """
import torch

class Group(torch.nn.Module):
    def forward(self, x):
        uid = torch.zeros([8], dtype=torch.int8).cpu()  # a CPU tensor's .cpu() copies nothing
        return x + uid.sum()
""",
    ),
    Valid(
        """
import torch

class Sampler(torch.nn.Module):
    def forward(self, x):
        idx = torch.randint(0, 10, (4,))  # made on the CPU: its read is "info", not shown by default
        return x[:, :4] * idx.max().item()
""",
    ),
    Valid(LORA_LAYER),
    # A dataclass field annotated as a Python int stays one, whatever a loaded state holds.
    Valid(
        """
import torch
from dataclasses import dataclass

@dataclass
class Trainer:
    global_step: int = 0

    def load_state_dict(self, state_dict):
        self.global_step = state_dict["global_step"]

    def trace_hook(self, module, args, output):
        print(f"step{self.global_step}")

    def fit(self, model):
        model.register_forward_hook(self.trace_hook)
"""
    ),
]

# A method of the class whose return follows its argument keeps a host copy on the host.
HOST_METHOD_RESULT = """
import torch


class Sampler(torch.nn.Module):
    @staticmethod
    def _scale(row, t):
        return row / t

    def forward(self, logits, temps):
        host = logits.cpu().to(torch.float32)
        row = self._scale(host[0].clone(), 2.0)    # a method of this class whose return follows its input
        total = torch.softmax(row, dim=-1).sum()
        a = float(total.item())                     # info: computed on the host copy
        dev = self._scale(logits[0], 2.0)
        b = dev.sum().item()                        # a warning: on the device
        return a, b
"""

EXPORT_EMBED = """
import torch

def build(model):
    return torch.compile(model)

class TiledEmbedding(torch.nn.Module):
    def forward(self, x, aspect_ratio):
        torch._check(x.size(1) <= self.max_tiles)
        return self._embed(x, aspect_ratio)

    def _embed(self, x, aspect_ratio):
        for h, w in aspect_ratio:
            n = h.item() * w.item()
            x = x + self.embedding[:n]
        return x
"""

INVALID = [
    # The same ctx attribute holding a tensor (split sizes counted on the device): a host read.
    Invalid(SPMD_GMM.replace("ctx.device_ids = device_ids", "ctx.device_ids = torch.bincount(x.flatten())"),
            line=17),
    # A quantization observer's forward runs in calibration; convert removes it before the model
    # is compiled (torchao's SmoothQuant). Info in a project that does not target torch_xla.
    Invalid("""
import torch

class SmoothQuantObserver(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inputs = []

    def forward(self, x):
        self.inputs.append(x.to("cpu"))
        return x

def quantize(model):
    return torch.compile(model)
""", line=10, severity="info"),
    # Called from a fake-quantize module's forward (quantization-aware training), it runs at
    # every compiled step: a warning.
    Invalid("""
import torch

class MinMaxObserver(torch.nn.Module):
    def forward(self, x):
        self.min_val = min(self.min_val, x.min().item())
        return x

class FakeQuantize(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.observer = MinMaxObserver()

    def forward(self, x):
        self.observer(x)
        return torch.round(x)

def train(model):
    return torch.compile(model)
""", line=6),
    # On torch_xla a calibration pass run on the device is traced like any forward.
    Invalid("""
import torch
import torch_xla

class HistogramObserver(torch.nn.Module):
    def forward(self, x):
        self.lo = x.min().item()
        return x
""", line=7),
    # The wrapper a decorator returns runs at every call (transformers' @dynamic_rope_update).
    Invalid("""
import functools
import torch

def checked(fn):
    @functools.wraps(fn)
    def wrapper(self, x):
        print(torch.max(x).item())
        return fn(self, x)
    return wrapper

class Head(torch.nn.Module):
    @checked
    def forward(self, x):
        return x * 2
""", line=8),
    # The same message built before the call: formatted on every forward.
    Invalid("""
import torch

class Merge(torch.nn.Module):
    def forward(self, embeds, image_mask, features):
        torch._check(
            image_mask.sum() * embeds.shape[-1] == features.numel(),
            f"tokens: {image_mask.sum()}, features: {features.shape[0]}",
        )
        return embeds.masked_scatter(image_mask.unsqueeze(-1), features)
""", line=8),
    # The same loop leaving by a break with the step's work pending: the read runs it.
    Invalid(COMPILED_EPOCH.format(leave="                break"), line=17),
    Invalid(
        """
import torch
import torch_xla.core.xla_model as xm

def run(params, optimizer, use_zero1, steps):
    res = []
    for i in range(steps):
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer.step()
        if i % 10 == 0:
            xm.mark_step()
        norm = sum(p.detach().cpu().norm() for p in params)   # mid-step in 9 iterations of 10
        res.append(norm)
    return res
""",
        line=13,
    ),
    Invalid(HOST_METHOD_RESULT, line=14, severity="info"),
    Invalid(HOST_METHOD_RESULT, line=16),
    Invalid(
        """
import torch

class Sampler(torch.nn.Module):
    def forward(self, x):
        idx = torch.randint(0, 10, (4,))
        return x[:, :4] * idx.max().item()  # no device sync on XLA, a graph break under torch.compile
""",
        line=7,
        severity="info",
    ),
    Invalid(
        """
import torch

class Sampler(torch.nn.Module):
    def forward(self, x):
        idx = torch.randint(0, 10, (4,)).to(x.device)  # moved to the device: a real sync
        return x[:, :4] * idx.max().item()
""",
        line=7,
    ),
    Invalid(
        """
import torch
import torch_xla

for step in range(10):
    loss = (torch.ones(3, device=torch_xla.device()) * step).sum()
    print(loss.item())
    torch_xla.sync()
""",
        line=7,
    ),
    Invalid(
        """
import torch

class MoE(torch.nn.Module):
    def forward(self, x):
        dropped = x > 3
        total = int(dropped.sum())
        return x * total
""",
        line=7,
    ),
    Invalid(
        """
import torch
import torch_xla

@torch_xla.compile
def step(x):
    y = torch.relu(x) * 2
    print(f"y={y}")
    return y
""",
        line=8,
    ),
    Invalid(
        """
import torch

class Router(torch.nn.Module):
    def forward(self, x):
        _, idx = torch.topk(x, 1)  # tuple unpacking of a torch result
        return idx.item()
""",
        line=7,
    ),
    Invalid(
        """
import torch

class Head(torch.nn.Module):
    def forward(self, logits, labels, limit: int):
        n = min(labels.max(), limit)  # builtin min() compares on the host
        return logits[:, :n]
""",
        line=6,
    ),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x, labels):
        if -1 in labels:  # Tensor.__contains__
            x = x * 0
        return x
""",
        line=6,
    ),
    Invalid(
        """
import torch_xla

@torch_xla.compile
def step(model, batch, stats):
    result = model(**batch)
    stats.append(float(result["loss"]))  # a tensor from the model's output mapping
    return result
""",
        line=7,
    ),
    Invalid(CLIP + "\ndef clip(x):\n    return Clip.apply(x)\n", line=7),
    # Applied nowhere in the project: it runs only from code elsewhere (info).
    Invalid(CLIP, line=7, severity="info"),
    Invalid(
        """
import torch

def log_activations(module, inputs, output):
    print(output.norm().item())

def attach(model):
    model.register_forward_hook(log_activations)  # hooks run inside forward
""",
        line=5,
    ),
    Invalid(
        """
import torch
import torch_xla

def probe(model, batch):
    def peek(module, inputs, output):
        print(output.norm().item())

    handle = model.register_forward_hook(peek)
    loss = model(batch)
    handle.remove()
    return loss

def train(model, loader):
    for batch in loader:
        probe(model, batch).backward()  # the temporary hook runs every step
        torch_xla.sync()
""",
        line=7,
    ),
    Invalid(
        """
import torch_xla.debug.profiler as xp

def train(model, loader):
    for step, batch in enumerate(loader):
        with xp.StepTrace("train", step_num=step):
            loss = model(batch)
            print(loss.item())
""",
        line=8,
    ),
    Invalid(
        """
from transformers import PreTrainedModel  # followed to nn.Module (or guessed from forward)

class Head(PreTrainedModel):
    def forward(self, hidden):
        return hidden.mean().item()
""",
        line=6,
    ),
    Invalid(
        """
import torch

def has_only_one_value(t):
    return (t == t[0]).all()

class Experts(torch.nn.Module):
    def forward(self, x, sizes):
        var_len = not has_only_one_value(sizes)  # Tensor.__bool__ outside any if
        return x if var_len else x * 2
""",
        line=9,
    ),
    Invalid(
        """
import torch
import torch.nn.functional as F

def exclusive_cumsum(t):
    return F.pad(t, (1, -1)).cumsum(-1)  # lives where t lives

class Dispatch(torch.nn.Module):
    def forward(self, x, rank: int):
        starts = exclusive_cumsum(torch.tensor([2, 3, 4]))  # a Python list, no device
        return x[starts[rank].item():]  # info: a CPU tensor through the helper
""",
        line=11,
        severity="info",
    ),
    # torchtitan's MoE dispatch: copies of the split sizes, then reads of the copies. In a
    # project that only uses torch.compile the copies are traced, blocking or not (no graph
    # break): info. The reads of the host copies break the graph there: a warning.
    Invalid(SPLIT_COPIES, line=6, severity="info"),
    Invalid(SPLIT_COPIES, line=7, severity="info"),
    Invalid(SPLIT_COPIES, line=8),
    Invalid(SPLIT_COPIES.replace("return input_splits.tolist(), output_splits.tolist()",
                                 "return int(input_splits[0])"), line=8),
    Invalid(SPLIT_COPIES.replace("return input_splits.tolist(), output_splits.tolist()",
                                 "return counts.sum().cpu().item()"), line=8),
    # The same copies in code that uses torch_xla run the pending graph: a warning. Where it
    # also compiles, reading the copies breaks that graph (a warning); with torch_xla alone
    # reading them costs nothing more (info).
    Invalid("import torch_xla\n" + SPLIT_COPIES, line=7),
    Invalid("import torch_xla\n" + SPLIT_COPIES, line=8),
    Invalid("import torch_xla\n" + SPLIT_COPIES, line=9),
    Invalid("import torch_xla\n" + SPLIT_COPIES.replace("torch.compile(Dispatch())", "Dispatch()"), line=8),
    Invalid("import torch_xla\n" + SPLIT_COPIES.replace("torch.compile(Dispatch())", "Dispatch()"),
            line=9, severity="info"),
    # torchtune's export-friendly position embedding: the read is guarded with torch._check,
    # as code written for torch.export is. In a project that compiles but never uses
    # torch_xla the value stays symbolic there: info. The same class with torch_xla: a warning.
    Invalid(EXPORT_EMBED, line=14, severity="info"),
    Invalid("import torch_xla\n" + EXPORT_EMBED, line=15),
    # Without the torch._check guards it is an ordinary host read.
    Invalid(EXPORT_EMBED.replace("torch._check(", "print("), line=14),
    # A flag whose branch calls something else runs every step it is true.
    Invalid(LORA_LAYER.replace("self.unmerge()  ", "self.refresh()  ").replace("def unmerge(self):", "def refresh(self):"),
            line=13),
    # torchtitan's and OLMo's block-by-block compile: the model's own forward runs eagerly
    # around the compiled blocks (info without torch_xla); the blocks stay traced.
    Invalid(BLOCKWISE, line=6, severity="info"),
    Invalid(BLOCKWISE, line=10),
    Invalid("import torch_xla\n" + BLOCKWISE, line=7),
    # A module whose methods the project compiles by name, never its forward: the forward
    # runs eagerly (info without torch_xla); the compiled method and what it calls are traced.
    Invalid(METHODWISE, line=12, severity="info"),
    Invalid(METHODWISE.replace("return self.net(obs)", "return self.net(obs) * obs.max().item()"), line=15),
    # Its own method compiled in __init__ (pi0's self.sample_actions), the same.
    Invalid(METHODWISE.replace("self.net = nn.Linear(4, 4)", "self.net = nn.Linear(4, 4)\n"
                               "        self.predict_action_chunk = torch.compile(self.predict_action_chunk)")
            .replace("    policy.predict_action_chunk = torch.compile(policy.predict_action_chunk)\n", ""),
            line=13, severity="info"),
    # Its forward compiled by name too (pi0's self.forward = torch.compile(self.forward)):
    # a warning.
    Invalid(METHODWISE.replace("self.net = nn.Linear(4, 4)", "self.net = nn.Linear(4, 4)\n"
                               "        self.forward = torch.compile(self.forward)"), line=13),
    # The module itself compiled in one of its methods: a warning.
    Invalid(METHODWISE.replace("self.net = nn.Linear(4, 4)", "self.net = nn.Linear(4, 4)\n"
                               "        self.compiled = torch.compile(self)"), line=13),
    # A method of a list or a tensor names no project class.
    Invalid(METHODWISE.replace("predict_action_chunk", "append"), line=12),
    Invalid("import torch_xla\n" + METHODWISE, line=13),
    # SAM2's training model: its base compiles a component's forward (self.image_encoder),
    # never the model; its own forward runs eagerly around it (info without torch_xla).
    Invalid(PARTWISE, line=14, severity="info"),
    Invalid(PARTWISE.replace("self.encoder.forward = torch.compile(self.encoder.forward)",
                             'self.encoder.compile(mode="max-autotune")'), line=14, severity="info",
            config=Config(targets=["compile"])),
    # The model compiled too, or compiled by its forward: a warning.
    Invalid(PARTWISE.replace("self.encoder.forward = torch.compile(self.encoder.forward)",
                             "self.encoder.forward = torch.compile(self.encoder.forward)\n"
                             "            self.forward = torch.compile(self.forward)"), line=15),
    # A script builds the model and compiles it whole (a local of a known class): a warning.
    Invalid(PARTWISE + "\ndef build():\n    model = Train(nn.Linear(4, 4))\n    return torch.compile(model)\n",
            line=14),
    Invalid("import torch_xla\n" + PARTWISE, line=15),
]
