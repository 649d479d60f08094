//! Layers and losses against plain loops and finite differences, and the
//! `Module` machinery (names, device moves, train/eval), on every device.

use crate::common::*;
use crate::gradcheck::{T, data, gradcheck};
use devtensor::io::Checkpoint;
use devtensor::nn::{
    Celu, CrossEntropy, Dropout, Elu, Embedding, Flatten, Glu, Hardsigmoid, Hardswish, Hardtanh, Identity, LayerNorm,
    LeakyRelu, Linear, LogSigmoid, LogSoftmax, MhaInput, Mish, Module, Prelu, Reduction, Relu, Relu6, Selu, Sequential,
    Silu, Softmax, Softplus, Softsign, Tanh, TensorKind, binary_cross_entropy_with_logits, cross_entropy,
    cross_entropy_with, l1_loss, mse_loss, nll_loss,
};
use devtensor::ops::attention::AttentionMask;
use devtensor::{Cpu, Device, Error, Tensor};
use proptest::prelude::*;

fn tensor<D: Device>(dims: &[usize], seed: u64) -> T<D> {
    T::<D>::from_vec(data(dims.iter().product(), seed), dims)
}

/// `log softmax` of one row, in plain `f64`.
fn log_softmax_row(row: &[f64]) -> Vec<f64> {
    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let log_sum = row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
    row.iter().map(|v| v - max - log_sum).collect()
}

device_proptests! {
    cases = 24;

    fn linear_matches_a_loop_and_finite_differences<D>(
        batch in 1..4usize, inputs in 1..5usize, outputs in 1..4usize, seed in any::<u64>(), v in variant(),
    ) {
        let x = tensor_with::<D, f64>(&data(batch * inputs, seed), &[batch, inputs], v);
        let layer = Linear::<D, f64>::new(inputs, outputs);
        let (w, b) = (layer.weight.to_vec(), layer.bias.as_ref().unwrap().to_vec());
        let xs = x.to_vec();
        let expected: Vec<f64> = (0..batch * outputs)
            .map(|i| {
                let (n, o) = (i / outputs, i % outputs);
                b[o] + (0..inputs).map(|k| xs[n * inputs + k] * w[o * inputs + k]).sum::<f64>()
            })
            .collect();
        assert_close(&layer.forward(&x).to_vec(), &expected, 1e-12, 1e-12);
        // The weight's gradient is dense, as PyTorch's: clipping and the
        // optimiser read it in order.
        let grads = layer.forward(&x).sum().backward();
        prop_assert!(grads.get(&layer.weight).expect("the weight's gradient").is_contiguous());
        // With no gradient to record, the same numbers, [B, in] and
        // [2, B, in], with fewer rows than outputs and more (two paths of
        // the CPU product, which starts from the bias: PyTorch's addmm).
        let untracked = devtensor::no_grad(|| layer.forward(&x));
        assert_close(&untracked.to_vec(), &expected, 1e-12, 1e-12);
        let stacked = Tensor::cat(&[&x, &x.neg()], 0).reshape([2, batch, inputs]);
        let minus: Vec<f64> = (0..batch * outputs)
            .map(|i| 2.0 * b[i % outputs] - expected[i])
            .collect();
        let both: Vec<f64> = expected.iter().chain(&minus).copied().collect();
        assert_close(&devtensor::no_grad(|| layer.forward(&stacked)).to_vec(), &both, 1e-12, 1e-12);
        let params = [x, layer.weight.detach(), layer.bias.unwrap().detach()];
        gradcheck("Linear", &params, |t| Linear::from_weights(t[1].clone(), Some(t[2].clone())).forward(&t[0]));
        // Batched inputs [B, T, in] share the weight across the batch.
        let x3 = tensor::<D>(&[2, batch, inputs], seed ^ 5);
        let params = [x3, params[1].clone()];
        gradcheck("Linear (3-D)", &params, |t| Linear::from_weights(t[1].clone(), None).forward(&t[0]));
    }

    fn layer_norm_matches_a_loop_and_finite_differences<D>(rows in 1..4usize, width in 2..6usize, seed in any::<u64>()) {
        let x = tensor::<D>(&[rows, width], seed);
        let norm = LayerNorm::<D, f64>::new(&[width]);
        let xs = x.to_vec();
        let expected: Vec<f64> = xs
            .chunks(width)
            .flat_map(|row| {
                let mean = row.iter().sum::<f64>() / width as f64;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / width as f64;
                row.iter().map(move |v| (v - mean) / (var + 1e-5).sqrt()).collect::<Vec<_>>()
            })
            .collect();
        assert_close(&norm.forward(&x).to_vec(), &expected, 1e-12, 1e-12);
        let params = [x, tensor::<D>(&[width], seed ^ 1), tensor::<D>(&[width], seed ^ 2)];
        gradcheck("LayerNorm", &params, |t| LayerNorm::from_weights(t[1].clone(), t[2].clone()).forward(&t[0]));
    }

    fn cross_entropy_matches_a_loop<D>(
        n in 1..5usize, classes in 2..5usize, extra in 0..3usize, smoothing in prop_oneof![Just(0.0), 0.0..0.3f64],
        ignore in any::<bool>(), seed in any::<u64>(),
    ) {
        // Logits [N, C] or [N, C, extra]; some labels ignored.
        let logit_dims: Vec<usize> = if extra == 0 { vec![n, classes] } else { vec![n, classes, extra] };
        let label_dims: Vec<usize> = if extra == 0 { vec![n] } else { vec![n, extra] };
        let count: usize = label_dims.iter().product();
        let labels: Vec<i64> = (0..count)
            .map(|i| if ignore && i % 3 == 1 { -100 } else { ((seed >> (i % 60)) % classes as u64) as i64 })
            .collect();
        let logits = tensor::<D>(&logit_dims, seed);
        let label_tensor = Tensor::<D, i64>::from_vec(labels.clone(), label_dims.as_slice());
        // Reference: each target's row of class scores, from [N, C, d..].
        let z = logits.to_vec();
        let inner = if extra == 0 { 1 } else { extra };
        let losses: Vec<f64> = (0..count)
            .map(|t| {
                let (i, j) = (t / inner, t % inner);
                let row: Vec<f64> = (0..classes).map(|c| z[(i * classes + c) * inner + j]).collect();
                let lp = log_softmax_row(&row);
                if labels[t] == -100 {
                    return 0.0;
                }
                let smooth = -lp.iter().sum::<f64>() / classes as f64;
                (1.0 - smoothing) * -lp[labels[t] as usize] + smoothing * smooth
            })
            .collect();
        let kept = labels.iter().filter(|&&l| l != -100).count() as f64;
        let options = |reduction| CrossEntropy { reduction, label_smoothing: smoothing, ..Default::default() };
        let none = cross_entropy_with(&logits, &label_tensor, &options(Reduction::None));
        assert_eq!(none.dims(), label_dims.as_slice());
        assert_close(&none.to_vec(), &losses, 1e-12, 1e-12);
        let sum: f64 = losses.iter().sum();
        assert_close(&[cross_entropy_with(&logits, &label_tensor, &options(Reduction::Sum)).item()], &[sum], 1e-12, 1e-12);
        let mean = cross_entropy_with(&logits, &label_tensor, &options(Reduction::Mean)).item();
        assert_close(&[mean], &[sum / kept], 1e-12, 1e-12);
        gradcheck("cross_entropy", &[logits], |t| cross_entropy_with(&t[0], &label_tensor, &options(Reduction::Mean)));
    }

    fn pointwise_losses_match_their_formulas<D>(n in 1..8usize, seed in any::<u64>()) {
        let pred = tensor::<D>(&[n], seed);
        let target = tensor::<D>(&[n], !seed);
        let probs = T::<D>::from_vec(data(n, seed ^ 3).iter().map(|v| v.abs() / 2.0).collect(), [n]);
        let (p, t, q) = (pred.to_vec(), target.to_vec(), probs.to_vec());
        let mean = |f: &dyn Fn(usize) -> f64| (0..n).map(f).sum::<f64>() / n as f64;
        assert_close(&[mse_loss(&pred, &target, Reduction::Mean).item()], &[mean(&|i| (p[i] - t[i]).powi(2))], 1e-12, 1e-12);
        assert_close(&[l1_loss(&pred, &target, Reduction::Sum).item()], &[n as f64 * mean(&|i| (p[i] - t[i]).abs())], 1e-12, 1e-12);
        let bce = |i: usize| {
            let s = 1.0 / (1.0 + (-p[i]).exp());
            -(q[i] * s.ln() + (1.0 - q[i]) * (1.0 - s).ln())
        };
        let got = binary_cross_entropy_with_logits(&pred, &probs, Reduction::None).to_vec();
        assert_close(&got, &(0..n).map(bce).collect::<Vec<_>>(), 1e-12, 1e-12);
        let pair = [pred, target];
        gradcheck("mse_loss", &pair, |t| mse_loss(&t[0], &t[1], Reduction::Mean));
        gradcheck("bce_with_logits", &pair[..1], |t| binary_cross_entropy_with_logits(&t[0], &probs, Reduction::Mean));
    }
}

