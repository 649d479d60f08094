//! Training rows: the operations of a training step forward and backward,
//! and whole training and inference steps of small real models (seed 002's
//! CNN, PyTorch's CIFAR-10 LeNet, a small ResNet), in devtensor, candle-nn
//! (where it has the operation) and PyTorch, from the same inputs and weights.

use super::{Contest, Row, data, median_pair};
use candle_core::{Device as CandleDevice, Tensor as CandleTensor, Var};
use candle_nn::Optimizer as _;
use devtensor::nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Flatten, LayerNorm, Linear, MaxPool2d, Relu, cross_entropy,
};
use devtensor::ops::attention::AttentionMask;
use devtensor::ops::conv::Window2d;
use devtensor::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig, clip_grad_norm};
#[allow(dead_code)] // what only the example uses
#[path = "../../../examples/gpt/model.rs"]
mod gpt;
use devtensor::nn::ToDtype;
use devtensor::static_shapes::{Const, SConv2d, SFlatten, SForward, SLinear, SMaxPool2d, STensor};
use devtensor::{Cpu, Device, FloatElement, Tensor, autocast, bf16, no_grad};
use gpt::{Gpt, GptConfig, KvCache, Sampling};
use serde_json::json;
use std::hint::black_box;

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
type StaticSeed002 =
    (SConv2d<Cpu, 3, 16, 3, 1, 1>, Relu, SMaxPool2d<2, 2>, SFlatten, SLinear<Cpu, { 16 * 32 * 32 }, 10>);

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

/// PyTorch's CIFAR-10 tutorial network, with its parameter names.
struct LeNet<D: Device> {
    conv1: Conv2d<D>,
    conv2: Conv2d<D>,
    fc1: Linear<D>,
    fc2: Linear<D>,
    fc3: Linear<D>,
}
devtensor::module!(LeNet { conv1, conv2, fc1, fc2, fc3 });

impl<D: Device> LeNet<D> {
    fn new() -> Self {
        LeNet {
            conv1: Conv2d::new(3, 6, 5),
            conv2: Conv2d::new(6, 16, 5),
            fc1: Linear::new(16 * 5 * 5, 120),
            fc2: Linear::new(120, 84),
            fc3: Linear::new(84, 10),
        }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let pool = MaxPool2d::new(2);
        let x = pool.forward(&self.conv1.forward(x).relu());
        let x = pool.forward(&self.conv2.forward(&x).relu()).flatten(1, -1);
        self.fc3.forward(&self.fc2.forward(&self.fc1.forward(&x).relu()).relu())
    }
}

/// A residual block: conv-BN-ReLU-conv-BN, plus the input, then ReLU.
struct Block<D: Device> {
    conv1: Conv2d<D>,
    bn1: BatchNorm2d<D>,
    conv2: Conv2d<D>,
    bn2: BatchNorm2d<D>,
}
devtensor::module!(Block { conv1, bn1, conv2, bn2 });

impl<D: Device> Block<D> {
    fn new(c: usize) -> Self {
        let conv = || Conv2d::new(c, c, 3).padding(1).without_bias();
        Block { conv1: conv(), bn1: BatchNorm2d::new(c), conv2: conv(), bn2: BatchNorm2d::new(c) }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let y = self.bn1.forward(&self.conv1.forward(x)).relu();
        (&self.bn2.forward(&self.conv2.forward(&y)) + x).relu()
    }
}

/// A small ResNet: a stem and three residual blocks of `c` channels on
/// 32x32 images, global average pooling and a linear classifier.
struct ResNet<D: Device> {
    stem: Conv2d<D>,
    stem_bn: BatchNorm2d<D>,
    b1: Block<D>,
    b2: Block<D>,
    b3: Block<D>,
    fc: Linear<D>,
}
devtensor::module!(ResNet { stem, stem_bn, b1, b2, b3, fc });

impl<D: Device> ResNet<D> {
    fn new(c: usize) -> Self {
        ResNet {
            stem: Conv2d::new(3, c, 3).padding(1).without_bias(),
            stem_bn: BatchNorm2d::new(c),
            b1: Block::new(c),
            b2: Block::new(c),
            b3: Block::new(c),
            fc: Linear::new(c, 10),
        }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        let x = self.stem_bn.forward(&self.stem.forward(x)).relu();
        let x = self.b3.forward(&self.b2.forward(&self.b1.forward(&x)));
        self.fc.forward(&AdaptiveAvgPool2d::new([1, 1]).forward(&x).flatten(1, -1))
    }
}

/// Multiply-adds of a convolution's forward, times 2: FLOP.
fn conv_flops(batch: usize, cin: usize, cout: usize, out_hw: usize, k: usize) -> f64 {
    2.0 * (batch * cout * out_hw * out_hw * cin * k * k) as f64
}

