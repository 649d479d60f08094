//! Criterion benchmarks of the CUDA backend on `Cuda<0>`:
//! `cargo bench --bench cuda`.
//!
//! Operations are asynchronous, so each sample queues `iters` operations and
//! then waits for the GPU once (`Cuda::<0>::synchronize()`): the time per
//! operation is GPU time for large inputs and the launch cost for small
//! ones. Rates are reported through criterion's throughput: FLOP/s for
//! products (shown as "elem/s"), bytes moved for everything else.
//! `benches/peers/torch_cuda.py` runs the same operations through PyTorch,
//! and BENCHMARKS.md says what each row is judged against.
//!
//! Without a usable GPU the suite prints one `SKIP` line and exits. Set
//! `DEVTENSOR_BENCH_SMALL=1` to divide every size by 64, for a smoke test
//! under the emulated GPU (`bash scripts/with-emu.sh cargo bench --bench cuda
//! -- --test`).

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use devtensor::ops::attention::AttentionMask;
use devtensor::ops::matmul::{MatmulPrecision, set_float32_matmul_precision};
use devtensor::{Cpu, Cuda, Element, FloatElement, Generator, Tensor, bf16, f16, no_grad};
use std::hint::black_box;
use std::time::{Duration, Instant};

type Gpu = Cuda<0>;

/// `n`, divided by 64 (at least 1) when `DEVTENSOR_BENCH_SMALL=1`.
fn size(n: usize) -> usize {
    match std::env::var("DEVTENSOR_BENCH_SMALL").as_deref() {
        Ok("1") => (n / 64).max(1),
        _ => n,
    }
}

fn sync() {
    Cuda::<0>::synchronize().expect("the GPU ran the queued work");
}

/// Times `iters` runs of `op` queued back to back, plus one wait for the GPU.
fn queued<R>(iters: u64, mut op: impl FnMut() -> R) -> Duration {
    sync();
    let start = Instant::now();
    for _ in 0..iters {
        black_box(op());
    }
    sync();
    start.elapsed()
}

fn randn<E: Element>(dims: &[usize], seed: u64) -> Tensor<Gpu, E> {
    Tensor::<Cpu>::randn_with(dims.to_vec(), &mut Generator::new(seed)).to_dtype::<E>().to::<Gpu>()
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
}

/// cuBLAS strided-batched GEMM through `matmul`; throughput in FLOP.
fn matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("cuda_matmul");
    configure(&mut group);
    for n in [1024, 4096, 8192].map(size) {
        let (a, b) = (randn::<f32>(&[n, n], 1), randn::<f32>(&[n, n], 2));
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.bench_function(BenchmarkId::new("f32", n), |bench| {
            bench.iter_custom(|iters| queued(iters, || a.matmul(&b)))
        });
    }
    let n = size(4096);
    let (a, b) = (randn::<f64>(&[n, n], 3), randn::<f64>(&[n, n], 4));
    group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
    group.bench_function(BenchmarkId::new("f64", n), |bench| bench.iter_custom(|iters| queued(iters, || a.matmul(&b))));
    // The half types on the tensor cores (f32 sums), and f32 through TF32.
    for n in [4096, 8192].map(size) {
        let (a, b) = (randn::<bf16>(&[n, n], 7), randn::<bf16>(&[n, n], 8));
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.bench_function(BenchmarkId::new("bf16", n), |bench| {
            bench.iter_custom(|iters| queued(iters, || a.matmul(&b)))
        });
    }
    let n = size(4096);
    group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
    let (a, b) = (randn::<f16>(&[n, n], 9), randn::<f16>(&[n, n], 10));
    group.bench_function(BenchmarkId::new("f16", n), |bench| bench.iter_custom(|iters| queued(iters, || a.matmul(&b))));
    let (a, b) = (randn::<f32>(&[n, n], 11), randn::<f32>(&[n, n], 12));
    set_float32_matmul_precision(MatmulPrecision::High);
    group.bench_function(BenchmarkId::new("f32_tf32", n), |bench| {
        bench.iter_custom(|iters| queued(iters, || a.matmul(&b)))
    });
    set_float32_matmul_precision(MatmulPrecision::Highest);
    let (batch, n) = (64, size(512));
    let (a, b) = (randn::<f32>(&[batch, n, n], 5), randn::<f32>(&[batch, n, n], 6));
    group.throughput(Throughput::Elements(2 * batch as u64 * (n as u64).pow(3)));
    group.bench_function(BenchmarkId::new("f32_batched_64", n), |bench| {
        bench.iter_custom(|iters| queued(iters, || a.matmul(&b)))
    });
    group.finish();
}

