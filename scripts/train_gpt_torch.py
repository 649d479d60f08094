#!/usr/bin/env python3
"""PyTorch's side of `examples/train_gpt.rs`: the same character-level GPT
(nanoGPT's model with biases and no dropout), the same settings, the same
text and the same batches (SplitMix64 positions), so that the two runs'
losses compare step for step. Only the initial weights differ (each
library draws its own from the same distributions).

    python3 scripts/train_gpt_torch.py [--steps N] [--threads T] [--device cuda] [--bf16]

`--bf16` runs the forward under `torch.autocast(device, dtype=torch.bfloat16)`,
the example's `--bf16`.

Run it with the Python that `benches/peers/torch-env.sh` prints (it
installs PyTorch's wheel once). `tests/fixtures/pytorch/make_fixtures.py`
imports the model from here for the parity fixture.
"""

import argparse
import gzip
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, BLOCK, EVAL_EVERY, EVAL_BATCHES = 12, 64, 250, 20
MASK = (1 << 64) - 1


class SelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        heads = lambda y: y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = SelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = Mlp(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """The parameter names of `examples/gpt/model.rs` (and nanoGPT's)."""

    def __init__(self, block_size, vocab_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer)),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight
        residual_std = 0.02 / math.sqrt(2 * n_layer)
        for name, p in self.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                continue
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, residual_std if name.endswith("c_proj.weight") else 0.02)

    def forward(self, idx, targets=None):
        """The mean cross-entropy against `targets`, or without them the logits."""
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    def optimizer(self, lr, weight_decay, betas):
        """AdamW with weight decay on the matrices only."""
        params = list(self.parameters())
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)


def splitmix(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def batch(tokens, stream, index):
    """`Split::batch` of the example: the same windows, the same order."""
    starts = len(tokens) - BLOCK - 1
    rows = [splitmix(stream ^ splitmix(index * BATCH + row)) % starts for row in range(BATCH)]
    x = torch.stack([tokens[s:s + BLOCK] for s in rows])
    y = torch.stack([tokens[s + 1:s + 1 + BLOCK] for s in rows])
    return x, y


def lr_at(step, steps):
    """The example's schedule: linear warm-up, then cosine decay to 1e-4."""
    warmup = min(steps // 20, 100)
    if step < warmup:
        start = 1.0 / max(warmup, 1)
        return 1e-3 * (start + (1.0 - start) * step / warmup)
    t, t_max = step - warmup, steps - warmup
    return 1e-4 + (1e-3 - 1e-4) * (1 + math.cos(math.pi * min(t, t_max) / t_max)) / 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU")
    parser.add_argument("--bf16", action="store_true", help="the forward under torch.autocast in bfloat16")
    args = parser.parse_args()
    amp = lambda: torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.bf16)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    with gzip.open(os.path.join(ROOT, "examples/data/shakespeare.txt.gz"), "rb") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long, device=args.device)
    cut = len(tokens) * 9 // 10
    train, val = tokens[:cut], tokens[cut:]
    model = Gpt(BLOCK, len(vocab), 4, 4, 128).to(args.device)
    opt = model.optimizer(1e-3, 0.1, (0.9, 0.99))
    print(f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, "
          f"{sum(p.numel() for p in model.parameters())} parameters, autocast bf16 {args.bf16}", flush=True)

    def loss_of(split, stream, first):
        with torch.no_grad(), amp():
            return sum(model(*batch(split, stream, first + i)).item() for i in range(EVAL_BATCHES)) / EVAL_BATCHES

    started = time.perf_counter()
    window, tokens_per_second = time.perf_counter(), 0.0
    for step in range(args.steps + 1):
        if step % EVAL_EVERY == 0 or step == args.steps:
            train_loss, val_loss = loss_of(train, 1, 1 << 40), loss_of(val, 2, 0)
            print(f"step {step:5}: train loss {train_loss:.4f}, val loss {val_loss:.4f}, "
                  f"{tokens_per_second:.0f} tokens/s", flush=True)
            window, window_tokens = time.perf_counter(), 0
        if step == args.steps:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps)
        with amp():
            loss = model(*batch(train, 1, step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        window_tokens += BATCH * BLOCK
        tokens_per_second = window_tokens / (time.perf_counter() - window)
    print(f"trained {args.steps} steps in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
