//! Training rows: convolution and linear layers forward and backward, and
//! one full training step of seed 002's CNN, in devtensor and candle-nn on
//! the same inputs.

use super::{Row, data, median_pair};
use candle_core::{Device as CandleDevice, Tensor as CandleTensor, Var};
use candle_nn::Optimizer as _;
use devtensor::nn::{Conv2d, Flatten, Linear, MaxPool2d, Relu, cross_entropy};
use devtensor::ops::conv::Window2d;
use devtensor::optim::{Adam, AdamConfig, Optimizer};
use devtensor::shapes::{Const, SConv2d, SFlatten, SForward, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Device, Tensor};
use std::hint::black_box;
use std::time::Duration;

/// Seed 002's model at its real sizes: Conv2d(3, 16, 3, padding=1), ReLU,
/// MaxPool2d(2), flatten, Linear(16 * 32 * 32, 10), on 3x64x64 images.
struct Seed002<D: Device> {
    conv: Conv2d<D>,
    relu: Relu,
    pool: MaxPool2d,
    flatten: Flatten,
    fc: Linear<D>,
}
devtensor::module!(Seed002 { conv, relu, pool, flatten, fc });

impl<D: Device> Seed002<D> {
    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let x = self.pool.forward(&self.relu.forward(&self.conv.forward(x)));
        self.fc.forward(&self.flatten.forward(&x))
    }
}

/// Seed 002's model with static shapes: the same layers, sizes in types.
type StaticSeed002 = (SConv2d<Cpu, 3, 16, 3, 1, 1>, Relu, SMaxPool2d<2, 2>, SFlatten, SLinear<Cpu, { 16 * 32 * 32 }, 10>);

/// The same model in candle, on `Var`s holding the same initial values.
struct CandleSeed002 {
    conv_w: Var,
    conv_b: Var,
    fc_w: Var,
    fc_b: Var,
}

impl CandleSeed002 {
    fn forward(&self, x: &CandleTensor) -> candle_core::Result<CandleTensor> {
        let y = x.conv2d(self.conv_w.as_tensor(), 1, 1, 1, 1)?;
        let y = y.broadcast_add(&self.conv_b.as_tensor().reshape((1, 16, 1, 1))?)?.relu()?.max_pool2d(2)?;
        let y = y.flatten_from(1)?;
        y.matmul(&self.fc_w.as_tensor().t()?)?.broadcast_add(self.fc_b.as_tensor())
    }

    fn vars(&self) -> Vec<Var> {
        vec![self.conv_w.clone(), self.conv_b.clone(), self.fc_w.clone(), self.fc_b.clone()]
    }
}

fn to_candle(t: &Tensor<Cpu>, cpu: &CandleDevice) -> candle_core::Result<CandleTensor> {
    CandleTensor::from_vec(t.to_vec(), t.dims(), cpu)
}