fn nll_and_cross_entropy_agree_and_check_their_inputs<D: Device>() {
    let logits = tensor::<D>(&[3, 4], 11);
    let labels = Tensor::<D, i64>::from_vec(vec![3, 0, 2], [3]);
    let a = cross_entropy(&logits, &labels).item();
    let b = nll_loss(&logits.log_softmax(1), &labels).item();
    assert!((a - b).abs() < 1e-14, "{a} vs {b}");
    // Every target ignored: the mean is 0 / 0, as in PyTorch.
    let ignored = Tensor::<D, i64>::from_vec(vec![-100; 3], [3]);
    assert!(cross_entropy(&logits, &ignored).item().is_nan());
    let err = devtensor::nn::try_cross_entropy(&logits, &Tensor::<D, i64>::zeros([4])).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "cross_entropy", .. }), "{err}");
    let err = devtensor::nn::try_cross_entropy(&logits, &Tensor::<D, i64>::from_vec(vec![0, 4, 1], [3])).unwrap_err();
    // Named in the loss's words, not the gather's inside it.
    assert_eq!(
        err.to_string(),
        format!(
            "cross_entropy on {}: target 4 is out of range for 4 classes: targets must be in 0..4 (or the ignore_index -100)",
            D::name()
        )
    );
    let err = devtensor::nn::try_nll_loss(&logits, &Tensor::<D, i64>::from_vec(vec![0, -1, 1], [3])).unwrap_err();
    assert!(matches!(err, Error::Argument { op: "nll_loss", .. }), "{err}");
    assert!(err.to_string().contains("target -1 is out of range for 4 classes"), "{err}");
}

fn erf_and_gelu_match_known_values<D: Device>() {
    // Reference values from Python's `math.erf` (the C library's), and GELU's
    // two formulas evaluated with it in double precision.
    let x = T::<D>::from_vec(vec![0.0, 0.5, 1.0, -2.0, 3.5], [5]);
    let erf = [0.0, 0.5204998778130465, 0.8427007929497149, -0.9953222650189527, 0.9999992569016276];
    assert_close(&x.erf().to_vec(), &erf, 1e-15, 1e-15);
    let x32 = x.to_dtype::<f32>();
    assert_close(&as_f64(&x32.erf().to_vec()), &erf, 1e-7, 1e-6);
    let gelu = devtensor::nn::Gelu::default().forward(&x).to_vec();
    assert_close(
        &gelu,
        &[0.0, 0.34573123063700656, 0.8413447460685429, -0.04550026389635842, 3.4991857982233756],
        1e-12,
        1e-12,
    );
    let tanh = devtensor::nn::Gelu::tanh().forward(&x).to_vec();
    assert_close(
        &tanh,
        &[0.0, 0.34571400982514394, 0.8411919906082768, -0.04540230591222494, 3.499383802344626],
        1e-12,
        1e-12,
    );
}

fn embedding_rows_and_gradients<D: Device>() {
    let table = Embedding::<D, f64>::new(5, 3);
    let ids = Tensor::<D, i64>::from_vec(vec![4, 1, 4, 0], [2, 2]);
    let out = table.forward(&ids);
    assert_eq!(out.dims(), &[2, 2, 3]);
    let w = table.weight.to_vec2();
    assert_eq!(out.to_vec(), [w[4].clone(), w[1].clone(), w[4].clone(), w[0].clone()].concat());
    // Each row's gradient counts its uses.
    let grads = out.sum().backward();
    let g = grads.get(&table.weight).unwrap().to_vec2();
    assert_eq!(g.iter().map(|row| row[0]).collect::<Vec<_>>(), vec![1.0, 1.0, 0.0, 0.0, 2.0]);
    // A token id out of range is named in the layer's words.
    for bad in [5, -1] {
        let err = table.try_forward(&Tensor::<D, i64>::from_vec(vec![0, bad], [2])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "Embedding on {}: index {bad} is out of range for Embedding(5, 3): indices must be in 0..5",
                D::name()
            )
        );
    }
}

/// `padding_idx`, as PyTorch: the row starts at zeros, a loaded row is
/// returned as it is, and no gradient reaches it while the other rows get
/// theirs (weighted sums against a loop).
fn embedding_padding_rows_get_no_gradient<D: Device>() {
    let table = Embedding::<D, f64>::new(4, 2).padding_idx(1);
    assert_eq!(table.weight.to_vec2()[1], vec![0.0, 0.0]);
    let loaded = Tensor::<D, f64>::from_vec((0..8).map(|v| v as f64).collect(), [4, 2]).requires_grad();
    let table = Embedding::from_weights(loaded, Some(1));
    let ids = [1i64, 3, 1, 0, 2, 1];
    let out = table.forward(&Tensor::<D, i64>::from_vec(ids.to_vec(), [2, 3]));
    let w = table.weight.to_vec2();
    let expected: Vec<f64> = ids.iter().flat_map(|&i| w[i as usize].clone()).collect();
    assert_eq!(out.to_vec(), expected);
    let weights: Vec<f64> = (0..12).map(|v| 1.0 + v as f64).collect();
    let grads = (&out * &Tensor::<D, f64>::from_vec(weights.clone(), [2, 3, 2])).sum().backward();
    let mut want = vec![vec![0.0; 2]; 4];
    for (p, &i) in ids.iter().enumerate() {
        if i != 1 {
            want[i as usize][0] += weights[2 * p];
            want[i as usize][1] += weights[2 * p + 1];
        }
    }
    assert_eq!(grads.get(&table.weight).unwrap().to_vec2(), want);
    let err = Embedding::<D, f64>::new(4, 2).try_padding_idx(4).unwrap_err().to_string();
    assert_eq!(err, format!("Embedding on {}: padding_idx 4 is out of range for Embedding(4, 2)", D::name()));
}

fn dropout_keeps_the_expectation<D: Device>() {
    devtensor::manual_seed(7);
    let n = 20_000;
    let mut drop = Dropout::new(0.3);
    let x = Tensor::<D, f64>::ones([n]).requires_grad();
    let y = drop.forward(&x);
    let values = y.to_vec();
    let zeros = values.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
    assert!((zeros - 0.3).abs() < 0.02, "zeroed fraction {zeros}");
    assert!(values.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.7).abs() < 1e-12));
    // The gradient flows through the kept elements only, scaled alike.
    let g = y.sum().backward().get(&x).unwrap().to_vec();
    assert_eq!(g, values);
    Module::<D, f64>::eval(&mut drop);
    assert_eq!(drop.forward(&x).to_vec(), vec![1.0; n]);
    assert!(Dropout::try_new(1.5).is_err());
}

/// The channel-wise dropouts zero whole channels, about `p` of them, and
/// scale the rest; the gradient takes the same mask; evaluation passes the
/// input through.
fn channel_dropout_zeroes_whole_channels<D: Device>() {
    use devtensor::nn::{Dropout1d, Dropout2d, Dropout3d, Forward};
    devtensor::manual_seed(11);
    fn check<D: Device, L: Forward<D, f64>>(mut layer: L, name: &str, dims: &[usize], spatial: usize) {
        let x = Tensor::<D, f64>::ones(dims).requires_grad();
        let y = layer.forward(&x);
        let per_channel: usize = dims[dims.len() - spatial..].iter().product();
        let values = y.to_vec();
        let channels: Vec<&[f64]> = values.chunks(per_channel).collect();
        for channel in &channels {
            assert!(channel.iter().all(|&v| v == channel[0]), "{name}: a channel partly dropped");
            assert!(channel[0] == 0.0 || (channel[0] - 1.0 / 0.75).abs() < 1e-12, "{name}: {}", channel[0]);
        }
        let n = channels.len() as f64;
        let dropped = channels.iter().filter(|c| c[0] == 0.0).count() as f64 / n;
        let slack = 6.0 * (0.25 * 0.75 / n).sqrt();
        assert!((dropped - 0.25).abs() < slack, "{name}: {dropped} of the channels dropped");
        assert_eq!(y.sum().backward().get(&x).unwrap().to_vec(), values, "{name}: the gradient's mask");
        layer.eval();
        assert_eq!(layer.forward(&x).to_vec(), vec![1.0; x.elem_count()], "{name} in evaluation");
    }
    check::<D, _>(Dropout1d::new(0.25), "Dropout1d", &[40, 50, 3], 1);
    check::<D, _>(Dropout1d::new(0.25), "Dropout1d unbatched", &[2000, 3], 1);
    check::<D, _>(Dropout2d::new(0.25), "Dropout2d", &[40, 50, 2, 3], 2);
    check::<D, _>(Dropout3d::new(0.25), "Dropout3d", &[20, 100, 2, 1, 2], 3);
    let err = Dropout2d::new(0.5).try_forward(&Tensor::<D, f64>::ones([4, 5])).unwrap_err().to_string();
    assert!(err.contains("Dropout2d") && err.contains("[N, C, H, W] or [C, H, W]"), "{err}");
    assert!(Dropout3d::try_new(-0.1).is_err());
}

struct Net<D: Device> {
    body: Sequential<(Linear<D>, Relu, Dropout)>,
    norm: LayerNorm<D>,
    head: Linear<D>,
    /// A bare tensor field: a parameter, as PyTorch's `nn.Parameter`.
    gain: Tensor<D>,
    classes: usize,
}
devtensor::module!(Net { body, norm, head, gain; classes });

