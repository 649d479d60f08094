//! Seed 002's CNN for the handwritten digits and its training recipe, shared
//! by the data-parallel examples (`data_parallel.rs` in one process,
//! `ddp.rs` across processes) and their tests: the model, the loss each
//! replica computes, the batches, the schedule, the accuracy, and the
//! single-device run every data-parallel run is compared with.

use devtensor::data::{DataLoader, TensorDataset};
use devtensor::nn::{Conv2d, Forward, Linear, MaxPool2d, Module, try_cross_entropy};
use devtensor::optim::{AdamConfig, CosineAnnealingLr, LrSchedule, Optimizer, OptimizerConfig};
use devtensor::parallel::Loss;
use devtensor::{Cpu, Device, Result, Tensor, no_grad};

pub const EPOCHS: usize = 12;
pub const BATCH: usize = 64;
pub const SEED: u64 = 2002;

/// Seed 002's model for one-channel 8x8 images (see `train_cnn.rs`).
pub struct Cnn<D: Device> {
    conv: Conv2d<D>,
    pool: MaxPool2d,
    fc: Linear<D>,
}
devtensor::module!(Cnn { conv, fc; pool });

impl<D: Device> Cnn<D> {
    pub fn new() -> Self {
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
pub type Batch = (Tensor<Cpu>, Tensor<Cpu, i64>);

/// The share of `images` that `model` classifies as `labels` says.
pub fn accuracy<D: Device>(model: &Cnn<D>, (images, labels): &Batch) -> Result<f32> {
    no_grad(|| {
        let predicted = model.try_forward(&images.try_to::<D>()?)?.try_argmax(-1)?;
        predicted.try_eq(&labels.try_to::<D>()?)?.try_to_dtype::<f32>()?.try_mean()?.try_item()
    })
}

/// The training batches of every epoch, shuffled with a fixed seed, so
/// that both runs see the same ones.
pub fn loader(train: &Batch) -> Result<DataLoader<TensorDataset<f32, i64>>> {
    Ok(DataLoader::new(TensorDataset::try_new(train.0.clone(), train.1.clone())?, BATCH).shuffle(SEED))
}

/// The learning rate of epoch `epoch`: cosine from 1e-2 to 1e-4.
pub fn lr(epoch: usize) -> f64 {
    CosineAnnealingLr { base_lr: 1e-2, t_max: EPOCHS, eta_min: 1e-4 }.lr(epoch)
}

/// The optimizer every run uses.
pub fn adam() -> AdamConfig {
    AdamConfig { lr: 1e-2, ..Default::default() }
}

/// Trains on one device, `D`, with whole batches: the reference.
pub fn single_device<D: Device>(train: &Batch, epochs: usize) -> Result<Cnn<D>> {
    devtensor::manual_seed(SEED);
    let mut model = Cnn::<Cpu>::new().try_to::<D>()?;
    let mut opt = adam().build(&model);
    let mut loader = loader(train)?;
    for epoch in 0..epochs {
        opt.set_lr(lr(epoch));
        loader.set_epoch(epoch);
        for batch in loader.iter() {
            let (x, y) = batch?;
            let loss = model.loss(&(x.try_to::<D>()?, y.try_to::<D>()?))?;
            opt.try_step(&mut model, &loss.try_backward()?)?;
        }
    }
    Ok(model)
}
