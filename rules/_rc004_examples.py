"""RC004's VALID/INVALID example programs (run by tests/lint/test_rule_examples.py), kept
apart from the rule's logic in :mod:`detective.rules.rc004_key_branch` for length."""

from detective.lint.rule import Invalid, Valid

# A collater that gives only some batches KEY: the evidence a key test needs to be a warning.
# Appended after an example, so the example's line numbers stay.
OPTIONAL_KEY_COLLATER = """
def collate(samples):
    batch = {"x": samples[0]["x"]}
    if all("KEY" in s for s in samples):  # only batches whose samples all carry it
        batch["KEY"] = samples[0]["KEY"]
    return batch
"""


def with_optional(code: str, key: str) -> str:
    return code + OPTIONAL_KEY_COLLATER.replace("KEY", key)


VALID = [
    # Host bookkeeping under a key test: shapes and Python counters, no tensor op, one graph.
    Valid(
        """
import torch
import torch_xla

def train(model, loader):
    tokens, seq_length = 0, None
    for batch in loader:
        if "input_ids" in batch:
            input_ids = batch["input_ids"]
            if isinstance(input_ids, torch.Tensor):
                tokens += input_ids.numel()
                if seq_length is None:
                    seq_length = input_ids.shape[1]
        model(**batch).loss.backward()
        torch_xla.sync()
"""
    ),
    # zip(a.named_parameters(), b.named_parameters()) yields (name, parameter) pairs: a
    # substring test on a name, not a key of a batch.
    Valid(
        """
import torch
import torch_xla.core.xla_model as xm

def copy_weights(model_a, model_b, steps):
    for step in range(steps):
        with torch.no_grad():
            for (a_name, a_param), (b_name, b_param) in zip(model_a.named_parameters(), model_b.named_parameters()):
                if "experts" in a_name:
                    b_param.copy_(a_param)
            xm.mark_step()
"""
    ),
    Valid(
        """
import torch

class Memory(torch.nn.Module):
    def forward(self, x, state):
        if state.get("memory_banks", None) is None:
            state["memory_banks"] = []  # fills the key it lacked: one key set from here on
        state["memory_banks"].append(x)
        return x
"""
    ),
    Valid(
        """
import torch

def canonicalize(batch):
    if "mask" not in batch:            # outside any traced region: fine
        batch["mask"] = torch.ones_like(batch["x"])
    return batch

class Net(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def forward(self, batch):
        if "relu" in self.cfg:          # static configuration, same every call
            return torch.relu(batch["x"] * batch["mask"])
        return batch["x"] * batch["mask"]
"""
    ),
    Valid(
        """
import torch

class Net(torch.nn.Module):
    def forward(self, x, model, config):
        if hasattr(model, "adapter"):  # an attribute of a module, not a batch key
            x = model.adapter(x)
        if hasattr(config, "scale"):
            x = x * config.scale
        return x
""",
    ),
    Valid(
        """
import torch

class Fuse(torch.nn.Module):
    def forward(self, x, batch, token_ids):
        if "image" not in token_ids:  # the other side only raises: no second program
            raise ValueError("token_ids lacks 'image'")
        if "ids" in batch:
            ids = batch["ids"]
        else:
            raise KeyError("batch lacks 'ids'")
        return x[token_ids["image"]] + ids
""",
    ),
]
INVALID = [
    Invalid(
        """
import torch_xla

def train(model, loader):
    for batch in loader:
        args = {"source": batch["source"]}
        if "corpus_key" in batch:
            args["corpus_key"] = batch["corpus_key"]   # a key set passed on: not bookkeeping
        model(**args).loss.backward()
        torch_xla.sync()
""",
        line=7,
        severity="info",  # reported; info only because nothing in view makes the key optional
    ),
    Invalid(
        with_optional("""
import torch
import torch_xla

def train(model, loader, pad):
    tokens = 0
    for batch in loader:
        if "input_ids" in batch:
            tokens += batch["input_ids"].ne(pad).sum()   # a tensor op: each key set its own graph
        model(**batch).loss.backward()
        torch_xla.sync()
""", "input_ids"),
        line=8,
    ),
    Invalid(
        with_optional("""
import torch_xla.core.xla_model as xm

def train(model, loader):
    for (batch, target), step in zip(loader, range(100)):   # the loader's batches are data
        if "mask" in batch:
            model(batch["x"], batch["mask"]).backward()
        xm.mark_step()
""", "mask"),
        line=6,
    ),
    Invalid(
        """
import torch

def collate(samples):
    return {"net_input": {"source": torch.stack(samples)}}

class Wrapper:
    def collater(self, samples):
        samples = collate(samples)
        samples["net_input"]["src_tokens"] = samples["net_input"]["source"]
        del samples["net_input"]["source"]   # every batch it builds loses the key alike
        return samples

class Generator(torch.nn.Module):
    def forward(self, net_input):
        if "source" in net_input:
            return net_input["source"]
        return net_input["src_tokens"]
""",
        line=16,
        severity="info",
    ),
    Invalid(
        """
import torch

def collate(samples, bucket):
    x = torch.stack([s["source"] for s in samples])
    batch = {"source": x}
    pad = bucket - x.size(-1)
    if pad:                                  # a replacement: the key was there already
        batch["source"] = torch.nn.functional.pad(x, (0, pad))
    return batch

class Model(torch.nn.Module):
    def forward(self, batch):
        if "source" in batch:
            return batch["source"]
        return batch["features"]
""",
        line=14,
        severity="info",
    ),
    Invalid(
        """
import torch

def collate(samples):
    batch = {"x": torch.stack([s["x"] for s in samples])}
    if all("mask" in s for s in samples):  # only batches whose samples all carry one
        batch["mask"] = torch.stack([s["mask"] for s in samples])
    return batch

class Net(torch.nn.Module):
    def forward(self, batch):
        if "mask" in batch:  # batches of one run differ in the key: two programs
            return batch["x"] * batch["mask"]
        return batch["x"]
""",
        line=12,
    ),
    Invalid(
        """
import torch

def collate(samples):
    return {"src_tokens": torch.stack([s["src"] for s in samples]),
            "src_lengths": torch.tensor([len(s["src"]) for s in samples])}

class Encoder(torch.nn.Module):
    def forward(self, net_input):
        x = net_input["src_tokens"].float()
        if "src_lengths" in net_input:  # info: every batch has it; a run takes one side
            x = x * net_input["src_lengths"][:, None]
        return x
""",
        line=11,
        severity="info",
    ),
    Invalid(
        """
import torch

class Block(torch.nn.Module):
    def forward(self, x, context=None, **kwargs):
        if "encoder_states" in kwargs:  # info: a keyword every call site passes or never does
            context = kwargs["encoder_states"]
        return x if context is None else x + context
""",
        line=6,
        severity="info",
    ),
    Invalid(
        """
import torch

def collate(samples):
    batch = {"x": torch.stack([s["x"] for s in samples])}
    if all("bias" in s for s in samples):  # only some batches get the key
        batch["bias"] = torch.stack([s["bias"] for s in samples])
    return batch

class Net(torch.nn.Module):
    def forward(self, x, **kwargs):
        if "bias" in kwargs:  # model(**collate(samples)): the key set changes between batches
            x = x + kwargs["bias"]
        return x
""",
        line=12,
    ),
    Invalid(
        with_optional("""
import torch

class Net(torch.nn.Module):
    def forward(self, batch):
        x = batch["x"]
        if "mask" in batch:
            x = x * batch["mask"]
        return x
""", "mask"),
        line=7,
    ),
    Invalid(
        with_optional("""
import torch
import torch_xla

def train(model, loader):
    for batch in loader:
        mask = batch["mask"] if batch.get("mask") is not None else None
        model(batch["x"], mask).backward()
        torch_xla.sync()
""", "mask"),
        line=7,
    ),
    Invalid(
        with_optional("""
import torch

class Encoder(torch.nn.Module):
    def forward(self, batch):
        if "attention_mask" in batch["encoder"]:  # a nested input mapping
            return batch["encoder"]["attention_mask"]
        return batch["ids"]
""", "attention_mask"),
        line=6,
    ),
    Invalid(
        with_optional("""
import torch

class Net(torch.nn.Module):
    def forward(self, x, batch):
        bias = batch["bias"] if "bias" in batch else 0.0
        return x + bias
""", "bias"),
        line=6,
    ),
    Invalid(
        """
import torch

def duplicate(sample):
    inner = sample["net_input"] if "net_input" in sample else sample  # the branch that forks
    for k, v in inner.items():
        inner[k] = torch.cat([v, v])
    if "net_input" in sample:  # the same key again: same answer, no new graph, not reported
        sample["net_input"] = inner
    else:
        sample = inner
    return sample

class Criterion(torch.nn.Module):
    def forward(self, model, sample):
        return model(**duplicate(sample))
""",
        line=5,
        severity="info",  # the file sets "net_input" and never makes it optional
    ),
    Invalid(
        with_optional("""
import torch

class Encoder(torch.nn.Module):
    def forward(self, net_input):
        if "tokens" in net_input:
            x = net_input["tokens"].float()
        elif "features" in net_input:  # the chain picks among key sets; only its last `else` raises
            x = net_input["features"]
        else:
            raise KeyError("no input")
        return x
""", "features"),
        line=8,
    ),
    Invalid(
        """
import torch

class Down(torch.nn.Module):
    def forward(self, x, **kwargs):
        if kwargs.get("scale") is not None:   # each call site passes the same keywords
            print("scale is deprecated")
        return x

class Block(torch.nn.Module):
    def forward(self, x, cross_attention_kwargs=None):
        cross_attention_kwargs = dict(cross_attention_kwargs or {})
        scale = cross_attention_kwargs.pop("scale", 1.0)   # an option consumed: no optional key
        return self.down(x) * scale
""",
        line=6,
        severity="info",
    ),
    # Nothing in view makes the key optional (no collater read, or a key no file sets, such
    # as a tokenizer's): the test is reported as info, with a note saying why.
    Invalid(
        """
import torch

class Encoder(torch.nn.Module):
    def forward(self, batch):
        if "attention_mask" in batch["encoder"]:
            return batch["encoder"]["attention_mask"]
        return batch["ids"]
""",
        line=6,
        severity="info",
    ),
    Invalid(
        """
import torch

def strip(batch):
    batch.pop("scale", None)          # a batch that loses the key: now it is optional

class Down(torch.nn.Module):
    def forward(self, x, **kwargs):
        if kwargs.get("scale") is not None:
            x = x * kwargs["scale"]
        return x
""",
        line=9,
    ),
    Invalid(
        """
import torch

def convert(state, config):
    if not config.normalize_before:    # a setting of the run, not data: no optional key
        state["scale"] = torch.ones(4)
    return state

class Down(torch.nn.Module):
    def forward(self, x, **kwargs):
        if kwargs.get("scale") is not None:
            x = x * kwargs["scale"]
        return x
""",
        line=11,
        severity="info",
    ),
    Invalid(
        """
import torch

def collate(samples):
    res = {"net_input": {"source": torch.stack([s["source"] for s in samples])}}
    if "target" in samples[0]:        # passes on what the samples had: no optional key
        res["net_input"]["target"] = torch.stack([s["target"] for s in samples])
    return res

class Model(torch.nn.Module):
    def forward(self, net_input):
        x = net_input["source"]
        if "target" in net_input:
            x = x + net_input["target"]
        return x
""",
        line=13,
        severity="info",
    ),
    Invalid(
        """
import torch

def log(logging_output, target):
    if target.numel() > 0:            # a result being filled: not a batch key made optional
        logging_output["target"] = target.cpu()

class Model(torch.nn.Module):
    def forward(self, sample):
        x = sample["source"]
        if "target" in sample:
            x = x + sample["target"]
        return x
""",
        line=11,
        severity="info",
    ),
]