impl<D: Device> Net<D> {
    fn new() -> Self {
        Net {
            body: Sequential::new((Linear::new(4, 6), Relu, Dropout::new(0.5))),
            norm: LayerNorm::new(&[6]),
            head: Linear::new(6, 3),
            gain: Tensor::full([3], 2.0).requires_grad(),
            classes: 3,
        }
    }

    fn forward(&self, x: &Tensor<D>) -> Tensor<D> {
        self.head.forward(&self.norm.forward(&self.body.forward(x))) * &self.gain
    }
}

fn modules_name_move_and_switch_modes<D: Device>() {
    let mut net = Net::<D>::new();
    let names: Vec<(String, TensorKind)> = net.named_tensors().into_iter().map(|(n, k, _)| (n, k)).collect();
    let expected = ["body.0.weight", "body.0.bias", "norm.weight", "norm.bias", "head.weight", "head.bias", "gain"];
    assert_eq!(names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), expected);
    assert!(names.iter().all(|(_, k)| *k == TensorKind::Parameter));
    assert_eq!(net.num_parameters(), 4 * 6 + 6 + 6 + 6 + 6 * 3 + 3 + 3);
    // Evaluation turns the dropout off: two passes agree.
    net.eval();
    let x = Tensor::<D>::ones([2, 4]);
    assert_eq!(net.forward(&x).to_vec(), net.forward(&x).to_vec());
    // To the CPU and back: same values, fresh leaves, plain fields copied.
    let on_cpu: Net<Cpu> = net.to::<Cpu>();
    assert_eq!(on_cpu.classes, 3);
    let back: Net<D> = on_cpu.to::<D>();
    for ((name, a), (_, b)) in net.parameters().into_iter().zip(back.parameters()) {
        assert_eq!(a.to_vec(), b.to_vec(), "{name}");
        assert!(b.is_leaf() && b.tracks_grad(), "{name}");
    }
    // Every parameter gets a gradient from a loss on the output.
    let grads = net.forward(&x).sum().backward();
    assert_eq!(grads.len(), 7);
    assert_eq!(Flatten::default().forward(&Tensor::<D>::zeros([2, 3, 4])).dims(), &[2, 12]);
    assert_eq!(Sequential::new((Tanh,)).forward::<D, D, f32, f32>(&Tensor::<D>::zeros([1])).to_vec(), vec![0.0]);
}

/// `nn::MultiheadAttention` in plain `f64` loops: the three projections,
/// each head's masked softmax over the keys (causal when `causal`, and the
/// keys marked in `padding` hidden), the heads' average weights, and the
/// output projection. Inputs are batch-first.
#[allow(clippy::too_many_arguments)]
fn mha_reference(
    [n, l, s, e, heads]: [usize; 5],
    x: &[f64],
    kv: &[f64],
    w: &[f64],
    b: &[f64],
    wo: &[f64],
    bo: &[f64],
    causal: bool,
    padding: &[u8],
) -> (Vec<f64>, Vec<f64>) {
    let project = |input: &[f64], len: usize, third: usize| -> Vec<f64> {
        let mut out = vec![0.0; n * len * e];
        for r in 0..n * len {
            for o in 0..e {
                let row = third * e + o;
                out[r * e + o] = b[row] + (0..e).map(|c| input[r * e + c] * w[row * e + c]).sum::<f64>();
            }
        }
        out
    };
    let (q, k, v) = (project(x, l, 0), project(kv, s, 1), project(kv, s, 2));
    let d = e / heads;
    let mut merged = vec![0.0; n * l * e];
    let mut weights = vec![0.0; n * l * s];
    for bn in 0..n {
        for h in 0..heads {
            for i in 0..l {
                let visible: Vec<usize> = (0..s).filter(|&j| !(causal && j > i) && padding[bn * s + j] == 0).collect();
                let scores: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        (0..d).map(|c| q[(bn * l + i) * e + h * d + c] * k[(bn * s + j) * e + h * d + c]).sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().map(|x| (x - max).exp()).sum();
                for (&j, &sc) in visible.iter().zip(&scores) {
                    let p = (sc - max).exp() / total;
                    weights[(bn * l + i) * s + j] += p / heads as f64;
                    for c in 0..d {
                        merged[(bn * l + i) * e + h * d + c] += p * v[(bn * s + j) * e + h * d + c];
                    }
                }
            }
        }
    }
    let mut y = vec![0.0; n * l * e];
    for r in 0..n * l {
        for o in 0..e {
            y[r * e + o] = bo[o] + (0..e).map(|c| merged[r * e + c] * wo[o * e + c]).sum::<f64>();
        }
    }
    (y, weights)
}

/// MultiheadAttention against the loops, batch-first and sequence-first,
/// with a causal mask and key padding, with and without the weights; its
/// gradients against finite differences; PyTorch's parameter names.
fn multihead_attention_matches_a_loop<D: Device>() {
    let [n, l, s, e, heads] = [2, 4, 5, 6, 3];
    let mut mha = devtensor::nn::MultiheadAttention::<D, f64>::new(e, heads).batch_first(true);
    let names: Vec<String> = mha.named_tensors().into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
    // Non-zero biases, so that a bias applied to the wrong third shows.
    mha.in_proj_bias = Some(tensor::<D>(&[3 * e], 3).requires_grad());
    mha.out_proj.bias = Some(tensor::<D>(&[e], 4).requires_grad());
    let x = tensor::<D>(&[n, l, e], 1);
    let kv = tensor::<D>(&[n, s, e], 2);
    let padding: Vec<u8> = vec![0, 0, 1, 0, 0, 0, 1, 0, 0, 1];
    let pad = Tensor::<D, u8>::from_vec(padding.clone(), [n, s]);
    let values = |t: &Option<T<D>>| t.as_ref().unwrap().to_vec();
    let reference = |causal: bool, padding: &[u8]| {
        mha_reference(
            [n, l, s, e, heads],
            &x.to_vec(),
            &kv.to_vec(),
            &mha.in_proj_weight.to_vec(),
            &values(&mha.in_proj_bias),
            &mha.out_proj.weight.to_vec(),
            &values(&mha.out_proj.bias),
            causal,
            padding,
        )
    };
    let (expected_y, expected_w) = reference(true, &padding);
    fn causal<'a, D: Device>(q: &'a T<D>, kv: &'a T<D>, pad: &'a Tensor<D, u8>) -> MhaInput<'a, D, f64> {
        MhaInput::new(q, kv, kv).key_padding_mask(pad).attn_mask(AttentionMask::Causal)
    }
    let input = |q, kv| causal(q, kv, &pad);
    let (y, w) = mha.forward(input(&x, &kv));
    assert_close(&y.to_vec(), &expected_y, 1e-12, 1e-12);
    assert_close(&w.unwrap().to_vec(), &expected_w, 1e-12, 1e-12);
    let (fused, none) = mha.forward(input(&x, &kv).need_weights(false));
    assert!(none.is_none());
    assert_close(&fused.to_vec(), &expected_y, 1e-12, 1e-12);
    // Sequence-first: the same numbers with the first two axes swapped.
    let seq_first = mha.clone().batch_first(false);
    let (xt, kvt) = (x.transpose(0, 1), kv.transpose(0, 1));
    let (y2, _) = seq_first.forward(input(&xt, &kvt).need_weights(false));
    assert_close(&y2.transpose(0, 1).to_vec(), &expected_y, 1e-12, 1e-12);
    // No mask and no padding.
    let (plain, _) = mha.forward(MhaInput::new(&x, &kv, &kv).need_weights(false));
    let (expected, _) = reference(false, &vec![0; n * s]);
    assert_close(&plain.to_vec(), &expected, 1e-12, 1e-12);
    gradcheck("MultiheadAttention", &[x.clone(), kv.clone()], |t| {
        mha.forward(causal(&t[0], &t[1], &pad).need_weights(false)).0
    });
    let grads = mha.forward(input(&x, &kv).need_weights(false)).0.sum().backward();
    for (name, p) in mha.parameters() {
        assert!(grads.get(&p).is_some_and(|g| g.to_vec().iter().any(|&v| v != 0.0)), "{name} gets no gradient");
    }
    let err = mha.try_forward(MhaInput::new(&x, &kv.narrow(2, 0, 5), &kv)).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "MultiheadAttention", .. }), "{err}");
}

