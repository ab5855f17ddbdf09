"""A nanoGPT-sized transformer (random weights, random tokens) trained with torch.compile.

Two habits that cost compiles: batches packed to their longest sequence (a new length every
step), and a training metric read with `.item()` inside forward (a graph break, and the float it
returns is guarded in the graph after the break).
"""

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
VOCAB, BLOCK, LAYERS, HEADS, EMBED = 128, 32, 2, 2, 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(EMBED), nn.LayerNorm(EMBED)
        self.qkv = nn.Linear(EMBED, 3 * EMBED)
        self.proj = nn.Linear(EMBED, EMBED)
        self.mlp = nn.Sequential(nn.Linear(EMBED, 4 * EMBED), nn.GELU(), nn.Linear(4 * EMBED, EMBED))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(EMBED, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, EMBED)
        self.pos = nn.Embedding(BLOCK, EMBED)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(EMBED, VOCAB, bias=False)
        self.last_accuracy = 0.0

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        self.last_accuracy = (logits.argmax(-1) == targets).float().mean().item()  # for the progress bar
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1), ignore_index=-1)
        return loss / math.log(VOCAB)


def batch(step: int):
    length = BLOCK if step < 3 else 16 + (step * 5) % 17  # packed to the longest sequence; short ones from step 3
    tokens = torch.randint(0, VOCAB, (4, length + 1))
    return tokens[:, :-1], tokens[:, 1:]


torch.manual_seed(0)
model = GPT()
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(STEPS):
    idx, targets = batch(step)
    loss = compiled(idx, targets)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step} loss {loss.item():.3f} acc {model.last_accuracy:.3f}")
