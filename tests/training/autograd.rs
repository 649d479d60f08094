//! Autograd: every gradient rule checked against central finite differences
//! in `f64`, on random shapes, broadcast pairs and non-contiguous leaves, on
//! every device; and the graph's behaviour (accumulation, `no_grad`,
//! `detach`, in-place updates, errors, device moves).

use crate::common::*;
use crate::gradcheck::{T, Values, data, gradcheck, gradgradcheck, inputs};
use devtensor::{Cpu, Device, Error, Tensor, no_grad};
use proptest::prelude::*;

// ---- Strategies ----

/// A shape and values for it.
type Operand = (Vec<usize>, Vec<f64>);

/// Two shapes that broadcast together, with values for each.
fn broadcast_operands() -> impl Strategy<Value = (Operand, Operand)> {
    broadcast_pair(3, 3).prop_flat_map(|(a, b)| {
        let (na, nb) = (a.iter().product(), b.iter().product());
        ((Just(a), interleaved(na, 1)), (Just(b), interleaved(nb, 0)))
    })
}

/// `n` values in `-2..2` away from zero, on one of two interleaved grids:
/// odd multiples of 1/8 (`odd` 1) or non-zero multiples of 1/4 (`odd` 0).
/// Operands from the two grids are never closer than 1/8, so `maximum`,
/// `minimum` and `where_cond(a > b, ..)` never switch sides within a step
/// of the differences (with continuous draws, by an estimate, once in some 6 000 runs).
fn interleaved(n: usize, odd: i32) -> impl Strategy<Value = Vec<f64>> {
    let value = (1..=8i32, any::<bool>()).prop_map(move |(k, negative)| {
        let v = f64::from(2 * k - odd) / 8.0;
        if negative { -v } else { v }
    });
    prop::collection::vec(value, n)
}

/// An axis in `-rank..rank` (0 for rank 0, which accepts it).
fn axis_of(dims: &[usize], seed: usize, negative: bool) -> isize {
    let rank = dims.len().max(1);
    let axis = (seed % rank) as isize;
    if negative { axis - rank as isize } else { axis }
}

/// The operands of a `torch.matmul`: vectors, matrices and stacks whose
/// batch axes broadcast.
fn matmul_operands() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (1..4usize, 1..4usize, 1..4usize, 0..3usize, 0..3usize, 1..3usize, any::<bool>()).prop_map(
        |(m, k, n, a_kind, b_kind, batch, broadcast)| {
            let a = match a_kind {
                0 => vec![k],
                1 => vec![m, k],
                _ => vec![batch, m, k],
            };
            let b = match b_kind {
                0 => vec![k],
                1 => vec![k, n],
                _ => vec![if broadcast { 1 } else { batch }, k, n],
            };
            (a, b)
        },
    )
}

// ---- Rules against finite differences ----

