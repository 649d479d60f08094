//! Gradients of gradients (`autograd::grad` with `create_graph`): PyTorch's
//! WGAN-GP critic loss and a Hessian-vector product (fixtures saved by
//! PyTorch, `autograd.safetensors`), the second derivatives of the core
//! ops' rules against central differences of their first, what `grad`
//! computes and refuses, and the ops whose backward is a fused kernel
//! (norms, convolutions, pooling, attention, recurrent cells, the binary
//! cross-entropies' own formulas) differentiated again through the same
//! ops composed of recorded ones.

use crate::common::gradcheck::{T, Values, data, gradgradcheck, inputs};
use crate::common::{tensor_with, variant};
use crate::fixture::{Case, load};
use devtensor::autograd::{GradOptions, grad, try_grad};
use devtensor::nn::Linear;
use devtensor::ops::conv::Window2d;
use devtensor::{Device, Error, Tensor, enable_grad, no_grad};
use proptest::prelude::*;

/// `|a - b| <= 1e-12 (1 + |b|)` element by element: the fixtures are f64
/// and the expressions short.
#[track_caller]
fn assert_close<D: Device>(what: &str, a: &T<D>, b: &T<D>) {
    assert_eq!(a.dims(), b.dims(), "{what}: shapes");
    for (x, y) in a.to_vec().iter().zip(b.to_vec()) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{what} on {}: {x} against PyTorch's {y}", D::name());
    }
}

fn critic<D: Device>(x: &T<D>, p: &[T<D>; 4]) -> T<D> {
    (x.matmul(&p[0].t()) + &p[1]).leaky_relu(0.2).matmul(&p[2].t()) + &p[3]
}

/// WGAN-GP's critic loss, as its PyTorch implementations write it: the
/// input gradient with `create_graph`, its norm's penalty, and the
/// loss's gradients reaching the weights through the input gradient.
fn wgan_gp_gradient_penalty_matches_pytorch<D: Device>() {
    let file = load("autograd.safetensors");
    let case = Case::<D>::new(&file, "wgan_gp", |_| false);
    let p = ["w1", "b1", "w2", "b2"].map(|name| case.get(name).requires_grad());
    let (real, fake, alpha) = (case.get("real"), case.get("fake"), case.get("alpha"));
    let interp = (&alpha * &real + (1.0 - &alpha) * &fake).requires_grad();
    let out = critic(&interp, &p);
    let ones = out.ones_like();
    let [dinterp] = grad(&[&out], [&interp], GradOptions::new().grad_outputs(&[&ones]).create_graph(true));
    assert!(dinterp.tracks_grad());
    assert_close("dinterp", &dinterp, &case.get("dinterp"));
    let penalty = (dinterp.vector_norm_axis(2.0, 1) - 1.0).square().mean();
    assert_close("penalty", &penalty, &case.get("penalty"));
    let loss = critic(&fake, &p).mean() - critic(&real, &p).mean() + penalty * 10.0;
    assert_close("loss", &loss, &case.get("loss"));
    let grads = loss.backward();
    for (name, param) in ["w1", "b1", "w2", "b2"].iter().zip(&p) {
        assert_close(&format!("grad.{name}"), grads.get(param).unwrap(), &case.get(&format!("grad.{name}")));
    }
}

/// A Hessian-vector product and the next derivative, each the gradient
/// of the previous one's product with `v`.
fn hessian_vector_products_match_pytorch_to_the_third_order<D: Device>() {
    let file = load("autograd.safetensors");
    let case = Case::<D>::new(&file, "hvp", |_| false);
    let (x, a, v) = (case.get("x").requires_grad(), case.get("a"), case.get("v"));
    let f = x.matmul(&a).tanh().logsumexp(-1).sum() + x.powf(3.0).sum() / 3.0;
    assert_close("f", &f, &case.get("f"));
    let recorded = GradOptions::new().create_graph(true);
    let [g] = grad(&[&f], [&x], recorded);
    assert_close("grad", &g, &case.get("grad"));
    let [hvp] = grad(&[&(&g * &v).sum()], [&x], GradOptions::new().create_graph(true));
    assert_close("hvp", &hvp, &case.get("hvp"));
    let [third] = grad(&[&(&hvp * &v).sum()], [&x], GradOptions::new());
    assert!(!third.tracks_grad(), "without create_graph the gradient records nothing");
    assert_close("third", &third, &case.get("third"));
}

