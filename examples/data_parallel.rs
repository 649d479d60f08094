//! Seed 002's CNN trained with data parallelism on the handwritten digits:
//! one replica per GPU present (two CPU replicas when there is none), each
//! global batch of 64 split between them, gradients summed in buckets while
//! backward runs, over NCCL when it is installed and peer copies otherwise.
//!
//! The same model is also trained on one device with the same batches; the
//! two runs print the same test accuracy, which is the point of data
//! parallelism: more devices, the same training.
//!
//! Run with `cargo run --release --example data_parallel`; under the
//! emulated GPUs (`bash scripts/with-emu.sh cargo run --release --example
//! data_parallel`) it runs on `Cuda<0>` and `Cuda<1>`, slowly.

use devtensor::optim::AdamConfig;
use devtensor::parallel::{AllGpus, DataParallel, DeviceList, Replicate};
use devtensor::{Backend, Cpu, Cuda, Result};
use std::time::Instant;

#[path = "data/digits.rs"]
pub mod digits;

#[path = "cnn/model.rs"]
mod model;
use model::{Batch, Cnn, EPOCHS, SEED, accuracy, adam, loader, lr, single_device};

/// Trains with one replica per device of `L` and returns the test accuracy
/// of the data-parallel model and of the single-device reference
/// (`tests/training` runs this too).
pub fn run<L: DeviceList>(pixels: &[f32], labels: &[i64], epochs: usize) -> Result<(f32, f32)>
where
    Cnn<Cpu>: Replicate<Cpu, L, Batch, AdamConfig, Root = Cnn<L::Root>>,
{
    let (train, test) = digits::shuffled_split(pixels, labels, SEED);
    devtensor::manual_seed(SEED);
    let model = Cnn::<Cpu>::new();
    let mut dp = DataParallel::<L, _, _, _>::try_new(&model, adam())?;
    println!(
        "data parallel over {} ({} replicas), gradients summed over {:?} in {} bucket(s)",
        dp.devices().join(", "),
        dp.devices().len(),
        dp.reduction(),
        dp.bucket_count()
    );
    let mut loader = loader(&train)?;
    let started = Instant::now();
    for epoch in 0..epochs {
        dp.set_lr(lr(epoch));
        loader.set_epoch(epoch);
        let (mut loss, mut batches) = (0.0, 0);
        for batch in loader.iter() {
            loss += dp.try_step(&batch?)?;
            batches += 1;
        }
        println!(
            "epoch {:2}: loss {:.4}, test accuracy {:5.1}%",
            epoch + 1,
            loss / batches as f32,
            100.0 * accuracy(dp.model(), &test)?
        );
    }
    let parallel = accuracy(dp.model(), &test)?;
    println!("data parallel: test accuracy {:.1}% after {:.1} s", 100.0 * parallel, started.elapsed().as_secs_f64());
    let reference = accuracy(&single_device::<L::Root>(&train, epochs)?, &test)?;
    println!("one device ({}), same batches: test accuracy {:.1}%", L::Root::name(), 100.0 * reference);
    Ok((parallel, reference))
}

fn main() -> Result<()> {
    let (pixels, labels) = digits::load_digits();
    if Cuda::<0>::is_available() {
        run::<AllGpus>(&pixels, &labels, EPOCHS)?;
    } else {
        println!("no GPU found: two replicas on the CPU");
        run::<(Cpu, Cpu)>(&pixels, &labels, EPOCHS)?;
    }
    Ok(())
}
