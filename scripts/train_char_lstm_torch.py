#!/usr/bin/env python3
"""PyTorch's side of `examples/train_char_lstm.rs`: the same character-level
LSTM (an embedding of 64, a 2-layer `nn.LSTM` of 256 with dropout 0.2,
`batch_first`, a linear head), the same settings (batch 16, sequence 32,
Adam at 2e-3, gradients clipped at 1.0), the same text and the same batches
(SplitMix64 positions), so that the two runs' losses compare step for step.
Only the initial weights and the dropout masks differ (each library draws
its own from the same distributions).

    python3 scripts/train_char_lstm_torch.py [--steps N] [--threads T] [--device cuda]

Run it with the Python that `benches/peers/torch-env.sh` prints (it
installs PyTorch's wheel once).
"""

import argparse
import gzip
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, SEQ, EMBED, HIDDEN, LAYERS, EVAL_EVERY, EVAL_BATCHES = 16, 32, 64, 256, 2, 250, 20
MASK = (1 << 64) - 1


class CharLstm(nn.Module):
    """The field names of the example's `CharLstm`."""

    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, batch_first=True, dropout=0.2)
        self.head = nn.Linear(HIDDEN, vocab)

    def forward(self, x, targets):
        out, _ = self.lstm(self.embed(x))
        logits = self.head(out)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def splitmix(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def batch(tokens, stream, index):
    """`Split::batch` of the example: the same windows, the same order."""
    starts = len(tokens) - SEQ - 1
    rows = [splitmix(stream ^ splitmix(index * BATCH + row)) % starts for row in range(BATCH)]
    x = torch.stack([tokens[s:s + SEQ] for s in rows])
    y = torch.stack([tokens[s + 1:s + 1 + SEQ] for s in rows])
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    with gzip.open(os.path.join(ROOT, "examples/data/shakespeare.txt.gz"), "rb") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long, device=args.device)
    cut = len(tokens) * 9 // 10
    train, val = tokens[:cut], tokens[cut:]
    model = CharLstm(len(vocab)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    print(f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, "
          f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)

    def loss_of(split, stream, first):
        model.eval()
        with torch.no_grad():
            loss = sum(model(*batch(split, stream, first + i)).item() for i in range(EVAL_BATCHES)) / EVAL_BATCHES
        model.train()
        return loss

    started = time.perf_counter()
    for step in range(args.steps + 1):
        if step % EVAL_EVERY == 0 or step == args.steps:
            train_loss, val_loss = loss_of(train, 1, 1 << 40), loss_of(val, 2, 0)
            print(f"step {step:5}: train loss {train_loss:.4f}, val loss {val_loss:.4f} "
                  f"({time.perf_counter() - started:.1f} s)", flush=True)
        if step == args.steps:
            break
        loss = model(*batch(train, 1, step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    print(f"trained {args.steps} steps in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