/// `grad` returns the gradients of the inputs asked for, computed
/// tensors among them, and nothing else; its errors name the input.
fn grad_computes_the_chosen_gradients_and_refuses_what_it_cannot<D: Device>() {
    let x = T::<D>::from_vec(vec![1.0, -2.0, 3.0], [3]).requires_grad();
    let w = T::<D>::from_vec(vec![0.5, 0.25, -1.0], [3]).requires_grad();
    let h = &x * &w;
    let y = h.square().sum();
    // d y / d h = 2 h, d y / d x = 2 h w, both computed by one walk.
    let [dh, dx] = grad(&[&y], [&h, &x], GradOptions::new());
    assert_eq!(dh.to_vec(), (&h * 2.0).to_vec());
    assert_eq!(dx.to_vec(), (&h * &w * 2.0).to_vec());
    assert!(!dx.tracks_grad());
    // Two outputs, weighted by their grad_outputs.
    let (y1, y2) = (x.sum(), (&x * 3.0).sum());
    let (s1, s2) = (T::<D>::scalar(2.0), T::<D>::scalar(-1.0));
    let [dx] = grad(&[&y1, &y2], [&x], GradOptions::new().grad_outputs(&[&s1, &s2]));
    assert_eq!(dx.to_vec(), [-1.0; 3]);
    // An input the outputs do not depend on.
    let unused = T::<D>::zeros([2]).requires_grad();
    let err = try_grad(&[&y], [&unused], GradOptions::new()).unwrap_err();
    assert!(err.to_string().contains("input 0 was not used"), "{err}");
    let [zeros] = grad(&[&y], [&unused], GradOptions::new().materialize_grads(true));
    assert_eq!(zeros.to_vec(), [0.0; 2]);
    // Untracked inputs and outputs, a vector output without its
    // gradient, a gradient of the wrong shape.
    let err = try_grad(&[&y], [&x.detach()], GradOptions::new()).unwrap_err();
    assert!(
        matches!(err, Error::Argument { op: "grad", .. }) && err.to_string().contains("input 0 tracks no gradient"),
        "{err}"
    );
    let err = try_grad(&[&y.detach()], [&x], GradOptions::new()).unwrap_err();
    assert!(err.to_string().contains("output 0 tracks no gradient"), "{err}");
    let err = try_grad(&[&h], [&x], GradOptions::new()).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "grad", .. }), "{err}");
    let wrong = T::<D>::ones([2]);
    let err = try_grad(&[&h], [&x], GradOptions::new().grad_outputs(&[&wrong])).unwrap_err();
    assert!(err.to_string().contains("grad_outputs[0] must have the shape of output 0"), "{err}");
    // A list of inputs gives a Vec.
    let inputs: Vec<&T<D>> = vec![&x, &w];
    assert_eq!(grad(&[&y], &inputs[..], GradOptions::new()).len(), 2);
}

