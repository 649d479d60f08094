//! Overlapping uploads with computation: the double-buffered loader that
//! PyTorch writes with `pin_memory=True` and `non_blocking=True`.
//!
//! Each step multiplies a batch by a weight matrix on the GPU. Three loops
//! feed it the same batches:
//! - `plain .to()`: from ordinary memory; the copy is queued behind the
//!   previous step's kernels and the host waits for it;
//! - `pinned, serial`: from page-locked memory (as a loader with
//!   `pin_memory=True` prepares it), each upload started once the previous
//!   step is over: no overlap, the pinned speed alone;
//! - `prefetching`: from page-locked memory, the upload of batch `i + 1`
//!   started before step `i`, so the GPU's copy engine moves the next batch
//!   while its cores work on this one.
//!
//! The pending transfer cannot be used until `.join()`, so the overlap can
//! never compute on a batch that has not arrived.
//!
//! Run with `cargo run --release --example prefetch` on a machine with a GPU
//! (without one it says so and exits).

use devtensor::{Cpu, Cuda, Generator, OnDevice, PinnedTensor, Tensor};
use std::time::Instant;

const BATCHES: usize = 16;
const ROWS: usize = 4096;
const FEATURES: usize = 4096;

type Gpu = Cuda<0>;

/// One training-like step: a product and a reduction, to keep the GPU busy.
/// The batch is taken as `&impl OnDevice<Gpu>`, so a batch handed over
/// before its upload is a compile error in devtensor's words.
fn step(x: &impl OnDevice<Gpu>, w: &Tensor<Gpu>) -> Tensor<Gpu> {
    x.tensor().matmul(w).relu().sum_axis(0)
}

fn plain(batches: &[Tensor<Cpu>], w: &Tensor<Gpu>) -> Vec<Tensor<Gpu>> {
    batches.iter().map(|batch| step(&batch.to::<Gpu>(), w)).collect()
}

fn pinned_serial(pinned: &[PinnedTensor], w: &Tensor<Gpu>) -> Vec<Tensor<Gpu>> {
    let mut outputs = Vec::with_capacity(pinned.len());
    for batch in pinned {
        Cuda::<0>::synchronize().expect("GPU work succeeds");
        outputs.push(step(&batch.to_async::<Gpu>().wait(), w));
    }
    outputs
}

fn prefetching(pinned: &[PinnedTensor], w: &Tensor<Gpu>) -> Vec<Tensor<Gpu>> {
    let mut outputs = Vec::with_capacity(pinned.len());
    let mut next = pinned.first().map(|batch| batch.to_async::<Gpu>());
    for i in 0..pinned.len() {
        let x = next.take().expect("one upload per batch").join(); // the GPU waits; the host goes on
        next = pinned.get(i + 1).map(|batch| batch.to_async::<Gpu>());
        outputs.push(step(&x, w));
    }
    outputs
}

fn timed(label: &str, run: impl Fn() -> Vec<Tensor<Gpu>>) -> Vec<Tensor<Gpu>> {
    run(); // warm-up: kernels compiled, buffers cached
    Cuda::<0>::synchronize().expect("GPU work succeeds");
    let start = Instant::now();
    let outputs = run();
    Cuda::<0>::synchronize().expect("GPU work succeeds");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let gib = (BATCHES * ROWS * FEATURES * 4) as f64 / (1u64 << 30) as f64;
    println!(
        "{label:>14}: {ms:7.1} ms for {BATCHES} batches ({gib:.1} GiB uploaded, {:.1} ms per batch)",
        ms / BATCHES as f64
    );
    outputs
}

fn main() {
    if let Err(reason) = Cuda::<0>::try_init() {
        println!("this example needs a GPU: {reason}");
        return;
    }
    let mut rng = Generator::new(7);
    let batches: Vec<Tensor<Cpu>> = (0..BATCHES).map(|_| Tensor::randn_with([ROWS, FEATURES], &mut rng)).collect();
    let pinned: Vec<PinnedTensor> = batches.iter().map(Tensor::pin_memory).collect();
    let w = Tensor::<Cpu>::randn_with([FEATURES, FEATURES], &mut rng).to::<Gpu>() * 0.02;
    let a = timed("plain .to()", || plain(&batches, &w));
    let b = timed("pinned, serial", || pinned_serial(&pinned, &w));
    let c = timed("prefetching", || prefetching(&pinned, &w));
    // Same batches, same kernels: the results agree exactly.
    for ((x, y), z) in a.iter().zip(&b).zip(&c) {
        assert_eq!(x.to_vec(), y.to_vec());
        assert_eq!(x.to_vec(), z.to_vec());
    }
    println!("results agree");
}
