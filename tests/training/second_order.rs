//! Gradients of gradients (`autograd::grad` with `create_graph`): PyTorch's
//! WGAN-GP critic loss and a Hessian-vector product (fixtures saved by
//! PyTorch, `autograd.safetensors`), the second derivatives of the core
//! ops' rules against central differences of their first, what `grad`
//! computes and refuses, and the ops whose gradient cannot be
//! differentiated again failing with their name.

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

/// The ops whose backward is a fused kernel: a gradient through them
/// with `create_graph` is usable, but differentiating it again fails
/// with the op's name (PyTorch's "derivative not implemented"), not a
/// silent zero.
fn fused_backward_kernels_refuse_a_second_derivative_by_name<D: Device>() {
    let x = T::<D>::from_vec(data(2 * 3 * 4 * 4, 5), [2, 3, 4, 4]).requires_grad();
    let w = T::<D>::from_vec(data(2 * 3 * 3 * 3, 6), [2, 3, 3, 3]).requires_grad();
    let window = Window2d { padding: [1, 1], ..Window2d::new([3, 3]) };
    let y = x.conv2d(&w, None, window, 1).square().sum();
    let [dx] = grad(&[&y], [&x], GradOptions::new().create_graph(true));
    let first = no_grad(|| grad(&[&y], [&x], GradOptions::new())[0].to_vec());
    assert_eq!(dx.to_vec(), first, "the recorded walk computes the same gradient");
    let err = dx.sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("`conv2d`"), "{err}");

    let rows = T::<D>::from_vec(data(3 * 4, 7), [3, 4]).requires_grad();
    // The losses whose backward is PyTorch's own formula.
    let p = (rows.sigmoid() * 0.9 + 0.05).detach().requires_grad();
    let bce = devtensor::nn::binary_cross_entropy(&p, &p.detach().round(), None, devtensor::nn::Reduction::Mean);
    let [dbce] = grad(&[&bce], [&p], GradOptions::new().create_graph(true));
    let err = dbce.sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("`binary_cross_entropy`"), "{err}");
    let [dp] = grad(&[&rows.prod()], [&rows], GradOptions::new().create_graph(true));
    let err = dp.sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("`prod`"), "{err}");
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

device_tests! {
    wgan_gp_gradient_penalty_matches_pytorch => wgan_gp_gradient_penalty_matches_pytorch,
    hessian_vector_products_match_pytorch_to_the_third_order => hessian_vector_products_match_pytorch_to_the_third_order,
    grad_computes_the_chosen_gradients_and_refuses_what_it_cannot => grad_computes_the_chosen_gradients_and_refuses_what_it_cannot,
    fused_backward_kernels_refuse_a_second_derivative_by_name => fused_backward_kernels_refuse_a_second_derivative_by_name,
    scopes_and_saved_tensors_follow_pytorch => scopes_and_saved_tensors_follow_pytorch,
    norm_layers_have_second_derivatives => norm_layers_have_second_derivatives,
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