/// The training rows whose name `wanted` accepts. `peak` is the FMA peak and
/// `bandwidth` the triad bandwidth measured in this run, for the share-of-peak
/// column.
pub fn rows(
    contest: &mut Contest,
    wanted: impl Fn(&str) -> bool,
    peak: f64,
    bandwidth: f64,
) -> candle_core::Result<()> {
    let cpu = CandleDevice::Cpu;
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
    let labels = |n: usize| Tensor::<Cpu, i64>::from_slice(&(0..n as i64).map(|i| i % 10).collect::<Vec<_>>(), [n]);
    let y = labels(batch);
    let cy = CandleTensor::from_vec(y.to_vec().iter().map(|&l| l as u32).collect::<Vec<_>>(), batch, &cpu)?;

    // Both libraries compute the same logits and loss.
    let logits = model.forward(&x);
    let candle_logits = candle_model.forward(&cx)?;
    let diff = super::max_diff(&logits.to_vec(), &candle_logits.flatten_all()?.to_vec1()?);
    assert!(diff < 1e-3, "seed 002 forward: results differ by {diff}");

    let conv = &model.conv;
    let seed_conv_flops = conv_flops(batch, 3, 16, 64, 3);
    let window = Window2d { padding: [1, 1], ..Window2d::new([3, 3]) };
    let op = "conv2d fwd 64x3x64x64 k3";
    if wanted(op) {
        contest.torch.tensor("x", &x);
        contest.torch.tensor("w", &conv.weight);
        let ours = x.conv2d(&conv.weight.detach(), None, window, 1).to_vec();
        let torch = contest.torch.setup(op, "conv2d_fwd", json!({"padding": 1}), &ours, 1e-4);
        contest.row(
            op,
            seed_conv_flops,
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(x.conv2d(&conv.weight.detach(), None, window, 1))),
            Some(&mut || drop(black_box(cx.conv2d(candle_model.conv_w.as_tensor(), 1, 1, 1, 1).unwrap()))),
        );
    }
    // Convolutions forward and backward: a first layer (gradients of the
    // weight and bias; the input is data) and middle layers of a ResNet
    // (the input's gradient too).
    for (n, cin, cout, hw) in [(64, 3, 16, 64), (32, 32, 32, 32), (32, 64, 64, 16)] {
        let op = format!("conv2d fwd+bwd {n}x{cin}x{hw}x{hw} k3 ->{cout}");
        if !wanted(&op) {
            continue;
        }
        let first_layer = cin == 3;
        let x_data = data(n * cin * hw * hw, 20 + cin as u64);
        let x = Tensor::<Cpu>::from_slice(&x_data, [n, cin, hw, hw]);
        let x = if first_layer { x } else { x.requires_grad() };
        let layer = Conv2d::<Cpu>::new(cin, cout, 3).padding(1);
        let bias = layer.bias.as_ref().unwrap();
        let cx = Var::from_tensor(&CandleTensor::from_slice(&x_data, (n, cin, hw, hw), &cpu)?)?;
        let cw = Var::from_tensor(&to_candle(&layer.weight, &cpu)?)?;
        let cb = Var::from_tensor(&to_candle(bias, &cpu)?)?;
        contest.torch.tensor("x", &x.detach());
        contest.torch.tensor("w", &layer.weight);
        contest.torch.tensor("b", bias);
        let ours = layer.forward(&x).to_vec();
        let torch =
            contest.torch.setup(&op, "conv2d_fwd_bwd", json!({"padding": 1, "input_grad": !first_layer}), &ours, 1e-4);
        let flops = conv_flops(n, cin, cout, hw, 3);
        contest.row(
            &op,
            if first_layer { 2.0 * flops } else { 3.0 * flops },
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(layer.forward(&x).sum().backward())),
            Some(&mut || {
                let y = cx.as_tensor().conv2d(cw.as_tensor(), 1, 1, 1, 1).unwrap();
                let y = y.broadcast_add(&cb.as_tensor().reshape((1, cout, 1, 1)).unwrap()).unwrap();
                drop(black_box(y.sum_all().unwrap().backward().unwrap()))
            }),
        );
    }
    let op = "linear fwd+bwd 64x16384->10";
    if wanted(op) {
        let h_data = data(batch * 16 * 32 * 32, 12);
        let h = Tensor::<Cpu>::from_slice(&h_data, [batch, 16 * 32 * 32]);
        let ch = CandleTensor::from_slice(&h_data, (batch, 16 * 32 * 32), &cpu)?;
        contest.torch.tensor("x", &h);
        contest.torch.tensor("w", &model.fc.weight);
        contest.torch.tensor("b", model.fc.bias.as_ref().unwrap());
        let torch = contest.torch.setup(op, "linear_fwd_bwd", json!({}), &model.fc.forward(&h).to_vec(), 1e-4);
        let flops = 2.0 * (batch * 16 * 32 * 32 * classes) as f64;
        contest.row(
            op,
            2.0 * flops,
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(model.fc.forward(&h).sum().backward())),
            Some(&mut || {
                let y = ch.matmul(&candle_model.fc_w.as_tensor().t().unwrap()).unwrap();
                let y = y.broadcast_add(candle_model.fc_b.as_tensor()).unwrap();
                drop(black_box(y.sum_all().unwrap().backward().unwrap()))
            }),
        );
    }
    let op = "linear fwd+bwd 16x64x128->512";
    if wanted(op) {
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
        let ours = fc.forward(&x3).to_vec();
        let diff = super::max_diff(&ours, &candle_fc.forward(&cx3)?.flatten_all()?.to_vec1()?);
        assert!(diff < 1e-3, "3-d linear: results differ by {diff}");
        contest.torch.tensor("x", &x3);
        contest.torch.tensor("w", &fc.weight);
        contest.torch.tensor("b", fc.bias.as_ref().unwrap());
        let torch = contest.torch.setup(op, "linear_fwd_bwd", json!({}), &ours, 1e-4);
        let flops = 2.0 * (b * t * width * out) as f64;
        contest.row(
            op,
            2.0 * flops,
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(fc.forward(&x3).sum().backward())),
            Some(&mut || drop(black_box(candle_fc.forward(&cx3).unwrap().sum_all().unwrap().backward().unwrap()))),
        );
    }
    let op = "gelu fwd+bwd 16x64x512";
    if wanted(op) {
        // A transformer MLP's hidden activation: nn::Gelu (exact, erf form)
        // against candle's gelu_erf, forward and backward.
        let n = 16 * 64 * 512;
        let g_data = data(n, 14).iter().map(|v| v * 4.0).collect::<Vec<f32>>();
        let gx = Tensor::<Cpu>::from_slice(&g_data, [16, 64, 512]).requires_grad();
        let cgx = Var::from_tensor(&CandleTensor::from_slice(&g_data, (16, 64, 512), &cpu)?)?;
        let gelu = devtensor::nn::Gelu::default();
        let ours = gelu.forward(&gx).to_vec();
        let diff = super::max_diff(&ours, &cgx.as_tensor().gelu_erf()?.flatten_all()?.to_vec1()?);
        assert!(diff < 1e-5, "gelu: results differ by {diff}");
        contest.torch.tensor("x", &gx.detach());
        let torch = contest.torch.setup(op, "gelu_fwd_bwd", json!({}), &ours, 1e-5);
        // Forward reads x and writes y; backward reads x and the incoming gradient, writes x's.
        contest.row(
            op,
            (5 * 4 * n) as f64,
            Some(bandwidth),
            "GB/s",
            torch,
            &mut || drop(black_box(gelu.forward(&gx).sum().backward())),
            Some(&mut || drop(black_box(cgx.as_tensor().gelu_erf().unwrap().sum_all().unwrap().backward().unwrap()))),
        );
    }
    normalisation_rows(contest, &wanted, bandwidth)?;
    attention_rows(contest, &wanted, peak, bandwidth)?;
    let op = "max_pool2d fwd+bwd 32x32x32x32";
    if wanted(op) {
        let x_data = data(32 * 32 * 32 * 32, 15);
        let px = Tensor::<Cpu>::from_slice(&x_data, [32, 32, 32, 32]).requires_grad();
        let cpx = Var::from_tensor(&CandleTensor::from_slice(&x_data, (32, 32, 32, 32), &cpu)?)?;
        let pool = MaxPool2d::new(2);
        contest.torch.tensor("x", &px.detach());
        let torch = contest.torch.setup(op, "max_pool_fwd_bwd", json!({}), &pool.forward(&px).to_vec(), 0.0);
        // Forward reads x and writes a quarter of it; backward the reverse.
        let bytes = (2 * 4 * 32 * 32 * 32 * 32 * 5 / 4) as f64;
        contest.row(
            op,
            bytes,
            Some(bandwidth),
            "GB/s",
            torch,
            &mut || drop(black_box(pool.forward(&px).sum().backward())),
            Some(&mut || {
                drop(black_box(cpx.as_tensor().max_pool2d(2).unwrap().sum_all().unwrap().backward().unwrap()))
            }),
        );
    }

    let op = "train step seed 002, static shapes (peer: dynamic)";
    if wanted(op) {
        // The same model with its sizes in its type, from the same weights,
        // timed against the dynamic model (in the peer column): static
        // shapes are meant to cost nothing at run time.
        let mut dynamic = Seed002::<Cpu> {
            conv: model.conv.clone(),
            relu: Relu,
            pool: MaxPool2d::new(2),
            flatten: Flatten::default(),
            fc: model.fc.clone(),
        };
        let mut fixed: StaticSeed002 = (
            SConv2d::from_weights(model.conv.weight.clone(), model.conv.bias.clone()),
            Relu,
            SMaxPool2d,
            SFlatten,
            SLinear::from_weights(model.fc.weight.clone(), model.fc.bias.clone()),
        );
        let sx: STensor<Cpu, (usize, Const<3>, Const<64>, Const<64>)> = x.try_static().expect("3x64x64 images");
        let sy: STensor<Cpu, (usize,), i64> = y.try_static().expect("one label per image");
        assert_eq!(
            fixed.forward(&sx).dynamic().to_vec(),
            dynamic.forward(&x).to_vec(),
            "static and dynamic logits differ"
        );
        let (mut opt_static, mut opt_dynamic) =
            (Adam::new(&fixed, AdamConfig::default()), Adam::new(&dynamic, AdamConfig::default()));
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
        let budget = contest.budget;
        let (st1, dt1) = median_pair(budget / 2, &mut static_step, &mut dynamic_step);
        let (dt2, st2) = median_pair(budget / 2, &mut dynamic_step, &mut static_step);
        contest.push(Row {
            op: op.into(),
            devtensor: (st1 + st2) / 2,
            candle: Some((dt1 + dt2) / 2),
            torch: None,
            work: 3.0 * seed_conv_flops,
            peak: Some(peak),
            unit: "GFLOP/s",
        });
    }
    let op = "infer seed 002 (64x3x64x64)";
    if wanted(op) {
        contest.torch.model(&model);
        contest.torch.tensor("x", &x);
        let torch = contest.torch.setup(op, "inference", json!({"model": "seed002"}), &logits.to_vec(), 1e-4);
        let ours = &mut || drop(black_box(devtensor::no_grad(|| model.forward(&x))));
        let theirs = &mut || drop(black_box(candle_model.forward(&cx).unwrap()));
        contest.row(op, seed_conv_flops, Some(peak), "GFLOP/s", torch, ours, Some(theirs));
        let peer = Peer { kind: "inference", args: json!({"model": "seed002"}), check: &logits.to_vec() };
        other_runtimes(
            contest,
            op,
            peer,
            &mut |t| {
                t.model(&model);
                t.tensor("x", &x);
            },
            (seed_conv_flops, peak),
            ours,
        );
    }
    let op = "train step seed 002 (64x3x64x64)";
    let mixed_op = "train step seed 002 bf16 autocast (64x3x64x64)";
    // A training row's own copy of the model, sent to PyTorch with the batch.
    let training_copy = |contest: &mut Contest| {
        let copy = Seed002::<Cpu> {
            conv: model.conv.clone(),
            relu: Relu,
            pool: MaxPool2d::new(2),
            flatten: Flatten::default(),
            fc: model.fc.clone(),
        };
        contest.torch.model(&copy);
        contest.torch.tensor("x", &x);
        contest.torch.labels("y", &y);
        copy
    };
    if wanted(mixed_op) && !super::capped() {
        let mut model = training_copy(contest);
        let args = json!({"model": "seed002", "optimizer": "adam", "lr": 1e-3, "autocast": "bf16"});
        let torch = contest.torch.setup(mixed_op, "train_step", args, &logits.to_vec(), 1e-4);
        let mut opt = Adam::new(&model, AdamConfig::default());
        let step = &mut || {
            let loss = cross_entropy(&autocast::<bf16, _>(|| model.forward(&x)), &y);
            opt.step(&mut model, &loss.backward());
        };
        contest.row(mixed_op, 3.0 * seed_conv_flops, Some(peak), "GFLOP/s", torch, step, None);
    }
    if wanted(op) {
        let mut model = training_copy(contest);
        let args = json!({"model": "seed002", "optimizer": "adam", "lr": 1e-3});
        let torch = contest.torch.setup(op, "train_step", args, &logits.to_vec(), 1e-4);
        let mut opt = Adam::new(&model, AdamConfig::default());
        let mut candle_opt = candle_nn::AdamW::new(
            candle_model.vars(),
            candle_nn::ParamsAdamW { lr: 1e-3, weight_decay: 0.0, ..Default::default() },
        )?;
        // Forward and backward (about 3x the forward's multiply-adds).
        contest.row(
            op,
            3.0 * seed_conv_flops,
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || {
                let loss = cross_entropy(&model.forward(&x), &y);
                opt.step(&mut model, &loss.backward());
            },
            Some(&mut || {
                let loss = candle_nn::loss::cross_entropy(&candle_model.forward(&cx).unwrap(), &cy).unwrap();
                candle_opt.backward_step(&loss).unwrap();
            }),
        );
    }
    model_rows(contest, &wanted, peak);
    gpt_rows(contest, &wanted, peak);
    generation_row(contest, &wanted);
    Ok(())
}

