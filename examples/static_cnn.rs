//! Seed 002's CNN with static shapes: every size of the model is in its
//! type, checked by the compiler, and the sizes between the layers are
//! computed by it. The model states only its input, `[B, 1, 8, 8]`, and its
//! layers; if the flattened size given to the linear layer were wrong (the
//! seed's `16 * 16 * 16` is the classic), `cargo build` would stop with
//!
//! ```text
//! error[E0080]: evaluation panicked: `Linear(4096, 10)` expects 4096 input features, but its input has 256
//! ```
//!
//! instead of PyTorch's crash at the first batch. Static tensors run the
//! same kernels as dynamic ones: trained with the same seed, data and
//! schedule as `examples/train_cnn.rs`, this model reaches the same test
//! accuracy, to the last bit.
//!
//! Run with `cargo run --release --example static_cnn`.

use devtensor::nn::Module;
use devtensor::optim::{Adam, AdamConfig, CosineAnnealingLr, LrSchedule, Optimizer};
use devtensor::static_shapes::{Const, SConv2d, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Device, Generator, Result, Tensor, no_grad};
use std::time::Instant;

#[path = "data/digits.rs"]
pub mod digits;

const EPOCHS: usize = 12;
const BATCH: usize = 64;
const SEED: u64 = 2002;

/// A batch of any size of one-channel 8x8 images.
type Images<D> = STensor<D, (usize, Const<1>, Const<8>, Const<8>)>;
/// Ten scores per image.
type Logits<D> = STensor<D, (usize, Const<10>)>;
/// One class per image.
type Labels<D> = STensor<D, (usize,), i64>;

/// Seed 002's model with its sizes in its type: Conv2d(1, 16, kernel 3,
/// stride 1, padding 1), ReLU, MaxPool2d(2), flatten, Linear(16 * 4 * 4, 10).
struct StaticCnn<D: Device> {
    conv: SConv2d<D, 1, 16, 3, 1, 1>,
    pool: SMaxPool2d<2, 2>,
    fc: SLinear<D, { 16 * 4 * 4 }, 10>,
}
devtensor::module!(StaticCnn { conv, pool, fc });

impl<D: Device> StaticCnn<D> {
    fn new() -> Self {
        StaticCnn { conv: SConv2d::new(), pool: SMaxPool2d, fc: SLinear::new() }
    }

    /// No size in between is written down: `[B, 16, 8, 8]`, `[B, 16, 4, 4]`
    /// and `[B, 256]` are computed by the compiler.
    fn forward(&self, x: &Images<D>) -> Logits<D> {
        let features = self.pool.forward(&self.conv.forward(x).relu()).flatten();
        self.fc.forward(&features)
    }
}

/// Images and labels of one split, on `D`, with their shapes in the type.
struct Split<D: Device> {
    images: Images<D>,
    labels: Labels<D>,
}

impl<D: Device> Split<D> {
    /// The CPU tensors moved to `D`; `try_static` checks their sizes once,
    /// at the boundary between dynamic data and the static model.
    fn new((images, labels): digits::Split) -> Result<Self> {
        Ok(Split { images: images.try_to::<D>()?.try_static()?, labels: labels.try_to::<D>()?.try_static()? })
    }

    fn len(&self) -> usize {
        self.labels.shape().0
    }

    /// The rows `rows` of this split, as a static batch.
    fn batch(&self, rows: &Tensor<D, i64>) -> Result<(Images<D>, Labels<D>)> {
        let images = self.images.dynamic().try_index_select(0, rows)?.try_static()?;
        Ok((images, self.labels.dynamic().try_index_select(0, rows)?.try_static()?))
    }
}

/// The share of `split` that `model` classifies correctly.
fn accuracy<D: Device>(model: &StaticCnn<D>, split: &Split<D>) -> f32 {
    no_grad(|| {
        let predicted = model.forward(&split.images).dynamic().argmax(-1);
        predicted.eq(split.labels.dynamic()).to_dtype::<f32>().mean().item()
    })
}

/// Trains seed 002's static model on `D` for `epochs` epochs (the same
/// seeds, batches and schedule as `train_cnn`) and returns its test
/// accuracy. `tests/training` runs this too.
pub fn run<D: Device>(pixels: &[f32], labels: &[i64], epochs: usize) -> Result<f32> {
    let (train_cpu, test_cpu) = digits::shuffled_split(pixels, labels, SEED);
    let (train, test) = (Split::<D>::new(train_cpu)?, Split::<D>::new(test_cpu)?);
    devtensor::manual_seed(SEED);
    let mut model = StaticCnn::<D>::new();
    println!("seed 002's CNN with static shapes on {}: {} parameters", D::name(), model.num_parameters());
    let mut opt = Adam::new(&model, AdamConfig { lr: 1e-2, ..Default::default() });
    let schedule = CosineAnnealingLr { base_lr: 1e-2, t_max: EPOCHS, eta_min: 1e-4 };
    let mut shuffle = Generator::new(SEED + 1);
    let started = Instant::now();
    for epoch in 1..=epochs {
        schedule.apply(&mut opt, epoch - 1);
        let order = Tensor::<Cpu, i64>::randperm_with(train.len(), &mut shuffle).try_to::<D>()?;
        let (mut loss_sum, mut batches) = (0.0, 0);
        for first in (0..train.len()).step_by(BATCH) {
            let (x, y) = train.batch(&order.narrow(0, first, BATCH.min(train.len() - first)))?;
            let loss = model.forward(&x).cross_entropy(&y);
            opt.try_step(&mut model, &loss.backward())?;
            loss_sum += loss.item();
            batches += 1;
        }
        println!(
            "epoch {epoch:2}: loss {:.4}, test accuracy {:5.1}%",
            loss_sum / batches as f32,
            100.0 * accuracy(&model, &test)
        );
    }
    let test_accuracy = accuracy(&model, &test);
    println!("test accuracy: {:.1}% after {:.1} s", 100.0 * test_accuracy, started.elapsed().as_secs_f64());

    // A static model moves between devices like any other: its type names
    // the new device, and its sizes come along.
    let on_cpu: StaticCnn<Cpu> = model.try_to::<Cpu>()?;
    let test_on_cpu = Split::<Cpu> { images: test.images.try_to()?, labels: test.labels.try_to()? };
    assert_eq!(accuracy(&on_cpu, &test_on_cpu), test_accuracy, "the moved model must classify the same way");
    Ok(test_accuracy)
}

fn main() -> Result<()> {
    let (pixels, labels) = digits::load_digits();
    devtensor::on_best_device!(D => run::<D>(&pixels, &labels, EPOCHS))?;
    Ok(())
}