device_proptests! {
    cases = 48;

    // The unary ops' own rules are checked by their table in tests/ops/unary.rs.
    fn gelu_rules_match_finite_differences<D>((dims, x) in inputs(3, 4, Values::AwayFromZero), v in variant()) {
        let x = [tensor_with::<D, f64>(&x, &dims, v)];
        gradcheck("gelu", &x, |t| devtensor::nn::Gelu::default().forward(&t[0]));
        gradcheck("gelu (tanh)", &x, |t| devtensor::nn::Gelu::tanh().forward(&t[0]));
    }

    fn binary_rules_sum_broadcast_gradients_back<D>(((ad, a), (bd, b)) in broadcast_operands(), va in variant(), vb in variant()) {
        let x = [tensor_with::<D, f64>(&a, &ad, va), tensor_with::<D, f64>(&b, &bd, vb)];
        gradcheck("add", &x, |t| &t[0] + &t[1]);
        gradcheck("sub", &x, |t| &t[0] - &t[1]);
        gradcheck("mul", &x, |t| &t[0] * &t[1]);
        gradcheck("div", &x, |t| &t[0] / &t[1]);
        gradcheck("maximum", &x, |t| t[0].maximum(&t[1]));
        gradcheck("minimum", &x, |t| t[0].minimum(&t[1]));
        gradcheck("where_cond", &x, |t| t[0].gt(&t[1]).where_cond(&t[0].square(), &t[1]));
    }

    fn scalar_rules_match_finite_differences<D>((dims, x) in inputs(3, 4, Values::AwayFromZero), v in variant()) {
        let x = [tensor_with::<D, f64>(&x, &dims, v)];
        gradcheck("add_scalar", &x, |t| &t[0] + 2.5);
        gradcheck("sub_scalar", &x, |t| &t[0] - 2.5);
        gradcheck("rsub_scalar", &x, |t| 2.5 - &t[0]);
        gradcheck("mul_scalar", &x, |t| &t[0] * -1.5);
        gradcheck("div_scalar", &x, |t| &t[0] / 4.0);
        gradcheck("rdiv_scalar", &x, |t| 3.0 / &t[0]);
        // A divisor above every |x|: floor(x / 2.5) jumps only at 0, which
        // the values avoid (0.7 put jumps at ±0.7 and ±1.4, inside them).
        gradcheck("div_floor", &x, |t| t[0].try_div_floor_scalar(2.5).unwrap() + &t[0]);
    }

    fn reduction_rules_match_finite_differences<D>(
        (dims, x) in inputs(3, 4, Values::Distinct), v in variant(), seed in 0..6usize, negative in any::<bool>(),
    ) {
        let x = [tensor_with::<D, f64>(&x, &dims, v)];
        let a = axis_of(&dims, seed, negative);
        gradcheck("sum", &x, |t| t[0].sum());
        gradcheck("sum_axis", &x, |t| t[0].sum_axis(a));
        gradcheck("sum_keepdim", &x, |t| t[0].sum_keepdim(a));
        gradcheck("mean", &x, |t| t[0].mean());
        gradcheck("mean_axis", &x, |t| t[0].mean_axis(a));
        gradcheck("mean_keepdim", &x, |t| t[0].mean_keepdim(a));
        gradcheck("max", &x, |t| t[0].max());
        gradcheck("min", &x, |t| t[0].min());
        gradcheck("max_axis", &x, |t| t[0].max_axis(a));
        gradcheck("min_axis", &x, |t| t[0].min_axis(a));
        gradcheck("max_keepdim", &x, |t| t[0].max_keepdim(a));
        gradcheck("min_keepdim", &x, |t| t[0].min_keepdim(a));
        gradcheck("softmax", &x, |t| t[0].softmax(a));
        gradcheck("log_softmax", &x, |t| t[0].log_softmax(a));
    }

    fn matmul_rule_matches_finite_differences<D>((ad, bd) in matmul_operands(), seed in any::<u64>(), va in variant(), vb in variant()) {
        let x = [tensor_with::<D, f64>(&data(ad.iter().product(), seed), &ad, va), tensor_with::<D, f64>(&data(bd.iter().product(), !seed), &bd, vb)];
        gradcheck("matmul", &x, |t| t[0].matmul(&t[1]));
    }

    fn view_rules_match_finite_differences<D>(
        (dims, x) in inputs(3, 4, Values::AwayFromZero), v in variant(), seed in 0..6usize, negative in any::<bool>(),
    ) {
        let x = [tensor_with::<D, f64>(&x, &dims, v)];
        let a = axis_of(&dims, seed, negative);
        let rank = dims.len();
        let reversed: Vec<usize> = (0..rank).rev().collect();
        gradcheck("reshape", &x, |t| t[0].reshape([t[0].elem_count()]));
        gradcheck("permute", &x, |t| t[0].permute(&reversed));
        gradgradcheck("permute", &x, |t| t[0].permute(&reversed).square());
        gradcheck("transpose", &x, |t| t[0].transpose(0, -1));
        gradcheck("contiguous", &x, |t| t[0].transpose(0, -1).contiguous());
        gradcheck("unsqueeze", &x, |t| t[0].unsqueeze(-1));
        gradcheck("squeeze", &x, |t| t[0].unsqueeze(0).squeeze(0));
        gradcheck("squeeze_all", &x, |t| t[0].squeeze_all());
        gradcheck("flatten", &x, |t| t[0].flatten(0, -1));
        gradcheck("broadcast_to", &x, |t| {
            let mut shape = vec![2];
            shape.extend(t[0].dims());
            t[0].broadcast_to(shape)
        });
        if rank > 0 {
            let size = dims[a.rem_euclid(rank as isize) as usize];
            let (start, len) = (seed % size, size - seed % size);
            gradcheck("narrow", &x, |t| t[0].narrow(a, start, len));
            gradcheck("select", &x, |t| t[0].select(a, start));
            gradgradcheck("select", &x, |t| t[0].select(a, start).square());
        }
        if rank <= 2 {
            gradcheck("t", &x, |t| t[0].t());
        }
    }

    fn index_rules_match_finite_differences<D>(
        (dims, x) in inputs(3, 4, Values::AwayFromZero).prop_filter("rank 1+", |(d, _)| !d.is_empty()),
        v in variant(), seed in any::<u64>(),
    ) {
        let x = [tensor_with::<D, f64>(&x, &dims, v)];
        let a = (seed % dims.len() as u64) as usize;
        let size = dims[a];
        // Indices with repeats, so that gradients add up.
        let picks: Vec<i64> = (0..size + 2).map(|i| ((seed >> (i % 48)) as usize % size) as i64).collect();
        let indices = Tensor::<D, i64>::from_vec(picks.clone(), [picks.len()]);
        gradcheck("index_select", &x, |t| t[0].index_select(a as isize, &indices));
        let index_dims = dims.clone();
        let index_data: Vec<i64> = (0..x[0].elem_count()).map(|i| ((seed as usize).wrapping_add(i * 5) % size) as i64).collect();
        let index = Tensor::<D, i64>::from_vec(index_data, index_dims.as_slice());
        gradcheck("gather", &x, |t| t[0].gather(a as isize, &index));
        let base = T::<D>::from_vec(data(dims.iter().product(), seed), dims.as_slice());
        let both = [x[0].clone(), base];
        gradcheck("scatter_add", &both, |t| t[1].scatter_add(a as isize, &index, &t[0]));
        let mut src_dims = dims.clone();
        src_dims[a] = picks.len();
        let src = T::<D>::from_vec(data(src_dims.iter().product(), !seed), src_dims.as_slice());
        let pair = [x[0].clone(), src];
        gradcheck("index_add", &pair, |t| t[0].index_add(a as isize, &indices, &t[1]));
        let other = T::<D>::from_vec(data(dims.iter().product(), seed ^ 7), dims.as_slice());
        let three = [x[0].clone(), other, x[0].narrow(a as isize, 0, 1)];
        gradcheck("cat", &three, |t| Tensor::cat(&[&t[0], &t[1], &t[2]], a as isize));
        gradcheck("stack", &three[..2], |t| Tensor::stack(&[&t[0], &t[1]], a as isize));
        // Second derivatives (`create_graph`), squared: the ops are linear.
        gradgradcheck("gather", &x, |t| t[0].gather(a as isize, &index).square());
        gradgradcheck("scatter_add", &both, |t| t[1].scatter_add(a as isize, &index, &t[0]).square());
        gradgradcheck("index_add", &pair, |t| t[0].index_add(a as isize, &indices, &t[1]).square());
        gradgradcheck("stack", &three[..2], |t| Tensor::stack(&[&t[0], &t[1]], a as isize).square());
    }

    fn a_small_network_matches_finite_differences<D>(seed in any::<u64>(), batch in 1..4usize) {
        // Linear -> ReLU -> Linear -> log_softmax -> pick the labels: the
        // cross-entropy of a two-layer perceptron, built from core ops.
        let (inputs, hidden, classes) = (3, 4, 3);
        let params = [
            T::<D>::from_vec(data(inputs * hidden, seed), [inputs, hidden]),
            T::<D>::from_vec(data(hidden, seed ^ 1), [hidden]),
            T::<D>::from_vec(data(hidden * classes, seed ^ 2), [hidden, classes]),
            T::<D>::from_vec(data(classes, seed ^ 3), [classes]),
        ];
        let x = T::<D>::from_vec(data(batch * inputs, seed ^ 4), [batch, inputs]);
        let labels = Tensor::<D, i64>::from_vec((0..batch as i64).map(|i| i % classes as i64).collect(), [batch, 1]);
        gradcheck("mlp", &params, |p| {
            let h = (x.matmul(&p[0]) + &p[1]).tanh();
            let logits = h.matmul(&p[2]) + &p[3];
            -logits.log_softmax(-1).gather(1, &labels).mean()
        });
    }
}

