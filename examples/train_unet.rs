//! A UNet, as the best-known PyTorch repository of it (milesial's
//! Pytorch-UNet) writes one, trained to segment the bundled handwritten
//! digits out of noise: `DoubleConv` blocks (3x3 convolutions without bias,
//! `BatchNorm2d`, ReLU), `MaxPool2d(2)` down, `nn.Upsample(scale_factor=2,
//! mode='bilinear', align_corners=True)` up with the skip connections
//! concatenated, a 1x1 head over two classes; cross-entropy plus the dice
//! loss on `softmax` against `F.one_hot` of the mask; `RMSprop` with
//! weight decay and momentum, gradients clipped at 1.0, and
//! `ReduceLROnPlateau(mode='max')` on the validation dice score. On
//! `Cuda<0>` when a GPU is present, else on the CPU.
//!
//! The 8x8 images are split 80/20, and each is given uniform noise of
//! ±0.35 (fresh every epoch; fixed for validation); the mask to predict is
//! the clean image above 0.3. The split, the batch order and the noise come
//! from a splitmix64 hash, so `scripts/train_unet_torch.py` (PyTorch's
//! version of this program) trains on exactly the same batches. Every
//! epoch prints the mean training loss, the validation loss and dice score
//! (of the foreground class, as the repository's `evaluate`) and the rate.
//!
//! Run with `cargo run --release --example train_unet`; `-- --epochs N`
//! trains for fewer epochs.

use devtensor::nn::{BatchNorm2d, Conv2d, InterpolateMode, MaxPool2d, Module, Relu, Upsample, cross_entropy};
use devtensor::optim::{
    Optimizer, PlateauConfig, PlateauMode, ReduceLrOnPlateau, RmsProp, RmsPropConfig, clip_grad_norm,
};
use devtensor::{Cpu, Device, Tensor, no_grad};
use std::time::Instant;

#[path = "data/digits.rs"]
mod digits;

const EPOCHS: usize = 15;
const BATCH: usize = 32;
const SEED: u64 = 59;
/// The noise's half-width and the threshold of the mask.
const NOISE: f64 = 0.35;
const FOREGROUND: f64 = 0.3;
/// The epoch number whose noise the validation set keeps.
const VALIDATION: u64 = 1 << 20;

/// milesial's `DoubleConv`: (convolution => BN => ReLU) twice.
struct DoubleConv<D: Device> {
    conv1: Conv2d<D>,
    bn1: BatchNorm2d<D>,
    conv2: Conv2d<D>,
    bn2: BatchNorm2d<D>,
}
devtensor::module!(DoubleConv { conv1, bn1, conv2, bn2 });

impl<D: Device> DoubleConv<D> {
    fn new(input: usize, output: usize, mid: usize) -> Self {
        DoubleConv {
            conv1: Conv2d::new(input, mid, 3).padding(1).without_bias(),
            bn1: BatchNorm2d::new(mid),
            conv2: Conv2d::new(mid, output, 3).padding(1).without_bias(),
            bn2: BatchNorm2d::new(output),
        }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let x = Relu.forward(&self.bn1.forward(&self.conv1.forward(x)));
        Relu.forward(&self.bn2.forward(&self.conv2.forward(&x)))
    }
}

/// `Down`: max pooling, then a `DoubleConv`.
struct Down<D: Device> {
    pool: MaxPool2d,
    conv: DoubleConv<D>,
}
devtensor::module!(Down { pool, conv });

impl<D: Device> Down<D> {
    fn new(input: usize, output: usize) -> Self {
        Down { pool: MaxPool2d::new(2), conv: DoubleConv::new(input, output, output) }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        self.conv.forward(&self.pool.forward(x))
    }
}

/// `Up` with `bilinear=True`: the upsampled input beside the skip
/// connection, then a `DoubleConv` narrowing to half its input.
struct Up<D: Device> {
    up: Upsample,
    conv: DoubleConv<D>,
}
devtensor::module!(Up { up, conv });

impl<D: Device> Up<D> {
    fn new(input: usize, output: usize) -> Self {
        let up = Upsample::new(2.0, InterpolateMode::Bilinear).align_corners(true);
        Up { up, conv: DoubleConv::new(input, output, input / 2) }
    }

    fn forward(&self, x: &Tensor<D>, skip: &Tensor<D>) -> Tensor<D> {
        self.conv.forward(&Tensor::cat(&[skip, &self.up.forward(x)], 1))
    }
}

/// The UNet, two levels deep for 8x8 images, with `bilinear=True`'s
/// halved bottom (`factor = 2`).
struct UNet<D: Device> {
    inc: DoubleConv<D>,
    down1: Down<D>,
    down2: Down<D>,
    up1: Up<D>,
    up2: Up<D>,
    outc: Conv2d<D>,
}
devtensor::module!(UNet { inc, down1, down2, up1, up2, outc });

impl<D: Device> UNet<D> {
    fn new(classes: usize) -> Self {
        UNet {
            inc: DoubleConv::new(1, 16, 16),
            down1: Down::new(16, 32),
            down2: Down::new(32, 64 / 2),
            up1: Up::new(64, 32 / 2),
            up2: Up::new(32, 16),
            outc: Conv2d::new(16, classes, 1),
        }
    }

    /// The logits `[N, classes, 8, 8]` of images `[N, 1, 8, 8]`.
    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let x1 = self.inc.forward(x);
        let x2 = self.down1.forward(&x1);
        let x3 = self.down2.forward(&x2);
        self.outc.forward(&self.up2.forward(&self.up1.forward(&x3, &x2), &x1))
    }
}

