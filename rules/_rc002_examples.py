"""RC002's VALID/INVALID example programs (run by tests/lint/test_rule_examples.py), kept
apart from the rule's logic in :mod:`detective.rules.rc002_tensor_branch` for length."""

from detective.lint.rule import Invalid, Valid

HOST_TRIM = """
import torch

class Trim(torch.nn.Module):
    def forward(self, x, lengths):
        host = lengths.cpu()  # the one sync on torch_xla (RC001)
        longest = host.max()
        if longest > 8:
            x = x[:, :8]
        return x
"""

VALID = [
    # The side where `isinstance(p, torch.Tensor)` is false holds no tensor (demucs' center_trim:
    # `reference` is a tensor or a length).
    Valid("""
import torch
from typing import Union

def center_trim(tensor: torch.Tensor, reference: Union[torch.Tensor, int]):
    if isinstance(reference, torch.Tensor):
        ref_size = reference.size(-1)
    else:
        ref_size = reference
    delta = tensor.size(-1) - ref_size
    if delta:
        tensor = tensor[..., delta // 2:-(delta - delta // 2)]
    return tensor

class Net(torch.nn.Module):
    def forward(self, x, ref):
        return center_trim(x, ref)
"""),
    # A parameter the method slices by is a length, not a tensor (demucs' decoder layer).
    Valid("""
import torch

class Dec(torch.nn.Module):
    def forward(self, x, skip, length):
        z = self.conv(x + skip)
        z = z[..., self.pad:self.pad + length]
        assert z.shape[-1] == length, (z.shape[-1], length)
        return z
"""),
    # A guard against an unsupported argument that defaults to None (OLMo-core's attention):
    # a working program passes None and never reads a tensor here.
    Valid("""
import torch

class Attention(torch.nn.Module):
    def forward(self, x, cache_leftpad=None):
        if cache_leftpad:
            raise NotImplementedError("cache_leftpad is not supported here")
        return x * 2
"""),
    # A self-test inside a function (icefall's scaling.py): the side runs only when the file
    # itself is the program, never in a program that imports it.
    Valid("""
import torch

class DoubleSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        d = torch.sigmoid(x) * 255.0
        if __name__ == "__main__":
            assert d.min() >= 0.0
        return x * torch.sigmoid(x - 1.0)

class Act(torch.nn.Module):
    def forward(self, x):
        return DoubleSwish.apply(x)
"""),
    # An `if isinstance(p, int):` side reads a Python number, whatever `p` was annotated
    # (OLMo-core's LM head, wenet's positional encodings).
    Valid("""
import torch
from typing import Union

class Head(torch.nn.Module):
    def forward(self, x, keep: Union[int, torch.Tensor] = 0, offset: Union[int, torch.Tensor] = 0):
        if isinstance(keep, int):
            if keep != 0:
                x = x[:, -keep:]
        else:
            x = x.gather(1, keep)
        if not isinstance(offset, int):
            x = x + offset
        else:
            assert offset < 10
        return x
"""),
    # SAM2's _use_multimask: a helper returns a Python bool through a local.
    Valid("""
import torch

class Head(torch.nn.Module):
    def _use_multimask(self, point_inputs):
        num_pts = 0 if point_inputs is None else point_inputs["point_labels"].size(1)
        multimask = self.multimask_output and (1 <= num_pts <= 3)
        return multimask

    def forward(self, x, point_inputs=None):
        if self.training and not self._use_multimask(point_inputs):
            x = x + 1
        return x
"""),
    # NumPy made the value branched on: a NumPy read (info at most), whatever the targets.
    Valid(HOST_TRIM.replace("lengths.cpu()", "lengths.cpu().numpy()")),
    # A constructor's **kwargs are options (NeMo's RadTTS), not batch fields.
    Valid(
        """
import torch

class Predictor(torch.nn.Module):
    def __init__(self, dim, **kwargs):
        super().__init__()
        self.use_unvoiced_bias = kwargs["use_unvoiced_bias"]
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x, bias):
        if self.use_unvoiced_bias:
            x = x + bias
        return self.proj(x)
"""
    ),
    # A layout query gives a Python bool (apex's multihead attention: is_coalesced()).
    Valid(
        """
import torch

class Sparse(torch.nn.Module):
    def forward(self, x, weight):
        if not weight.is_coalesced():
            weight = weight.coalesce()
        if x.is_signed() and x.is_same_size(weight):
            x = x.abs()
        return torch.sparse.mm(weight, x)
"""
    ),
    # A field of a config-named mapping is a setting, not a batch field (neuronx-distributed's
    # zero1 test, diffusers' far_cfg).
    Valid(
        """
import torch_xla.core.xla_model as xm

def train(model, loader, optimizer, parallel_config):
    for batch in loader:
        loss = model(batch)
        if parallel_config["ep_degree"] > 1:
            loss = loss / parallel_config["ep_degree"]
        loss.backward()
        optimizer.step()
        xm.mark_step()
"""
    ),
    # The branch fills the attribute it tests: it runs at the first call only.
    Valid(
        """
import math
import torch

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.register_buffer("inv_freq", None, persistent=False)

    def forward(self, x, position_ids):
        if self.inv_freq is None:          # filled at the first call
            inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float().to(x.device) / self.dim))
            new = []
            for freq in inv_freq:
                if 2 * math.pi / freq < 8192:
                    new.append(freq)
            self.inv_freq = torch.tensor(new, device=x.device)
        return x * self.inv_freq[None, :]
"""
    ),
    Valid(
        """
import torch

class CharEmbedder(torch.nn.Module):
    def forward(self, chars):
        pads = chars[:, 0].eq(0)
        if self.onnx_trace:  # only while exporting to ONNX, never on XLA
            if pads.any():
                chars = chars * 1
        return chars
"""
    ),
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x, mask=None, training: bool = False):
        if mask is not None:          # identity test: no value read
            x = x * mask
        if x.shape[-1] > 128:         # shape metadata is static
            x = x[..., :128]
        if self.training or training:
            x = torch.dropout(x, 0.1, True)
        return x