// ---- Graph behaviour ----

fn from<D: Device>(values: &[f64]) -> T<D> {
    T::<D>::from_slice(values, [values.len()])
}

fn grads_accumulate_over_uses<D: Device>() {
    // y = x * x + x uses x three times: dy/dx = 2x + 1.
    let x = from::<D>(&[1.0, -2.0, 0.5]).requires_grad();
    let grads = (&x * &x + &x).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![3.0, -3.0, 2.0]);
    // Running backward again on the same graph gives the same gradients.
    let y = (&x * &x).sum();
    assert_eq!(y.backward().get(&x).unwrap().to_vec(), y.backward().get(&x).unwrap().to_vec());
}

fn no_grad_and_detach_cut_the_graph<D: Device>() {
    let x = from::<D>(&[2.0, 3.0]).requires_grad();
    assert!(x.tracks_grad() && x.is_leaf());
    let y = no_grad(|| x.exp());
    assert!(!y.tracks_grad());
    assert!(devtensor::is_grad_enabled(), "no_grad restores the setting");
    // x * detach(x): the detached factor is a constant.
    let grads = (&x * &x.detach()).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![2.0, 3.0]);
    // A data tensor mixes with a parameter and gets no gradient.
    let data = from::<D>(&[10.0, 20.0]);
    let grads = (&x * &data).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![10.0, 20.0]);
    assert!(grads.get(&data).is_none());
    assert_eq!(grads.len(), 1);
    assert_eq!((&x * &data).grad_fn(), Some("mul"));
    // Integer results of tracked tensors track nothing.
    assert!(!x.gt_scalar(2.5).tracks_grad());
    assert!(!x.argmax(0).tracks_grad());
    assert!(!x.to_dtype::<i64>().tracks_grad());
}

