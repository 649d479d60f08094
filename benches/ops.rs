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
    group.sampling_mode(SamplingMode::Flat).sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let mut rng = Generator::new(0);
    for n in [64usize, 128, 256, 512, 1024, 2048] {
        let a = Tensor::<Cpu>::randn_with([n, n], &mut rng);
        let b = Tensor::<Cpu>::randn_with([n, n], &mut rng);
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| bench.iter(|| black_box(&a).matmul(black_box(&b))));
    }
    group.finish();
}

/// `a + b` on contiguous f32 vectors: one that fits in L1 (fixed per-op cost
/// dominates) and one of 64 MiB per operand (memory bandwidth dominates).
/// Throughput in bytes moved: two reads and one write per element for the
/// add, one read and one write for the scalar multiply.
fn elementwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("elementwise_f32");
    group.sampling_mode(SamplingMode::Flat).sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let mut rng = Generator::new(1);
    for (label, len) in [("4096", 4096usize), ("16M", 1 << 24)] {
        let a = Tensor::<Cpu>::randn_with([len], &mut rng);
        let b = Tensor::<Cpu>::randn_with([len], &mut rng);
        group.throughput(Throughput::Bytes(3 * 4 * len as u64));
        group.bench_function(BenchmarkId::new("add", label), |bench| bench.iter(|| black_box(&a) + black_box(&b)));
        group.throughput(Throughput::Bytes(2 * 4 * len as u64));
        group.bench_function(BenchmarkId::new("mul_scalar", label), |bench| bench.iter(|| black_box(&a) * 1.5f32));
    }
    group.finish();
}

// Room for the reduction and softmax benchmarks (`sum`, `softmax`), added
// once those ops are merged: put their functions here, e.g.
// `fn reductions(c: &mut Criterion)` over 4096 and 16M elements and
// `fn softmax(c: &mut Criterion)` over [rows, 1024] with
// `Throughput::Bytes`, and add them to `criterion_group!` below.

criterion_group!(benches, matmul, elementwise);
criterion_main!(benches);