/// milesial's `dice_coeff` with `reduce_batch_first=True`: one dice over
/// every element, `(2 Σ p t + ε) / (Σ p + Σ t + ε)`.
fn dice<D: Device>(predicted: &Tensor<D>, target: &Tensor<D>) -> Tensor<D> {
    let inter = (predicted * target).sum() * 2.0;
    (inter + 1e-6) / (predicted.sum() + target.sum() + 1e-6)
}

/// Cross-entropy plus `dice_loss(softmax(logits), one_hot(mask))`.
fn loss<D: Device>(logits: &Tensor<D>, mask: &Tensor<D, i64>) -> Tensor<D> {
    let target = mask.one_hot(logits.dims()[1]).permute([0, 3, 1, 2]).to_dtype::<f32>();
    cross_entropy(logits, mask) + (-dice(&logits.softmax(1), &target) + 1.0)
}

/// The repository's `evaluate`: the dice of the predicted foreground
/// against the true one, per image (1 where both are empty), averaged.
fn dice_score<D: Device>(logits: &Tensor<D>, mask: &Tensor<D, i64>) -> f32 {
    let predicted = logits.argmax(1).to_dtype::<f32>();
    let target = mask.to_dtype::<f32>();
    let inter = (&predicted * &target).sum_axis([1, 2]) * 2.0;
    let sets = predicted.sum_axis([1, 2]) + target.sum_axis([1, 2]);
    ((inter + 1e-6) / (sets + 1e-6)).mean().item()
}

/// splitmix64: the one source of the split, the order and the noise, so
/// that the PyTorch script draws the same.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `0..n` ordered by the hash of `(key, i)`.
fn order(n: usize, key: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| splitmix((key << 32) | i as u64));
    order
}

/// The noisy images `[N, 1, 8, 8]` and masks `[N, 8, 8]` of the digits
/// `indices` (into `pixels`, 0..16), with the noise of `epoch`.
fn batch<D: Device>(pixels: &[f32], indices: &[usize], epoch: u64) -> (Tensor<D>, Tensor<D, i64>) {
    let (mut noisy, mut mask) = (Vec::with_capacity(indices.len() * 64), Vec::with_capacity(indices.len() * 64));
    for &i in indices {
        for p in 0..64 {
            let clean = f64::from(pixels[i * 64 + p]) / 16.0;
            let key = (epoch * 1_000_003 + i as u64) * 64 + p as u64;
            let u = (splitmix(key ^ 0xD1B5_4A32_D192_ED03) >> 11) as f64 / (1u64 << 53) as f64;
            noisy.push((clean + NOISE * (2.0 * u - 1.0)).clamp(0.0, 1.0) as f32);
            mask.push(i64::from(clean > FOREGROUND));
        }
    }
    let n = indices.len();
    (Tensor::<Cpu>::from_vec(noisy, [n, 1, 8, 8]).to::<D>(), Tensor::<Cpu, i64>::from_vec(mask, [n, 8, 8]).to::<D>())
}

fn train<D: Device>(epochs: usize) {
    let (pixels, labels) = digits::load_digits();
    let shuffled = order(labels.len(), SEED);
    let (train_set, val_set) = shuffled.split_at(labels.len() * 4 / 5);
    let (val_x, val_mask) = batch::<D>(&pixels, val_set, VALIDATION);

    devtensor::manual_seed(SEED);
    let mut model = UNet::<D>::new(2);
    println!(
        "{} training and {} validation digits, a UNet of {} parameters, on {}",
        train_set.len(),
        val_set.len(),
        model.num_parameters(),
        D::name()
    );
    let config = RmsPropConfig { lr: 1e-3, weight_decay: 1e-8, momentum: 0.9, ..Default::default() };
    let mut opt = RmsProp::new(&model, config);
    let mut plateau =
        ReduceLrOnPlateau::new(PlateauConfig { mode: PlateauMode::Max, patience: 2, ..Default::default() });
    let started = Instant::now();
    for epoch in 0..epochs {
        model.train();
        let order = order(train_set.len(), SEED + 1 + epoch as u64);
        let mut total = 0.0;
        let steps = train_set.len() / BATCH;
        for step in 0..steps {
            let indices: Vec<usize> = order[step * BATCH..(step + 1) * BATCH].iter().map(|&k| train_set[k]).collect();
            let (x, mask) = batch::<D>(&pixels, &indices, epoch as u64);
            let loss = loss(&model.forward(&x), &mask);
            total += loss.item();
            let mut grads = loss.backward();
            clip_grad_norm(&model, &mut grads, 1.0, 2.0);
            opt.step(&mut model, &grads);
        }
        model.eval();
        let (val_loss, score) = no_grad(|| {
            let logits = model.forward(&val_x);
            (loss(&logits, &val_mask).item(), dice_score(&logits, &val_mask))
        });
        plateau.step(f64::from(score), &mut opt);
        println!(
            "epoch {:2}: train loss {:.4}, val loss {val_loss:.4}, val dice {score:.4}, lr {:.0e} ({:.1} s)",
            epoch + 1,
            total / steps as f32,
            opt.lr(),
            started.elapsed().as_secs_f64()
        );
    }
}

fn main() {
    let mut epochs = EPOCHS;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|n| n.parse().ok())) {
            ("--epochs", Some(n)) if n > 0 => epochs = n,
            _ => {
                eprintln!("usage: train_unet [--epochs N]");
                std::process::exit(2);
            }
        }
    }
    devtensor::on_best_device!(D => train::<D>(epochs));
}