/// `nn::init` against PyTorch's formulas: sample means and deviations of
/// large draws (131,072 values: a deviation is off by more than 1% about
/// once in 10^9 draws), uniform bounds, fans of a convolution weight, gains,
/// parameters staying parameters, errors; `apply` keeping a tie.
fn init_functions_follow_pytorch<D: Device>() {
    use devtensor::nn::init::{self, FanMode};
    devtensor::manual_seed(7);
    let moments = |t: &T<D>| {
        let v = t.to_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (mean, (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
    };
    let mut w = T::<D>::zeros([256, 512]).requires_grad();
    init::normal_(&mut w, 0.5, 0.02);
    assert!(w.tracks_grad() && w.is_leaf());
    let (mean, std) = moments(&w);
    assert!((mean - 0.5).abs() < 5.0 * 0.02 / 362.0, "mean {mean}");
    assert!((std / 0.02 - 1.0).abs() < 0.01, "std {std}");
    // Truncated normals: N(0.5, 2²) on [-1.5, 4.5] (from -1 to 2 standard
    // deviations), and a window in the tail, 3 to 4 standard deviations
    // out, which rejection sampling would take a thousand tries to fill;
    // the moments are those of the truncated normal (computed with erf).
    init::trunc_normal_(&mut w, 0.5, 2.0, -1.5, 4.5);
    assert!(w.tracks_grad() && w.to_vec().iter().all(|x| (-1.5..=4.5).contains(x)));
    let (mean, std) = moments(&w);
    assert!((mean - 0.959_274_358).abs() < 0.01 && (std - 1.441_891_174).abs() < 0.01, "trunc_normal_ {mean} {std}");
    init::trunc_normal_(&mut w, 0.0, 1.0, 3.0, 4.0);
    let (mean, std) = moments(&w);
    assert!((mean - 3.260_454_286).abs() < 0.005 && (std - 0.221_986_022).abs() < 0.005, "tail {mean} {std}");
    let err = init::try_trunc_normal_(&mut w, 0.0, 1.0, 2.0, -2.0).unwrap_err();
    assert!(err.to_string().contains("a < b"), "{err}");
    // Xavier-uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
    init::xavier_uniform_(&mut w, 1.0);
    let a = (6.0f64 / (512.0 + 256.0)).sqrt();
    let v = w.to_vec();
    assert!(v.iter().all(|x| x.abs() <= a) && v.iter().any(|x| x.abs() > 0.99 * a));
    // Kaiming-normal of a convolution weight [64, 32, 8, 8]: fan_out = 64 * 64.
    let mut conv = T::<D>::zeros([64, 32, 8, 8]);
    init::kaiming_normal_(&mut conv, 0.0, FanMode::FanOut, "relu");
    assert!(!conv.tracks_grad(), "a tensor that was not a parameter does not become one");
    let expected = 2f64.sqrt() / (64.0f64 * 64.0).sqrt();
    assert!((moments(&conv).1 / expected - 1.0).abs() < 0.01, "kaiming std {}", moments(&conv).1);
    assert_eq!(init::fans(&[16, 8, 3, 3]), Some((72, 144)));
    assert_eq!(init::calculate_gain("leaky_relu", None).unwrap(), (2.0f64 / 1.0001).sqrt());
    assert!(matches!(init::calculate_gain("swish", None), Err(Error::Argument { op: "calculate_gain", .. })));
    init::kaiming_uniform_(&mut conv, 5f64.sqrt(), FanMode::FanIn, "leaky_relu");
    // PyTorch's default for Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    let bound = 1.0 / (32.0f64 * 64.0).sqrt();
    assert!(conv.to_vec().iter().all(|x| x.abs() <= bound * (1.0 + 1e-12)));
    init::constant_(&mut conv, 0.25);
    assert!(conv.to_vec().iter().all(|&x| x == 0.25));
    let mut bias = T::<D>::zeros([4]);
    let err = init::try_xavier_uniform_(&mut bias, 1.0).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "xavier_uniform_", .. }), "{err}");

    // apply: tied weights stay one tensor; biases left alone; shapes checked.
    let wte = devtensor::nn::Embedding::<D, f64>::new(10, 4);
    let mut model = Tied { head: Linear::from_weights(wte.weight.clone(), Some(T::<D>::zeros([10]))), wte };
    init::apply(&mut model, |name, t| {
        if !name.ends_with("weight") {
            return Ok(None);
        }
        let mut t = t.clone();
        init::try_normal_(&mut t, 0.0, 0.02)?;
        Ok(Some(t))
    })
    .unwrap();
    assert_eq!(model.wte.weight.leaf_id(), model.head.weight.leaf_id());
    assert_eq!(model.head.bias.as_ref().unwrap().to_vec(), vec![0.0; 10]);
    assert!(
        model.wte.weight.to_vec().iter().all(|x| x.abs() < 0.2) && model.wte.weight.to_vec().iter().any(|&x| x != 0.0)
    );
    let err = init::apply(&mut model, |_, _| Ok(Some(T::<D>::zeros([3])))).unwrap_err();
    assert!(err.to_string().contains("`wte.weight`"), "{err}");
}

struct Tied<D: Device, E: devtensor::FloatElement> {
    wte: devtensor::nn::Embedding<D, E>,
    head: Linear<D, E>,
}
devtensor::module!(Tied<E> { wte, head });

/// GroupNorm and RmsNorm against plain loops, with random affine
/// parameters, and their gradients (input and parameters) against finite
/// differences.
fn group_norm_and_rms_norm_match_loops<D: Device>() {
    use devtensor::nn::{GroupNorm, RmsNorm};
    let (n, c, hw, groups) = (2, 6, 5, 3);
    let mut gn = GroupNorm::<D, f64>::new(groups, c);
    gn.weight = tensor::<D>(&[c], 11).requires_grad();
    gn.bias = tensor::<D>(&[c], 12).requires_grad();
    let x = tensor::<D>(&[n, c, hw], 13);
    let (xs, w, b) = (x.to_vec(), gn.weight.to_vec(), gn.bias.to_vec());
    let per = c / groups * hw;
    let mut expected = vec![0.0; xs.len()];
    for group in 0..n * groups {
        let run = &xs[group * per..(group + 1) * per];
        let mean = run.iter().sum::<f64>() / per as f64;
        let var = run.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / per as f64;
        for (k, v) in run.iter().enumerate() {
            let channel = (group % groups) * (c / groups) + k / hw;
            expected[group * per + k] = (v - mean) / (var + 1e-5).sqrt() * w[channel] + b[channel];
        }
    }
    assert_close(&gn.forward(&x).to_vec(), &expected, 1e-12, 1e-12);
    gradcheck("GroupNorm", &[x.clone(), gn.weight.clone(), gn.bias.clone()], |t| {
        GroupNorm::from_weights(groups, t[1].clone(), t[2].clone()).forward(&t[0])
    });
    assert!(matches!(GroupNorm::<D, f64>::try_new(4, 6), Err(Error::Argument { op: "GroupNorm", .. })));

    let mut rms = RmsNorm::<D, f64>::new(&[c, hw]);
    assert_eq!(rms.eps, f64::EPSILON);
    rms.weight = tensor::<D>(&[c, hw], 14).requires_grad();
    let rw = rms.weight.to_vec();
    let per = c * hw;
    let expected: Vec<f64> = (0..xs.len())
        .map(|i| {
            let row = &xs[i / per * per..(i / per + 1) * per];
            let ms = row.iter().map(|v| v * v).sum::<f64>() / per as f64;
            xs[i] / (ms + f64::EPSILON).sqrt() * rw[i % per]
        })
        .collect();
    assert_close(&rms.forward(&x).to_vec(), &expected, 1e-12, 1e-12);
    gradcheck("RmsNorm", &[x.clone(), rms.weight.clone()], |t| {
        RmsNorm::from_weights(t[1].clone()).eps(1e-6).forward(&t[0])
    });
    let err = rms.try_forward(&tensor::<D>(&[2, 5, 6], 1)).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "RmsNorm", .. }), "{err}");
}

/// Untracked products large enough to start from the bias on every thread
/// (65,536 output elements and up, or blocks of rows), against a loop.
/// The activation layers built as PyTorch builds them by default (or with
/// the settings `make_op_fixtures.py` gives), against PyTorch 2.15's
/// outputs and gradients on an input `[2, 4, 3]` that holds their kinks;
/// `Prelu`'s parameter loads by PyTorch's name, `weight`, and its gradient
/// matches too.
fn activation_layers_match_pytorch<D: Device>() {
    let file = Checkpoint::<Cpu, f64>::load(format!("{}/tests/fixtures/pytorch/ops.safetensors", crate::common::REPO));
    let get = |name: &str| -> T<D> {
        let found = file.tensors().iter().find(|(n, _)| n == name);
        found.unwrap_or_else(|| panic!("no `{name}` in ops.safetensors (rerun make_op_fixtures.py)")).1.to::<D>()
    };
    type Layer<D> = Box<dyn Fn(&T<D>) -> T<D>>;
    let prelu = Prelu::<D, f64>::from_weights(get("layer.prelu.param.weight"));
    let per_channel = Prelu::<D, f64>::from_weights(get("layer.prelu_per_channel.param.weight"));
    let names =
        |m: &Prelu<D, f64>| Checkpoint::from_model(m).tensors().iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&per_channel), ["weight"], "Prelu's parameter has PyTorch's name");
    let rows: Vec<(&str, Layer<D>)> = vec![
        ("leaky_relu", Box::new(|x| LeakyRelu::default().forward(x))),
        ("leaky_relu_slope", Box::new(|x| LeakyRelu::new(0.2).forward(x))),
        ("elu", Box::new(|x| Elu::default().forward(x))),
        ("celu", Box::new(|x| Celu::default().forward(x))),
        ("selu", Box::new(|x| Selu.forward(x))),
        ("softplus", Box::new(|x| Softplus::default().forward(x))),
        ("hardtanh", Box::new(|x| Hardtanh::default().forward(x))),
        ("relu6", Box::new(|x| Relu6.forward(x))),
        ("hardswish", Box::new(|x| Hardswish.forward(x))),
        ("hardsigmoid", Box::new(|x| Hardsigmoid.forward(x))),
        ("mish", Box::new(|x| Mish.forward(x))),
        ("silu", Box::new(|x| Silu.forward(x))),
        ("log_sigmoid", Box::new(|x| LogSigmoid.forward(x))),
        ("softsign", Box::new(|x| Softsign.forward(x))),
        ("softmax", Box::new(|x| Softmax::new(1).forward(x))),
        ("log_softmax", Box::new(|x| LogSoftmax::new(-1).forward(x))),
        ("glu", Box::new(|x| Glu::new(1).forward(x))),
        ("prelu", Box::new(move |x| prelu.forward(x))),
        (
            "prelu_per_channel",
            Box::new({
                let layer = per_channel.clone();
                move |x| layer.forward(x)
            }),
        ),
        ("identity", Box::new(|x| Identity.forward(x))),
    ];
    for (name, layer) in rows {
        let p = format!("layer.{name}.");
        let x = get(&format!("{p}x")).requires_grad();
        let y = layer(&x);
        let want = get(&format!("{p}y"));
        assert_eq!(y.dims(), want.dims(), "{name}");
        println!("{name} on {}", D::name());
        // Absolute slack for values that cancel (`log_softmax` of a row's
        // largest element is `-log(1 + 1e-6)`, which both compute to 1e-16).
        assert_close(&y.to_vec(), &want.to_vec(), 1e-15, 1e-14);
        let grads = (&y * &get(&format!("{p}w"))).sum().backward();
        // PyTorch's hardsigmoid gradient multiplies by 1/6 rounded to f32
        // (tests/ops/pytorch.rs, DELIBERATE).
        let rel = if name == "hardsigmoid" { 1e-7 } else { 1e-13 };
        assert_close(&grads.get(&x).expect(name).to_vec(), &get(&format!("{p}gx")).to_vec(), 1e-14, rel);
    }
    let x = get("layer.prelu_per_channel.x");
    let grads = (&per_channel.forward(&x) * &get("layer.prelu_per_channel.w")).sum().backward();
    let want = get("layer.prelu_per_channel.grad.weight").to_vec();
    assert_close(&grads.get(&per_channel.weight).expect("weight").to_vec(), &want, 1e-14, 1e-13);
    // One slope per channel needs an input whose axis 1 has that many.
    let err = per_channel.try_forward(&x.narrow(1, 0, 3)).unwrap_err().to_string();
    assert!(err.contains("Prelu") && err.contains("channel axis"), "{err}");
    let err = Glu::new(-1).try_forward(&x).unwrap_err().to_string();
    assert!(err.contains("glu") && err.contains("even"), "{err}");
}