/// Element-wise kernels: a tiny add (the launch cost) and 64M-element
/// operands (memory bandwidth), dense, broadcast and transposed.
fn elementwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("cuda_elementwise");
    configure(&mut group);
    let (a, b) = (randn::<f32>(&[4096], 7), randn::<f32>(&[4096], 8));
    group.throughput(Throughput::Bytes(3 * 4 * 4096));
    group.bench_function("add/4096", |bench| bench.iter_custom(|iters| queued(iters, || &a + &b)));

    let n = size(1 << 26);
    let (a, b) = (randn::<f32>(&[n], 9), randn::<f32>(&[n], 10));
    group.throughput(Throughput::Bytes(3 * 4 * n as u64));
    group.bench_function("add/64M", |bench| bench.iter_custom(|iters| queued(iters, || &a + &b)));
    group.throughput(Throughput::Bytes(2 * 4 * n as u64));
    group.bench_function("mul_scalar/64M", |bench| bench.iter_custom(|iters| queued(iters, || &a * 1.5f32)));
    group.bench_function("exp/64M", |bench| bench.iter_custom(|iters| queued(iters, || a.exp())));

    let side = size(8192);
    let (m, row) = (randn::<f32>(&[side, side], 11), randn::<f32>(&[side], 12));
    group.throughput(Throughput::Bytes(4 * (2 * side * side + side) as u64));
    group.bench_function("add_broadcast_row/8192x8192", |bench| bench.iter_custom(|iters| queued(iters, || &m + &row)));
    let other = randn::<f32>(&[side, side], 13);
    group.throughput(Throughput::Bytes(3 * 4 * (side * side) as u64));
    group.bench_function("add_transposed/8192x8192", |bench| {
        bench.iter_custom(|iters| queued(iters, || m.t() + &other))
    });
    group.finish();
}

/// Reductions and softmax; throughput in bytes read.
fn reductions(c: &mut Criterion) {
    let mut group = c.benchmark_group("cuda_reduce");
    configure(&mut group);
    let n = size(1 << 26);
    let x = randn::<f32>(&[n], 14);
    group.throughput(Throughput::Bytes(4 * n as u64));
    group.bench_function("sum/64M", |bench| bench.iter_custom(|iters| queued(iters, || x.sum())));
    let side = size(8192);
    let m = randn::<f32>(&[side, side], 15);
    group.throughput(Throughput::Bytes(4 * (side * side) as u64));
    group
        .bench_function("sum_axis_last/8192x8192", |bench| bench.iter_custom(|iters| queued(iters, || m.sum_axis(-1))));
    group
        .bench_function("sum_axis_first/8192x8192", |bench| bench.iter_custom(|iters| queued(iters, || m.sum_axis(0))));
    group.bench_function("argmax_last/8192x8192", |bench| bench.iter_custom(|iters| queued(iters, || m.argmax(-1))));
    // Softmax reads and writes every element.
    group.throughput(Throughput::Bytes(2 * 4 * (side * side) as u64));
    group.bench_function("softmax_last/8192x8192", |bench| bench.iter_custom(|iters| queued(iters, || m.softmax(-1))));
    let (rows, cols) = (size(65536), 1024);
    let wide = randn::<f32>(&[rows, cols], 16);
    group.throughput(Throughput::Bytes(2 * 4 * (rows * cols) as u64));
    group.bench_function("softmax_last/65536x1024", |bench| {
        bench.iter_custom(|iters| queued(iters, || wide.softmax(-1)))
    });
    group.finish();
}