/// The binary cross-entropies, whose backward is PyTorch's own formula
/// (a floor under a saturated probability; `σ(x) - t` for logits, also
/// at `x = 0`, where the stable expression's `relu` and `abs` have kinks):
/// under `create_graph` the formula is computed again from recorded ops,
/// giving the plain backward's gradients and second derivatives that
/// match differences of them, toward the prediction and the target. And
/// logistic regression's Hessian-vector product at zero weights against
/// its closed form `Xᵀ (σ(1 - σ) ⊙ X v) / N`, which PyTorch gives.
fn binary_cross_entropies_have_second_derivatives<D: Device>() {
    use devtensor::nn::{
        Reduction, binary_cross_entropy, binary_cross_entropy_with_logits, binary_cross_entropy_with_logits_weighted,
    };
    let logits = T::<D>::from_vec(data(3 * 4, 7), [3, 4]);
    let p = logits.sigmoid() * 0.9 + 0.05;
    let t = T::<D>::from_vec(data(3 * 4, 8), [3, 4]).sigmoid();
    let w = T::<D>::from_vec(data(4, 9), [4]).abs() + 0.5;
    let pos_weight = T::<D>::from_vec(data(4, 10), [4]).abs() + 0.25;
    type Loss<'a, D> = Box<dyn Fn(&[T<D>]) -> T<D> + 'a>;
    let losses: [(&str, T<D>, Loss<D>); 4] = [
        ("binary_cross_entropy", p.clone(), Box::new(|x| binary_cross_entropy(&x[0], &x[1], None, Reduction::Sum))),
        (
            "binary_cross_entropy (weight)",
            p.clone(),
            Box::new(|x| binary_cross_entropy(&x[0], &x[1], Some(&w), Reduction::None)),
        ),
        (
            "binary_cross_entropy_with_logits",
            logits.clone(),
            Box::new(|x| binary_cross_entropy_with_logits(&x[0], &x[1], Reduction::Mean)),
        ),
        (
            "binary_cross_entropy_with_logits (weight, pos_weight)",
            logits.clone(),
            Box::new(|x| {
                binary_cross_entropy_with_logits_weighted(&x[0], &x[1], Some(&w), Some(&pos_weight), Reduction::Sum)
            }),
        ),
    ];
    for (name, pred, loss) in &losses {
        let operands = [pred.clone(), t.clone()];
        recorded_gradients_match_the_fused_ones(name, &operands, loss);
        gradgradcheck(name, &operands, loss);
    }

    let x = T::<D>::from_vec(data(5 * 3, 11), [5, 3]);
    let labels = T::<D>::from_vec(data(5, 12), [5, 1]).gt_scalar(0.0).to_dtype::<f64>();
    let beta = T::<D>::zeros([3, 1]).requires_grad();
    let v = T::<D>::from_vec(vec![0.5, -1.0, 2.0], [3, 1]);
    let loss = binary_cross_entropy_with_logits(&x.matmul(&beta), &labels, Reduction::Mean);
    let [g] = grad(&[&loss], [&beta], GradOptions::new().create_graph(true));
    let [hvp] = grad(&[&(&g * &v).sum()], [&beta], GradOptions::new());
    let s = x.matmul(&beta.detach()).sigmoid();
    let want = x.t().matmul(&(&s * (1.0 - &s) * x.matmul(&v))) / 5.0;
    assert_close("logistic regression's Hessian-vector product", &hvp, &want);
}

/// The scopes: `enable_grad` records inside `no_grad` and restores it;
/// `inference_mode` records nothing. A graph can be walked again (there is
/// no `retain_graph` to forget), and a tensor saved for backward that is
/// then changed in place keeps its saved value: PyTorch raises "one of the
/// variables needed for gradient computation has been modified by an
/// inplace operation"; here the write copies, and the gradient is right.
fn scopes_and_saved_tensors_follow_pytorch<D: Device>() {
    let w = T::<D>::ones([2]).requires_grad();
    no_grad(|| {
        assert!(!(&w * 2.0).tracks_grad());
        let inner = enable_grad(|| &w * 2.0);
        assert!(inner.tracks_grad());
        assert!(!devtensor::is_grad_enabled());
    });
    assert!(!devtensor::inference_mode(|| &w * 2.0).tracks_grad());
    assert!(devtensor::is_grad_enabled());

    let x = T::<D>::from_vec(vec![0.5, -1.0], [2]).requires_grad();
    let mut e = x.exp(); // exp's rule saves its result
    let y = e.sum();
    no_grad(|| e.try_add_assign(&T::<D>::ones([2]))).unwrap();
    assert_eq!(e.to_vec(), [0.5f64.exp() + 1.0, (-1.0f64).exp() + 1.0]);
    for _ in 0..2 {
        assert_eq!(y.backward().get(&x).unwrap().to_vec(), [0.5f64.exp(), (-1.0f64).exp()]);
    }
}

