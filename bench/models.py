"""Small reference models shared by the benchmarks and tests: plain PyTorch,
nothing device specific."""
import math

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    """GPT-style decoder: token + position embeddings, pre-norm blocks with
    causal attention, tied LM head."""

    def __init__(self, vocab=512, d=256, layers=4, heads=4, seq=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 if p is not self.tok.weight else 1 / math.sqrt(d))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def gpt_batch(batch, seq, vocab, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return data[:, :-1].to(device), data[:, 1:].to(device)


def gpt_loss(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def gpt_train_step(model, opt):
    """A training step function: zero_grad, loss, backward, optimizer step."""

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = gpt_loss(model, x, y)
        loss.backward()
        opt.step()
        return loss

    return step