fn backward_errors_name_the_problem<D: Device>() {
    let x = from::<D>(&[1.0, 2.0]).requires_grad();
    let err = no_grad(|| x.sum()).try_backward().unwrap_err();
    assert!(matches!(err, Error::Argument { op: "backward", .. }), "{err}");
    assert!(err.to_string().contains("tracks no gradient"), "{err}");
    let err = (&x * 2.0).try_backward().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "backward on {}: shape [2]: a gradient can be created implicitly only for a one-element tensor; \
             pass the result's gradient to `backward_with`",
            D::name()
        )
    );
    let err = (&x * 2.0).try_backward_with(&from::<D>(&[1.0])).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "backward", .. }), "{err}");
    let grads = (&x * 2.0).backward_with(&from::<D>(&[1.0, -1.0]));
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![2.0, -2.0]);
}

fn in_place_updates_follow_pytorch<D: Device>() {
    let mut w = from::<D>(&[1.0, 2.0]).requires_grad();
    // Writing a leaf in place while recording is refused, as in PyTorch.
    let err = w.try_add_assign(&from::<D>(&[1.0, 1.0])).unwrap_err();
    assert!(err.to_string().contains("update it inside `no_grad`"), "{err}");
    assert_eq!(w.to_vec(), vec![1.0, 2.0]);
    // Under no_grad the update lands and w stays the same leaf.
    let grads = (&w * &w).sum().backward();
    let g = grads.get(&w).unwrap().clone();
    no_grad(|| w -= &(&g * 0.25));
    assert_eq!(w.to_vec(), vec![0.5, 1.0]);
    assert!(w.is_leaf() && w.tracks_grad());
    assert_eq!((&w * 3.0).sum().backward().get(&w).unwrap().to_vec(), vec![3.0, 3.0]);
    // A computed tensor updated in place is recorded: y = 2w; y += w.
    let mut y = &w * 2.0;
    y += &w;
    assert_eq!(y.sum().backward().get(&w).unwrap().to_vec(), vec![3.0, 3.0]);
    // A data tensor updated in place with a tracked one starts tracking.
    let mut d = from::<D>(&[1.0, 1.0]);
    d *= &w;
    assert_eq!(d.sum().backward().get(&w).unwrap().to_vec(), vec![1.0, 1.0]);
}

fn extreme_values_share_gradients_like_pytorch<D: Device>() {
    // max over everything shares between ties; along an axis the first wins.
    let x = from::<D>(&[1.0, 3.0, 3.0, 2.0]).requires_grad();
    assert_eq!(x.max().backward().get(&x).unwrap().to_vec(), vec![0.0, 0.5, 0.5, 0.0]);
    assert_eq!(x.max_axis(0).backward().get(&x).unwrap().to_vec(), vec![0.0, 1.0, 0.0, 0.0]);
    let m = x.reshape([2, 2]).min_axis(1).sum();
    assert_eq!(m.backward().get(&x).unwrap().to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    // maximum splits a tie in half between its operands.
    let y = from::<D>(&[3.0, 0.0, 3.0, 5.0]).requires_grad();
    let grads = x.maximum(&y).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![0.0, 1.0, 0.5, 0.0]);
    assert_eq!(grads.get(&y).unwrap().to_vec(), vec![1.0, 0.0, 0.5, 1.0]);
    // relu passes nothing at 0, abs has gradient 0 at 0 (PyTorch's choices).
    let z = from::<D>(&[-1.0, 0.0, 2.0]).requires_grad();
    assert_eq!(z.relu().sum().backward().get(&z).unwrap().to_vec(), vec![0.0, 0.0, 1.0]);
    assert_eq!(z.abs().sum().backward().get(&z).unwrap().to_vec(), vec![-1.0, 0.0, 1.0]);
}

fn gradients_cross_devices_back_to_the_leaf<D: Device>() {
    // A leaf on D, a computation on the CPU, a loss back on D: the gradient
    // lands on D, where the leaf lives.
    let x = from::<D>(&[0.0, 1.0, 2.0]).requires_grad();
    let on_cpu = x.to::<Cpu>().exp();
    let loss = on_cpu.to::<D>().sum();
    let grads = loss.backward();
    let g: &Tensor<D, f64> = grads.get(&x).unwrap();
    assert_close(&g.to_vec(), &[1.0, 1f64.exp(), 2f64.exp()], 1e-12, 1e-12);
    // The same through an asynchronous transfer.
    let grads = x.to_async::<Cpu>().wait().square().sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![0.0, 2.0, 4.0]);
    // And through an f32 detour: the gradient comes back as f64.
    let grads = (x.to_dtype::<f32>() * 3.0).to_dtype::<f64>().sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![3.0; 3]);
}

