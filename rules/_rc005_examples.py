"""RC005's VALID/INVALID example programs (run by tests/lint/test_rule_examples.py), kept
apart from the rule's logic in :mod:`detective.rules.rc005_dynamic_shape` for length."""

from detective.lint.rule import Invalid, Valid

# DeepSpeed's sharded_moe.py: scripted helpers take the capacity as a plain parameter; with
# drop_tokens=False the gate hands them a count read from the data.
CAPACITY_HELPERS = """
import torch
import torch.nn.functional as F

@torch.jit.script
def _top_idx(source, k):
    return torch.topk(source, k=k, dim=0)[1]

def _one_hot_to_float(x, num_classes):
    return F.one_hot(x, num_classes=num_classes).float()

class Gate(torch.nn.Module):
    def forward(self, logits, locations):
        capacity = max(torch.max(logits.sum(0)), torch.tensor(4, device=logits.device))
        top = _top_idx(logits, capacity)
        return top, _one_hot_to_float(locations, capacity)
"""

VALID = [
    # A flag the code fixes (yolov5's `merge = False  # use merge-NMS`, a module's DEBUG = False):
    # nothing can make its side run short of editing the file.
    Valid("""
import torch

DEBUG = False

def nms(x, conf):
    merge = False
    keep = x[:, 4] > conf
    if DEBUG:
        x = x[keep]
    if merge and (1 < x.shape[0] < 3000):
        x = x[keep]
    return x

class Head(torch.nn.Module):
    def forward(self, x):
        return nms(x, 0.5)
"""),
    # One-time k-means initialisation of a codebook (vector-quantize-pytorch): the method
    # returns at once when the flag is set, and sets it at its end, so what follows the
    # guard runs at the first forward only. The guard itself reads a buffer (RC002's).
    Valid("""
import torch

class Codebook(torch.nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.register_buffer("initted", torch.tensor(False))
        self.embed = torch.nn.Parameter(torch.randn(n, d))

    def init_embed_(self, data, mask=None):
        if self.initted:
            return
        if mask is not None:
            data = data[mask]
        self.embed.data.copy_(data[: self.embed.shape[0]])
        self.initted.data.copy_(torch.tensor(True))

    def forward(self, x, mask):
        self.init_embed_(x, mask=mask)
        return x @ self.embed.t()
"""),
    # A slice object named like a mask (transformers' SAM2 video mask decoder).
    Valid("""
import torch

class MaskDecoder(torch.nn.Module):
    def forward(self, masks, iou_pred, scores, multimask: bool):
        if multimask:
            mask_slice = slice(1, None)
        else:
            mask_slice = slice(0, 1)
        masks = masks[:, :, mask_slice]
        return masks, iou_pred
"""),
    # Named like masks, but integers: an arithmetic result and a gather by two index tensors.
    Valid(
        """
import torch

class ParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, start, end):
        keep = (target >= start) & (target < end)
        masked_target = torch.mul(target - start, keep.long())
        masked_target_1d = masked_target.view(-1)
        rows = torch.arange(logits.size(0), device=logits.device)
        ctx.save_for_backward(rows, masked_target_1d)
        return logits[rows, masked_target_1d]

    @staticmethod
    def backward(ctx, grad):
        _, masked_target_1d = ctx.saved_tensors
        rows = torch.arange(grad.size(0), device=grad.device)
        out = torch.zeros_like(grad)
        out[rows, masked_target_1d] -= 1.0
        return out, None, None, None

def parallel_cross_entropy(logits, target):
    return ParallelCrossEntropy.apply(logits, target, 0, 1024)
"""
    ),
    # masked_indices holds indices (an argsort's first columns, a topk's indices), whatever
    # "mask" is in the name (vit-pytorch's MAE and SimMIM): a gather of a fixed count.
    Valid(
        """
import torch

class MAE(torch.nn.Module):
    def forward(self, tokens, num_masked: int):
        batch, n = tokens.shape[:2]
        rand_indices = torch.rand(batch, n, device=tokens.device).argsort(dim=-1)
        masked_indices, unmasked_indices = rand_indices[:, :num_masked], rand_indices[:, num_masked:]
        batch_range = torch.arange(batch, device=tokens.device)[:, None]
        return tokens[batch_range, unmasked_indices], tokens[batch_range, masked_indices]

class SimMIM(torch.nn.Module):
    def forward(self, tokens, num_masked: int):
        batch, n = tokens.shape[:2]
        masked_indices = torch.rand(batch, n, device=tokens.device).topk(k=num_masked, dim=-1).indices
        batch_range = torch.arange(batch, device=tokens.device)[:, None]
        return tokens[batch_range, masked_indices]
"""
    ),
    Valid(  # info: the file runs nonzero with a bounded dynamic shape
        """
import os
import torch

os.environ["XLA_EXPERIMENTAL"] = "nonzero:masked_select"

class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x).float(), x.masked_select(x > 0)
"""
    ),
    Valid(  # info: the file requires the flag (naming no op: both bounded ops)
        """
import os
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        return x.nonzero()

if __name__ == "__main__":
    assert os.environ["XLA_EXPERIMENTAL"] != ""
"""
    ),
    Valid(  # NumPy's unique, and a mask over a NumPy array: host code, no graph
        """
import numpy as np
import torch

class Net(torch.nn.Module):
    def forward(self, x, sz: int):
        idc = np.asarray([3, 1, 3, 7])
        idc = np.unique(idc[idc < sz])
        return x[:, :4] * torch.from_numpy(idc).to(x.device)
"""
    ),
    Valid(
        """
import torch

class Router(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x, scores):
        top = scores.topk(self.k)              # k from config: static
        y = torch.where(scores > 0, x, 0.0)    # three-argument where: same shape
        return x[:, :8], top, y.repeat_interleave(2, dim=0)
"""
    ),
    # The same helpers handed a capacity fixed by the config: one program.
    Valid(CAPACITY_HELPERS.replace(
        "max(torch.max(logits.sum(0)), torch.tensor(4, device=logits.device))", "self.capacity")),
]

