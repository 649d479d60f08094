//! Seed 002's CNN trained on the handwritten digits with one process per
//! GPU (PyTorch's `DistributedDataParallel` under `torchrun`): each process
//! reads its place in the job from the environment the launcher sets,
//! enters the training code typed on its own GPU, trains on its shard of
//! every epoch, and sums gradients with the others over NCCL while backward
//! runs. Rank 0 prints the progress and writes a checkpoint.
//!
//! ```text
//! cargo build --release --example ddp --bin devtensor-run
//! target/release/devtensor-run --nproc-per-node 2 target/release/examples/ddp
//! ```
//!
//! Without GPUs, run it on the emulated ones (slowly):
//! `bash scripts/with-emu.sh target/release/devtensor-run --nproc-per-node 2
//! target/release/examples/ddp --epochs 2 --compare`. `--compare` has rank 0
//! also train the same model on one device with the same global batches and
//! fail unless both classify the test images alike, within one image.

use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::Module;
use devtensor::parallel::{DistributedDataParallel, Job, ProcessGroup};
use devtensor::{Cpu, Device, Error, Result};
use std::time::Instant;

#[path = "data/digits.rs"]
mod digits;

#[path = "cnn/model.rs"]
mod model;
use model::{BATCH, Batch, Cnn, EPOCHS, SEED, accuracy, adam, lr, single_device};

/// Command-line settings: `--epochs N`, `--compare`, `--checkpoint PATH`.
struct Settings {
    epochs: usize,
    compare: bool,
    checkpoint: Option<String>,
}

fn settings() -> Result<Settings> {
    let mut settings = Settings { epochs: EPOCHS, compare: false, checkpoint: None };
    let mut args = std::env::args().skip(1);
    let bad = |reason: String| Error::Distributed { rank: None, reason };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--epochs" => {
                let text = args.next().ok_or_else(|| bad("--epochs needs a number".into()))?;
                settings.epochs = text.parse().map_err(|_| bad(format!("--epochs {text:?} is not a number")))?;
            }
            "--compare" => settings.compare = true,
            "--checkpoint" => settings.checkpoint = args.next(),
            other => return Err(bad(format!("unknown argument {other} (--epochs N, --compare, --checkpoint PATH)"))),
        }
    }
    Ok(settings)
}

/// This rank's part of the job, typed on its GPU `D`.
fn train<D: Device>(job: &Job, settings: &Settings) -> Result<()> {
    let main = job.is_main();
    let group = ProcessGroup::<D>::try_new(job)?;
    let (pixels, labels) = digits::load_digits();
    let (train, test) = digits::shuffled_split(&pixels, &labels, SEED);

    devtensor::manual_seed(SEED);
    let model = Cnn::<Cpu>::new().try_to::<D>()?;
    let mut ddp = DistributedDataParallel::try_new(group, model, adam())?;
    if main {
        println!(
            "{} processes, one per GPU; this one on {}, gradients summed over NCCL in {} bucket(s)",
            job.world_size,
            D::name(),
            ddp.bucket_count()
        );
    }
    // Each rank takes every WORLD_SIZE-th sample of the epoch's shuffle, in
    // batches of BATCH / WORLD_SIZE: together, the global batches of one
    // device shuffled with the same seed.
    let dataset = TensorDataset::try_new(train.0.clone(), train.1.clone())?;
    let per_rank = BATCH / job.world_size;
    let mut loader = DataLoader::new(dataset, per_rank).sampler(job.sampler(true, SEED));
    let started = Instant::now();
    for epoch in 0..settings.epochs {
        ddp.set_lr(lr(epoch));
        loader.set_epoch(epoch);
        let (mut loss, mut batches) = (0.0, 0);
        for batch in loader.iter() {
            let (x, y) = batch?;
            loss += ddp.try_step(&(x.try_to::<D>()?, y.try_to::<D>()?))?;
            batches += 1;
        }
        if main {
            println!(
                "epoch {:2}: loss {:.4} (rank 0's shard), test accuracy {:5.1}%",
                epoch + 1,
                loss / batches as f32,
                100.0 * accuracy(ddp.model(), &test)?
            );
        }
    }
    if let Some(path) = &settings.checkpoint {
        ddp.try_save_checkpoint(path)?;
        if main {
            println!("checkpoint (model and optimizer) written to {path}");
        }
    }
    if main {
        let parallel = accuracy(ddp.model(), &test)?;
        let images = test.1.dims()[0];
        println!(
            "distributed: test accuracy {:.1}% ({} of {images} images) after {:.1} s",
            100.0 * parallel,
            (parallel * images as f32).round(),
            started.elapsed().as_secs_f64()
        );
        if settings.compare {
            compare::<D>(&train, &test, settings.epochs, parallel)?;
        }
    }
    Ok(())
}

/// Trains the same model on one device with the same global batches and
/// fails unless it classifies the test images like the distributed run,
/// within one image.
fn compare<D: Device>(train: &Batch, test: &Batch, epochs: usize, parallel: f32) -> Result<()> {
    let reference = accuracy(&single_device::<D>(train, epochs)?, test)?;
    let images = test.1.dims()[0] as f32;
    let (a, b) = ((parallel * images).round(), (reference * images).round());
    println!(
        "one device ({}), same batches: test accuracy {:.1}% ({b} of {images} images)",
        D::name(),
        100.0 * reference
    );
    if (a - b).abs() > 1.0 {
        return Err(Error::Distributed {
            rank: Some(0),
            reason: format!("the distributed run classified {a} test images correctly, one device {b}"),
        });
    }
    println!("the same accuracy within one test image");
    Ok(())
}

fn main() {
    let job = match Job::from_env() {
        Ok(job) => job,
        Err(e) => {
            eprintln!("{e}\n\nstart it with the launcher, one process per GPU:");
            eprintln!("    target/release/devtensor-run --nproc-per-node 2 target/release/examples/ddp");
            std::process::exit(2);
        }
    };
    let trained =
        settings().and_then(|settings| devtensor::on_local_gpu!(job, D => train::<D>(&job, &settings)).and_then(|r| r));
    if let Err(e) = trained {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