/// Every loss of `torch.nn.functional` that devtensor has beyond
/// cross-entropy, MSE and L1, and the distances under the metric losses,
/// against PyTorch 2.15's values for each reduction and its gradients
/// toward every float input (`make_op_fixtures.py`, `loss.<row>.`), on
/// inputs that include saturated probabilities (exact 0 and 1) and zero
/// logits, where PyTorch's gradients are its own formulas.
fn losses_match_pytorch<D: Device>() {
    use devtensor::nn::{
        KlReduction, TripletMargin, binary_cross_entropy, binary_cross_entropy_with_logits_weighted,
        cosine_embedding_loss, cosine_similarity, cross_entropy_probs, cross_entropy_weighted, hinge_embedding_loss,
        huber_loss, kl_div, margin_ranking_loss, nll_loss_with, pairwise_distance, smooth_l1_loss, soft_margin_loss,
        triplet_margin_loss,
    };
    let file = Checkpoint::<Cpu, f64>::load(format!("{}/tests/fixtures/pytorch/ops.safetensors", crate::common::REPO));
    let find = |name: &str| file.tensors().iter().find(|(n, _)| n == name).map(|(_, t)| t.to::<D>());
    let get =
        |name: &str| find(name).unwrap_or_else(|| panic!("no `{name}` in ops.safetensors (rerun make_op_fixtures.py)"));
    type Loss<D> = Box<dyn Fn(&[T<D>], Reduction) -> T<D>>;
    // The fixture stores class labels as float64.
    fn labels<D: Device>(x: &T<D>) -> Tensor<D, i64> {
        x.to_dtype::<i64>()
    }
    fn ce(reduction: Reduction, label_smoothing: f64, ignore_index: Option<i64>) -> CrossEntropy {
        CrossEntropy { reduction, label_smoothing, ignore_index }
    }
    let rows: Vec<(&str, Loss<D>)> = vec![
        ("bce", Box::new(|x, r| binary_cross_entropy(&x[0], &x[1], None, r))),
        ("bce_weight", Box::new(|x, r| binary_cross_entropy(&x[0], &x[1], Some(&x[2]), r))),
        ("bce_logits", Box::new(|x, r| binary_cross_entropy_with_logits(&x[0], &x[1], r))),
        (
            "bce_logits_weighted",
            Box::new(|x, r| binary_cross_entropy_with_logits_weighted(&x[0], &x[1], Some(&x[2]), Some(&x[3]), r)),
        ),
        ("smooth_l1", Box::new(|x, r| smooth_l1_loss(&x[0], &x[1], r, 1.0))),
        ("smooth_l1_beta", Box::new(|x, r| smooth_l1_loss(&x[0], &x[1], r, 0.5))),
        ("huber", Box::new(|x, r| huber_loss(&x[0], &x[1], r, 1.0))),
        ("huber_delta", Box::new(|x, r| huber_loss(&x[0], &x[1], r, 2.0))),
        ("kl_div", Box::new(|x, r| kl_div(&x[0], &x[1], r, false))),
        ("kl_div_log_target", Box::new(|x, r| kl_div(&x[0], &x[1], r, true))),
        ("margin_ranking", Box::new(|x, r| margin_ranking_loss(&x[0], &x[1], &x[2], 0.3, r))),
        ("hinge_embedding", Box::new(|x, r| hinge_embedding_loss(&x[0], &x[1], 1.0, r))),
        ("soft_margin", Box::new(|x, r| soft_margin_loss(&x[0], &x[1], r))),
        ("cosine_embedding", Box::new(|x, r| cosine_embedding_loss(&x[0], &x[1], &x[2], 0.2, r))),
        (
            "triplet",
            Box::new(|x, r| {
                triplet_margin_loss(&x[0], &x[1], &x[2], &TripletMargin { reduction: r, ..Default::default() })
            }),
        ),
        (
            "triplet_p1_swap",
            Box::new(|x, r| {
                let options = TripletMargin { margin: 2.0, p: 1.0, swap: true, reduction: r, ..Default::default() };
                triplet_margin_loss(&x[0], &x[1], &x[2], &options)
            }),
        ),
        (
            "triplet_p3",
            Box::new(|x, r| {
                triplet_margin_loss(
                    &x[0],
                    &x[1],
                    &x[2],
                    &TripletMargin { margin: 3.0, p: 3.0, reduction: r, ..Default::default() },
                )
            }),
        ),
        ("cosine_similarity", Box::new(|x, _| cosine_similarity(&x[0], &x[1], 1, 1e-8))),
        ("cosine_similarity_broadcast", Box::new(|x, _| cosine_similarity(&x[0], &x[1], -1, 1e-8))),
        ("pairwise_distance", Box::new(|x, _| pairwise_distance(&x[0], &x[1], 2.0, 1e-6, false))),
        ("pairwise_distance_p", Box::new(|x, _| pairwise_distance(&x[0], &x[1], 1.5, 1e-6, true))),
        ("ce_weight", Box::new(|x, r| cross_entropy_weighted(&x[0], &labels(&x[1]), &x[2], &ce(r, 0.0, Some(-100))))),
        (
            "ce_weight_smooth",
            Box::new(|x, r| cross_entropy_weighted(&x[0], &labels(&x[1]), &x[2], &ce(r, 0.2, Some(-100)))),
        ),
        (
            "ce_weight_nd",
            Box::new(|x, r| cross_entropy_weighted(&x[0], &labels(&x[1]), &x[2], &ce(r, 0.0, Some(-100)))),
        ),
        ("ce_probs", Box::new(|x, r| cross_entropy_probs(&x[0], &x[1], None, &ce(r, 0.0, None)))),
        ("ce_probs_weight_smooth", Box::new(|x, r| cross_entropy_probs(&x[0], &x[1], Some(&x[2]), &ce(r, 0.1, None)))),
        ("ce_probs_nd", Box::new(|x, r| cross_entropy_probs(&x[0], &x[1], None, &ce(r, 0.0, None)))),
        ("nll_weight", Box::new(|x, r| nll_loss_with(&x[0], &labels(&x[1]), Some(&x[2]), &ce(r, 0.0, Some(2))))),
    ];
    let reductions =
        [("none", Reduction::None), ("mean", Reduction::Mean), ("sum", Reduction::Sum), ("y", Reduction::None)];
    for (name, loss) in rows {
        let p = format!("loss.{name}.");
        let inputs: Vec<T<D>> = (0..).map_while(|i| find(&format!("{p}in{i}"))).collect();
        let tracked: Vec<T<D>> = inputs
            .iter()
            .enumerate()
            .map(|(i, x)| if find(&format!("{p}g{i}")).is_some() { x.clone().requires_grad() } else { x.clone() })
            .collect();
        let mut checked = 0;
        for (key, reduction) in reductions {
            let Some(want) = find(&format!("{p}{key}")) else { continue };
            let got = loss(&inputs, reduction);
            assert_eq!(got.dims(), want.dims(), "{name} ({key})");
            println!("{name} ({key}) on {}", D::name());
            assert_close(&got.to_vec(), &want.to_vec(), 1e-14, 1e-12);
            checked += 1;
        }
        assert!(checked > 0, "{name}: no values in the fixture");
        if let Some(want) = find(&format!("{p}batchmean")) {
            let got = kl_div(&inputs[0], &inputs[1], KlReduction::BatchMean, name.ends_with("log_target"));
            assert_close(&got.to_vec(), &want.to_vec(), 1e-14, 1e-12);
        }
        // The gradients of `(losses * w).sum()`, unreduced.
        let grads = (&loss(&tracked, Reduction::None) * &get(&format!("{p}w"))).sum().backward();
        for (i, x) in tracked.iter().enumerate() {
            let Some(want) = find(&format!("{p}g{i}")) else { continue };
            let got = grads.get(x).unwrap_or_else(|| panic!("{name}: no gradient for input {i}"));
            println!("{name} gradient {i} on {}", D::name());
            let (got, mut want) = (got.to_vec(), want.to_vec());
            if name == "kl_div" && i == 1 {
                // DELIBERATE: toward a target of exactly 0, PyTorch's
                // gradient is NaN (xlogy's derivative there); devtensor's
                // is finite, `-input`, the `t log t` term adding nothing.
                let zeros = inputs[1].to_vec();
                for (k, w) in want.iter_mut().enumerate() {
                    if zeros[k] == 0.0 {
                        assert!(w.is_nan(), "{name}: PyTorch's gradient at a zero target");
                        *w = -inputs[0].to_vec()[k] * get(&format!("{p}w")).to_vec()[k];
                    }
                }
            }
            assert_close(&got, &want, 1e-14, 1e-11);
        }
    }
}