# Repeats per request counted on the host: a CPU tensor, uploaded afterwards (info), next to
# the same op on device tensors (a warning).
CPU_REPEATS = """
import torch

class Sampler(torch.nn.Module):
    def forward(self, logits, counts, lengths):
        num = torch.tensor(counts, device="cpu")
        rows = torch.arange(len(counts), device=torch.device("cpu")).repeat_interleave(num)
        picked = logits[rows.to(logits.device)]
        return picked, logits.repeat_interleave(lengths, dim=0)
"""

INVALID = [
    # ...but a parameter of that name is whatever its callers pass, and a flag bound twice is
    # not fixed.
    Invalid("""
import torch

DEBUG = False

def pick(x, DEBUG=False):
    if DEBUG:
        x = x[x > 0]
    return x

class Head(torch.nn.Module):
    def forward(self, x):
        return pick(x, DEBUG=True)
""",
        line=8,
    ),
    Invalid("""
import torch

def pick(x, strict):
    merge = False
    if strict:
        merge = True
    if merge:
        x = x[x > 0]
    return x

class Head(torch.nn.Module):
    def forward(self, x):
        return pick(x, x.shape[0] > 2)
""",
        line=9,
    ),
    # The same guard on a flag the method never sets: the rest runs every forward.
    Invalid("""
import torch

class Codebook(torch.nn.Module):
    def init_embed_(self, data, mask):
        if self.initted:
            return
        return data[mask]

    def forward(self, x, mask):
        return self.init_embed_(x, mask)
""",
        line=8,
    ),
    # The same name from a boolean array made on the host (fairseq's wav2vec 2.0): a mask.
    Invalid("""
import torch

class Wav2Vec(torch.nn.Module):
    def forward(self, x, padding_mask, compute_mask_indices):
        mask_indices = torch.from_numpy(compute_mask_indices(x.shape[:2], padding_mask)).to(x.device)
        x[mask_indices] = 0.0
        return x
""", line=7),
    # A name that says it holds a mask is one, though it comes from a parameter (vit-pytorch's MPP).
    Invalid("""
import torch

class Loss(torch.nn.Module):
    def forward(self, patches, bool_mask_replace):
        patches[bool_mask_replace] = 0.0
        return patches
""", line=6),
    # A mask on one side, every position on the other (transformers' MiniCPM-V position ids).
    Invalid("""
import torch

class Positions(torch.nn.Module):
    def forward(self, position_ids, values, attention_mask=None):
        if attention_mask is not None:
            valid_mask = attention_mask.bool()
        else:
            valid_mask = slice(None)
        position_ids[:, valid_mask] = values
        return position_ids
""", line=10),
    # The same name bound to a comparison: a boolean mask.
    Invalid("""
import torch

class MaskDecoder(torch.nn.Module):
    def forward(self, masks, iou_pred, scores):
        mask_slice = scores > 0
        masks = masks[:, :, mask_slice]
        return masks, iou_pred
""", line=7),
    Invalid(
        """
import torch

class Gather(torch.nn.Module):
    def forward(self, logits, target):
        keep = target >= 0
        rows = torch.arange(logits.size(0))
        return logits[keep, rows]   # made by a comparison: a mask, even beside an index
""",
        line=8,
    ),
    Invalid(CPU_REPEATS, line=7, severity="info"),
    Invalid(CPU_REPEATS, line=9),
    Invalid(CAPACITY_HELPERS, line=7),  # topk(k) where k is handed a count read from the data
    Invalid(CAPACITY_HELPERS, line=10),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        return x[x > 0]
""",
        line=6,
    ),
    Invalid(
        """
import os
import torch

os.environ.setdefault("XLA_EXPERIMENTAL", "masked_select")

class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)  # the flag bounds masked_select only here
""",
        line=9,
    ),
    Invalid(
        """
import os
import unittest
import torch

@unittest.skipUnless("nonzero" in os.environ.get("XLA_EXPERIMENTAL", ""), "needs bounded nonzero")
class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x), x.unique()  # unique: not bounded by the flag
""",
        line=9,
    ),
    Invalid(
        """
import os
import torch

os.environ["XLA_EXPERIMENTAL"] = "nonzero"

