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

use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::{Conv2d, Forward, Linear, MaxPool2d, Module, try_cross_entropy};
use devtensor::optim::{AdamConfig, CosineAnnealingLr, LrSchedule, Optimizer, OptimizerConfig};
use devtensor::parallel::{AllGpus, DataParallel, DeviceList, Loss, Replicate};
use devtensor::{Backend, Cpu, Cuda, Device, Result, Tensor, no_grad};
use std::time::Instant;

#[path = "data/digits.rs"]
pub mod digits;

const EPOCHS: usize = 12;
const BATCH: usize = 64;
const SEED: u64 = 2002;

/// Seed 002's model for one-channel 8x8 images (see `train_cnn.rs`).
pub struct Cnn<D: Device> {
    conv: Conv2d<D>,
    pool: MaxPool2d,
    fc: Linear<D>,
}
devtensor::module!(Cnn { conv, fc; pool });

impl<D: Device> Cnn<D> {
    fn new() -> Self {
        Cnn { conv: Conv2d::new(1, 16, 3).padding(1), pool: MaxPool2d::new(2), fc: Linear::new(16 * 4 * 4, 10) }
    }
}

/// The model's computation; `Forward` gives it a device-checked `forward`
/// and `try_forward`.
impl<D: Device> Forward<D> for Cnn<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let features = self.pool.try_forward(&self.conv.try_forward(x)?.relu())?.try_flatten(1, -1)?;
        self.fc.try_forward(&features)
    }
}

/// What each replica computes on its share of a batch: written once, for
/// every device.
impl<D: Device> Loss<D> for Cnn<D> {
    type Batch = (Tensor<D>, Tensor<D, i64>);

    fn loss(&self, (images, labels): &Self::Batch) -> Result<Tensor<D>> {
        try_cross_entropy(&self.try_forward(images)?, labels)
    }
}

/// A CPU batch: images `[B, 1, 8, 8]` and labels `[B]`.
type Batch = (Tensor<Cpu>, Tensor<Cpu, i64>);

/// The share of `images` that `model` classifies as `labels` says.
fn accuracy<D: Device>(model: &Cnn<D>, (images, labels): &Batch) -> Result<f32> {
    no_grad(|| {
        let predicted = model.try_forward(&images.try_to::<D>()?)?.try_argmax(-1)?;
        predicted.try_eq(&labels.try_to::<D>()?)?.try_to_dtype::<f32>()?.try_mean()?.try_item()
    })
}

/// The training batches of every epoch, shuffled with a fixed seed, so
/// that both runs see the same ones.
fn loader(train: &Batch) -> Result<DataLoader<TensorDataset<f32, i64>>> {
    Ok(DataLoader::new(TensorDataset::try_new(train.0.clone(), train.1.clone())?, BATCH).shuffle(SEED))
}

/// Trains on one device, `D`, with whole batches: the reference.
fn single_device<D: Device>(train: &Batch, epochs: usize) -> Result<Cnn<D>> {
    devtensor::manual_seed(SEED);
    let mut model = Cnn::<Cpu>::new().try_to::<D>()?;
    let config = AdamConfig { lr: 1e-2, ..Default::default() };
    let mut opt = config.build(&model);
    let schedule = CosineAnnealingLr { base_lr: 1e-2, t_max: EPOCHS, eta_min: 1e-4 };
    let mut loader = loader(train)?;
    for epoch in 0..epochs {
        opt.set_lr(schedule.lr(epoch));
        loader.set_epoch(epoch);
        for batch in loader.iter() {
            let (x, y) = batch?;
            let loss = model.loss(&(x.try_to::<D>()?, y.try_to::<D>()?))?;
            opt.try_step(&mut model, &loss.try_backward()?)?;
        }
    }
    Ok(model)
}

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
    let mut dp = DataParallel::<L, _, _, _>::try_new(&model, AdamConfig { lr: 1e-2, ..Default::default() })?;
    println!(
        "data parallel over {} ({} replicas), gradients summed over {:?} in {} bucket(s)",
        dp.devices().join(", "),
        dp.devices().len(),
        dp.reduction(),
        dp.bucket_count()
    );
    let schedule = CosineAnnealingLr { base_lr: 1e-2, t_max: EPOCHS, eta_min: 1e-4 };
    let mut loader = loader(&train)?;
    let started = Instant::now();
    for epoch in 0..epochs {
        dp.set_lr(schedule.lr(epoch));
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
