//! Loader throughput: batches per second out of a `DataLoader` with 0, 1
//! and 2 worker threads, on the digits (64 x 1x8x8 per batch) and on seed
//! 002's synthetic batches (64 x 3x64x64). devtensor alone: the peer for
//! this figure is PyTorch's DataLoader, on a machine with a GPU.

use devtensor::data::{DataLoader, TensorDataset};
use devtensor::{Cpu, Generator, Tensor};
use std::time::Instant;

/// Median batches per second over `epochs` epochs, after one warm-up epoch.
fn batches_per_second(images: &Tensor<Cpu>, labels: &Tensor<Cpu, i64>, workers: usize, epochs: usize) -> (f64, usize) {
    let dataset = TensorDataset::try_new(images.clone(), labels.clone()).expect("one label per image");
    let mut loader = DataLoader::new(dataset, 64).shuffle(1).workers(workers);
    let mut rates = Vec::new();
    let mut batches = 0;
    for epoch in 0..=epochs {
        loader.set_epoch(epoch);
        let start = Instant::now();
        batches = 0;
        for batch in loader.iter() {
            std::hint::black_box(batch.expect("a batch"));
            batches += 1;
        }
        if epoch > 0 {
            rates.push(batches as f64 / start.elapsed().as_secs_f64());
        }
    }
    rates.sort_by(f64::total_cmp);
    (rates[rates.len() / 2], batches)
}

/// Prints the loader table.
pub fn report() {
    let mut g = Generator::new(3);
    let digits = (Tensor::<Cpu>::rand_with([1797, 1, 8, 8], &mut g), Tensor::<Cpu, i64>::zeros([1797]));
    let seed002 = (Tensor::<Cpu>::rand_with([1024, 3, 64, 64], &mut g), Tensor::<Cpu, i64>::zeros([1024]));
    println!("| data set | batch | workers | batches/s | samples/s |");
    println!("|---|---|---|---|---|");
    for (name, shape, (images, labels), epochs) in [
        ("digits (1797 images)", "64 x 1x8x8", &digits, 31),
        ("seed 002 synthetic (1024 images)", "64 x 3x64x64", &seed002, 11),
    ] {
        for workers in [0, 1, 2] {
            let (rate, batches) = batches_per_second(images, labels, workers, epochs);
            let samples = rate * labels.elem_count() as f64 / batches as f64;
            println!("| {name} | {shape} | {workers} | {rate:.0} | {samples:.0} |");
        }
    }
}