"""
    ),
    Valid(
        """
import torch
import torch_xla

for step in range(3):
    loss = torch.ones(2).sum()
    torch_xla.sync()
    if loss > 1:                       # after the sync: value already on hand
        print("big")
"""
    ),
    Valid(
        """
import torch

def count_ready(n, k):
    return n == k

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2)})
        self._initialized = False

    def forward(self, x, batch, name=None):
        if batch["task"] == "qa":  # a string field
            x = x + 1
        for key, head in self.heads.items():
            if key == name:  # ModuleDict keys
                x = head(x)
        feats = []
        if not feats:  # a list
            feats.append(x)
        if count_ready(2, 3):  # a helper returning a Python bool
            x = x * 2
        if self.should_skip(x):  # a method returning a Python bool
            x = x * 3
        if torch.jit.is_scripting() or self.xla:
            x = x.sum()
        if not self._initialized:  # one-time lazy set-up
            self.scale = float(x.abs().max())
        return x

    def should_skip(self, x):
        return self.n == self.k
""",
    ),
    Valid(
        """
import torch
from typing import Any, Dict, List

def rebuild(tensors, packed: Dict[str, List[Any]]):
    out, i = [], 0
    for was_tensor in packed["flags"]:  # a list of Python bools, as annotated
        if was_tensor:
            out.append(tensors[i])
            i += 1
    return out

class Block(torch.nn.Module):
    def forward(self, x):
        return rebuild((x,), {"flags": [True]})
""",
    ),
    Valid(
        """
import torch

class Criterion(torch.nn.Module):
    def forward(self, model, sample):
        losses = self.per_channel(model, sample)  # a dict of dicts of tensors
        total = 0.0
        for source in losses:
            for target in losses[source]:  # indexed by its own items: keys, not rows
                if target == source:  # two channel names compared
                    total = total + losses[source][target]
        return total

    def per_channel(self, model, sample):
        out = {"a": {"a": model(sample["x"])}}
        return out
""",
    ),
    Valid(
        """
import torch