fn gradient_descent_fits_a_line<D: Device>() {
    // y = 3x - 2 recovered by plain gradient descent on the mean squared error.
    let xs: Vec<f64> = (0..16).map(|i| i as f64 / 8.0 - 1.0).collect();
    let x = T::<D>::from_vec(xs.clone(), [16, 1]);
    let y = T::<D>::from_vec(xs.iter().map(|v| 3.0 * v - 2.0).collect(), [16, 1]);
    let mut w = T::<D>::zeros([1, 1]).requires_grad();
    let mut b = T::<D>::zeros([1]).requires_grad();
    for _ in 0..300 {
        let loss = (x.matmul(&w) + &b - &y).square().mean();
        let grads = loss.backward();
        let (gw, gb) = (grads.get(&w).unwrap(), grads.get(&b).unwrap());
        no_grad(|| {
            w -= &(gw * 0.5);
            b -= &(gb * 0.5);
        });
    }
    assert_close(&w.to_vec(), &[3.0], 1e-6, 0.0);
    assert_close(&b.to_vec(), &[-2.0], 1e-6, 0.0);
}

/// Tensor hooks as PyTorch's `register_hook` behaves: called once with
/// the complete gradient (a tensor used twice sums first), before it flows
/// on; a returned gradient replaces it; hooks chain in order; `remove`
/// takes one off; a leaf's hook changes what is stored; `grad` and
/// `create_graph` see them too.
fn tensor_hooks_see_and_replace_gradients_like_pytorch<D: Device>() {
    use std::sync::{Arc, Mutex};
    let x = from::<D>(&[1.0, -2.0, 0.5]).requires_grad();
    let h = &x * 2.0;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let watch = h.register_hook(move |g| {
        log.lock().unwrap().push(g.to_vec());
        None
    });
    // y = h·h + h: dy/dh = 2h + 1 = [5, -7, 3], seen once, summed.
    let y = (&h * &h + &h).sum();
    let grads = y.backward();
    assert_eq!(*seen.lock().unwrap(), [vec![5.0, -7.0, 3.0]]);
    assert_eq!(grads.get(&x).unwrap().to_vec(), [10.0, -14.0, 6.0]);
    // Chained: the second hook gets the first one's gradient.
    let double = h.register_hook(|g| Some(g * 2.0));
    let plus_one = h.register_hook(|g| Some(g + 1.0));
    assert_eq!(y.backward().get(&x).unwrap().to_vec(), [22.0, -26.0, 14.0]);
    double.remove();
    assert_eq!(y.backward().get(&x).unwrap().to_vec(), [12.0, -12.0, 8.0]);
    plus_one.remove();
    watch.remove();
    assert_eq!(y.backward().get(&x).unwrap().to_vec(), [10.0, -14.0, 6.0]);
    assert_eq!(seen.lock().unwrap().len(), 3, "a removed hook is not called");
    // A leaf's hook changes the stored gradient, in `grad` too.
    let clip = x.register_hook(|g| Some(g.clamp(-8.0, 8.0)));
    assert_eq!(y.backward().get(&x).unwrap().to_vec(), [8.0, -8.0, 6.0]);
    let [dx] = devtensor::autograd::grad(&[&y], [&x], devtensor::autograd::GradOptions::new());
    assert_eq!(dx.to_vec(), [8.0, -8.0, 6.0]);
    clip.remove();
    // Recorded (`create_graph`), a hook's gradient is differentiated too,
    // and the hook fires again when the second walk reaches `h`: dx =
    // 2·3·(2h + 1), whose gradient 3·2·2·2 = 24 flows back through `h`
    // and its hook once more, 72 (PyTorch 2.15 gives the same numbers).
    let triple = h.register_hook(|g| Some(g * 3.0));
    let options = devtensor::autograd::GradOptions::new().create_graph(true);
    let [dx] = devtensor::autograd::grad(&[&y], [&x], options);
    assert_eq!(dx.to_vec(), [30.0, -42.0, 18.0]);
    let second = dx.sum().backward();
    assert_eq!(second.get(&x).unwrap().to_vec(), [72.0; 3]);
    triple.remove();
    // A gradient of the wrong shape, and a tensor that tracks nothing.
    let _wrong = h.register_hook(|g| Some(g.sum()));
    let err = y.try_backward().unwrap_err();
    assert!(matches!(err, Error::Shape { op: "register_hook", .. }), "{err}");
    let err = x.detach().try_register_hook(|_| None).unwrap_err();
    assert!(err.to_string().contains("does not track gradients"), "{err}");
}