class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)
""",
        line=9,
        severity="info",
    ),
    Invalid(
        """
import torch

class Router(torch.nn.Module):
    def forward(self, scores):
        k = int((scores > 0.5).sum())
        return torch.topk(scores, k)
""",
        line=7,
    ),
    Invalid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x)
        return x.index_select(0, idx[:, 0])
""",
        line=6,
    ),
    Invalid(
        """
import torch

class Gather(torch.nn.Module):
    def forward(self, ids, h):
        keep = ids >= 0
        return h[keep, :]  # a mask from a comparison two lines up
""",
        line=7,
    ),
    Invalid(
        """
import torch

class Pad(torch.nn.Module):
    def forward(self, x, padding_mask):
        x[padding_mask] = 0  # bool-mask assignment: index_put_ through nonzero on XLA
        return x
""",
        line=6,
    ),
    Invalid(
        """
import torch

class Loss(torch.nn.Module):
    def forward(self, logits, labels):
        labels[labels < 0] = 0  # info: only XLA pays for a mask fill, and this project uses torch.compile
        return logits.gather(-1, labels[..., None])

loss_fn = torch.compile(Loss())
""",
        line=6,
        severity="info",
    ),
    # A value from a parameter of unknown type may be a tensor of the mask's count: not a fill.
    Invalid(
        """
import torch

def scatter(x: torch.Tensor, values, shift: int):
    x[x < 0] = values - shift
    return x

scatter_fast = torch.compile(scatter)
""",
        line=5,
    ),
    # Fill values computed from Python numbers: an int parameter, a range() index, a 0-dim tensor
    # of a literal with keywords (torchao's custom float casts). Still fills: info here.
    Invalid(
        """
import torch

F32_SHIFT = 23

def cast(x: torch.Tensor, amax: torch.Tensor, mbits: int):
    bias = 1 - 127 + mbits
    for i in range(mbits):
        x[x == i] = (bias - i) << F32_SHIFT
    amax[torch.isnan(amax)] = torch.tensor(float("nan"), device=amax.device, dtype=amax.dtype)
    return x, amax

cast_fast = torch.compile(cast)
""",
        line=9,
        severity="info",
    ),
    Invalid(
        """
import torch

def cast(x: torch.Tensor, amax: torch.Tensor, mbits: int):
    for i in range(mbits):
        x[x == i] = (1 - i) << 23
    amax[torch.isnan(amax)] = torch.tensor(float("nan"), device=amax.device, dtype=amax.dtype)
    return x, amax

cast_fast = torch.compile(cast)
""",
        line=7,
        severity="info",
    ),
    Invalid(
        """
import torch
import torch.nn.functional as F

class Router(torch.nn.Module):
    def forward(self, idx):
        return F.one_hot(idx, max(idx.max() + 1, 8))  # num_classes read from the data
""",
        line=7,
    ),
    Invalid(
        """
import torch

class MoE(torch.nn.Module):
    def forward(self, x, top):
        return self.dispatch(x, top)

    def dispatch(self, x, top):
        out = torch.zeros_like(x)
        for i in range(4):
            chosen = top == i
            out[chosen] = x[chosen] * i  # a mask built from the helper's parameter
        return out
""",
        line=12,
    ),
    Invalid(
        """
import torch

class Negatives(torch.nn.Module):
    def forward(self, y, high: int):
        idx = torch.randint(low=0, high=high, size=(4, 8))  # made on the CPU
        idx[idx >= 3] += 1  # info: the dynamic shape never reaches an XLA graph
        return y[..., idx.view(-1)]
""",
        line=7,
        severity="info",
    ),
    Invalid(
        """
import torch

class Merge(torch.nn.Module):
    def forward(self, ids, h):
        runs = []
        for row in ids:
            runs.append(row.cpu().unique_consecutive(return_counts=True))  # the sync: RC001
        values, counts = runs[0]
        values[counts > 1] = 0  # info: a host copy, no XLA program
        return h, values
""",
        line=10,
        severity="info",
    ),
    Invalid(
        """
import torch

class Merge(torch.nn.Module):
    def forward(self, ids, h):
        values = ids[0].cpu()
        keep = values >= 0
        return h[0][keep]  # a device tensor gathered by a host mask: still a dynamic shape
""",
        line=8,
    ),
    # A cast keeps a CPU tensor on the CPU (peft's CPT epsilon from a config list): info;
    # the same tensor moved to the input's device is a device tensor.
    Invalid(
        """
import torch

class Emb(torch.nn.Module):
    def forward(self, x):
        mask = torch.Tensor(self.config.mask).long()
        eps = torch.ones_like(torch.Tensor(self.config.mask)).to(torch.float32) * 1e-10
        eps[mask > 0] = 0.5
        return x * eps.to(x.device).sum()
""",
        line=8,
        severity="info",
    ),
    Invalid(
        """
import torch

class Emb(torch.nn.Module):
    def forward(self, x):
        eps = torch.ones(4).to(x.device)
        eps[eps > 0] = 0.5
        return x * eps.sum()
""",
        line=7,
    ),
]