/// The GPT of `examples/train_gpt.rs` (4 layers, 4 heads, width 128,
/// context 64, 76 tokens) on a batch of 16: inference, and one training
/// step as the example takes it (loss, backward, gradient clipping, AdamW
/// with a no-decay group), against PyTorch's same model
/// (`scripts/train_gpt_torch.py`) with the same weights. candle has no GPT
/// of its own to compare.
fn gpt_rows(contest: &mut Contest, wanted: &impl Fn(&str) -> bool, peak: f64) {
    let (batch, config) = (16, GptConfig { block_size: 64, vocab_size: 76, n_layer: 4, n_head: 4, n_embd: 128 });
    let (t, c) = (config.block_size, config.n_embd);
    devtensor::manual_seed(7);
    let mut model = Gpt::<Cpu>::new(config).expect("the model");
    let tokens = |seed| {
        let ids = data(batch * t, seed).iter().map(|v| ((v + 1.0) * 38.0) as i64 % 76).collect();
        Tensor::<Cpu, i64>::from_vec(ids, [batch, t])
    };
    let (idx, y) = (tokens(61), tokens(62));
    // Multiply-adds of the forward: the blocks' matrices (12 c² per token
    // and layer), the output layer, and causal attention's two products.
    let tokens_in = (batch * t) as f64;
    let matrices = tokens_in * (config.n_layer as f64 * 12.0 * (c * c) as f64 + (c * config.vocab_size) as f64);
    let attention = config.n_layer as f64 * 2.0 * (batch * t * t * c) as f64 / 2.0;
    let forward = 2.0 * (matrices + attention);
    let args = json!({"config": {"block_size": t, "vocab_size": config.vocab_size, "n_layer": config.n_layer,
                                 "n_head": config.n_head, "n_embd": c}});
    // The model converted to bf16 as a whole (PyTorch's
    // `model.to(torch.bfloat16)`), before the training rows change it.
    let op = "infer GPT bf16 4x4x128 (16x64)";
    if wanted(op) {
        let half = model.to_dtype::<bf16>();
        let logits = no_grad(|| half.logits(&idx).expect("the model runs")).to_dtype::<f32>();
        // PyTorch's bf16 under the AVX2 cap runs at a few GFLOP/s: no comparison there.
        let torch = !super::capped() && {
            contest.torch.model(&model);
            contest.torch.labels("idx", &idx);
            let mut row_args = args.clone();
            row_args["dtype"] = json!("bf16");
            // Both round every op's output to bf16, in their own orders.
            contest.torch.setup(op, "gpt_inference", row_args, &logits.to_vec(), 2f64.powi(-4))
        };
        let run = &mut || drop(black_box(no_grad(|| half.logits(&idx).expect("the model runs"))));
        contest.row(op, forward, super::bf16_peak(Cpu::num_threads()).or(Some(peak)), "GFLOP/s", torch, run, None);
    }
    for (training, mixed) in [(false, false), (true, false), (true, true)] {
        let op = match (training, mixed) {
            (true, true) => "train step GPT bf16 autocast 4x4x128 (16x64)",
            (true, false) => "train step GPT 4x4x128 (16x64)",
            _ => "infer GPT 4x4x128 (16x64)",
        };
        // PyTorch's bf16 under the AVX2 cap runs at a few GFLOP/s (see the
        // bf16 product rows): no comparison there.
        if !wanted(op) || (mixed && super::capped()) {
            continue;
        }
        // The weights as this row starts (a training row leaves them trained).
        let logits = no_grad(|| model.logits(&idx).expect("the model runs"));
        contest.torch.model(&model);
        contest.torch.labels("idx", &idx);
        contest.torch.labels("y", &y);
        let kind = if training { "gpt_train_step" } else { "gpt_inference" };
        let mut row_args = args.clone();
        if mixed {
            row_args["autocast"] = json!("bf16");
        }
        let torch = contest.torch.setup(op, kind, row_args, &logits.to_vec(), 1e-4);
        if training {
            let mut opt = model.optimizer(1e-3, 0.1, (0.9, 0.99));
            let model = &mut model;
            let step = &mut || {
                let loss = match mixed {
                    true => autocast::<bf16, _>(|| model.loss(&idx, &y)),
                    false => model.loss(&idx, &y),
                };
                let mut grads = loss.expect("the model runs").backward();
                clip_grad_norm(&*model, &mut grads, 1.0, 2.0);
                opt.step(model, &grads);
            };
            contest.row(op, 3.0 * forward, Some(peak), "GFLOP/s", torch, step, None);
        } else {
            let run = &mut || drop(black_box(no_grad(|| model.logits(&idx).expect("the model runs"))));
            contest.row(op, forward, Some(peak), "GFLOP/s", torch, run, None);
            let peer = Peer { kind: "gpt_inference", args: args.clone(), check: &logits.to_vec() };
            other_runtimes(
                contest,
                op,
                peer,
                &mut |t| {
                    t.model(&model);
                    t.labels("idx", &idx);
                },
                (forward, peak),
                run,
            );
        }
    }
}

