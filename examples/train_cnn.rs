//! Seed 002's CNN, trained end to end on real handwritten digits: Conv2d,
//! ReLU, MaxPool2d, flatten, Linear, cross-entropy and Adam, written once for
//! any device and run on `Cuda<0>` when a GPU is present, else on the CPU.
//!
//! The 1797 8x8 images are shuffled and split 80/20. Each epoch prints the
//! training loss and accuracy, the test accuracy and the speed. At the end
//! the model is saved as a safetensors checkpoint, loaded back onto the CPU,
//! and checked to give the same test accuracy.
//!
//! Run with `cargo run --release --example train_cnn`. With `--bf16`, the
//! products (the convolution and the linear layer) run in `bf16` under
//! [`autocast`](devtensor::autocast), with the parameters, the optimizer and
//! everything else in `f32`; with `--f16`, in `f16`, with the loss scaled by
//! a [`GradScaler`](devtensor::optim::GradScaler).

use devtensor::io::Checkpoint;
use devtensor::nn::{Conv2d, Flatten, Forward, Linear, MaxPool2d, Module, Relu, cross_entropy};
use devtensor::optim::{Adam, AdamConfig, CosineAnnealingLr, GradScaler, LrSchedule, Optimizer};
use devtensor::{Cpu, Device, Generator, Result, Tensor, autocast, bf16, f16, no_grad};
use std::time::Instant;

#[path = "data/digits.rs"]
pub mod digits;
use digits::load_digits;

const EPOCHS: usize = 12;
const BATCH: usize = 64;
const SEED: u64 = 2002;

/// Seed 002's model, for one-channel 8x8 images: Conv2d(1, 16, 3, padding=1)
/// keeps 8x8, MaxPool2d(2) halves it, so the flattened size is 16 * 4 * 4.
struct Cnn<D: Device> {
    conv: Conv2d<D>,
    relu: Relu,
    pool: MaxPool2d,
    flatten: Flatten,
    fc: Linear<D>,
}
devtensor::module!(Cnn { conv, relu, pool, flatten, fc });

impl<D: Device> Cnn<D> {
    fn new() -> Self {
        Cnn {
            conv: Conv2d::new(1, 16, 3).padding(1),
            relu: Relu,
            pool: MaxPool2d::new(2),
            flatten: Flatten::default(),
            fc: Linear::new(16 * 4 * 4, 10),
        }
    }
}

/// The model's computation, on its own device. Through `Forward`,
/// `model.forward(&batch)` takes a batch of any device type, so one left on
/// the host is a compile error in devtensor's words, with the fix.
impl<D: Device> Forward<D> for Cnn<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let x = self.pool.try_forward(&self.relu.try_forward(&self.conv.try_forward(x)?)?)?;
        self.fc.try_forward(&self.flatten.try_forward(&x)?)
    }
}

/// Images `[N, 1, 8, 8]` scaled to `[0, 1]`, and their labels `[N]`.
/// What the products compute in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Precision {
    F32,
    /// `bf16` products under `autocast`.
    Bf16,
    /// `f16` products under `autocast`, with loss scaling.
    F16,
}

impl Precision {
    /// `f()` with the products in this precision.
    fn run<T>(self, f: impl FnOnce() -> T) -> T {
        match self {
            Precision::F32 => f(),
            Precision::Bf16 => autocast::<bf16, _>(f),
            Precision::F16 => autocast::<f16, _>(f),
        }
    }
}

struct Split<D: Device> {
    images: Tensor<D>,
    labels: Tensor<D, i64>,
}

impl<D: Device> Split<D> {
    fn len(&self) -> usize {
        self.labels.elem_count()
    }
}

/// The share of `split` that `model` classifies correctly.
fn accuracy<D: Device>(model: &Cnn<D>, split: &Split<D>, precision: Precision) -> f32 {
    no_grad(|| {
        let predicted = precision.run(|| model.forward(&split.images)).argmax(-1);
        predicted.eq(&split.labels).to_dtype::<f32>().mean().item()
    })
}

/// A shuffled 80/20 split of the data set, on `D`.
fn split<D: Device>(pixels: &[f32], labels: &[i64]) -> (Split<D>, Split<D>) {
    let ((train_x, train_y), (test_x, test_y)) = digits::shuffled_split(pixels, labels, SEED);
    (
        Split { images: train_x.to::<D>(), labels: train_y.to::<D>() },
        Split { images: test_x.to::<D>(), labels: test_y.to::<D>() },
    )
}

