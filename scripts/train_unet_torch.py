#!/usr/bin/env python3
"""PyTorch's side of `examples/train_unet.rs`: the same UNet (milesial's
Pytorch-UNet blocks, two levels, bilinear upsampling with
`align_corners=True`), the same loss (cross-entropy plus the dice loss on
`softmax` against `F.one_hot`), the same optimizer (`RMSprop`, weight decay
1e-8, momentum 0.9, gradients clipped at 1.0) and schedule
(`ReduceLROnPlateau(mode='max', patience=2)` on the validation dice), on the
same noisy digits in the same batches (a SplitMix64 hash), so that the two
runs' losses compare epoch for epoch. Only the initial weights differ (each
library draws its own from the same distributions).

    python3 scripts/train_unet_torch.py [--epochs N] [--threads T] [--device cuda]

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
EPOCHS, BATCH, SEED, NOISE, FOREGROUND, VALIDATION = 15, 32, 59, 0.35, 0.3, 1 << 20
MASK = (1 << 64) - 1


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class UNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.inc = DoubleConv(1, 16, 16)
        self.down1 = Down(16, 32)
        self.down2 = Down(32, 64 // 2)
        self.up1 = Up(64, 32 // 2)
        self.up2 = Up(32, 16)
        self.outc = nn.Conv2d(16, classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        return self.outc(self.up2(self.up1(x3, x2), x1))


def dice(predicted, target, epsilon=1e-6):
    """`dice_coeff(.., reduce_batch_first=True)` over every element."""
    inter = 2 * (predicted * target).sum()
    return (inter + epsilon) / (predicted.sum() + target.sum() + epsilon)


def loss_of(logits, mask):
    target = F.one_hot(mask, logits.shape[1]).permute(0, 3, 1, 2).float()
    return F.cross_entropy(logits, mask) + (1 - dice(F.softmax(logits, dim=1), target))


def dice_score(logits, mask):
    """The foreground's dice per image, averaged (the repository's evaluate)."""
    predicted, target = logits.argmax(dim=1).float(), mask.float()
    inter = 2 * (predicted * target).sum(dim=(1, 2))
    sets = predicted.sum(dim=(1, 2)) + target.sum(dim=(1, 2))
    return ((inter + 1e-6) / (sets + 1e-6)).mean().item()


def splitmix(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def order(n, key):
    return sorted(range(n), key=lambda i: splitmix(((key << 32) | i) & MASK))


def load_digits():
    with gzip.open(os.path.join(ROOT, "examples", "data", "digits.csv.gz"), "rt") as f:
        rows = [line.split(",") for line in f if line.strip()]
    return [[float(v) for v in row[:64]] for row in rows], [int(float(row[64])) for row in rows]


def batch(pixels, indices, epoch, device):
    noisy, mask = [], []
    for i in indices:
        for p in range(64):
            clean = pixels[i][p] / 16.0
            key = ((epoch * 1_000_003 + i) * 64 + p) & MASK
            u = (splitmix(key ^ 0xD1B54A32D192ED03) >> 11) / float(1 << 53)
            noisy.append(min(max(clean + NOISE * (2.0 * u - 1.0), 0.0), 1.0))
            mask.append(int(clean > FOREGROUND))
    n = len(indices)
    x = torch.tensor(noisy, dtype=torch.float32).reshape(n, 1, 8, 8)
    return x.to(device), torch.tensor(mask, dtype=torch.int64).reshape(n, 8, 8).to(device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pixels, labels = load_digits()
    shuffled = order(len(labels), SEED)
    cut = len(labels) * 4 // 5
    train_set, val_set = shuffled[:cut], shuffled[cut:]
    val_x, val_mask = batch(pixels, val_set, VALIDATION, args.device)

    torch.manual_seed(SEED)
    model = UNet(2).to(args.device)
    print(f"{len(train_set)} training and {len(val_set)} validation digits, a UNet of "
          f"{sum(p.numel() for p in model.parameters())} parameters, on {args.device}, torch {torch.__version__}")
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.9)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=2)
    started, spent = time.time(), 0.0
    for epoch in range(args.epochs):
        model.train()
        perm = order(len(train_set), SEED + 1 + epoch)
        steps = len(train_set) // BATCH
        batches = [batch(pixels, [train_set[k] for k in perm[s * BATCH:(s + 1) * BATCH]], epoch, args.device)
                   for s in range(steps)]
        total, began = 0.0, time.time()
        for x, mask in batches:
            loss = loss_of(model(x), mask)
            total += loss.item()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(val_x)
            val_loss, score = loss_of(logits, val_mask).item(), dice_score(logits, val_mask)
        spent += time.time() - began
        plateau.step(score)
        print(f"epoch {epoch + 1:2}: train loss {total / steps:.4f}, val loss {val_loss:.4f}, val dice {score:.4f}, "
              f"lr {opt.param_groups[0]['lr']:.0e} ({spent:.1f} s training, {time.time() - started:.1f} s in all)")


if __name__ == "__main__":
    main()