fn large_untracked_linear_starts_from_the_bias<D: Device>() {
    // The first fills its output in parallel before one product; the second
    // is split by rows on the CPU, each thread starting its block as the bias.
    for (rows, inputs, outputs) in [(sized(311, 7), 3, sized(229, 5)), (sized(613, 21), sized(40, 6), sized(53, 7))] {
        let x = T::<D>::from_vec(data(rows * inputs, 4), [rows, inputs]);
        let layer = Linear::<D, f64>::new(inputs, outputs);
        let (w, b, xs) = (layer.weight.to_vec(), layer.bias.as_ref().unwrap().to_vec(), x.to_vec());
        let expected: Vec<f64> = (0..rows * outputs)
            .map(|i| {
                let (n, o) = (i / outputs, i % outputs);
                b[o] + (0..inputs).map(|k| xs[n * inputs + k] * w[o * inputs + k]).sum::<f64>()
            })
            .collect();
        assert_close(&devtensor::no_grad(|| layer.forward(&x)).to_vec(), &expected, 1e-12, 1e-12);
    }
}

/// A layer's forward: its output and its float tensors by name.
type Run<D> = Box<dyn Fn(&T<D>) -> (T<D>, Vec<(String, TensorKind, T<D>)>)>;

fn run<D: Device, L: devtensor::nn::Forward<D, f64> + 'static>(layer: L) -> Run<D> {
    Box::new(move |x| (layer.forward(x), layer.named_tensors()))
}

/// Each `layer.<name>.` row of `ops.safetensors` against `rows`' layers:
/// outputs, input gradients, parameter gradients, and every float tensor
/// of PyTorch's `state_dict` after the forward, by its name, and no other.
fn check_layer_rows<D: Device>(rows: Vec<(&str, Run<D>)>) {
    let file = op_fixtures();
    let get = |name: &str| fixture::<D>(&file, name);
    for (name, layer) in rows {
        let p = format!("layer.{name}.");
        let x = get(&format!("{p}x")).requires_grad();
        let (y, state) = layer(&x);
        let want = get(&format!("{p}y"));
        assert_eq!(y.dims(), want.dims(), "{name}");
        println!("{name} on {}", D::name());
        assert_close(&y.to_vec(), &want.to_vec(), 1e-14, 1e-12);
        let grads = (&y * &get(&format!("{p}w"))).sum().backward();
        assert_close(&grads.get(&x).expect(name).to_vec(), &get(&format!("{p}gx")).to_vec(), 1e-14, 1e-11);
        // Every float tensor of PyTorch's state_dict, by its name, and no other.
        // (safetensors keeps names sorted, not in the state_dict's order.)
        let mut names: Vec<&str> = state.iter().map(|(n, _, _)| n.as_str()).collect();
        let prefix = format!("{p}param.");
        let theirs: Vec<&str> = file.tensors().iter().filter_map(|(n, _)| n.strip_prefix(prefix.as_str())).collect();
        names.sort_unstable();
        assert_eq!(names, theirs, "{name}: the state_dict's float tensors");
        for (key, kind, tensor) in &state {
            assert_close(&tensor.to_vec(), &get(&format!("{prefix}{key}")).to_vec(), 1e-14, 1e-12);
            if *kind == TensorKind::Parameter {
                let got = grads.get(tensor).unwrap_or_else(|| panic!("{name}: no gradient for {key}"));
                assert_close(&got.to_vec(), &get(&format!("{p}grad.{key}")).to_vec(), 1e-14, 1e-11);
            }
        }
    }
}

/// `ops.safetensors`.
fn op_fixtures() -> Checkpoint<Cpu, f64> {
    Checkpoint::<Cpu, f64>::load(format!("{}/tests/fixtures/pytorch/ops.safetensors", crate::common::REPO))
}

/// The tensor `name` of `file`, on `D`.
fn fixture<D: Device>(file: &Checkpoint<Cpu, f64>, name: &str) -> T<D> {
    let found = file.tensors().iter().find(|(n, _)| n == name).map(|(_, t)| t.to::<D>());
    found.unwrap_or_else(|| panic!("no `{name}` in ops.safetensors (rerun make_op_fixtures.py)"))
}

/// The 1-D and 3-D norms and pools, the instance norms, `LayerNorm`
/// without a bias, the pixel shuffles and `Upsample` in every mode against
/// PyTorch (the `layer.<name>.` rows made after the activations'):
/// outputs, input gradients, parameter gradients, and the `state_dict`
/// after the forward under PyTorch's names (BatchNorm's running statistics
/// after one batch).
fn norm_pool_and_resample_layers_match_pytorch<D: Device>() {
    use devtensor::nn::{
        AdaptiveAvgPool1d, AvgPool1d, BatchNorm1d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
        InterpolateMode as Mode, MaxPool1d, PixelShuffle, PixelUnshuffle, Resize, Upsample,
    };
    fn factors(mode: Mode, factors: [f64; 2]) -> Upsample {
        let mut layer = Upsample::new(1.0, mode);
        layer.options.resize = Resize::ScaleFactor(factors.to_vec());
        layer
    }
    let rows: Vec<(&str, Run<D>)> = vec![
        ("batch_norm1d", run(BatchNorm1d::<D, f64>::new(4))),
        ("batch_norm1d_features", run(BatchNorm1d::<D, f64>::new(4))),
        ("batch_norm3d", run(BatchNorm3d::<D, f64>::new(3))),
        ("layer_norm_no_bias", run(LayerNorm::<D, f64>::new(&[3]).without_bias())),
        ("max_pool1d", run(MaxPool1d::new(2))),
        ("max_pool1d_padded", run(MaxPool1d::new(3).stride(2).padding(1))),
        ("avg_pool1d_padded", run(AvgPool1d::new(3).stride(2).padding(1))),
        ("adaptive_avg_pool1d", run(AdaptiveAvgPool1d::new(3))),
        ("upsample_nearest", run(Upsample::new(2.0, Mode::Nearest))),
        ("upsample_nearest_size", run(Upsample::with_size([7, 3], Mode::Nearest))),
        ("upsample_nearest_exact", run(Upsample::with_size([7, 8], Mode::NearestExact))),
        ("upsample_nearest_1d_factor", run(Upsample::new(1.7, Mode::Nearest))),
        ("upsample_nearest_3d", run(Upsample::with_size([3, 4, 5], Mode::Nearest))),
        ("upsample_linear", run(Upsample::with_size([12], Mode::Linear1d))),
        ("upsample_linear_align", run(Upsample::new(2.0, Mode::Linear1d).align_corners(true))),
        ("upsample_bilinear", run(Upsample::new(2.0, Mode::Bilinear))),
        ("upsample_bilinear_align", run(Upsample::new(2.0, Mode::Bilinear).align_corners(true))),
        ("upsample_bilinear_down", run(Upsample::with_size([3, 2], Mode::Bilinear))),
        ("upsample_bicubic", run(Upsample::with_size([6, 9], Mode::Bicubic))),
        ("upsample_bicubic_align", run(Upsample::new(1.5, Mode::Bicubic).align_corners(true))),
        ("upsample_trilinear", run(Upsample::new(2.0, Mode::Trilinear))),
        ("upsample_bilinear_factors", run(factors(Mode::Bilinear, [2.0, 1.3]))),
        ("upsample_bicubic_factors", run(factors(Mode::Bicubic, [1.3, 2.0]))),
        ("upsample_nearest_exact_factor", run(Upsample::new(1.3, Mode::NearestExact))),
        ("instance_norm1d", run(InstanceNorm1d::<D, f64>::new(3))),
        ("instance_norm1d_unbatched", run(InstanceNorm1d::<D, f64>::new(3))),
        ("instance_norm2d_affine", run(InstanceNorm2d::<D, f64>::new(3).affine())),
        ("instance_norm3d", run(InstanceNorm3d::<D, f64>::new(2))),
        ("pixel_shuffle", run(PixelShuffle::new(2))),
        ("pixel_unshuffle", run(PixelUnshuffle::new(2))),
    ];
    check_layer_rows(rows);
    // A shape the layer cannot take is an error naming it.
    let x = T::<D>::zeros([2, 3]);
    let err = BatchNorm3d::<D, f64>::new(3).try_forward(&x).unwrap_err().to_string();
    assert!(err.contains("BatchNorm3d") && err.contains("[N, 3, D, H, W]"), "{err}");
    let err = MaxPool1d::new(5).try_forward(&T::<D>::zeros([1, 2, 3])).unwrap_err().to_string();
    assert!(err.contains("MaxPool1d") && err.contains("length of 3"), "{err}");
    let err = AvgPool1d::new(2).padding(2).try_forward(&T::<D>::zeros([1, 2, 8])).unwrap_err().to_string();
    assert!(err.contains("AvgPool1d") && err.contains("half the kernel"), "{err}");
    let err = AdaptiveAvgPool1d::new(2).try_forward(&T::<D>::zeros([1, 1, 2, 3])).unwrap_err().to_string();
    assert!(err.contains("AdaptiveAvgPool1d") && err.contains("[N, C, L]"), "{err}");
    let err = PixelShuffle::new(3).try_forward(&T::<D>::zeros([1, 8, 2, 2])).unwrap_err().to_string();
    assert!(err.contains("PixelShuffle") && err.contains("multiple of upscale_factor² (3²)"), "{err}");
    let err = PixelUnshuffle::new(2).try_forward(&T::<D>::zeros([1, 3])).unwrap_err().to_string();
    assert!(err.contains("rank 3 or more"), "{err}");
    let err = InstanceNorm2d::<D, f64>::new(3).try_forward(&T::<D>::zeros([1, 4, 2, 2])).unwrap_err().to_string();
    assert!(err.contains("InstanceNorm2d") && err.contains("[N, 3, H, W] or [3, H, W]"), "{err}");
    // A factor too large for memory is an error, not an abort.
    let huge = Upsample::new(1e15, Mode::Linear1d).try_forward(&T::<D>::zeros([1, 1, 4]));
    assert!(matches!(huge, Err(Error::OutOfMemory { .. })), "{huge:?}");
    let err = Upsample::new(2.0, Mode::Bilinear).try_forward(&T::<D>::zeros([1, 2, 3])).unwrap_err().to_string();
    assert!(err.contains("interpolate") && err.contains("'bilinear'") && err.contains("[N, C, H, W]"), "{err}");
    let err = Upsample::new(2.0, Mode::Nearest).align_corners(true).try_forward(&x.unsqueeze(0)).unwrap_err();
    assert!(err.to_string().contains("align_corners only applies"), "{err}");
    let err = Upsample::with_size([2, 2], Mode::Nearest).try_forward(&T::<D>::zeros([1, 1, 4])).unwrap_err();
    assert!(err.to_string().contains("one size per spatial axis (1) or one for all, got 2"), "{err}");
}