/// Convolutions and pooling: their fused backward gives way, under
/// `create_graph`, to the same op composed of recorded ops (unfold, whose
/// gradient is fold and fold's unfold, and products), so their second
/// derivatives (input, weight and bias) match differences of the fused
/// first ones; with strides, padding, dilation and groups.
fn convolutions_and_pooling_have_second_derivatives<D: Device>() {
    let x = T::<D>::from_vec(data(2 * 4 * 5 * 5, 31), [2, 4, 5, 5]);
    let w = T::<D>::from_vec(data(2 * 4 * 3 * 3, 32), [2, 4, 3, 3]);
    let b = T::<D>::from_vec(data(2, 33), [2]);
    let padded = Window2d { padding: [1, 1], ..Window2d::new([3, 3]) };
    let conv = |t: &[T<D>]| t[0].conv2d(&t[1], Some(&t[2]), padded, 1);
    recorded_gradients_match_the_fused_ones("conv2d", &[x.clone(), w.clone(), b.clone()], conv);
    gradgradcheck("conv2d", &[x.clone(), w.clone(), b.clone()], conv);
    let strided = Window2d { stride: [2, 1], padding: [1, 0], dilation: [1, 2], ..Window2d::new([2, 2]) };
    let grouped = [x.clone(), T::<D>::from_vec(data(4 * 2 * 2 * 2, 34), [4, 2, 2, 2])];
    gradgradcheck("conv2d (strided, dilated, 2 groups)", &grouped, |t| t[0].conv2d(&t[1], None, strided, 2).square());
    let signal = [x.reshape([2, 4, 25]), w.narrow(2, 0, 1).reshape([2, 4, 3])];
    let window = devtensor::ops::conv::Window1d { stride: 2, padding: 1, dilation: 1 };
    gradgradcheck("conv1d", &signal, |t| t[0].conv1d(&t[1], None, window, 1));
    let transposed = [x.narrow(2, 0, 3).narrow(3, 0, 3), T::<D>::from_vec(data(4 * 3 * 2 * 2, 35), [4, 3, 2, 2])];
    let up = Window2d { stride: [2, 2], padding: [1, 0], ..Window2d::new([2, 2]) };
    gradgradcheck("conv_transpose2d", &transposed, |t| t[0].conv_transpose2d(&t[1], None, up, [1, 0], 1).square());
    let image = std::slice::from_ref(&x);
    let pool = Window2d { stride: [2, 2], padding: [1, 1], ..Window2d::new([3, 3]) };
    gradgradcheck("max_pool2d", image, |t| t[0].max_pool2d(pool).square());
    gradgradcheck("avg_pool2d", image, |t| t[0].avg_pool2d(pool).square());
    gradgradcheck("adaptive_avg_pool2d", image, |t| t[0].adaptive_avg_pool2d([2, 3]).square());
    // The layers, through the same ops.
    let conv = devtensor::nn::Conv2d::<D, f64>::from_weights(w.clone(), Some(b.clone()), Default::default());
    let leaf = x.detach().requires_grad();
    let [dx] = grad(&[&conv.forward(&leaf).square().sum()], [&leaf], GradOptions::new().create_graph(true));
    let penalty = dx.square().sum().backward();
    assert!(penalty.get(&conv.weight).is_some(), "a gradient penalty on Conv2d's input reaches its weight");
}

/// `f`'s gradient with respect to each input, once from the fused
/// kernels' backward and once recorded (`create_graph`), which computes
/// it from the op composed of recorded ops: the two must agree, so that
/// what the second derivative differentiates is the op's own gradient.
#[track_caller]
fn recorded_gradients_match_the_fused_ones<D: Device>(name: &str, inputs: &[T<D>], f: impl Fn(&[T<D>]) -> T<D>) {
    let leaves: Vec<T<D>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let y = f(&leaves).square().sum();
    let refs: Vec<&T<D>> = leaves.iter().collect();
    let fused = grad(&[&y], &refs[..], GradOptions::new());
    let recorded = grad(&[&y], &refs[..], GradOptions::new().create_graph(true));
    for (i, (a, b)) in fused.iter().zip(&recorded).enumerate() {
        assert!(b.tracks_grad(), "{name}: input {i}'s recorded gradient tracks");
        assert_close(&format!("{name}: input {i}"), &a.detach(), &b.detach());
    }
}