/// Module hooks as PyTorch's behave (numbers from PyTorch 2.15, the script
/// in the comments): a forward-pre hook that doubles the input, a forward
/// hook that adds 1 to the output, a backward-pre hook that triples the
/// output's gradient and a full backward hook that halves the input's;
/// the hook gets `None` for an input that needs no gradient; hooks fire
/// inside a `Sequential`, once per call with that call's gradients; a
/// clone keeps its own copy; moving a hooked layer fails by name.
fn module_hooks_see_and_replace_like_pytorch<D: Device>() {
    use devtensor::nn::{Hooks, Linear, Module, Sequential, Tanh};
    use std::sync::{Arc, Mutex};
    // lin = nn.Linear(3, 2) with these weights, in float64.
    let weight = T::<D>::from_vec(vec![1.0, -1.0, 0.5, 2.0, 0.0, -0.5], [2, 3]);
    let lin = Linear::from_weights(weight, Some(from::<D>(&[0.25, -0.25])));
    let x = T::<D>::from_vec(vec![1.0, 2.0, -1.0, 0.5, -0.5, 2.0], [2, 3]).requires_grad();
    type Seen = Arc<Mutex<Vec<(Option<Vec<f64>>, Vec<f64>)>>>;
    let seen: Seen = Arc::default();
    let double = lin.register_forward_pre_hook(|x| Some(x * 2.0));
    let plus_one = lin.register_forward_hook(|_, y| Some(y + 1.0));
    let triple = lin.register_full_backward_pre_hook(|g| Some(g * 3.0));
    let log = seen.clone();
    let _halve = lin.register_full_backward_hook(move |grad_input, grad_output| {
        log.lock().unwrap().push((grad_input.map(|g| g.to_vec()), grad_output.to_vec()));
        grad_input.map(|g| g * 0.5)
    });
    let y = lin.forward(&x);
    assert_eq!(y.to_vec(), [-1.75, 5.75, 5.25, 0.75]);
    let grads = (&y * &y).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), [58.5, 10.5, -22.5, 40.5, -31.5, 13.5]);
    assert_eq!(grads.get(&lin.weight).unwrap().to_vec(), [10.5, -73.5, 147.0, 73.5, 133.5, -51.0]);
    assert_eq!(grads.get(lin.bias.as_ref().unwrap()).unwrap().to_vec(), [21.0, 39.0]);
    // The module's input is the doubled one: its gradient is 58.5, halved
    // by the hook, doubled again on the way to `x`.
    let first = seen.lock().unwrap().remove(0);
    assert_eq!(first, (Some(vec![58.5, 10.5, -22.5, 40.5, -31.5, 13.5]), vec![-10.5, 34.5, 31.5, 4.5]));
    // An input that needs no gradient: `None`, the output's gradient as before.
    let y = lin.forward(&x.detach());
    let grads = (&y * &y).sum().backward();
    assert_eq!(grads.get(&lin.weight).unwrap().to_vec(), [10.5, -73.5, 147.0, 73.5, 133.5, -51.0]);
    assert_eq!(seen.lock().unwrap().remove(0), (None, vec![-10.5, 34.5, 31.5, 4.5]));
    // A clone copies the hooks; removing them from `lin` leaves the clone's.
    let copy = lin.clone();
    for handle in [double, plus_one, triple] {
        handle.remove();
    }
    assert_eq!(copy.forward(&x.detach()).to_vec(), [-1.75, 5.75, 5.25, 0.75]);
    assert_eq!(lin.forward(&x.detach()).to_vec(), [-1.25, 2.25, 2.25, -0.25]);
    assert_eq!(seen.lock().unwrap().len(), 0, "no backward, no backward hook");
    // Moved with hooks: an error that says what to do (to its own device, it keeps them).
    if let Err(err) = copy.try_to::<Cpu>() {
        assert!(err.to_string().contains("the module has 4 hook(s)"), "{err}");
    } else {
        assert_eq!(std::any::type_name::<D>(), std::any::type_name::<Cpu>());
    }
    // Used twice in a `Sequential` (a clone shares the parameters and
    // copies the hooks, as one module used twice in PyTorch): the hook
    // fires once per call, with that call's gradients, the second call's first.
    let weight2 = T::<D>::from_vec(vec![1.0, 0.5, -1.0, 1.0, 0.0, 2.0], [3, 2]);
    let lin2 = Linear::from_weights(weight2, Some(T::<D>::zeros([3])));
    let seq = Sequential::new((lin.clone(), Tanh, lin2, Tanh, lin));
    let z = seq.forward(&x);
    let expected = [-0.5636414482855915, -1.4195364859697017, 1.5574435391743668, 1.3649766761052085];
    assert_close(&z.to_vec(), &expected, 1e-12, 1e-12);
    let grads = z.powf(3.0).sum().backward();
    let calls = std::mem::take(&mut *seen.lock().unwrap());
    let pytorch: [([f64; 6], [f64; 4]); 2] = [
        (
            [
                13.043578056671691,
                -0.9530750466764373,
                -2.546088229160595,
                18.45585909101527,
                -7.276891133147933,
                0.8437035771071315,
            ],
            [0.9530750466764373, 6.045251504997627, 7.276891133147933, 5.58948397893367],
        ),
        (
            [
                1.8535524358914197,
                -1.6248382719157644,
                0.7552405949639683,
                4.002543689354912,
                -0.25434931932119204,
                -0.8098739328478339,
            ],
            [1.6248382719157644, 0.11435708198782768, 0.25434931932119204, 1.87409718501686],
        ),
    ];
    assert_eq!(calls.len(), 2);
    for ((grad_input, grad_output), (want_input, want_output)) in calls.iter().zip(&pytorch) {
        assert_close(grad_input.as_ref().unwrap(), want_input, 1e-12, 1e-12);
        assert_close(grad_output, want_output, 1e-12, 1e-12);
    }
    let dx = [
        0.9267762179457099,
        -0.8124191359578822,
        0.37762029748198417,
        2.001271844677456,
        -0.12717465966059602,
        -0.40493696642391697,
    ];
    assert_close(&grads.get(&x).unwrap().to_vec(), &dx, 1e-12, 1e-12);
}