class Backbone(torch.nn.Module):
    def features(self, x, keep=None):
        outs = []
        for blk in self.blocks:
            x = blk(x)
            if keep == "all":  # compared with a string: keep is an option, no tensor
                outs.append(x)
        return outs if keep else x

    def forward(self, x, keep=None):
        x = self.features(x, keep=keep)
        if keep:
            return x[0]
        return x
""",
    ),
    Valid(
        """
import torch

class ScaledSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, opts):
        ctx.scale = scale  # stored on ctx, not saved for backward: a Python value
        scaled = False if scale == 1.0 else True
        if opts["offload"]:  # a dict of options: apply() tracks only tensor arguments
            x = x.clone()
        return x * scale if scaled else x
""",
    ),
    # dinov2's mmseg-style losses and depth head: a parameter asserted to be one of a few strings,
    # and per-image metadata (img_metas[0]["flip"]), hold Python values.
    Valid(
        """
import torch

class CrossEntropyLoss(torch.nn.Module):
    def forward(self, cls_score, label, reduction_override=None):
        assert reduction_override in (None, "none", "mean", "sum")
        reduction = reduction_override if reduction_override else self.reduction
        return torch.nn.functional.cross_entropy(cls_score, label, reduction=reduction)

class DepthHead(torch.nn.Module):
    def forward(self, img, img_metas):
        out = self.decode(img)
        if img_metas[0]["flip"]:
            out = out.flip(dims=(3,))
        return out
"""
    ),
    # timm's Adopt and Adafactor: helpers that take one param group by its conventional name.
    Valid(
        """
import torch

class Adopt(torch.optim.Optimizer):
    def _init_group(self, group, params):
        for p in group["params"]:
            if group["differentiable"] and p.requires_grad:   # hyperparameters, not batch fields
                raise RuntimeError("differentiable mode is not supported")
            params.append(p)

    @staticmethod
    def _get_lr(param_group, step):
        return param_group["lr"] if param_group["relative_step"] else 1e-2

    @torch.compile
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            params = []
            self._init_group(group, params)
            for p in params:
                p.mul_(1 - self._get_lr(group, 1))
"""
    ),
    # timm's Lamb/RAdam: a tensor step counter stored in the group, a Python one in the state;
    # the other keys keep what they were given.
    Valid(
        """
import torch

class RAdam(torch.optim.Optimizer):
    @torch.compile
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            if "step" not in group:
                group["step"] = torch.tensor(0.0)
            group["step"].add_(1)
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                state["step"] += 1
                if state["step"] == 1:          # a Python int stored under "step"
                    state["exp_avg"].copy_(p)
                if group["caution"]:            # a hyperparameter, whatever "step" holds
                    p.mul_(0.5)
"""
    ),
    Valid(
        """
import torch

class DistAdam(torch.optim.Optimizer):
    @torch.compile
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            wd = group["weight_decay"]   # a Python number the constructor was given
            for param in group["params"]:
                if wd != 0:
                    param.mul_(1 - wd)
"""
    ),
    Valid(
        """
import torch
import torch_xla.core.xla_model as xm

class Pipeline:
    def get_timesteps(self, num_inference_steps, strength):
        start = num_inference_steps - int(num_inference_steps * strength)
        return self.scheduler.timesteps[start:], num_inference_steps - start   # (steps, an int)

    def __call__(self, latents, num_inference_steps=50, strength=0.8):
        timesteps, num_inference_steps = self.get_timesteps(num_inference_steps, strength)
        num_warmup_steps = len(timesteps) - num_inference_steps
        for i, t in enumerate(timesteps):
            latents = self.unet(latents, t)
            if i == len(timesteps) - 1 or (i + 1) > num_warmup_steps:   # Python ints
                self.progress.update()
            xm.mark_step()
        return latents
"""
    ),
    Valid(
        """
import torch

class Encoder(torch.nn.Module):
    def forward(self, x, kv_caches=None):
        if not kv_caches:                  # a list (or None) filled when empty: its length
            kv_caches = [None for _ in range(len(self.layers))]
        major = int(torch.__version__.split(".")[0])   # a version string, not a tensor
        for layer, cache in zip(self.layers, kv_caches):
            x = layer(x, cache)
        return x