/// Causal attention in one call at a small GPT's batch, heads and head
/// width (16, 4, 32) and three context lengths, forward and forward plus
/// backward; throughput in FLOP of the two products over the causal half of
/// the scores (forward), three times that with the backward.
fn attention(c: &mut Criterion) {
    let mut group = c.benchmark_group("cuda_attention");
    configure(&mut group);
    for t in [64, 256, 1024] {
        causal_attention::<f32>(&mut group, "", [16, 4, t, 32]);
    }
    // The half types' kernels: bf16 at the same shapes, and at a larger
    // model's (16 heads of 64).
    for t in [256, 1024] {
        causal_attention::<bf16>(&mut group, "bf16_", [16, 4, t, 32]);
    }
    causal_attention::<bf16>(&mut group, "bf16_", [4, 16, 2048, 64]);
    group.finish();
}

/// Causal attention over `[batch, heads, t, d]` (the batch divided by 64
/// under `DEVTENSOR_BENCH_SMALL=1`, the context by 8), forward, and forward
/// plus backward, named `causal_fwd_<prefix>BxHxTxD/t`.
fn causal_attention<E: FloatElement>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    prefix: &str,
    [batch, heads, t, d]: [usize; 4],
) {
    let name = format!("{prefix}{batch}x{heads}xTx{d}");
    let (batch, t) = ((size(batch * 64) / 64).max(1), (size(t * 8) / 8).max(1));
    let shape = [batch, heads, t, d];
    let q = randn::<E>(&shape, 31).requires_grad();
    let k = randn::<E>(&shape, 32).requires_grad();
    let v = randn::<E>(&shape, 33).requires_grad();
    let g = randn::<E>(&shape, 34);
    let attend = || q.scaled_dot_product_attention(&k, &v, AttentionMask::Causal, None);
    let flops = 2 * (batch * heads * t * t * d) as u64;
    group.throughput(Throughput::Elements(flops));
    group.bench_function(BenchmarkId::new(format!("causal_fwd_{name}"), t), |bench| {
        bench.iter_custom(|iters| queued(iters, || no_grad(attend)))
    });
    group.throughput(Throughput::Elements(3 * flops));
    group.bench_function(BenchmarkId::new(format!("causal_fwd_bwd_{name}"), t), |bench| {
        bench.iter_custom(|iters| queued(iters, || (&attend() * &g).sum().backward()))
    });
}

/// Copies of 256 MiB: host to device and back, from ordinary and from
/// page-locked memory, and within the device.
fn transfers(c: &mut Criterion) {
    let mut group = c.benchmark_group("cuda_transfer");
    configure(&mut group);
    let n = size(1 << 26);
    let bytes = 4 * n as u64;
    let host = Tensor::<Cpu>::randn_with([n], &mut Generator::new(17));
    let pinned = host.pin_memory();
    let device = host.to::<Gpu>();
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("h2d_pageable/256MiB", |bench| bench.iter_custom(|iters| queued(iters, || host.to::<Gpu>())));
    group.bench_function("h2d_pinned/256MiB", |bench| {
        bench.iter_custom(|iters| queued(iters, || pinned.to_async::<Gpu>().wait()))
    });
    group
        .bench_function("d2h_pageable/256MiB", |bench| bench.iter_custom(|iters| queued(iters, || device.to::<Cpu>())));
    group.bench_function("d2h_async/256MiB", |bench| {
        bench.iter_custom(|iters| queued(iters, || device.to_async::<Cpu>().wait()))
    });
    // Reads and writes every byte once.
    group.throughput(Throughput::Bytes(2 * bytes));
    group.bench_function("d2d_copy/256MiB", |bench| {
        bench.iter_custom(|iters| queued(iters, || device.to_dtype::<f32>()))
    });
    group.finish();
}

fn main() {
    if let Err(reason) = Cuda::<0>::try_init() {
        println!("SKIP cuda benches: {reason}");
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    matmul(&mut c);
    elementwise(&mut c);
    reductions(&mut c);
    transfers(&mut c);
    attention(&mut c);
    c.final_summary();
}
