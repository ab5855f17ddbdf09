"""FIXED: the same MoE block with the three causes removed, the seed's way.

    detective run --mode diagnose -- python examples/moe/moe_fixed.py

1. The overflow counters are buffers updated in place on the device: no `.item()`, no Python
   number in the graph.
2. The capacity is clamped at config time from the configured tokens per batch; the collator's
   count never reaches the graph.
3. The collator canonicalises the batch: `doc_ids` is always there (one document when the data
   had none), and the mask is always applied.

Same batches as moe_broken.py; two programs (steps 0 and 1), then none.
"""

import math

import torch
import torch_xla

STEPS = 8
BATCH, SEQ, DIM, VOCAB, EXPERTS = 4, 16, 32, 64, 4
CAPACITY_FACTOR = 2.0
WITH_DOC_IDS, SKEWED, PADDED = {3}, {5}, {6}


class MoEBlock(torch.nn.Module):
    """Attention, then top-1 routing to experts with a fixed capacity per expert."""

    def __init__(self, dim=DIM, experts=EXPERTS, capacity_factor=CAPACITY_FACTOR, drop_penalty=0.1,
                 max_tokens=BATCH * SEQ):
        super().__init__()
        self.num_experts, self.capacity_factor, self.drop_penalty = experts, capacity_factor, drop_penalty
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.router = torch.nn.Linear(dim, experts)
        self.w1 = torch.nn.Parameter(torch.randn(experts, dim, 2 * dim) / math.sqrt(dim))
        self.w2 = torch.nn.Parameter(torch.randn(experts, 2 * dim, dim) / math.sqrt(2 * dim))
        self.register_buffer("expert_ids", torch.arange(experts))
        self.register_buffer("overflow_total", torch.zeros((), dtype=torch.long))  # dropped tokens
        self.register_buffer("tokens_total", torch.zeros((), dtype=torch.long))
        self.capacity = math.ceil(capacity_factor * max_tokens / experts)  # fixed at config time

    def attention(self, x, batch):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
        same_doc = batch["doc_ids"][:, :, None] == batch["doc_ids"][:, None, :]  # always present
        scores = scores.masked_fill(~same_doc, -1e4)
        return x + scores.softmax(-1) @ v

    def forward(self, x, batch):
        x = self.attention(x, batch)
        b, t, d = x.shape
        tokens = x.reshape(b * t, d)
        capacity = self.capacity
        probs = self.router(tokens).softmax(-1)
        gate, expert = probs.max(-1)
        onehot = (expert[:, None] == self.expert_ids[None, :]).long()
        position = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
        keep = position < capacity
        dropped = (~keep).sum()
        self.overflow_total.add_(dropped)
        self.tokens_total.add_(b * t)
        trash = self.num_experts * capacity  # one extra slot collects the dropped tokens
        slot = torch.where(keep, expert * capacity + position, trash)
        dispatch = tokens.new_zeros(self.num_experts * capacity + 1, d).index_add(0, slot, tokens)
        expert_in = dispatch[:trash].view(self.num_experts, capacity, d)
        expert_out = torch.bmm(torch.relu(torch.bmm(expert_in, self.w1)), self.w2).reshape(trash, d)
        expert_out = torch.cat([expert_out, expert_out.new_zeros(1, d)])
        combined = expert_out[slot] * (gate * keep).unsqueeze(-1)
        aux = (probs.mean(0) * onehot.float().mean(0)).sum() * self.num_experts
        aux = aux + self.drop_penalty * self.overflow_total / self.tokens_total
        return x + combined.view(b, t, d), aux


class TinyMoELM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.block = MoEBlock()
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, batch):
        h, aux = self.block(self.embed(batch["tokens"]), batch)
        loss = torch.nn.functional.cross_entropy(self.head(h).flatten(0, 1), batch["labels"].flatten())
        return loss + 0.01 * aux


def batches():
    """The collator: fixed [BATCH, SEQ] padding, the real token count, always doc ids."""
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        tokens = torch.randint(1, VOCAB, (BATCH, SEQ), generator=g)
        if step in SKEWED:
            tokens[:] = 7  # one token everywhere: the router sends all of them to one expert
        ntokens = BATCH * SEQ
        if step in PADDED:
            tokens[:, -2:] = 0  # padding
            ntokens -= 2 * BATCH
        batch = {"tokens": tokens, "labels": torch.roll(tokens, -1, dims=1), "ntokens": ntokens}
        if step in WITH_DOC_IDS:
            batch["doc_ids"] = (torch.arange(SEQ) >= SEQ // 2).long().expand(BATCH, SEQ).clone()
        else:
            batch["doc_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.long)  # one document per row
        yield batch


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = TinyMoELM().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, batch in enumerate(batches()):
        batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        opt.zero_grad(set_to_none=False)
        loss = model(batch)
        loss.backward()
        opt.step()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.3f} dropped so far {model.block.overflow_total.item()}")


if __name__ == "__main__":
    main()