/// Attention and the recurrent cells and sequences: under `create_graph`
/// their fused backward gives way to the op composed of recorded ops
/// (matmul, masked softmax; the gates' sigmoids and tanhs, step by step),
/// whose gradients equal the fused ones and have second derivatives that
/// match differences of them.
fn attention_and_recurrent_ops_have_second_derivatives<D: Device>() {
    use devtensor::nn::{Gru, GruCell, Lstm, LstmCell};
    use devtensor::ops::attention::AttentionMask;
    let qkv = [
        T::<D>::from_vec(data(2 * 3 * 4, 41), [2, 3, 4]),
        T::<D>::from_vec(data(2 * 5 * 4, 42), [2, 5, 4]),
        T::<D>::from_vec(data(2 * 5 * 3, 43), [2, 5, 3]),
    ];
    for (name, mask) in [("attention", AttentionMask::None), ("attention (causal)", AttentionMask::Causal)] {
        let attend = |t: &[T<D>]| t[0].scaled_dot_product_attention(&t[1], &t[2], mask, None);
        recorded_gradients_match_the_fused_ones(name, &qkv, attend);
        gradgradcheck(name, &qkv, attend);
    }
    // A cell's input, states and weights: batch 3, input 2, hidden 2.
    let (batch, input, hidden) = (3, 2, 2);
    let tensor = |dims: &[usize], seed: u64| T::<D>::from_vec(data(dims.iter().product(), seed), dims);
    let lstm = [
        tensor(&[batch, input], 51),
        tensor(&[batch, hidden], 52),
        tensor(&[batch, hidden], 53),
        tensor(&[4 * hidden, input], 54),
        tensor(&[4 * hidden, hidden], 55),
        tensor(&[4 * hidden], 56),
        tensor(&[4 * hidden], 57),
    ];
    let lstm_cell = |t: &[T<D>]| {
        let cell = LstmCell::from_weights(t[3].clone(), t[4].clone(), Some(t[5].clone()), Some(t[6].clone()));
        let (h, c) = cell.forward_with_state(&t[0], (&t[1], &t[2]));
        Tensor::cat(&[&h, &c], -1)
    };
    recorded_gradients_match_the_fused_ones("LstmCell", &lstm, lstm_cell);
    gradgradcheck("LstmCell", &lstm, lstm_cell);
    let gru = [
        lstm[0].clone(),
        lstm[1].clone(),
        tensor(&[3 * hidden, input], 58),
        tensor(&[3 * hidden, hidden], 59),
        tensor(&[3 * hidden], 60),
        tensor(&[3 * hidden], 61),
    ];
    let gru_cell = |t: &[T<D>]| {
        let cell = GruCell::from_weights(t[2].clone(), t[3].clone(), Some(t[4].clone()), Some(t[5].clone()));
        cell.forward_with_state(&t[0], &t[1])
    };
    recorded_gradients_match_the_fused_ones("GruCell", &gru, gru_cell);
    gradgradcheck("GruCell", &gru, gru_cell);
    // Whole sequences (3 steps), the layers' fused sequence op.
    let steps = tensor(&[3, batch, input], 62);
    let mut sequence = lstm.clone();
    sequence[0] = steps.clone();
    let lstm_layer = |t: &[T<D>]| {
        let mut layer = Lstm::<D, f64>::new(input, hidden);
        layer.cells[0] = LstmCell::from_weights(t[3].clone(), t[4].clone(), Some(t[5].clone()), Some(t[6].clone()));
        let (out, (h, c)) = layer.forward_with_state(&t[0], (&t[1].unsqueeze(0), &t[2].unsqueeze(0)));
        Tensor::cat(&[&out, &h, &c], 0)
    };
    recorded_gradients_match_the_fused_ones("Lstm", &sequence, lstm_layer);
    gradgradcheck("Lstm", &sequence, lstm_layer);
    let mut sequence = gru.clone();
    sequence[0] = steps;
    let gru_layer = |t: &[T<D>]| {
        let mut layer = Gru::<D, f64>::new(input, hidden);
        layer.cells[0] = GruCell::from_weights(t[2].clone(), t[3].clone(), Some(t[4].clone()), Some(t[5].clone()));
        let (out, h) = layer.forward_with_state(&t[0], &t[1].unsqueeze(0));
        Tensor::cat(&[&out, &h], 0)
    };
    recorded_gradients_match_the_fused_ones("Gru", &sequence, gru_layer);
    gradgradcheck("Gru", &sequence, gru_layer);
}