/// `Hooked` gives hooks to any module, a `Sequential` block and an
/// activation here, with the block's layer's own hooks running inside the
/// block's, in PyTorch's order; the numbers are PyTorch 2.15's for the
/// same hooks on `nn.Sequential(lin, nn.Tanh())` and `nn.Tanh()`.
fn hooked_modules_run_hooks_like_pytorch<D: Device>() {
    use devtensor::nn::{Hooked, Hooks, Linear, Module, Sequential, Tanh};
    use std::sync::{Arc, Mutex};
    let weight = T::<D>::from_vec(vec![1.0, -1.0, 0.5, 2.0, 0.0, -0.5], [2, 3]);
    let lin = Linear::from_weights(weight, Some(from::<D>(&[0.25, -0.25])));
    let block: Hooked<_, D, f64> = Hooked::new(Sequential::new((lin, Tanh)));
    let act: Hooked<Tanh, D, f64> = Hooked::new(Tanh);
    let order: Arc<Mutex<Vec<&str>>> = Arc::default();
    let log = |name: &'static str| {
        let order = order.clone();
        move || order.lock().unwrap().push(name)
    };
    let (inner_pre, inner, outer_pre, outer) = (log("inner pre"), log("inner"), log("outer pre"), log("outer"));
    let _h1 = block.0.0.register_forward_pre_hook(move |_| {
        inner_pre();
        None
    });
    let _h2 = block.0.0.register_forward_hook(move |_, y| {
        inner();
        Some(y + 1.0)
    });
    let _h3 = block.register_forward_pre_hook(move |x| {
        outer_pre();
        Some(x * 2.0)
    });
    let _h4 = block.register_forward_hook(move |_, y| {
        outer();
        Some(y * 3.0)
    });
    let seen: Arc<Mutex<Vec<(Vec<f64>, Vec<f64>)>>> = Arc::default();
    let keep = seen.clone();
    let _h5 = block.register_full_backward_hook(move |grad_input, grad_output| {
        let grad_input = grad_input.unwrap();
        keep.lock().unwrap().push((grad_input.to_vec(), grad_output.to_vec()));
        Some(grad_input * 0.5)
    });
    let _h6 = act.register_full_backward_pre_hook(|g| Some(g * 10.0));
    let x = T::<D>::from_vec(vec![1.0, 2.0, -1.0, 0.5, -0.5, 2.0], [2, 3]).requires_grad();
    let y = act.forward(&block.forward(&x));
    assert_eq!(*order.lock().unwrap(), ["outer pre", "inner pre", "inner", "outer"]);
    assert_close(
        &y.to_vec(),
        &[-0.9929774123888793, 0.9950541539932571, 0.995053123409821, 0.9567013424298754],
        1e-12,
        1e-12,
    );
    let grads = (&y * &y).sum().backward();
    let grad_input = [
        -0.09485496242862515,
        0.09490270303078535,
        -0.047463286665932726,
        5.802756934717581,
        -6.48973662418971e-05,
        -1.450640560654714,
    ];
    let grad_output = [-0.2779514268615686, 0.19636857635199986, 0.19640918948576847, 1.6210833816926715];
    let calls = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(calls.len(), 1);
    assert_close(&calls[0].0, &grad_input, 1e-12, 1e-12);
    assert_close(&calls[0].1, &grad_output, 1e-12, 1e-12);
    // Halved by the hook, doubled by the pre-hook's `x * 2` on the way to `x`.
    assert_close(&grads.get(&x).unwrap().to_vec(), &grad_input, 1e-12, 1e-12);
    let dw = [
        -0.1897405086953288,
        -0.3796757094893833,
        0.1900649955265383,
        2.90139375927783,
        -2.9012505374713493,
        11.60533633410052,
    ];
    assert_close(&grads.get(&block.0.0.weight).unwrap().to_vec(), &dw, 1e-12, 1e-12);
    // Transparent to the state dict: the names are the block's own.
    let names: Vec<String> = block.parameters().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["0.weight", "0.bias"]);
}