/// A PyTorch row of `torch_peer.py`: its function, arguments, and the
/// values devtensor's result starts with.
struct Peer<'a> {
    kind: &'static str,
    args: serde_json::Value,
    check: &'a [f32],
}

/// The inference row `op` again against the faster ways PyTorch users run
/// a model: ONNX Runtime on the model `torch.onnx.export` writes, and
/// `torch.compile` (Inductor); not under `DEVTENSOR_CPU_ISA`, which they
/// have no switch for. `send` sends the row's weights and inputs,
/// `(work, peak)` are the row's. A runtime that is missing or fails to
/// export or compile leaves its row's peer column empty, with the reason on
/// stderr.
fn other_runtimes(
    contest: &mut Contest,
    op: &str,
    peer: Peer,
    send: &mut dyn FnMut(&mut super::torch::Torch),
    (work, peak): (f64, f64),
    ours: &mut dyn FnMut(),
) {
    // Neither has a switch to cap its instruction set the way PyTorch's
    // eager kernels are capped, so a capped run leaves them out.
    if super::capped() {
        return;
    }
    for (runtime, label) in [("onnxruntime", "ONNX Runtime"), ("compile", "torch.compile")] {
        let row = format!("{op} vs {label}");
        send(&mut contest.torch);
        let mut args = peer.args.clone();
        args["runtime"] = json!(runtime);
        let torch = contest.torch.setup(&row, peer.kind, args, peer.check, 1e-4);
        contest.row(&row, work, Some(peak), "GFLOP/s", torch, ours, None);
    }
}

