"""PyTorch on the same operations and shapes as `benches/cuda.rs`, plus the
references a GPU run is judged against (achieved cuBLAS FP32, device copy
bandwidth, host<->device bandwidth from pageable and pinned memory).

Run on the GPU machine: `python3 benches/peers/torch_cuda.py`. Each row is
the median over several timed batches of queued operations, each batch
ended by `torch.cuda.synchronize()`, after a warm-up: the same method as the
criterion suite (`iter_custom` queuing `iters` operations, then one wait).
devtensor's matmul is cuBLAS SGEMM without TF32, so TF32 is off here too.
"""

import statistics
import sys
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
DEV = "cuda:0"


def timed(op, min_seconds=0.3, batches=7):
    """Median seconds per call of `op`, queued back to back."""
    op()
    torch.cuda.synchronize()
    # Calibrate: how many calls fill `min_seconds / batches`.
    iters, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(iters):
            op()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed > min_seconds / batches or iters >= 1 << 16:
            break
        iters *= 2
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(iters):
            op()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


def row(group, name, seconds, amount, unit):
    """Prints time and rate; `unit` is FLOP or B."""
    rate = amount / seconds
    pretty = f"{rate / 1e12:8.2f} TFLOP/s" if unit == "FLOP" else f"{rate / 1e9:8.1f} GB/s"
    if seconds < 1e-3:
        t = f"{seconds * 1e6:9.2f} us"
    else:
        t = f"{seconds * 1e3:9.3f} ms"
    print(f"{group:18} {name:30} {t}  {pretty}", flush=True)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def main():
    # `python3 benches/peers/torch_cuda.py attention matmul` runs only the
    # groups whose name holds one of the words.
    words = sys.argv[1:] or [""]
    want = lambda group: any(word in group for word in words)
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, "
          f"torch {torch.__version__}, CUDA {torch.version.cuda}, python {sys.version.split()[0]}")

    if want("cuda_matmul"):
        matmul_rows()
    if want("cuda_elementwise") or want("cuda_reduce"):
        elementwise_and_reduce_rows()
    if want("cuda_transfer"):
        transfer_rows()
    if want("cuda_attention"):
        attention_rows()
    if want("reference"):
        # The best this GPU does through PyTorch.
        big = torch.empty(1 << 28, device=DEV)  # 1 GiB
        dst = torch.empty_like(big)
        row("reference", "d2d_copy/1GiB (copy_)", timed(lambda: dst.copy_(big)), 2 * 4 * (1 << 28), "B")


def matmul_rows():
    for n in (1024, 4096, 8192):
        a, b = randn(n, n), randn(n, n)
        row("cuda_matmul", f"f32/{n}", timed(lambda: a @ b), 2 * n**3, "FLOP")
    a, b = randn(4096, 4096, dtype=torch.float64), randn(4096, 4096, dtype=torch.float64)
    row("cuda_matmul", "f64/4096", timed(lambda: a @ b), 2 * 4096**3, "FLOP")
    for n in (4096, 8192):
        a, b = randn(n, n, dtype=torch.bfloat16), randn(n, n, dtype=torch.bfloat16)
        row("cuda_matmul", f"bf16/{n}", timed(lambda: a @ b), 2 * n**3, "FLOP")
    a, b = randn(4096, 4096, dtype=torch.float16), randn(4096, 4096, dtype=torch.float16)
    row("cuda_matmul", "f16/4096", timed(lambda: a @ b), 2 * 4096**3, "FLOP")
    a, b = randn(4096, 4096), randn(4096, 4096)
    torch.backends.cuda.matmul.allow_tf32 = True
    row("cuda_matmul", "f32_tf32/4096", timed(lambda: a @ b), 2 * 4096**3, "FLOP")
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = randn(64, 512, 512), randn(64, 512, 512)
    row("cuda_matmul", "f32_batched_64/512", timed(lambda: a @ b), 2 * 64 * 512**3, "FLOP")