/// The training rows, for operations whose name contains `filter`.
/// `peak` is the FMA peak measured in this run, for the share-of-peak column.
pub fn rows(budget: Duration, wanted: impl Fn(&str) -> bool, peak: f64) -> candle_core::Result<Vec<Row>> {
    let cpu = CandleDevice::Cpu;
    let mut rows = Vec::new();
    let (batch, classes) = (64, 10);
    let x_data = data(batch * 3 * 64 * 64, 11);
    let x = Tensor::<Cpu>::from_slice(&x_data, [batch, 3, 64, 64]);
    let cx = CandleTensor::from_slice(&x_data, (batch, 3, 64, 64), &cpu)?;
    devtensor::manual_seed(2);
    let model = Seed002::<Cpu> {
        conv: Conv2d::new(3, 16, 3).padding(1),
        relu: Relu,
        pool: MaxPool2d::new(2),
        flatten: Flatten::default(),
        fc: Linear::new(16 * 32 * 32, classes),
    };
    let candle_model = CandleSeed002 {
        conv_w: Var::from_tensor(&to_candle(&model.conv.weight, &cpu)?)?,
        conv_b: Var::from_tensor(&to_candle(model.conv.bias.as_ref().unwrap(), &cpu)?)?,
        fc_w: Var::from_tensor(&to_candle(&model.fc.weight, &cpu)?)?,
        fc_b: Var::from_tensor(&to_candle(model.fc.bias.as_ref().unwrap(), &cpu)?)?,
    };
    let labels: Vec<i64> = (0..batch as i64).map(|i| i % classes as i64).collect();
    let y = Tensor::<Cpu, i64>::from_slice(&labels, [batch]);
    let cy = CandleTensor::from_vec(labels.iter().map(|&l| l as u32).collect::<Vec<_>>(), batch, &cpu)?;

    // Both libraries compute the same logits and loss.
    let logits = model.forward(&x);
    let candle_logits = candle_model.forward(&cx)?;
    let diff = super::max_diff(&logits.to_vec(), &candle_logits.flatten_all()?.to_vec1()?);
    assert!(diff < 1e-3, "seed 002 forward: results differ by {diff}");

    let conv = &model.conv;
    // 2 FLOP per multiply-add: O * OH * OW * C * KH * KW per image.
    let conv_flops = 2.0 * (batch * 16 * 64 * 64 * 3 * 9) as f64;
    let window = Window2d { padding: [1, 1], ..Window2d::new([3, 3]) };
    if wanted("training: conv2d forward [64, 3, 64, 64] k3 p1 -> 16") {
        let (dt, cd) = median_pair(
            budget,
            || drop(black_box(x.conv2d(&conv.weight.detach(), None, window, 1))),
            || drop(black_box(cx.conv2d(candle_model.conv_w.as_tensor(), 1, 1, 1, 1).unwrap())),
        );
        rows.push(Row { op: "conv2d fwd 64x3x64x64 k3".into(), devtensor: Some(dt), candle: cd, work: conv_flops, peak: Some(peak), unit: "GFLOP/s" });
    }
    if wanted("training: conv2d forward backward [64, 3, 64, 64] k3 p1 -> 16") {
        // Gradients of the weight (the input is data, as in a first layer).
        let (dt, cd) = median_pair(
            budget,
            || drop(black_box(x.conv2d(&conv.weight, conv.bias.as_ref(), window, 1).sum().backward())),
            || {
                let y = cx.conv2d(candle_model.conv_w.as_tensor(), 1, 1, 1, 1).unwrap();
                let y = y.broadcast_add(&candle_model.conv_b.as_tensor().reshape((1, 16, 1, 1)).unwrap()).unwrap();
                drop(black_box(y.sum_all().unwrap().backward().unwrap()))
            },
        );
        rows.push(Row { op: "conv2d fwd+bwd 64x3x64x64 k3".into(), devtensor: Some(dt), candle: cd, work: 2.0 * conv_flops, peak: Some(peak), unit: "GFLOP/s" });
    }
    let h_data = data(batch * 16 * 32 * 32, 12);
    let h = Tensor::<Cpu>::from_slice(&h_data, [batch, 16 * 32 * 32]);
    let ch = CandleTensor::from_slice(&h_data, (batch, 16 * 32 * 32), &cpu)?;
    let linear_flops = 2.0 * (batch * 16 * 32 * 32 * classes) as f64;
    if wanted("training: linear forward backward [64, 16384] -> 10") {
        let (dt, cd) = median_pair(
            budget,
            || drop(black_box(model.fc.forward(&h).sum().backward())),
            || {
                let y = ch.matmul(&candle_model.fc_w.as_tensor().t().unwrap()).unwrap();
                let y = y.broadcast_add(candle_model.fc_b.as_tensor()).unwrap();
                drop(black_box(y.sum_all().unwrap().backward().unwrap()))
            },
        );
        rows.push(Row { op: "linear fwd+bwd 64x16384->10".into(), devtensor: Some(dt), candle: cd, work: 2.0 * linear_flops, peak: Some(peak), unit: "GFLOP/s" });
    }
    if wanted("training: linear forward backward [16, 64, 128] -> 512, a 3-d input") {
        // A transformer's MLP on [batch, context, width]: candle-nn's own
        // `Linear` against devtensor's, both from the same weights.
        use candle_nn::Module as _;
        let (b, t, width, out) = (16, 64, 128, 512);
        let x_data = data(b * t * width, 13);
        let x3 = Tensor::<Cpu>::from_slice(&x_data, [b, t, width]);
        let cx3 = CandleTensor::from_slice(&x_data, (b, t, width), &cpu)?;
        let fc = Linear::<Cpu>::new(width, out);
        let cw = Var::from_tensor(&to_candle(&fc.weight, &cpu)?)?;
        let cb = Var::from_tensor(&to_candle(fc.bias.as_ref().unwrap(), &cpu)?)?;
        let candle_fc = candle_nn::Linear::new(cw.as_tensor().clone(), Some(cb.as_tensor().clone()));
        let diff = super::max_diff(&fc.forward(&x3).to_vec(), &candle_fc.forward(&cx3)?.flatten_all()?.to_vec1()?);
        assert!(diff < 1e-3, "3-d linear: results differ by {diff}");
        let (dt, cd) = median_pair(
            budget,
            || drop(black_box(fc.forward(&x3).sum().backward())),
            || drop(black_box(candle_fc.forward(&cx3).unwrap().sum_all().unwrap().backward().unwrap())),
        );
        let flops = 2.0 * (b * t * width * out) as f64;
        rows.push(Row { op: "linear fwd+bwd 16x64x128->512".into(), devtensor: Some(dt), candle: cd, work: 2.0 * flops, peak: Some(peak), unit: "GFLOP/s" });
    }
    if wanted("training: gelu forward backward [16, 64, 512]") {
        // A transformer MLP's hidden activation: nn::Gelu (exact, erf form)
        // against candle's gelu_erf, forward and backward.
        let n = 16 * 64 * 512;
        let g_data = data(n, 14).iter().map(|v| v * 4.0).collect::<Vec<f32>>();
        let gx = Tensor::<Cpu>::from_slice(&g_data, [16, 64, 512]).requires_grad();
        let cgx = Var::from_tensor(&CandleTensor::from_slice(&g_data, (16, 64, 512), &cpu)?)?;
        let gelu = devtensor::nn::Gelu::default();
        let diff = super::max_diff(&gelu.forward(&gx).to_vec(), &cgx.as_tensor().gelu_erf()?.flatten_all()?.to_vec1()?);
        assert!(diff < 1e-5, "gelu: results differ by {diff}");
        let (dt, cd) = median_pair(
            budget,
            || drop(black_box(gelu.forward(&gx).sum().backward())),
            || drop(black_box(cgx.as_tensor().gelu_erf().unwrap().sum_all().unwrap().backward().unwrap())),
        );
        // Forward reads x and writes y; backward reads x and the incoming gradient, writes x's.
        rows.push(Row { op: "gelu fwd+bwd 16x64x512".into(), devtensor: Some(dt), candle: cd, work: (5 * 4 * n) as f64, peak: None, unit: "GB/s" });
    }
    if wanted("training: train step seed 002 cnn static shapes vs dynamic") {
        // The same model with its sizes in its type, from the same weights,
        // timed against the dynamic model (in the peer column): static
        // shapes are meant to cost nothing at run time.
        let mut dynamic = Seed002::<Cpu> { conv: model.conv.clone(), relu: Relu, pool: MaxPool2d::new(2), flatten: Flatten::default(), fc: model.fc.clone() };
        let mut fixed: StaticSeed002 = (SConv2d { inner: model.conv.clone() }, Relu, SMaxPool2d, SFlatten, SLinear { inner: model.fc.clone() });
        let sx: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = x.try_static().expect("3x64x64 images");
        let sy: STensor<Cpu, (usize,), i64> = y.try_static().expect("one label per image");
        assert_eq!(fixed.forward(&sx).dynamic().to_vec(), dynamic.forward(&x).to_vec(), "static and dynamic logits differ");
        let (mut opt_static, mut opt_dynamic) = (Adam::new(&fixed, AdamConfig::default()), Adam::new(&dynamic, AdamConfig::default()));
        let mut static_step = || {
            let loss = fixed.forward(&sx).cross_entropy(&sy);
            opt_static.step(&mut fixed, &loss.backward());
        };
        let mut dynamic_step = || {
            let loss = cross_entropy(&dynamic.forward(&x), &y);
            opt_dynamic.step(&mut dynamic, &loss.backward());
        };
        // Whichever closure runs first in each alternation measured a few
        // percent slower on this machine, so both orders are timed and
        // averaged.
        let (st1, dt1) = median_pair(budget / 2, &mut static_step, &mut dynamic_step);
        let (dt2, st2) = median_pair(budget / 2, &mut dynamic_step, &mut static_step);
        let (st, dt) = ((st1 + st2) / 2, (dt1 + dt2) / 2);
        rows.push(Row {
            op: "train step seed 002, static shapes (peer: dynamic)".into(),
            devtensor: Some(st),
            candle: dt,
            work: 3.0 * (conv_flops + linear_flops),
            peak: Some(peak),
            unit: "GFLOP/s",
        });
    }
    if wanted("training: train step seed 002 cnn adam") {
        let mut model = model;
        let mut opt = Adam::new(&model, AdamConfig::default());
        let mut candle_opt = candle_nn::AdamW::new(
            candle_model.vars(),
            candle_nn::ParamsAdamW { lr: 1e-3, weight_decay: 0.0, ..Default::default() },
        )?;
        let (dt, cd) = median_pair(
            budget,
            || {
                let loss = cross_entropy(&model.forward(&x), &y);
                opt.step(&mut model, &loss.backward());
            },
            || {
                let loss = candle_nn::loss::cross_entropy(&candle_model.forward(&cx).unwrap(), &cy).unwrap();
                candle_opt.backward_step(&loss).unwrap();
            },
        );
        // Forward and backward (about 3x the forward's multiply-adds).
        rows.push(Row {
            op: "train step seed 002 (64x3x64x64)".into(),
            devtensor: Some(dt),
            candle: cd,
            work: 3.0 * (conv_flops + linear_flops),
            peak: Some(peak),
            unit: "GFLOP/s",
        });
    }
    Ok(rows)
}