device_tests! {
    tensor_hooks_see_and_replace_gradients_like_pytorch => tensor_hooks_see_and_replace_gradients_like_pytorch,
    module_hooks_see_and_replace_like_pytorch => module_hooks_see_and_replace_like_pytorch,
    hooked_modules_run_hooks_like_pytorch => hooked_modules_run_hooks_like_pytorch,
    grads_accumulate_over_uses => grads_accumulate_over_uses,
    no_grad_and_detach_cut_the_graph => no_grad_and_detach_cut_the_graph,
    backward_errors_name_the_problem => backward_errors_name_the_problem,
    in_place_updates_follow_pytorch => in_place_updates_follow_pytorch,
    extreme_values_share_gradients_like_pytorch => extreme_values_share_gradients_like_pytorch,
    gradients_cross_devices_back_to_the_leaf => gradients_cross_devices_back_to_the_leaf,
    gradient_descent_fits_a_line => gradient_descent_fits_a_line,
}

#[test]
fn gradients_of_a_move_between_gpus_land_on_the_leafs_gpu() {
    use devtensor::Cuda;
    if !(cuda_ready::<0>() && cuda_ready::<1>()) {
        return;
    }
    // A leaf on Cuda<0>, a computation on Cuda<1>, the loss there: the
    // gradient comes back to Cuda<0>. Used with a tensor of Cuda<0>, a
    // gradient left on the other GPU would fault on the emulated driver
    // (its pointer belongs to device 1, the kernel runs on device 0).
    let x = T::<Cuda<0>>::from_vec(vec![0.0, 1.0, 2.0], [3]).requires_grad();
    let loss = (x.to::<Cuda<1>>().exp() * 2.0).sum();
    let grads = loss.backward();
    let g = grads.get(&x).unwrap();
    let expected: Vec<f64> = [0.0f64, 1.0, 2.0].iter().map(|v| 2.0 * v.exp() + v).collect();
    assert_close(&(g + &x.detach()).to_vec(), &expected, 1e-12, 1e-12);
    // And back: a leaf on Cuda<1> through Cuda<0> and the CPU.
    let y = T::<Cuda<1>>::from_vec(vec![1.0, -1.0], [2]).requires_grad();
    let grads = y.to::<Cuda<0>>().to::<Cpu>().square().sum().backward();
    let g = grads.get(&y).unwrap();
    assert_eq!((g * &y.detach()).to_vec(), vec![2.0, 2.0]);
    // By id: the gradient is one of Cuda<1>, not of the other GPU.
    let id = y.leaf_id().unwrap();
    assert_eq!(grads.get_by_id_as::<Cuda<1>, f64>(id).unwrap().to_vec(), g.to_vec());
    assert!(grads.get_by_id_as::<Cuda<0>, f64>(id).is_none());
    assert!(grads.get_by_id_as::<Cpu, f64>(id).is_none());
}

#[test]
fn a_long_chain_runs_backward_and_drops_without_recursion() {
    // 10^5 recorded ops: the walk and the drop of the graph are loops, so
    // neither overflows the test thread's stack.
    let n = sized(100_000, 500);
    let x = T::<Cpu>::scalar(0.0).requires_grad();
    let mut y = x.clone();
    for _ in 0..n {
        y = &y + 1.0;
    }
    assert_eq!(y.item(), n as f64);
    assert_eq!(y.backward().get(&x).unwrap().item(), 1.0);
    drop(y);
}

#[test]
fn tracked_tensors_cross_threads() {
    let w = T::<Cpu>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
    let y = std::thread::scope(|s| s.spawn(|| (&w * 4.0).sum()).join().unwrap());
    assert_eq!(y.backward().get(&w).unwrap().to_vec(), vec![4.0, 4.0]);
}