def elementwise_and_reduce_rows():
    a, b = randn(4096), randn(4096)
    row("cuda_elementwise", "add/4096", timed(lambda: a + b), 3 * 4 * 4096, "B")
    n = 1 << 26
    a, b = randn(n), randn(n)
    row("cuda_elementwise", "add/64M", timed(lambda: a + b), 3 * 4 * n, "B")
    row("cuda_elementwise", "mul_scalar/64M", timed(lambda: a * 1.5), 2 * 4 * n, "B")
    row("cuda_elementwise", "exp/64M", timed(lambda: a.exp()), 2 * 4 * n, "B")
    side = 8192
    m, r, other = randn(side, side), randn(side), randn(side, side)
    row("cuda_elementwise", "add_broadcast_row/8192x8192", timed(lambda: m + r), 4 * (2 * side * side + side), "B")
    row("cuda_elementwise", "add_transposed/8192x8192", timed(lambda: m.t() + other), 3 * 4 * side * side, "B")

    x = randn(n)
    row("cuda_reduce", "sum/64M", timed(lambda: x.sum()), 4 * n, "B")
    row("cuda_reduce", "sum_axis_last/8192x8192", timed(lambda: m.sum(-1)), 4 * side * side, "B")
    row("cuda_reduce", "sum_axis_first/8192x8192", timed(lambda: m.sum(0)), 4 * side * side, "B")
    row("cuda_reduce", "argmax_last/8192x8192", timed(lambda: m.argmax(-1)), 4 * side * side, "B")
    row("cuda_reduce", "softmax_last/8192x8192", timed(lambda: m.softmax(-1)), 2 * 4 * side * side, "B")
    wide = randn(65536, 1024)
    row("cuda_reduce", "softmax_last/65536x1024", timed(lambda: wide.softmax(-1)), 2 * 4 * 65536 * 1024, "B")


def transfer_rows():
    n = 1 << 26
    bytes_ = 4 * n
    host = torch.randn(n)
    pinned = host.pin_memory()
    dev = host.to(DEV)
    row("cuda_transfer", "h2d_pageable/256MiB", timed(lambda: host.to(DEV)), bytes_, "B")
    row("cuda_transfer", "h2d_pinned/256MiB", timed(lambda: pinned.to(DEV, non_blocking=True)), bytes_, "B")
    row("cuda_transfer", "d2h_pageable/256MiB", timed(lambda: dev.to("cpu")), bytes_, "B")
    out = torch.empty(n, pin_memory=True)
    row("cuda_transfer", "d2h_pinned/256MiB", timed(lambda: out.copy_(dev, non_blocking=True)), bytes_, "B")
    row("cuda_transfer", "d2d_copy/256MiB", timed(lambda: dev.clone()), 2 * bytes_, "B")


def attention_rows():
    # Causal attention, as benches/cuda.rs's cuda_attention group: batch 16,
    # 4 heads, head width 32, in f32 and bf16, and bf16 at 4 x 16 heads of
    # 64; FLOP of the two products over the causal half.
    shapes = [("", torch.float32, (16, 4, t, 32)) for t in (64, 256, 1024)]
    shapes += [("bf16_", torch.bfloat16, (16, 4, t, 32)) for t in (256, 1024)]
    shapes += [("bf16_", torch.bfloat16, (4, 16, 2048, 64))]
    for prefix, dtype, (b, h, t, d) in shapes:
        q, k, v, g = (randn(b, h, t, d, dtype=dtype).requires_grad_(i < 3) for i in range(4))
        flops = 2 * b * h * t * t * d
        name = f"{prefix}{b}x{h}xTx{d}/{t}"
        with torch.no_grad():
            row("cuda_attention", f"causal_fwd_{name}",
                timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), flops, "FLOP")
        row("cuda_attention", f"causal_fwd_bwd_{name}",
            timed(lambda: (F.scaled_dot_product_attention(q, k, v, is_causal=True) * g).sum().backward()),
            3 * flops, "FLOP")


if __name__ == "__main__":
    main()