/// The pools' remaining options, `MaxUnpool2d`/`MaxUnpool1d` after a
/// pool's indices, `Conv3d` and `ConvTranspose1d` against PyTorch (the
/// `layer.<name>.` rows of issue 59): outputs and gradients as
/// [`check_layer_rows`]; the indices as PyTorch's; the convolutions built
/// from PyTorch's initial weights, their `state_dict` by PyTorch's names.
fn pool_options_unpools_and_convolutions_match_pytorch<D: Device>() {
    use devtensor::nn::{
        AvgPool1d, AvgPool2d, Conv3d, Conv3dConfig, ConvTranspose1d, ConvTranspose1dConfig, MaxPool1d, MaxPool2d,
        MaxUnpool1d, MaxUnpool2d,
    };
    use devtensor::ops::conv::Window2d;
    let file = op_fixtures();
    let get = |name: &str| fixture::<D>(&file, name);
    let param = |row: &str, key: &str| get(&format!("layer.{row}.param.{key}"));
    // A pool with indices, then its unpool; the indices checked against PyTorch's.
    fn unpooled<D: Device>(
        indices: T<D>,
        pool: impl Fn(&T<D>) -> (T<D>, Tensor<D, i64>) + 'static,
        unpool: impl Fn(&T<D>, &Tensor<D, i64>) -> T<D> + 'static,
    ) -> Run<D> {
        Box::new(move |x| {
            let (y, got) = pool(x);
            let want: Vec<i64> = indices.to_vec().iter().map(|&i| i as i64).collect();
            assert_eq!(got.to_vec(), want, "the pool's indices");
            (unpool(&y, &got), vec![])
        })
    }
    let indices = |row: &str| get(&format!("layer.{row}.indices"));
    let conv3d = Conv3dConfig { stride: [1, 2, 1], padding: [1, 1, 0], dilation: [1, 1, 2], groups: 2 };
    let cube = Conv3dConfig { padding: [1; 3], ..Default::default() };
    let transpose = ConvTranspose1dConfig { stride: 2, padding: 1, output_padding: 1, ..Default::default() };
    let grouped = ConvTranspose1dConfig { stride: 3, dilation: 2, groups: 3, ..Default::default() };
    let overlapping = MaxPool2d::new(3).stride(2).padding(1).ceil_mode(true);
    let rows: Vec<(&str, Run<D>)> = vec![
        ("max_pool2d_ceil", run(MaxPool2d::new(2).ceil_mode(true))),
        ("max_pool2d_ceil_dilated", run(MaxPool2d::new(3).stride(2).padding(1).dilation(2).ceil_mode(true))),
        ("max_pool2d_unbatched", run(MaxPool2d::new(3).stride(2).padding(1))),
        ("avg_pool2d_ceil_dropped", run(AvgPool2d::new(3).stride(3).padding(1).ceil_mode(true))),
        ("avg_pool2d_ceil", run(AvgPool2d::new(2).ceil_mode(true))),
        ("avg_pool2d_exclude_pad", run(AvgPool2d::new(3).stride(2).padding(1).count_include_pad(false))),
        ("avg_pool2d_ceil_padded", run(AvgPool2d::new(3).stride(2).padding(1).ceil_mode(true))),
        (
            "avg_pool2d_ceil_exclude_pad",
            run(AvgPool2d::new(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false)),
        ),
        ("avg_pool2d_divisor", {
            let mut layer = AvgPool2d::new(2).padding(1).divisor_override(4);
            layer.window = Window2d { kernel: [2, 3], stride: [1, 2], padding: [1, 1], dilation: [1, 1] };
            run(layer)
        }),
        ("max_pool1d_ceil", run(MaxPool1d::new(2).ceil_mode(true))),
        (
            "avg_pool1d_ceil_exclude_pad",
            run(AvgPool1d::new(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false)),
        ),
        (
            "unpool2d",
            unpooled(
                indices("unpool2d"),
                |x| MaxPool2d::new(2).forward_with_indices(x),
                |y, i| MaxUnpool2d::new(2).output_size([5, 7]).forward(y, i),
            ),
        ),
        (
            "unpool2d_overlap",
            unpooled(
                indices("unpool2d_overlap"),
                move |x| overlapping.forward_with_indices(x),
                |y, i| MaxUnpool2d::new(3).stride(2).padding(1).forward(y, i),
            ),
        ),
        (
            "unpool1d",
            unpooled(
                indices("unpool1d"),
                |x| MaxPool1d::new(3).stride(2).forward_with_indices(x),
                |y, i| MaxUnpool1d::new(3).stride(2).output_size(9).forward(y, i),
            ),
        ),
        ("conv3d", run(Conv3d::from_weights(param("conv3d", "weight"), Some(param("conv3d", "bias")), conv3d))),
        ("conv3d_cube", run(Conv3d::from_weights(param("conv3d_cube", "weight"), None, cube))),
        (
            "conv_transpose1d",
            run(ConvTranspose1d::from_weights(
                param("conv_transpose1d", "weight"),
                Some(param("conv_transpose1d", "bias")),
                transpose,
            )),
        ),
        (
            "conv_transpose1d_groups",
            run(ConvTranspose1d::from_weights(
                param("conv_transpose1d_groups", "weight"),
                Some(param("conv_transpose1d_groups", "bias")),
                grouped,
            )),
        ),
        ("max_pool2d_ceil_short", run(MaxPool2d::new(3).stride(2).ceil_mode(true))),
        ("avg_pool2d_ceil_short", run(AvgPool2d::new(3).stride(2).ceil_mode(true))),
    ];
    check_layer_rows(rows);
    // Mistakes are errors naming the layer or op and what is wrong.
    let image = T::<D>::zeros([1, 1, 4, 4]);
    let (y, indices) = MaxPool2d::new(2).forward_with_indices(&image);
    let err = MaxUnpool2d::new(2).output_size([6, 4]).try_forward(&y, &indices).unwrap_err().to_string();
    assert!(err.contains("max_unpool2d") && err.contains("between 2 and 6 (exclusive)"), "{err}");
    let bad = Tensor::<D, i64>::from_vec(vec![0, 1, 2, 16], [1, 1, 2, 2]);
    let err = MaxUnpool2d::new(2).try_forward(&y, &bad).unwrap_err().to_string();
    assert!(err.contains("invalid max index 16") && err.contains("4x4"), "{err}");
    let err = MaxUnpool2d::new(2).try_forward(&y, &indices.reshape([1, 4])).unwrap_err().to_string();
    assert!(err.contains("the indices must have the input's shape"), "{err}");
    let err = AvgPool2d::new(2).divisor_override(0).try_forward(&image).unwrap_err().to_string();
    assert!(err.contains("divisor_override must not be zero"), "{err}");
    let err = MaxPool2d::new(2).try_forward(&T::<D>::zeros([4, 4])).unwrap_err().to_string();
    assert!(err.contains("MaxPool2d") && err.contains("[C, H, W]"), "{err}");
    let volume = T::<D>::zeros([1, 2, 2, 4, 4]);
    let err = Conv3d::<D, f64>::new(2, 2, 3).try_forward(&volume).unwrap_err().to_string();
    assert!(err.contains("conv3d") && err.contains("does not fit a volume of 2x4x4"), "{err}");
    let err = Conv3d::<D, f64>::new(3, 2, 1).try_forward(&volume).unwrap_err().to_string();
    assert!(err.contains("conv3d") && err.contains("the input's 2 channels"), "{err}");
    let err = ConvTranspose1d::<D, f64>::new(2, 2, 3).try_forward(&image).unwrap_err().to_string();
    assert!(err.contains("conv_transpose1d") && err.contains("[N, C, L]"), "{err}");
}