/// Generating 256 tokens at batch 1 after a 16-token prompt with the same
/// GPT (its position table grown to 512), temperature 0.8 among the top
/// 20, with a key/value cache on both sides (`Gpt::generate`; PyTorch's
/// loop in `torch_peer.py`), in tokens/s; in `f32`, and with the model
/// converted to `bf16` as a whole (PyTorch's `model.to(torch.bfloat16)`).
/// The tokens drawn differ (each side has its own generator), the work per
/// token does not; the prompt's next-token logits are checked.
fn generation_row(contest: &mut Contest, wanted: &impl Fn(&str) -> bool) {
    let rows = ["generate GPT 4x4x128 (256 tokens, batch 1)", "generate GPT bf16 (256 tokens, batch 1)"];
    if !rows.iter().any(|op| wanted(op)) {
        return;
    }
    let config = GptConfig { block_size: 512, vocab_size: 76, n_layer: 4, n_head: 4, n_embd: 128 };
    devtensor::manual_seed(8);
    let model = Gpt::<Cpu>::new(config).expect("the model");
    let ids = data(16, 63).iter().map(|v| ((v + 1.0) * 38.0) as i64 % 76).collect();
    let prompt = Tensor::<Cpu, i64>::from_vec(ids, [1, 16]);
    if wanted(rows[0]) {
        generate(contest, rows[0], &model, &model, &prompt, Some(1e-4));
    }
    if wanted(rows[1]) {
        // Both round every op's output to bf16, in their own orders. PyTorch's
        // bf16 under the AVX2 cap runs at a few GFLOP/s: no comparison there.
        let tolerance = (!super::capped()).then_some(2f64.powi(-4));
        generate(contest, rows[1], &model.to_dtype::<bf16>(), &model, &prompt, tolerance);
    }
}