device_tests! {
    wgan_gp_gradient_penalty_matches_pytorch => wgan_gp_gradient_penalty_matches_pytorch,
    hessian_vector_products_match_pytorch_to_the_third_order => hessian_vector_products_match_pytorch_to_the_third_order,
    grad_computes_the_chosen_gradients_and_refuses_what_it_cannot => grad_computes_the_chosen_gradients_and_refuses_what_it_cannot,
    binary_cross_entropies_have_second_derivatives => binary_cross_entropies_have_second_derivatives,
    scopes_and_saved_tensors_follow_pytorch => scopes_and_saved_tensors_follow_pytorch,
    norm_layers_have_second_derivatives => norm_layers_have_second_derivatives,
    convolutions_and_pooling_have_second_derivatives => convolutions_and_pooling_have_second_derivatives,
    attention_and_recurrent_ops_have_second_derivatives => attention_and_recurrent_ops_have_second_derivatives,
}

/// The norm layers' fused backward is replaced, under `create_graph`, by
/// the standardisation composed of recorded ops: their second derivatives
/// (input, weight and bias) against differences of the fused first ones.
fn norm_layers_have_second_derivatives<D: Device>() {
    use devtensor::nn::{BatchNorm2d, GroupNorm, LayerNorm};
    let x = T::<D>::from_vec(data(2 * 4 * 3, 21), [2, 4, 3]);
    let (w, b) = (T::<D>::from_vec(data(3, 22), [3]), T::<D>::from_vec(data(3, 23), [3]));
    let inputs = [x.clone(), w.clone(), b.clone()];
    gradgradcheck("LayerNorm", &inputs, |t| LayerNorm::from_weights(t[1].clone(), t[2].clone()).forward(&t[0]));
    let channels = [x.clone(), T::<D>::from_vec(data(4, 24), [4]), T::<D>::from_vec(data(4, 25), [4])];
    gradgradcheck("GroupNorm", &channels, |t| {
        GroupNorm::from_weights(2, t[1].clone(), t[2].clone()).forward(&t[0]).square()
    });
    let images = [x.reshape([2, 4, 3, 1]), channels[1].clone(), channels[2].clone()];
    gradgradcheck("BatchNorm2d (training)", &images, |t| {
        let stats = (T::<D>::zeros([4]), T::<D>::ones([4]));
        BatchNorm2d::from_weights(t[1].clone(), t[2].clone(), stats.0, stats.1).forward(&t[0]).square()
    });
}