/// Trains a fresh model and returns it with its test accuracy.
fn train<D: Device>(train: &Split<D>, test: &Split<D>, precision: Precision) -> (Cnn<D>, f32) {
    devtensor::manual_seed(SEED);
    let mut model = Cnn::<D>::new();
    let mut opt = Adam::new(&model, AdamConfig { lr: 1e-2, ..Default::default() });
    let mut scaler = GradScaler::new();
    let schedule = CosineAnnealingLr { base_lr: 1e-2, t_max: EPOCHS, eta_min: 1e-4 };
    let mut shuffle = Generator::new(SEED + 1);
    for epoch in 1..=EPOCHS {
        schedule.apply(&mut opt, epoch - 1);
        let start = Instant::now();
        let order = Tensor::<Cpu, i64>::randperm_with(train.len(), &mut shuffle).to::<D>();
        let (mut loss_sum, mut batches) = (0.0, 0);
        for first in (0..train.len()).step_by(BATCH) {
            let rows = order.narrow(0, first, BATCH.min(train.len() - first));
            let (x, y) = (train.images.index_select(0, &rows), train.labels.index_select(0, &rows));
            // The loss in f32 either way: only the products change.
            let loss = cross_entropy(&precision.run(|| model.forward(&x)), &y);
            if precision == Precision::F16 {
                let mut grads = scaler.scale_loss(&loss).backward();
                scaler.step(&mut opt, &mut model, &mut grads);
                scaler.update();
            } else {
                opt.step(&mut model, &loss.backward());
            }
            loss_sum += loss.item();
            batches += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "epoch {epoch:2}: loss {:.4}, train accuracy {:5.1}%, test accuracy {:5.1}%, {:6.0} samples/s",
            loss_sum / batches as f32,
            100.0 * accuracy(&model, train, precision),
            100.0 * accuracy(&model, test, precision),
            train.len() as f64 / seconds
        );
    }
    let test_accuracy = accuracy(&model, test, precision);
    (model, test_accuracy)
}

/// Trains on `D` in `f32`, checks the checkpoint round trip through the
/// CPU, and returns the test accuracy (`tests/training` runs this too).
pub fn run<D: Device>(pixels: &[f32], labels: &[i64]) -> f32 {
    run_in::<D>(pixels, labels, Precision::F32)
}

/// [`run`] with the products in `precision`.
pub fn run_in<D: Device>(pixels: &[f32], labels: &[i64], precision: Precision) -> f32 {
    println!(
        "training seed 002's CNN on {} ({} parameters), products in {precision:?}",
        D::name(),
        Cnn::<Cpu>::new().num_parameters()
    );
    let (train_set, test_set) = split::<D>(pixels, labels);
    println!("{} training images, {} test images", train_set.len(), test_set.len());
    let started = Instant::now();
    let (model, test_accuracy) = train(&train_set, &test_set, precision);
    println!("test accuracy: {:.1}% after {:.1} s", 100.0 * test_accuracy, started.elapsed().as_secs_f64());

    // Save from D, load onto the CPU, and check the reloaded model.
    let path = std::env::temp_dir().join(format!("devtensor-train-cnn-{}.safetensors", std::process::id()));
    Checkpoint::try_from_model(&model).expect("the model's tensors").save(&path);
    let mut reloaded = Cnn::<Cpu>::new();
    Checkpoint::<Cpu>::load(&path).load_into(&mut reloaded);
    // The file has served its purpose; don't leave one behind per run.
    let _ = std::fs::remove_file(&path);
    let cpu_test = Split { images: test_set.images.to::<Cpu>(), labels: test_set.labels.to::<Cpu>() };
    let reloaded_accuracy = accuracy(&reloaded, &cpu_test, precision);
    println!("checkpoint {} reloaded on Cpu: test accuracy {:.1}%", path.display(), 100.0 * reloaded_accuracy);
    assert!((reloaded_accuracy - test_accuracy).abs() < 1e-6, "the reloaded model must classify the same way");
    test_accuracy
}

fn main() {
    let precision = match std::env::args().nth(1).as_deref() {
        None => Precision::F32,
        Some("--bf16") => Precision::Bf16,
        Some("--f16") => Precision::F16,
        Some(other) => {
            eprintln!("unknown option {other:?}: expected nothing, --bf16 or --f16");
            std::process::exit(2);
        }
    };
    let (pixels, labels) = load_digits();
    devtensor::on_best_device!(D => run_in::<D>(&pixels, &labels, precision));
}