"""
    ),
    # The method's own summary decides what `self.get_timesteps(n, timesteps)` returns
    # at each position, however tensor the arguments are: `n - start` is an int.
    Valid(
        """
import torch
import torch_xla.core.xla_model as xm
from diffusers_like import FreeInitMixin

class Pipe(FreeInitMixin):
    def get_timesteps(self, n, timesteps, strength):
        start = max(n - int(n * strength), 0)
        return timesteps[start:], n - start   # the second item is a Python int

    def __call__(self, image, n=50, strength=0.8):
        latents = torch.randn(4, 8)
        timesteps = torch.arange(n)
        latents, timesteps = self._apply_free_init(latents, timesteps)   # the mixin's tensors
        n = len(timesteps)
        timesteps, n = self.get_timesteps(n, timesteps, strength)
        warmup = len(timesteps) - n
        for i, t in enumerate(timesteps):
            latents = self.unet(latents, t)
            if i + 1 > warmup:
                self.progress_bar.update()
            xm.mark_step()
        return latents
"""
    ),
]
INVALID = [
    # ...but a side that does work, or a test of a required argument, reads it every call.
    Invalid("""
import torch

class Attention(torch.nn.Module):
    def forward(self, x, pad):
        if pad:
            raise ValueError("padding not supported")
        return x * 2
""",
        line=6,
    ),
    # ...but not on the other side, where it is the tensor.
    Invalid("""
import torch
from typing import Union

class Head(torch.nn.Module):
    def forward(self, x, offset: Union[int, torch.Tensor] = 0):
        if isinstance(offset, int):
            assert offset < 10
        else:
            assert torch.max(offset) < 10
        return x + offset
""",
        line=10,
    ),
    # The forward's **kwargs do carry the batch.
    Invalid(
        """
import torch

class Predictor(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x, **kwargs):
        if kwargs["voiced"].any():
            x = x * 2
        return self.proj(x)
""",
        line=10,
    ),
    # The same test on a field of the batch reads a tensor.
    Invalid(
        """
import torch_xla.core.xla_model as xm

def train(model, loader, optimizer, parallel_config):
    for batch in loader:
        loss = model(batch)
        if batch["ntokens"] > 1:
            loss = loss / batch["ntokens"]
        loss.backward()
        optimizer.step()
        xm.mark_step()
""",
        line=7,
    ),
    Invalid(
        """
import math
import torch

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.register_buffer("inv_freq", None, persistent=False)

    def forward(self, x, position_ids):
        if self.inv_freq is None:          # never filled: every call
            inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float().to(x.device) / self.dim))
            new = []
            for freq in inv_freq:
                if 2 * math.pi / freq < 8192:
                    new.append(freq)
            freqs = torch.tensor(new, device=x.device)
        return x * freqs[None, :]
""",
        line=16,
    ),
    Invalid(
        """
import torch
import torch_xla.core.xla_model as xm
from diffusers_like import FreeInitMixin

class Pipe(FreeInitMixin):
    def get_timesteps(self, n, timesteps, strength):
        start = max(n - int(n * strength), 0)
        return timesteps[start:], timesteps.sum()   # a tensor this time

    def __call__(self, image, n=50, strength=0.8):
        latents = torch.randn(4, 8)
        timesteps = torch.arange(n)
        latents, timesteps = self._apply_free_init(latents, timesteps)   # the mixin's tensors
        n = len(timesteps)
        timesteps, n = self.get_timesteps(n, timesteps, strength)
        warmup = len(timesteps) - n
        for i, t in enumerate(timesteps):
            latents = self.unet(latents, t)
            if i + 1 > warmup:
                self.progress_bar.update()
            xm.mark_step()
        return latents
""",
        line=20,
    ),
    Invalid(
        """
import torch

class Clip(torch.optim.Optimizer):
    @torch.compile
    def step(self):
        for group in self.param_groups:
            for param in group["params"]:
                if param > 0:   # the group's parameters are tensors
                    param.mul_(0.5)
""",
        line=9,
    ),
    Invalid(
        """
import torch

class NovoGrad(torch.optim.Optimizer):
    @torch.compile
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg_sq"] = torch.zeros([])
                if state["exp_avg_sq"] == 0:   # the key holds a tensor
                    state["exp_avg_sq"].copy_(p.grad.norm())