device_proptests! {
    cases = 12;

    /// Second derivatives of the element-wise, broadcast, reduction,
    /// product, view and index rules. Linear ops are squared first, so
    /// that their gradient's own rule is exercised.
    fn core_rules_have_the_second_derivatives_of_finite_differences<D>(
        ((ad, a), seed) in (inputs(3, 3, Values::AwayFromZero), any::<u64>()), v in variant(),
    ) {
        let x = tensor_with::<D, f64>(&a, &ad, v);
        let rank = ad.len();
        // An operand broadcast against `x`: its trailing axis, or a scalar.
        let bd: Vec<usize> = if rank == 0 { vec![] } else { vec![1; rank - 1].into_iter().chain([ad[rank - 1]]).collect() };
        let b = T::<D>::from_vec(data(bd.iter().product(), seed).iter().map(|v| v.abs() + 0.5).collect(), bd.as_slice());
        let pair = [x.clone(), b];
        gradgradcheck("mul (broadcast)", &pair, |t| &t[0] * &t[1]);
        gradgradcheck("div (broadcast)", &pair, |t| &t[0] / &t[1]);
        gradgradcheck("add (broadcast)", &pair, |t| (&t[0] + &t[1]).square());
        gradgradcheck("pow", &[x.abs() + 0.5, pair[1].clone()], |t| t[0].pow(&t[1]));
        gradgradcheck("where_cond", &pair, |t| t[0].gt_scalar(0.0).where_cond(&t[0].square(), &(&t[1] * &t[0])));
        let one = std::slice::from_ref(&x);
        gradgradcheck("gelu", one, |t| devtensor::nn::Gelu::default().forward(&t[0]));
        gradgradcheck("gelu (tanh)", one, |t| devtensor::nn::Gelu::tanh().forward(&t[0]));
        gradgradcheck("reshape", one, |t| t[0].reshape([t[0].elem_count()]).square());
        gradgradcheck("transpose", one, |t| t[0].transpose(0, -1).square());
        gradgradcheck("broadcast_to", one, |t| {
            let mut shape = vec![2];
            shape.extend(t[0].dims());
            t[0].broadcast_to(shape).square()
        });
        gradgradcheck("sum", one, |t| t[0].sum().square());
        gradgradcheck("max", one, |t| t[0].max().square());
        if rank > 0 {
            gradgradcheck("narrow", one, |t| t[0].narrow(0, 0, 1).square());
            gradgradcheck("cat", one, |t| Tensor::cat(&[&t[0], &t[0].exp()], -1).square());
            let index = Tensor::<D, i64>::from_vec(vec![0; ad[0] + 1], [ad[0] + 1]);
            gradgradcheck("index_select", one, |t| t[0].index_select(0, &index).square());
            gradgradcheck("max_axis", one, |t| t[0].max_axis(-1).square());
            gradgradcheck("cumsum", one, |t| t[0].cumsum(-1).square());
            gradgradcheck("softmax", one, |t| t[0].softmax(-1));
        }
    }

    fn products_have_the_second_derivatives_of_finite_differences<D>(
        (m, k, n, batch) in (1..4usize, 1..4usize, 1..4usize, 1..3usize), seed in any::<u64>(),
    ) {
        let pair = [T::<D>::from_vec(data(batch * m * k, seed), [batch, m, k]), T::<D>::from_vec(data(k * n, !seed), [k, n])];
        gradgradcheck("matmul", &pair, |t| t[0].matmul(&t[1]));
        let bias = T::<D>::from_vec(data(n, seed ^ 3), [n]);
        let linear = [pair[0].reshape([batch * m, k]), pair[1].clone(), bias];
        gradgradcheck("mlp", &linear, |t| (t[0].matmul(&t[1]) + &t[2]).tanh().matmul(&t[1].t()).log_softmax(-1));

        // `Linear`'s one-pass product and bias (`addmm`): the gradients of a
        // penalty on its input gradient equal those of the same layer
        // composed from `matmul` and `+`, checked above.
        let [x, w, b] = [&linear[0], &pair[1].t().contiguous(), &linear[2]].map(|t| t.detach().requires_grad());
        let layer = Linear::from_weights(w.clone(), Some(b.clone()));
        let penalties = [layer.forward(&x), x.matmul(&w.t()) + &b].map(|y| {
            let [dx] = grad(&[&y.tanh().square().sum()], [&x], GradOptions::new().create_graph(true));
            dx.square().sum().backward()
        });
        for leaf in [&x, &w, &b] {
            let [fused, composed] = [&penalties[0], &penalties[1]].map(|g| g.get(leaf).unwrap().to_vec());
            for (f, c) in fused.iter().zip(&composed) {
                prop_assert!((f - c).abs() <= 1e-12 * (1.0 + c.abs()), "addmm: {fused:?} against {composed:?}");
            }
        }
    }
}