/// `ctc_loss` against PyTorch 2.15 (`ctc.<name>.` rows): padded and
/// concatenated targets, one sequence, the blank last, repeats, an empty
/// target and impossible alignments; every reduction, and the gradient
/// through `log_softmax`; then its errors.
fn ctc_loss_matches_pytorch<D: Device>() {
    use devtensor::nn::{CtcLoss, ctc_loss};
    let file = op_fixtures();
    let get = |name: &str| fixture::<D>(&file, name);
    let lengths = |t: T<D>| t.to_vec().iter().map(|&v| v as usize).collect::<Vec<_>>();
    for (name, blank, zero_infinity) in [
        ("padded", 0, false),
        ("concatenated", 0, false),
        ("unbatched", 0, false),
        ("blank_last", 4, false),
        ("impossible", 0, false),
        ("impossible_zero", 0, true),
    ] {
        let p = format!("ctc.{name}.");
        let logits = get(&format!("{p}logits")).requires_grad();
        let targets = Tensor::<D, i64>::from_vec(
            get(&format!("{p}targets")).to_vec().iter().map(|&v| v as i64).collect(),
            get(&format!("{p}targets")).dims(),
        );
        let (inputs, target_lengths) =
            (lengths(get(&format!("{p}input_lengths"))), lengths(get(&format!("{p}target_lengths"))));
        let loss = |reduction| {
            let options = CtcLoss { blank, reduction, zero_infinity };
            ctc_loss(&logits.log_softmax(-1), &targets, &inputs, &target_lengths, options)
        };
        println!("ctc {name} on {}", D::name());
        for (key, reduction) in [("none", Reduction::None), ("mean", Reduction::Mean), ("sum", Reduction::Sum)] {
            let want = get(&format!("{p}{key}"));
            let got = loss(reduction);
            assert_eq!(got.dims(), want.dims(), "{name} {key}");
            assert_close(&got.to_vec(), &want.to_vec(), 1e-13, 1e-13);
        }
        let grads = (&loss(Reduction::None) * &get(&format!("{p}w"))).sum().backward();
        let mut want = get(&format!("{p}gx")).to_vec();
        // DELIBERATE: an impossible alignment (zero_infinity off) sends back
        // no gradient; PyTorch's is NaN there.
        want.iter_mut().filter(|g| g.is_nan()).for_each(|g| *g = 0.0);
        assert_close(&grads.get(&logits).expect(name).to_vec(), &want, 1e-13, 1e-12);
    }
    let log_probs = T::<D>::zeros([4, 2, 3]);
    let targets = Tensor::<D, i64>::from_vec(vec![1, 2, 1, 0], [2, 2]);
    let options = CtcLoss::default();
    let err = devtensor::nn::try_ctc_loss(&log_probs, &targets, &[4, 4], &[2, 2], options).unwrap_err().to_string();
    assert!(err.contains("ctc_loss") && err.contains("target label 0 is not a class other than the blank"), "{err}");
    let err = devtensor::nn::try_ctc_loss(&log_probs, &targets, &[5, 4], &[2, 1], options).unwrap_err().to_string();
    assert!(err.contains("an input length of 5 exceeds the 4 steps"), "{err}");
    let err = devtensor::nn::try_ctc_loss(&log_probs, &targets, &[4], &[2], options).unwrap_err().to_string();
    assert!(err.contains("expected 2 input and target lengths"), "{err}");
    let err = devtensor::nn::try_ctc_loss(&log_probs, &targets, &[4, 4], &[3, 1], options).unwrap_err().to_string();
    assert!(err.contains("expected targets [N, S]"), "{err}");
}

/// `AdaptiveMaxPool2d` and `AdaptiveMaxPool1d` against PyTorch
/// (`adaptive_max.safetensors`): overlapping and growing windows, global
/// pooling, unbatched inputs, and ties, whose gradient goes to the first
/// maximum; and their errors.
fn adaptive_max_pools_match_pytorch<D: Device>() {
    use devtensor::nn::{AdaptiveMaxPool1d, AdaptiveMaxPool2d};
    let file = crate::fixture::load("adaptive_max.safetensors");
    let cases: [(&str, &dyn Fn(&T<D>) -> T<D>); 6] = [
        ("pool2d_overlapping", &|x| AdaptiveMaxPool2d::new([2, 3]).forward(x)),
        ("pool2d_global", &|x| AdaptiveMaxPool2d::new([1, 1]).forward(x)),
        ("pool2d_ties", &|x| AdaptiveMaxPool2d::new([3, 3]).forward(x)),
        ("pool2d_unbatched_up", &|x| AdaptiveMaxPool2d::new([5, 4]).forward(x)),
        ("pool1d", &|x| AdaptiveMaxPool1d::new(3).forward(x)),
        ("pool1d_unbatched", &|x| AdaptiveMaxPool1d::new(2).forward(x)),
    ];
    for (name, pool) in cases {
        let case = crate::fixture::Case::<D>::new(&file, name, |_| false);
        let x = case.get("x").requires_grad();
        case.check(&AdaptiveMaxPool2d::new([1, 1]), &[("x", &x)], &[("output", pool(&x))]);
    }
    let err = AdaptiveMaxPool2d::new([2, 2]).try_forward(&T::<D>::zeros([2, 3])).unwrap_err().to_string();
    assert!(err.contains("AdaptiveMaxPool2d") && err.contains("[N, C, H, W] or [C, H, W]"), "{err}");
    let err = AdaptiveMaxPool2d::new([0, 2]).try_forward(&T::<D>::zeros([1, 1, 2, 2])).unwrap_err().to_string();
    assert!(err.contains("cannot pool an image of 2x2 to 0x2"), "{err}");
    let err = AdaptiveMaxPool1d::new(2).try_forward(&T::<D>::zeros([1, 1, 1, 3])).unwrap_err().to_string();
    assert!(err.contains("AdaptiveMaxPool1d") && err.contains("[N, C, L]"), "{err}");
}

device_tests! {
    adaptive_max_pools_match_pytorch => adaptive_max_pools_match_pytorch,
    activation_layers_match_pytorch => activation_layers_match_pytorch,
    norm_pool_and_resample_layers_match_pytorch => norm_pool_and_resample_layers_match_pytorch,
    pool_options_unpools_and_convolutions_match_pytorch => pool_options_unpools_and_convolutions_match_pytorch,
    ctc_loss_matches_pytorch => ctc_loss_matches_pytorch,
    losses_match_pytorch => losses_match_pytorch,
    large_untracked_linear_starts_from_the_bias => large_untracked_linear_starts_from_the_bias,
    embedding_padding_rows_get_no_gradient => embedding_padding_rows_get_no_gradient,
    group_norm_and_rms_norm_match_loops => group_norm_and_rms_norm_match_loops,
    init_functions_follow_pytorch => init_functions_follow_pytorch,
    multihead_attention_matches_a_loop => multihead_attention_matches_a_loop,
    erf_and_gelu_match_known_values => erf_and_gelu_match_known_values,
    nll_and_cross_entropy_agree_and_check_their_inputs => nll_and_cross_entropy_agree_and_check_their_inputs,
    embedding_rows_and_gradients => embedding_rows_and_gradients,
    dropout_keeps_the_expectation => dropout_keeps_the_expectation,
    channel_dropout_zeroes_whole_channels => channel_dropout_zeroes_whole_channels,
    modules_name_move_and_switch_modes => modules_name_move_and_switch_modes,
}

#[allow(dead_code)] // its `main`
#[path = "../../examples/train_cnn.rs"]
pub(crate) mod train_cnn;

#[test]
fn the_training_example_reaches_97_percent_and_reloads_on_the_cpu() {
    let (pixels, labels) = train_cnn::digits::load_digits();
    let accuracy = train_cnn::run::<Cpu>(&pixels, &labels);
    assert!(accuracy >= 0.97, "test accuracy {accuracy}");
}