/// One row of [`generation_row`]: `model`, in its dtype `E`, against
/// PyTorch's copy of `f32_model` converted to `E` on its side, where there
/// is a `tolerance` for the check.
fn generate<E: FloatElement>(
    contest: &mut Contest,
    op: &str,
    model: &Gpt<Cpu, E>,
    f32_model: &Gpt<Cpu>,
    prompt: &Tensor<Cpu, i64>,
    tolerance: Option<f64>,
) {
    let (new_tokens, sampling) = (256, Sampling { temperature: 0.8, top_k: Some(20) });
    let first = no_grad(|| model.next_logits(prompt, &mut KvCache::new(model)).expect("the model runs"));
    let mut args = json!({"config": {"block_size": 512, "vocab_size": 76, "n_layer": 4, "n_head": 4, "n_embd": 128},
                          "new_tokens": new_tokens, "temperature": sampling.temperature, "top_k": 20});
    args["dtype"] = json!(E::DTYPE.name());
    let torch = tolerance.is_some_and(|tolerance| {
        contest.torch.model(f32_model);
        contest.torch.labels("idx", prompt);
        contest.torch.setup(op, "gpt_generate", args, &first.to_dtype::<f32>().to_vec(), tolerance)
    });
    let run = &mut || drop(black_box(model.generate(prompt, new_tokens, sampling).expect("the model runs")));
    contest.row(op, new_tokens as f64, None, "tokens/s", torch, run, None);
}