""",
        line=13,
    ),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x
""",
        line=6,
    ),
    Invalid(
        """
import torch
import torch_xla

def train(model, loader):
    for batch in loader:
        loss = model(batch).mean()
        assert not torch.isnan(loss)
        loss.backward()
        torch_xla.sync()
""",
        line=8,
    ),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        scale = 2.0 if x.abs().max() > 1 else 1.0
        return x * scale
""",
        line=6,
    ),
    Invalid(
        """
import torch

def is_padded(m):
    return (m == 0).any()

class Net(torch.nn.Module):
    def forward(self, x, mask):
        if is_padded(mask):  # the helper returns a tensor (its return summary)
            x = x * mask
        return x
""",
        line=9,
    ),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        size = torch.tensor(x.size())  # made on the CPU (no device)
        if (size > 8).any():  # info: no device sync on XLA, a graph break under torch.compile
            x = x[:8]
        return x
""",
        line=7,
        severity="info",
    ),
    Invalid(
        """
import torch

class Encoder(torch.nn.Module):
    def forward(self, x, padding_mask):
        has_pads = torch.tensor(x.device.type == "xla") or padding_mask.any()
        x = x.masked_fill(padding_mask.unsqueeze(-1), 0) if has_pads else x  # info: a CPU constant on XLA
        return x
""",
        line=7,
        severity="info",
    ),
    # A branch on a host copy: on torch_xla the copy ran the graph (RC001) and the branch
    # costs nothing more (info); torch.compile traces the copy and breaks at the branch.
    Invalid("import torch_xla\n" + HOST_TRIM, line=9, severity="info"),
    Invalid(HOST_TRIM, line=8),
    Invalid(HOST_TRIM.replace("longest > 8", "(host != -1).any()"), line=8),
    Invalid(
        """
import torch

class Embeddings(torch.nn.Module):
    def forward(self, pixels, interpolate):
        if interpolate:  # info: every call passes a flag (a literal, or kwargs' with a literal default)
            return pixels * 2
        return pixels

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()

    def forward(self, pixels, interpolate=False, **kwargs):
        return self.embeddings(pixels, interpolate=interpolate)

def prepare_inputs(model_inputs, **kwargs):
    model_inputs["interpolate"] = kwargs.pop("interpolate", False)
    return model_inputs
""",
        line=6,
        severity="info",
    ),
    Invalid(
        """
import torch

class Embeddings(torch.nn.Module):
    def forward(self, pixels, interpolate):
        if interpolate:  # read from a mapping with no literal default: it may hold a tensor
            return pixels * 2
        return pixels

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()

    def forward(self, pixels, interpolate=False, **kwargs):
        return self.embeddings(pixels, interpolate=interpolate)

def prepare_inputs(model_inputs, **kwargs):
    model_inputs["interpolate"] = kwargs.pop("interpolate", None)
    return model_inputs
""",
        line=6,
    ),
    Invalid(
        """
import torch

class Backbone(torch.nn.Module):
    def forward(self, x, keep=None):
        if keep:  # nothing says keep is a Python value: a tensor by guess
            return x * keep
        return x
""",
        line=6,
    ),
    Invalid(
        """
import torch

class ScaledSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(scale)  # a tensor, saved for backward
        return x * scale if scale.sum() > 1 else x

def scaled_softmax(x, scale):
    return ScaledSoftmax.apply(x, scale)
""",
        line=8,
    ),
    Invalid(
        """
import torch

class KVCache(torch.nn.Module):
    def forward(self, k):
        assert (self.pos < self.size).all()   # torch.compile: torch._assert_async, no break
        self.cache[:, self.pos] = k
        return self.cache

def build(model):
    return torch.compile(model)
""",
        line=6,
        severity="info",
    ),
    Invalid(
        """
import torch
import torch_xla

class KVCache(torch.nn.Module):
    def forward(self, k):
        assert (self.pos < self.size).all()   # the lazy tensor runs the graph to read it
        self.cache[:, self.pos] = k
        return self.cache
""",
        line=7,
    ),
]
