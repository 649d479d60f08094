//! Criterion benchmarks of the CPU kernels: `cargo bench --bench ops`.
//!
//! Sample counts are kept low so the whole run takes a few minutes on a
//! two-core machine; the one-run comparison with candle and with the
//! machine's peak lives in `benches/peers`.

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use devtensor::{Cpu, Generator, Tensor};
use std::hint::black_box;
use std::time::Duration;

/// Square f32 products; throughput in multiply-adds x 2 (FLOP) per second,
/// reported by criterion as "elements" (one element = one FLOP).
fn matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("matmul_f32");
    // Flat sampling: the same iteration count per sample, so ten samples of
    // the 2048 product take seconds, not the half minute of linear sampling.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut rng = Generator::new(0);
    for n in [64usize, 128, 256, 512, 1024, 2048] {
        let a = Tensor::<Cpu>::randn_with([n, n], &mut rng);
        let b = Tensor::<Cpu>::randn_with([n, n], &mut rng);
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| {
            bench.iter(|| black_box(&a).matmul(black_box(&b)))
        });
    }
    group.finish();
}

/// `a + b` on contiguous f32 vectors: one that fits in L1 (fixed per-op cost
/// dominates) and one of 64 MiB per operand (memory bandwidth dominates).
/// Throughput in bytes moved: two reads and one write per element for the
/// add, one read and one write for the scalar multiply and the unary ops.
fn elementwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("elementwise_f32");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut rng = Generator::new(1);
    for (label, len) in [("4096", 4096usize), ("16M", 1 << 24)] {
        let a = Tensor::<Cpu>::randn_with([len], &mut rng);
        let b = Tensor::<Cpu>::randn_with([len], &mut rng);
        group.throughput(Throughput::Bytes(3 * 4 * len as u64));
        group.bench_function(BenchmarkId::new("add", label), |bench| bench.iter(|| black_box(&a) + black_box(&b)));
        group.throughput(Throughput::Bytes(2 * 4 * len as u64));
        group.bench_function(BenchmarkId::new("mul_scalar", label), |bench| bench.iter(|| black_box(&a) * 1.5f32));
        // Unary ops, one read and one write each: a cheap one, one with
        // parameters, and two transcendental ones.
        group.bench_function(BenchmarkId::new("relu", label), |bench| bench.iter(|| black_box(&a).relu()));
        group.bench_function(BenchmarkId::new("clamp", label), |bench| bench.iter(|| black_box(&a).clamp(-0.5, 0.5)));
        group.bench_function(BenchmarkId::new("exp", label), |bench| bench.iter(|| black_box(&a).exp()));
        group.bench_function(BenchmarkId::new("sigmoid", label), |bench| bench.iter(|| black_box(&a).sigmoid()));
    }
    group.finish();
}

fn reductions(c: &mut Criterion) {
    let mut group = c.benchmark_group("reduce");
    group.sample_size(20);
    for (label, len) in [("4096", 4096usize), ("16M", 1 << 24)] {
        let x = Tensor::<Cpu>::randn([len]);
        group.throughput(Throughput::Bytes(4 * len as u64));
        group.bench_function(BenchmarkId::new("sum", label), |bench| bench.iter(|| black_box(&x).sum()));
    }
    // A [batch, features] matrix reduced over rows and over columns.
    let m = Tensor::<Cpu>::randn([4096, 1024]);
    group.throughput(Throughput::Bytes(4 * 4096 * 1024));
    group.bench_function("sum_axis_last/4096x1024", |bench| bench.iter(|| black_box(&m).sum_axis(-1)));
    group.bench_function("sum_axis_first/4096x1024", |bench| bench.iter(|| black_box(&m).sum_axis(0)));
    group.bench_function("argmax_last/4096x1024", |bench| bench.iter(|| black_box(&m).argmax(-1)));
    group.finish();
}

fn softmax(c: &mut Criterion) {
    let mut group = c.benchmark_group("softmax");
    group.sample_size(20);
    for (rows, cols) in [(64usize, 10usize), (4096, 1024)] {
        let x = Tensor::<Cpu>::randn([rows, cols]);
        group.throughput(Throughput::Bytes(2 * 4 * (rows * cols) as u64));
        let label = format!("{rows}x{cols}");
        group.bench_function(BenchmarkId::new("softmax", &label), |bench| bench.iter(|| black_box(&x).softmax(-1)));
        group.bench_function(BenchmarkId::new("log_softmax", &label), |bench| {
            bench.iter(|| black_box(&x).log_softmax(-1))
        });
    }
    group.finish();
}

criterion_group!(benches, matmul, elementwise, reductions, softmax);
criterion_main!(benches);