/// LeNet's and the ResNet's training steps (SGD with momentum, as in
/// PyTorch's tutorials) and LeNet's inference, against PyTorch.
fn model_rows(contest: &mut Contest, wanted: &impl Fn(&str) -> bool, peak: f64) {
    for n in [4, 64] {
        let lenet_flops = conv_flops(n, 3, 6, 28, 5)
            + conv_flops(n, 6, 16, 10, 5)
            + 2.0 * (n * (400 * 120 + 120 * 84 + 84 * 10)) as f64;
        let x = Tensor::<Cpu>::from_slice(&data(n * 3 * 32 * 32, 30), [n, 3, 32, 32]);
        let y = Tensor::<Cpu, i64>::from_slice(&(0..n as i64).map(|i| i % 10).collect::<Vec<_>>(), [n]);
        devtensor::manual_seed(3);
        let model = LeNet::<Cpu>::new();
        let logits = model.forward(&x).to_vec();
        let op = format!("infer lenet (batch {n})");
        if wanted(&op) {
            contest.torch.model(&model);
            contest.torch.tensor("x", &x);
            let torch = contest.torch.setup(&op, "inference", json!({"model": "lenet"}), &logits, 1e-4);
            let ours = &mut || drop(black_box(devtensor::no_grad(|| model.forward(&x))));
            contest.row(&op, lenet_flops, Some(peak), "GFLOP/s", torch, ours, None);
            let peer = Peer { kind: "inference", args: json!({"model": "lenet"}), check: &logits };
            other_runtimes(
                contest,
                &op,
                peer,
                &mut |t| {
                    t.model(&model);
                    t.tensor("x", &x);
                },
                (lenet_flops, peak),
                ours,
            );
        }
        let op = format!("train step lenet (batch {n}, sgd)");
        if wanted(&op) {
            let mut model = LeNet {
                conv1: model.conv1.clone(),
                conv2: model.conv2.clone(),
                fc1: model.fc1.clone(),
                fc2: model.fc2.clone(),
                fc3: model.fc3.clone(),
            };
            contest.torch.model(&model);
            contest.torch.tensor("x", &x);
            contest.torch.labels("y", &y);
            let args = json!({"model": "lenet", "optimizer": "sgd", "lr": 1e-3, "momentum": 0.9});
            let torch = contest.torch.setup(&op, "train_step", args, &logits, 1e-4);
            let mut opt = Sgd::new(&model, SgdConfig { lr: 1e-3, momentum: 0.9, ..Default::default() });
            let step = &mut || {
                let loss = cross_entropy(&model.forward(&x), &y);
                opt.step(&mut model, &loss.backward());
            };
            contest.row(&op, 3.0 * lenet_flops, Some(peak), "GFLOP/s", torch, step, None);
        }
    }
    let op = "train step resnet (batch 32, 32 ch, sgd)";
    if wanted(op) {
        let (n, c) = (32, 32);
        let x = Tensor::<Cpu>::from_slice(&data(n * 3 * 32 * 32, 31), [n, 3, 32, 32]);
        let y = Tensor::<Cpu, i64>::from_slice(&(0..n as i64).map(|i| i % 10).collect::<Vec<_>>(), [n]);
        devtensor::manual_seed(4);
        let mut model = ResNet::<Cpu>::new(c);
        contest.torch.model(&model);
        contest.torch.tensor("x", &x);
        contest.torch.labels("y", &y);
        let args = json!({"model": "resnet", "optimizer": "sgd", "lr": 1e-2, "momentum": 0.9});
        let torch = contest.torch.setup(op, "train_step", args, &model.forward(&x).to_vec(), 1e-3);
        let mut opt = Sgd::new(&model, SgdConfig { lr: 1e-2, momentum: 0.9, ..Default::default() });
        let flops = conv_flops(n, 3, c, 32, 3) + 6.0 * conv_flops(n, c, c, 32, 3);
        let step = &mut || {
            let loss = cross_entropy(&model.forward(&x), &y);
            opt.step(&mut model, &loss.backward());
        };
        contest.row(op, 3.0 * flops, Some(peak), "GFLOP/s", torch, step, None);
    }
}

/// Batch norm (a ResNet's) and layer norm (a transformer's), forward and
/// backward, against PyTorch's fused kernels; the incoming gradient is a
/// random tensor, so that no gradient is zero by construction.
fn normalisation_rows(
    contest: &mut Contest,
    wanted: &impl Fn(&str) -> bool,
    bandwidth: f64,
) -> candle_core::Result<()> {
    let op = "batch_norm fwd+bwd 32x32x32x32";
    if wanted(op) {
        let len = 32 * 32 * 32 * 32;
        let x = Tensor::<Cpu>::from_slice(&data(len, 16), [32, 32, 32, 32]).requires_grad();
        let g = Tensor::<Cpu>::from_slice(&data(len, 17), [32, 32, 32, 32]);
        let bn = BatchNorm2d::<Cpu>::new(32);
        contest.torch.tensor("x", &x.detach());
        contest.torch.tensor("w", &bn.weight);
        contest.torch.tensor("b", &bn.bias);
        contest.torch.tensor("g", &g);
        let torch = contest.torch.setup(op, "batch_norm_fwd_bwd", json!({}), &bn.forward(&x).to_vec(), 1e-4);
        // Reads x, writes y; reads x, y's gradient, writes x's: 5 passes.
        let bytes = (5 * 4 * len) as f64;
        let ours = &mut || drop(black_box((&bn.forward(&x) * &g).sum().backward()));
        contest.row(op, bytes, Some(bandwidth), "GB/s", torch, ours, None);
    }
    let op = "layer_norm fwd+bwd 16x64x128";
    if wanted(op) {
        let len = 16 * 64 * 128;
        let x = Tensor::<Cpu>::from_slice(&data(len, 18), [16, 64, 128]).requires_grad();
        let g = Tensor::<Cpu>::from_slice(&data(len, 19), [16, 64, 128]);
        let ln = LayerNorm::<Cpu>::new(&[128]);
        contest.torch.tensor("x", &x.detach());
        contest.torch.tensor("w", &ln.weight);
        contest.torch.tensor("b", ln.bias.as_ref().expect("a bias"));
        contest.torch.tensor("g", &g);
        let torch = contest.torch.setup(op, "layer_norm_fwd_bwd", json!({}), &ln.forward(&x).to_vec(), 1e-4);
        let bytes = (5 * 4 * len) as f64;
        let ours = &mut || drop(black_box((&ln.forward(&x) * &g).sum().backward()));
        contest.row(op, bytes, Some(bandwidth), "GB/s", torch, ours, None);
    }
    Ok(())
}

/// The pieces of attention at a small GPT's sizes (batch 16, 4 heads,
/// context 64, head width 32): the batched products of queries and keys,
/// and softmax over short rows, forward and backward.
fn attention_rows(
    contest: &mut Contest,
    wanted: &impl Fn(&str) -> bool,
    peak: f64,
    bandwidth: f64,
) -> candle_core::Result<()> {
    let cpu = CandleDevice::Cpu;
    let (bh, t, d) = (16 * 4, 64, 32);
    let op = "bmm fwd+bwd 64x[64x32]x[32x64]";
    if wanted(op) {
        let (a_data, b_data) = (data(bh * t * d, 40), data(bh * d * t, 41));
        let a = Tensor::<Cpu>::from_slice(&a_data, [bh, t, d]).requires_grad();
        let b = Tensor::<Cpu>::from_slice(&b_data, [bh, d, t]).requires_grad();
        let ca = Var::from_tensor(&CandleTensor::from_slice(&a_data, (bh, t, d), &cpu)?)?;
        let cb = Var::from_tensor(&CandleTensor::from_slice(&b_data, (bh, d, t), &cpu)?)?;
        contest.torch.tensor("a", &a.detach());
        contest.torch.tensor("b", &b.detach());
        let torch = contest.torch.setup(op, "bmm_fwd_bwd", json!({}), &a.matmul(&b).to_vec(), 1e-4);
        // The forward product and two products for the gradients.
        let flops = 3.0 * 2.0 * (bh * t * d * t) as f64;
        contest.row(
            op,
            flops,
            Some(peak),
            "GFLOP/s",
            torch,
            &mut || drop(black_box(a.matmul(&b).sum().backward())),
            Some(&mut || {
                drop(black_box(ca.as_tensor().matmul(cb.as_tensor()).unwrap().sum_all().unwrap().backward().unwrap()))
            }),
        );
    }
    let op = "softmax fwd+bwd 64x64x64";
    if wanted(op) {
        let len = bh * t * t;
        let x = Tensor::<Cpu>::from_slice(&data(len, 42), [bh, t, t]).requires_grad();
        let g = Tensor::<Cpu>::from_slice(&data(len, 43), [bh, t, t]);
        contest.torch.tensor("x", &x.detach());
        contest.torch.tensor("g", &g);
        let torch = contest.torch.setup(op, "softmax_fwd_bwd", json!({}), &x.softmax(-1).to_vec(), 1e-5);
        let bytes = (5 * 4 * len) as f64;
        let ours = &mut || drop(black_box((&x.softmax(-1) * &g).sum().backward()));
        contest.row(op, bytes, Some(bandwidth), "GB/s", torch, ours, None);
    }
    // Causal attention in one call, against F.scaled_dot_product_attention
    // (is_causal=True): the small GPT's sizes, and longer contexts.
    for (batch, heads, t, d) in [(16, 4, 64, 32), (4, 4, 256, 32), (1, 4, 1024, 32)] {
        let shape = [batch, heads, t, d];
        let len = batch * heads * t * d;
        let q = Tensor::<Cpu>::from_slice(&data(len, 44), shape).requires_grad();
        let k = Tensor::<Cpu>::from_slice(&data(len, 45), shape).requires_grad();
        let v = Tensor::<Cpu>::from_slice(&data(len, 46), shape).requires_grad();
        let g = Tensor::<Cpu>::from_slice(&data(len, 47), shape);
        let attend = || q.scaled_dot_product_attention(&k, &v, AttentionMask::Causal, None);
        // Two products over the causal half of the scores.
        let flops = 2.0 * 2.0 * (batch * heads * t * t * d) as f64 / 2.0;
        for backward in [false, true] {
            let op = format!("sdpa causal {} {batch}x{heads}x{t}x{d}", if backward { "fwd+bwd" } else { "fwd" });
            if !wanted(&op) {
                continue;
            }
            for (name, x) in [("q", &q), ("k", &k), ("v", &v)] {
                contest.torch.tensor(name, &x.detach());
            }
            contest.torch.tensor("g", &g);
            let function = if backward { "sdpa_fwd_bwd" } else { "sdpa_fwd" };
            let torch = contest.torch.setup(&op, function, json!({}), &attend().to_vec(), 1e-5);
            if backward {
                // The backward recomputes the scores and runs four more products.
                let ours = &mut || drop(black_box((&attend() * &g).sum().backward()));
                contest.row(&op, 3.0 * flops, Some(peak), "GFLOP/s", torch, ours, None);
            } else {
                let ours = &mut || drop(black_box(no_grad(attend)));
                contest.row(&op, flops, Some(peak), "GFLOP/s", torch, ours, None);
            }
        }
    }
    Ok(())
}
