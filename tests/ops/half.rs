//! The half-precision element types, `bf16` and `f16`, on every device:
//! every float operation checked against the same operation in `f32` on the
//! same inputs (half values, which `f32` holds exactly) on the same device,
//! on random shapes.
//!
//! The half kernels compute in `f32` and round once, as PyTorch's do (on
//! CUDA: element-wise kernels in `float`, the summing families on `f32`
//! copies), so a kernel's half result must be its `f32` result rounded to
//! the half type, bit for bit: [`assert_rounded`]. That `f32` result is itself checked
//! against plain loops by the other suites, so this is a check against an
//! independent reference once removed. What is computed as several kernels
//! in a row (gradients, a loss, a model's step) rounds between them, and is
//! held to a few of the half type's roundoffs instead: [`assert_near`].
//!
//! Then the conversions (known values, rounding to nearest even, overflow,
//! NaN), printing, and checkpoints (safetensors' `BF16` and `F16`, bit for
//! bit, as PyTorch writes them).

use crate::common::*;
use devtensor::nn::{
    BatchNorm2d, Embedding, GroupNorm, LayerNorm, Linear, Reduction, RmsNorm, cross_entropy, mse_loss,
};
use devtensor::ops::attention::AttentionMask;
use devtensor::ops::conv::{AvgPoolOptions, Window1d, Window2d, Window3d};
use devtensor::ops::index::{PadMode, ScatterReduce};
use devtensor::ops::reduce::QuantileInterpolation;
use devtensor::{Checkpoint, Cpu, DType, Device, Element, FloatElement, SliceStep, Tensor, bf16, f16};
use proptest::prelude::*;

/// The half type's unit roundoff: half the distance from 1 to the next value.
fn unit_roundoff<H: FloatElement>() -> f64 {
    match H::DTYPE {
        DType::BF16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        other => panic!("{other:?} is not a half type"),
    }
}

/// Asserts that each of `got` is `want` rounded to `H` (NaN for NaN).
#[track_caller]
fn assert_rounded<D: Device, H: FloatElement>(op: &str, got: &Tensor<D, H>, want: &Tensor<D, f32>) {
    assert_eq!(got.dims(), want.dims(), "{op}: shapes differ");
    for (i, (g, w)) in got.to_vec().into_iter().zip(want.to_vec()).enumerate() {
        let rounded = <H as Element>::from_f32(w);
        let bits = |v: H| Element::to_f64(v).to_bits();
        let same = (Element::is_nan(g) && w.is_nan()) || bits(g) == bits(rounded);
        assert!(same, "{op} in {:?}, element {i}: got {g}, the f32 result {w} rounds to {rounded}", H::DTYPE);
    }
}

/// Asserts that each of `got` is within one rounding of `want` in `H`, up to
/// `f32` sums taken in another order: `|got - want| <= 2u (|want| + max|want| / 64)`
/// with `u` `H`'s unit roundoff. For products whose half kernel sums in its
/// own order (the `bf16` dot-product kernel).
#[track_caller]
fn assert_rounded_reordered<D: Device, H: FloatElement>(op: &str, got: &Tensor<D, H>, want: &Tensor<D, f32>) {
    assert_eq!(got.dims(), want.dims(), "{op}: shapes differ");
    let (got, want) = (as_f64(&got.to_vec()), as_f64(&want.to_vec()));
    let largest = want.iter().fold(0f64, |m, w| m.max(w.abs()));
    let u = unit_roundoff::<H>();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let bound = 2.0 * u * (w.abs() + largest / 64.0);
        assert!((g - w).abs() <= bound, "{op} in {:?}, element {i}: got {g}, the f32 result is {w}", H::DTYPE);
    }
}

/// Asserts `got` within `roundoffs` of `H`'s unit roundoff of `want`, in the
/// norm of the whole tensor (elements that cancel would make an
/// element-wise bound meaningless).
#[track_caller]
fn assert_near<D: Device, H: FloatElement>(op: &str, got: &Tensor<D, H>, want: &Tensor<D, f32>, roundoffs: f64) {
    assert_eq!(got.dims(), want.dims(), "{op}: shapes differ");
    let (got, want) = (as_f64(&got.to_vec()), as_f64(&want.to_vec()));
    let error = got.iter().zip(&want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    let norm = want.iter().map(|w| w * w).sum::<f64>().sqrt();
    let bound = roundoffs * unit_roundoff::<H>() * norm.max(1e-3);
    assert!(error <= bound, "{op} in {:?}: error {error:e} above {bound:e} (norm {norm:e})", H::DTYPE);
}

/// Asserts `got` within `roundoffs` of `H`'s unit roundoff of `want`, in the
/// norm of `sizes`: the sizes of the terms each element of `want` sums, for
/// results whose terms cancel (rounding a term moves its sum by a roundoff
/// of the term, not of the sum).
#[track_caller]
fn assert_near_sizes<D: Device, H: FloatElement>(
    op: &str,
    got: &Tensor<D, H>,
    want: &Tensor<D, f32>,
    sizes: &Tensor<D, f32>,
    roundoffs: f64,
) {
    assert_eq!(got.dims(), want.dims(), "{op}: shapes differ");
    assert_eq!(sizes.dims(), want.dims(), "{op}: the sizes' shape differs");
    let (got, want) = (as_f64(&got.to_vec()), as_f64(&want.to_vec()));
    let error = got.iter().zip(&want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    let size = as_f64(&sizes.to_vec()).iter().map(|s| s * s).sum::<f64>().sqrt();
    let bound = roundoffs * unit_roundoff::<H>() * size.max(1e-3);
    assert!(error <= bound, "{op} in {:?}: error {error:e} above {bound:e} (sizes' norm {size:e})", H::DTYPE);
}

/// `v` in `E`.
fn num<E: Element>(v: f64) -> E {
    E::from_f64(v)
}

/// `len` values in [-3, 3) from `seed`, with a few exact zeros and ones.
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 17 {
                0 => 0.0,
                1 => 1.0,
                _ => (state >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 3.0,
            }
        })
        .collect()
}

/// A half tensor of `dims` from `seed`, and its exact `f32` copy.
fn pair<D: Device, H: FloatElement>(dims: &[usize], seed: u64) -> (Tensor<D, H>, Tensor<D, f32>) {
    let count = dims.iter().product();
    let half = Tensor::<D, H>::from_vec(cast_all(&values(count, seed)), dims);
    let exact = half.to_dtype::<f32>();
    (half, exact)
}

/// Runs `$call` on random inputs of the given shapes in each half type and
/// on their exact `f32` copies, with `E` naming the element type inside it,
/// and compares the two results: `rounded` ([`assert_rounded`]) or
/// `near(roundoffs)` ([`assert_near`]). The tensors are on the device `D`
/// names where the macro is called.
macro_rules! check_half {
    ($op:expr, $seed:expr, [$($x:ident: $dims:expr),+] => $call:expr, $($assert:tt)+) => {{
        check_half!(@one bf16, $op, $seed, [$($x: $dims),+] => $call, $($assert)+);
        check_half!(@one f16, $op, $seed, [$($x: $dims),+] => $call, $($assert)+);
    }};
    (@one $H:ty, $op:expr, $seed:expr, [$($x:ident: $dims:expr),+] => $call:expr, $($assert:tt)+) => {{
        let mut seed: u64 = $seed;
        $(
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let $x = pair::<D, $H>(&$dims[..], seed);
        )+
        let want = {
            #[allow(dead_code)] // for calls that name it
            type E = f32;
            $(let $x = &$x.1;)+
            $call
        };
        let got = {
            #[allow(dead_code)]
            type E = $H;
            $(let $x = &$x.0;)+
            $call
        };
        check_half!(@check $op, &got, &want, [$($x),+], $($assert)+);
    }};
    (@check $op:expr, $got:expr, $want:expr, [$($x:ident),+], sized($sizes:expr, $roundoffs:expr)) => {{
        let sizes = {
            $(let $x = &$x.1;)+
            $sizes
        };
        assert_near_sizes($op, $got, $want, &sizes, $roundoffs)
    }};
    (@check $op:expr, $got:expr, $want:expr, [$($x:ident),+], $($assert:tt)+) => {
        check_half!(@check $op, $got, $want, $($assert)+)
    };
    (@check $op:expr, $got:expr, $want:expr, rounded) => {
        assert_rounded($op, $got, $want)
    };
    (@check $op:expr, $got:expr, $want:expr, reordered) => {
        assert_rounded_reordered($op, $got, $want)
    };
    (@check $op:expr, $got:expr, $want:expr, near($roundoffs:expr)) => {
        assert_near($op, $got, $want, $roundoffs)
    };
}

/// Attention under the mask kind `seed` picks: none, causal, the kept keys
/// `keep`, or the additive mask `add` (scale 0.3).
fn masked_attention<D: Device, E: FloatElement>(
    q: &Tensor<D, E>,
    k: &Tensor<D, E>,
    v: &Tensor<D, E>,
    seed: u64,
    keep: &Tensor<D, u8>,
    add: &Tensor<D, E>,
) -> Tensor<D, E> {
    match seed % 4 {
        0 => q.scaled_dot_product_attention(k, v, AttentionMask::None, None),
        1 => q.scaled_dot_product_attention(k, v, AttentionMask::Causal, None),
        2 => q.scaled_dot_product_attention(k, v, AttentionMask::Keep(keep), None),
        _ => q.scaled_dot_product_attention(k, v, AttentionMask::Add(add), Some(0.3)),
    }
}

/// The weights `masked_attention` takes under the mask kind `seed` picks,
/// in `f32`, and its scale.
fn masked_weights<D: Device>(
    q: &Tensor<D, f32>,
    k: &Tensor<D, f32>,
    seed: u64,
    keep: &Tensor<D, u8>,
    add: &Tensor<D, f32>,
) -> (Tensor<D, f32>, f64) {
    let width = q.dims()[q.rank() - 1];
    let scale = if seed % 4 == 3 { 0.3 } else { 1.0 / (width as f64).sqrt() };
    let scores = &q.matmul(&k.transpose(-2, -1)) * scale as f32;
    let [queries, keys] = [scores.dims()[scores.rank() - 2], scores.dims()[scores.rank() - 1]];
    let hidden = match seed % 4 {
        0 | 3 => Tensor::<D, u8>::zeros([queries, keys]),
        1 => Tensor::<D, u8>::ones([queries, keys]).triu(1),
        _ => keep.logical_not(),
    };
    let scores = if seed % 4 == 3 { &scores + add } else { scores.masked_fill(&hidden, f32::MIN) };
    // A query that sees no key has weights of 0 (see `AttentionMask`).
    let unseen = hidden.min_keepdim(-1);
    (scores.masked_fill(&unseen, 0.0).softmax(-1).masked_fill(&unseen, 0.0), scale)
}

/// The sizes of the terms that the gradients of `sum(attention(q, k, v)²)`
/// with respect to `q`, `k` and `v` sum (the input of
/// [`assert_near_sizes`]), from the attention weights `p` and the `scale`:
/// each product's terms bounded by the product of its factors' sizes, as
/// FlashAttention's backward forms them (`o = p v`, `do = 2 o`,
/// `dp = do vᵀ`, `ds = p (dp - rowsum(do o))`, `dq = scale ds k`,
/// `dk = scale dsᵀ q`, `dv = pᵀ do`).
fn attention_gradient_sizes<D: Device>(
    q: &Tensor<D, f32>,
    k: &Tensor<D, f32>,
    v: &Tensor<D, f32>,
    (p, scale): &(Tensor<D, f32>, f64),
) -> [Tensor<D, f32>; 3] {
    let output_grad = &p.matmul(&v.abs()) * 2.0;
    let weight_grad = output_grad.matmul(&v.abs().transpose(-2, -1));
    let row = (p * &weight_grad).sum_keepdim(-1);
    let score_grad = p * &(&weight_grad + &row);
    [
        &score_grad.matmul(&k.abs()) * *scale as f32,
        &score_grad.transpose(-2, -1).matmul(&q.abs()) * *scale as f32,
        p.transpose(-2, -1).matmul(&output_grad),
    ]
}

/// Head widths up to 64, half of them multiples of 8 (rows that the
/// tensor-core kernels load as 16-byte chunks).
fn head_width() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=64, (1usize..=8).prop_map(|w| 8 * w)]
}

fn dims(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..=max_dim, 1..=max_rank)
}

device_proptests! {
    cases = 12;

    /// Every unary op, on every layout the kernels see (a transposed view
    /// included).
    fn unary_ops_round_the_f32_result_once<D>(d in dims(3, 9), seed in any::<u64>()) {
        macro_rules! unary {
            ($($name:literal: |$t:ident| $call:expr;)*) => {$(
                check_half!($name, seed, [x: d] => { let $t = x; $call }, rounded);
                check_half!(concat!($name, " (transposed)"), seed, [x: d] => { let $t = &x.transpose(0, -1); $call }, rounded);
            )*};
        }
        unary! {
            "neg": |t| t.neg();
            "abs": |t| t.abs();
            "relu": |t| t.relu();
            "clamp": |t| t.clamp(num::<E>(-0.5), num::<E>(1.25));
            "clamp_min": |t| t.clamp_min(num::<E>(-0.5));
            "clamp_max": |t| t.clamp_max(num::<E>(1.25));
            "square": |t| t.square();
            "exp": |t| t.exp();
            "expm1": |t| t.expm1();
            "log": |t| t.log();
            "log1p": |t| t.log1p();
            "sqrt": |t| t.sqrt();
            "rsqrt": |t| t.rsqrt();
            "tanh": |t| t.tanh();
            "sigmoid": |t| t.sigmoid();
            "silu": |t| t.silu();
            "gelu": |t| t.gelu();
            "gelu_tanh": |t| t.gelu_tanh();
            "sin": |t| t.sin();
            "cos": |t| t.cos();
            "erf": |t| t.erf();
            "recip": |t| t.recip();
            "powf": |t| t.powf(num::<E>(1.5));
            "floor": |t| t.floor();
            "ceil": |t| t.ceil();
            "round": |t| t.round();
            "trunc": |t| t.trunc();
            "sign": |t| t.sign();
            "frac": |t| t.frac();
            "tan": |t| t.tan();
            "asin": |t| t.asin();
            "acos": |t| t.acos();
            "atan": |t| t.atan();
            "sinh": |t| t.sinh();
            "cosh": |t| t.cosh();
            "asinh": |t| t.asinh();
            "acosh": |t| t.acosh();
            "atanh": |t| t.atanh();
            "log2": |t| t.log2();
            "log10": |t| t.log10();
            "exp2": |t| t.exp2();
            "leaky_relu": |t| t.leaky_relu(num::<E>(0.25));
            "elu": |t| t.elu(num::<E>(1.5));
            "selu": |t| t.selu();
            "celu": |t| t.celu(num::<E>(0.5));
            "softplus": |t| t.softplus(num::<E>(2.0), num::<E>(3.0));
            "mish": |t| t.mish();
            "hardswish": |t| t.hardswish();
            "hardsigmoid": |t| t.hardsigmoid();
            "log_sigmoid": |t| t.log_sigmoid();
            "softsign": |t| t.softsign();
        }
    }

    /// Element-wise ops of two tensors, broadcast, and with a scalar.
    fn binary_ops_round_the_f32_result_once<D>((a, b) in broadcast_pair(3, 6), seed in any::<u64>()) {
        check_half!("add", seed, [x: a, y: b] => x + y, rounded);
        check_half!("sub", seed, [x: a, y: b] => x - y, rounded);
        check_half!("mul", seed, [x: a, y: b] => x * y, rounded);
        check_half!("div", seed, [x: a, y: b] => x / y, rounded);
        check_half!("div_floor", seed, [x: a, y: b] => x.div_floor(y), rounded);
        check_half!("div_trunc", seed, [x: a, y: b] => x.div_trunc(y), rounded);
        check_half!("maximum", seed, [x: a, y: b] => x.maximum(y), rounded);
        check_half!("minimum", seed, [x: a, y: b] => x.minimum(y), rounded);
        check_half!("pow", seed, [x: a, y: b] => x.abs().pow(y), rounded);
        check_half!("remainder", seed, [x: a, y: b] => x.remainder(y), rounded);
        check_half!("fmod", seed, [x: a, y: b] => x.fmod(y), rounded);
        check_half!("atan2", seed, [x: a, y: b] => x.atan2(y), rounded);
        check_half!("logaddexp", seed, [x: a, y: b] => x.logaddexp(y), rounded);
        check_half!("mul_scalar", seed, [x: a] => x * num::<E>(0.375), rounded);
        check_half!("rsub_scalar", seed, [x: a] => num::<E>(0.375) - x, rounded);
    }

    /// Sums, means and scans accumulate in `f32`: one rounding, however
    /// long the sum (a `bf16` accumulator would stop growing at 256 ones).
    fn reductions_accumulate_in_f32<D>(d in dims(3, 12), seed in any::<u64>(), axis in 0usize..3) {
        let axis = (axis % d.len()) as isize;
        check_half!("sum", seed, [x: d] => x.sum(), rounded);
        check_half!("sum_axis", seed, [x: d] => x.sum_axis(axis), rounded);
        check_half!("mean_axis", seed, [x: d] => x.mean_axis(axis), rounded);
        check_half!("max_axis", seed, [x: d] => x.max_axis(axis), rounded);
        check_half!("min_axis", seed, [x: d] => x.min_axis(axis), rounded);
        check_half!("cumsum", seed, [x: d] => x.cumsum(axis), rounded);
        check_half!("cumprod", seed, [x: d] => x.cumprod(axis), rounded);
        // Over several axes: one rounding of the f32 result too.
        let ends: &[isize] = if d.len() > 1 { &[-1, 0] } else { &[0] };
        check_half!("sum_axis (two axes)", seed, [x: d] => x.sum_axis(ends), rounded);
        check_half!("mean_keepdim (two axes)", seed, [x: d] => x.mean_keepdim(ends), rounded);
        check_half!("amax", seed, [x: d] => x.amax(ends), rounded);
        check_half!("logsumexp", seed, [x: d] => x.logsumexp(ends), rounded);
        check_half!("prod_axis", seed, [x: d] => x.prod_axis(axis), rounded);
        check_half!("softmax", seed, [x: d] => x.softmax(axis), rounded);
        check_half!("log_softmax", seed, [x: d] => x.log_softmax(axis), rounded);
        check_half!("softmax (transposed)", seed, [x: d] => x.transpose(0, -1).softmax(axis), rounded);
        // Variances and standard deviations in f32, rounded once.
        check_half!("var_axis", seed, [x: d] => x.var_axis(axis, 0), rounded);
        check_half!("std", seed, [x: d] => x.std(1), rounded);
        // Comparisons are exact in every type.
        let (h, f) = pair::<D, bf16>(&d, seed);
        prop_assert_eq!(h.argmax(axis).to_vec(), f.argmax(axis).to_vec());
    }

    /// Products with `f32` accumulation: batched, broadcast, transposed,
    /// and with a bias fused in (`Linear`). On a CPU with AVX512-BF16 the
    /// `bf16` kernel sums in its own order.
    fn products_accumulate_in_f32<D>(m in 1usize..20, k in 0usize..40, n in 1usize..80, batch in 1usize..4, seed in any::<u64>()) {
        check_half!("matmul", seed, [a: [m, k], b: [k, n]] => a.matmul(b), reordered);
        check_half!("matmul (batched, transposed)", seed, [a: [batch, m, k], b: [batch, n, k]] => a.matmul(&b.transpose(-1, -2)), reordered);
        check_half!("matmul (broadcast)", seed, [a: [batch, m, k], b: [k, n]] => a.matmul(b), reordered);
        check_half!("addmm", seed, [c: [n], a: [m, k], b: [k, n]] => c.addmm(a, b, 0.5, 2.0), reordered);
        check_half!("baddbmm", seed, [c: [m, n], a: [batch, m, k], b: [batch, k, n]] => c.baddbmm(a, b, 1.0, 1.0), reordered);
        check_half!("addbmm", seed, [c: [m, n], a: [batch, m, k], b: [batch, k, n]] => c.addbmm(a, b, -1.0, 1.0), reordered);
        check_half!("addmv", seed, [c: [m], a: [m, k], v: [k]] => c.addmv(a, v, 1.0, 1.0), reordered);
        check_half!("outer", seed, [a: [m], b: [n]] => a.outer(b), rounded);
        check_half!("dot", seed, [a: [k], b: [k]] => a.dot(b), reordered);
        check_half!("Linear", seed, [x: [m, k], w: [n, k], b: [n]] => {
            Linear::from_weights(w.clone(), Some(b.clone())).forward(x)
        }, reordered);
    }

    /// Convolutions: forward (direct kernel or unfolded product), and the
    /// input and weight gradients, which sum many products.
    fn convolutions_accumulate_in_f32<D>(c in 1usize..4, o in 1usize..5, hw in 3usize..9, pad in 0usize..2, seed in any::<u64>()) {
        let window = Window2d { padding: [pad, pad], ..Window2d::new([3, 3]) };
        // One rounding where the direct kernel applies (AVX2 or wider,
        // stride 1, rows of 8 or more); else the product rounds before the
        // bias is added.
        check_half!("conv2d", seed, [x: [2, c, hw, hw], w: [o, c, 3, 3], b: [o]] => x.conv2d(w, Some(b), window, 1), near(4.0));
        for (name, input) in [("conv2d input gradient", 0), ("conv2d weight gradient", 1)] {
            check_half!(name, seed, [x: [2, c, hw, hw], w: [o, c, 3, 3]] => {
                let (x, w) = (x.clone().requires_grad(), w.clone().requires_grad());
                let grads = x.conv2d(&w, None, window, 1).square().sum().backward();
                grads.get(if input == 0 { &x } else { &w }).unwrap().clone()
            }, near(16.0));
        }
        // Built on conv2d: the 3-D one over stacked depth taps, the
        // transposed 1-D one over a height of 1.
        let volume = Window3d { padding: [pad; 3], ..Default::default() };
        check_half!("conv3d", seed, [x: [1, c, 3, hw, hw], w: [o, c, 2, 3, 3], b: [o]] => x.conv3d(w, Some(b), volume, 1), near(4.0));
        let sequence = Window1d { stride: 2, padding: pad, ..Default::default() };
        check_half!("conv_transpose1d", seed, [x: [2, c, hw], w: [c, o, 3], b: [o]] => {
            x.conv_transpose1d(w, Some(b), sequence, 1, 1)
        }, near(4.0));
    }

    /// Attention: the fused kernel keeps its scores, running maxima and
    /// sums in `f32`; every mask kind; and its gradients. On CUDA the
    /// half types' forward runs on the tensor cores, which round the
    /// weights to the half type before the second product (as
    /// FlashAttention does), so it is held to a few roundoffs rather than
    /// one rounding.
    fn attention_accumulates_in_f32<D>(queries in 1usize..12, keys in 1usize..12, width in 1usize..10, seed in any::<u64>()) {
        let shape = |rows: usize| [2, 2, rows, width];
        check_half!("attention", seed, [q: shape(queries), k: shape(keys), v: shape(keys)] => {
            q.scaled_dot_product_attention(k, v, AttentionMask::None, None)
        }, near(4.0));
        check_half!("attention (causal)", seed, [q: shape(keys), k: shape(keys), v: shape(keys)] => {
            q.scaled_dot_product_attention(k, v, AttentionMask::Causal, None)
        }, near(4.0));
        check_half!("attention (additive mask)", seed, [q: shape(queries), k: shape(keys), v: shape(keys), m: [queries, keys]] => {
            q.scaled_dot_product_attention(k, v, AttentionMask::Add(m), Some(0.5))
        }, near(4.0));
        // Grouped-query: both query heads read the one key and value head.
        let shared = |rows: usize| [2, 1, rows, width];
        check_half!("attention (grouped-query)", seed, [q: shape(queries), k: shared(keys), v: shared(keys)] => {
            q.scaled_dot_product_attention_gqa(k, v, AttentionMask::Causal, None)
        }, near(4.0));
        for which in 0..3 {
            check_half!("attention gradients", seed, [q: shape(queries), k: shape(keys), v: shape(keys)] => {
                let [q, k, v] = [q, k, v].map(|t| t.clone().requires_grad());
                let grads = q.scaled_dot_product_attention(&k, &v, AttentionMask::None, None).square().sum().backward();
                grads.get([&q, &k, &v][which]).unwrap().clone()
            }, sized({
                let weights = (&q.matmul(&k.transpose(-2, -1)) * (1.0 / (width as f32).sqrt())).softmax(-1);
                attention_gradient_sizes(q, k, v, &(weights, 1.0 / (width as f64).sqrt()))[which].clone()
            }, 8.0));
        }
    }

    /// Attention past one tile of the tensor-core kernels (64 queries and
    /// 64 keys a tile, rows up to 64 wide): several query tiles, the online
    /// softmax across key tiles, values of another width than the keys, one
    /// mask kind per case, a partial last tile everywhere; and the three
    /// gradients, whose passes walk the tiles the other way too.
    fn attention_walks_tiles<D>(queries in 1usize..140, keys in 1usize..140, width in head_width(), value_width in head_width(), seed in any::<u64>()) {
        let keep = Tensor::<D, u8>::from_vec(
            (0..queries * keys).map(|i| u8::from(!(i as u64 * 7 + seed).is_multiple_of(5))).collect(),
            [queries, keys],
        );
        let [q, k, v, m] = [[1, queries, width], [1, keys, width], [1, keys, value_width], [1, queries, keys]];
        check_half!("attention over tiles", seed, [q: q, k: k, v: v, m: m] => {
            masked_attention(q, k, v, seed, &keep, m)
        }, near(4.0));
        for which in 0..3 {
            check_half!("attention gradients over tiles", seed, [q: q, k: k, v: v, m: m] => {
                let [q, k, v] = [q, k, v].map(|t| t.clone().requires_grad());
                let grads = masked_attention(&q, &k, &v, seed, &keep, m).square().sum().backward();
                grads.get([&q, &k, &v][which]).unwrap().clone()
            }, sized(attention_gradient_sizes(q, k, v, &masked_weights(q, k, seed, &keep, m))[which].clone(), 8.0));
        }
    }

    /// Indexing, joining, sorting and selecting move half values as they
    /// are; comparisons are exact; `scatter_add` and `index_add` round each
    /// addition, as the element type's own arithmetic does.
    fn indexing_and_comparisons_keep_half_values<D>(rows in 1usize..9, cols in 1usize..9, seed in any::<u64>()) {
        let index = |len: usize| -> Tensor<D, i64> {
            Tensor::from_vec((0..len).map(|i| ((i as u64 * 7 + seed) % rows as u64) as i64).collect(), [len])
        };
        let picks = index(2 * rows + 1);
        let grid = Tensor::<D, i64>::from_vec(
            (0..rows * cols).map(|i| ((i as u64 * 5 + seed) % rows as u64) as i64).collect(),
            [rows, cols],
        );
        check_half!("index_select", seed, [x: [rows, cols]] => x.index_select(0, &picks), rounded);
        check_half!("gather", seed, [x: [rows, cols]] => x.gather(0, &grid), rounded);
        check_half!("cat", seed, [x: [rows, cols], y: [rows, cols]] => Tensor::cat(&[x, &y.t().contiguous().t()], 1), rounded);
        check_half!("sort", seed, [x: [rows, cols]] => x.sort(1, true).0, rounded);
        check_half!("flip", seed, [x: [rows, cols]] => x.flip([0, 1]), rounded);
        check_half!("masked_select", seed, [x: [rows, cols]] => x.masked_select(&x.gt_scalar(num::<E>(0.0))), rounded);
        check_half!("roll", seed, [x: [rows, cols]] => x.roll([1, -2], [0, 1]), rounded);
        check_half!("repeat_interleave", seed, [x: [rows, cols]] => x.repeat_interleave(2, 1), rounded);
        check_half!("take_along_dim", seed, [x: [rows, cols]] => x.take_along_dim(&grid, 0), rounded);
        check_half!("unflatten", seed, [x: [rows, cols]] => x.unflatten(1, [1, -1]), rounded);
        check_half!("where_cond", seed, [x: [rows, cols], y: [cols]] => x.gt(y).where_cond(x, y), rounded);
        check_half!("lt_scalar as a mask", seed, [x: [rows, cols]] => x.lt_scalar(num::<E>(0.5)).to_dtype::<E>(), rounded);
        check_half!("full", seed, [x: [rows]] => Tensor::<D, E>::full([rows, 2], num::<E>(-1.75)) + x.unsqueeze(1), rounded);
        // Sums of magnitudes, which cannot cancel: a few roundings of the result.
        check_half!("scatter_add", seed, [x: [rows, cols], s: [rows, cols]] => x.abs().scatter_add(0, &grid, &s.abs()), near(8.0));
        check_half!("index_add", seed, [x: [rows, cols], s: [2 * rows + 1, cols]] => x.abs().index_add(0, &picks, &s.abs()), near(8.0));
        check_half!("i", seed, [x: [rows, cols]] => x.i((&picks, (..).step(2))), rounded);
        check_half!("median_axis", seed, [x: [rows, cols]] => x.median_axis(1).0, rounded);
        check_half!("quantile", seed, [x: [rows, cols]] => x.quantile([0.0, 0.5, 1.0], Some(0), false, QuantileInterpolation::Lower), rounded);
        check_half!("i (mask)", seed, [x: [rows, cols]] => x.i(&x.gt_scalar(num::<E>(0.0))), rounded);
        check_half!("index_put", seed, [x: [rows, cols], v: [cols]] => x.index_put(&x.lt_scalar(num::<E>(0.0)).any_axis(1), v, false), rounded);
        check_half!("scatter", seed, [x: [rows, cols], s: [rows, cols]] => x.scatter(0, &grid, s), rounded);
        check_half!("scatter_reduce amax", seed, [x: [rows, cols], s: [rows, cols]] => x.scatter_reduce(0, &grid, s, ScatterReduce::Amax, false), rounded);
        check_half!("scatter_reduce prod", seed, [x: [rows, cols], s: [rows, cols]] => x.scatter_reduce(0, &grid, s, ScatterReduce::Product, true), near(8.0));
        check_half!("scatter_reduce mean", seed, [x: [rows, cols], s: [rows, cols]] => x.abs().scatter_reduce(0, &grid, &s.abs(), ScatterReduce::Mean, true), near(8.0));
    }

    /// The rest of a model's layers: pooling, padding and repetition move
    /// or compare values (exact); average pooling, group, batch and RMS norm
    /// and the losses sum in `f32` and round once, or after a few kernels
    /// in a row.
    fn layers_and_losses_take_half_types<D>(c in 1usize..4, hw in 2usize..7, seed in any::<u64>()) {
        let window = Window2d::new([2, 2]);
        check_half!("max_pool2d", seed, [x: [2, c, hw, hw]] => x.max_pool2d(window), rounded);
        // Means of magnitudes, which cannot cancel: a rounding or two.
        check_half!("avg_pool2d", seed, [x: [2, c, hw, hw]] => x.abs().avg_pool2d(window), near(4.0));
        check_half!("adaptive_avg_pool2d", seed, [x: [2, c, hw, hw]] => x.abs().adaptive_avg_pool2d([1, 1]), near(4.0));
        let wide = Window2d { stride: [2, 2], padding: [1, 1], ..Window2d::new([3, 3]) };
        check_half!("max_pool2d (ceil_mode)", seed, [x: [2, c, hw, hw]] => x.max_pool2d_with(wide, true), rounded);
        check_half!("max_unpool2d", seed, [x: [2, c, hw, hw]] => {
            let (y, indices) = x.max_pool2d_with_indices(window, false);
            y.max_unpool2d(&indices, window, None)
        }, rounded);
        let options = AvgPoolOptions { ceil_mode: true, count_include_pad: false, divisor_override: None };
        check_half!("avg_pool2d (ceil_mode, count_include_pad=False)", seed, [x: [2, c, hw, hw]] => {
            x.abs().avg_pool2d_with(wide, options)
        }, near(4.0));
        check_half!("pad (reflect)", seed, [x: [2, c, hw, hw]] => x.pad(&[1, 1], PadMode::Reflect), rounded);
        check_half!("pad (constant)", seed, [x: [2, c, hw, hw]] => x.pad(&[1, 2], PadMode::Constant(num::<E>(0.5))), rounded);
        check_half!("repeat", seed, [x: [c, hw]] => x.repeat([2, 1]), rounded);
        check_half!("GroupNorm", seed, [x: [2, 2 * c, hw, hw], w: [2 * c], b: [2 * c]] => {
            GroupNorm::from_weights(2, w.clone(), b.clone()).forward(x)
        }, near(8.0));
        check_half!("BatchNorm2d (training)", seed, [x: [3, c, hw, hw], w: [c], b: [c], m: [c], v: [c]] => {
            BatchNorm2d::from_weights(w.clone(), b.clone(), m.clone(), v.abs() + num::<E>(1.0)).forward(x)
        }, near(8.0));
        // One eps for both: by default it is the element type's epsilon, as
        // in PyTorch, which is 2^-7 for bf16.
        check_half!("RmsNorm", seed, [x: [c, hw], w: [hw]] => RmsNorm::from_weights(w.clone()).eps(1e-6).forward(x), near(8.0));
        let ids = Tensor::<D, i64>::from_vec((0..2 * hw).map(|i| ((i as u64 + seed) % c as u64) as i64).collect(), [2, hw]);
        check_half!("Embedding", seed, [w: [c, hw]] => Embedding::from_weights(w.clone(), None).forward(&ids), rounded);
        // The recursion runs in f32 and rounds once.
        let labels = Tensor::<D, i64>::from_vec(vec![1, 2, 1, 0], [2, 2]);
        let ctc = devtensor::nn::CtcLoss { reduction: devtensor::nn::Reduction::None, ..Default::default() };
        check_half!("ctc_loss", seed, [x: [hw + 3, 2, 3]] => {
            devtensor::nn::ctc_loss(&x.log_softmax(-1), &labels, &[hw + 3, hw], &[2, 1], ctc)
        }, near(8.0));
        let labels = Tensor::<D, i64>::from_vec((0..hw).map(|i| ((i as u64 * 3 + seed) % c as u64) as i64).collect(), [hw]);
        check_half!("cross_entropy", seed, [x: [hw, c]] => cross_entropy(x, &labels), near(8.0));
        check_half!("mse_loss", seed, [x: [c, hw], y: [c, hw]] => mse_loss(x, y, Reduction::Mean), near(8.0));
    }

    /// `to_dtype` keeps the memory order of a tensor that fills its memory
    /// in another order of its axes (a permuted one), as PyTorch's
    /// `.to(dtype)` does, and writes any other layout (a narrowed one)
    /// row-major; either way each element is its own value converted, in
    /// logical order, against a plain loop.
    fn casts_keep_a_dense_tensors_memory_order<D>((dims, data) in shaped_data(4, 5), v in variant()) {
        let data: Vec<f32> = data.iter().map(|&v| v as f32).collect();
        let x = tensor_with::<D, f32>(&data, &dims, v);
        let keeps = !matches!(v, Variant::Narrowed) && !x.is_contiguous();
        macro_rules! check {
            ($T:ty) => {{
                let cast = x.to_dtype::<$T>();
                if keeps {
                    prop_assert_eq!(cast.layout().strides(), x.layout().strides(), "{:?}", v);
                } else {
                    prop_assert!(cast.is_contiguous(), "{:?}", v);
                }
                let want: Vec<$T> = data.iter().map(|&v| <$T as Element>::from_f32(v)).collect();
                let bits = |v: Vec<$T>| v.into_iter().map(|v| Element::to_f64(v).to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(cast.to_vec()), bits(want));
            }};
        }
        check!(bf16);
        check!(f16);
        check!(f64);
    }

    /// Layer norm's statistics in `f32`, forward and backward.
    fn layer_norm_computes_in_f32<D>(rows in 1usize..8, width in 1usize..40, seed in any::<u64>()) {
        check_half!("LayerNorm", seed, [x: [rows, width], w: [width], b: [width]] => {
            LayerNorm::from_weights(w.clone(), b.clone()).forward(x)
        }, rounded);
        check_half!("LayerNorm input gradient", seed, [x: [rows, width], w: [width], b: [width], r: [rows, width]] => {
            let x = x.clone().requires_grad();
            let y = LayerNorm::from_weights(w.clone(), b.clone()).forward(&x);
            (y * r).sum().backward().get(&x).unwrap().clone()
        }, near(32.0));
    }
}

device_tests! {
    a_large_half_product_matches_f32 => large_half_product_matches_f32,
    a_training_steps_gradients_follow_f32 => training_steps_gradients_follow_f32,
    conversions_round_to_nearest_even_and_keep_special_values => conversions_round_to_nearest_even,
    attention_tiles_seen_whole_match_f32 => attention_tiles_seen_whole,
}

fn whole_tiles_mask<'a, D: Device, E: FloatElement>(causal: bool) -> AttentionMask<'a, D, E> {
    if causal { AttentionMask::Causal } else { AttentionMask::None }
}

/// Attention with tiles that every query sees whole (no mask, or below a
/// causal mask's diagonal: 192 queries and 160 keys are three tiles each of
/// the tensor-core kernels), which skip the per-score mask test, next to the
/// diagonal and partial tiles that do not; heads of 32 and 64 columns
/// (their two kernels), rows that load as 16-byte chunks (widths that are
/// multiples of 8) and one that does not, two problems in a batch. The
/// output and all three gradients, against `f32`; and the gradients of a
/// grouped-query attention.
fn attention_tiles_seen_whole<D: Device>() {
    for (seed, [width, value_width]) in [[32, 32], [64, 48], [40, 36]].into_iter().enumerate() {
        for causal in [false, true] {
            let [q, k, v] = [[2, 192, width], [2, 160, width], [2, 160, value_width]];
            let seed = seed as u64;
            check_half!("attention over whole tiles", seed, [q: q, k: k, v: v] => {
                q.scaled_dot_product_attention(k, v, whole_tiles_mask(causal), None)
            }, near(4.0));
            for which in 0..3 {
                check_half!("attention gradients over whole tiles", seed, [q: q, k: k, v: v] => {
                    let [q, k, v] = [q, k, v].map(|t| t.clone().requires_grad());
                    let grads = q.scaled_dot_product_attention(&k, &v, whole_tiles_mask(causal), None).square().sum().backward();
                    grads.get([&q, &k, &v][which]).unwrap().clone()
                }, near(32.0));
            }
        }
    }
    // Grouped-query attention over two tiles: the keys' pass sums each
    // key head's gradient over its two query heads.
    let [q, k, v] = [[1, 4, 70, 32], [1, 2, 70, 32], [1, 2, 70, 32]];
    for which in 0..3 {
        check_half!("grouped-query attention gradients over tiles", 5, [q: q, k: k, v: v] => {
            let [q, k, v] = [q, k, v].map(|t| t.clone().requires_grad());
            let grads = q.scaled_dot_product_attention_gqa(&k, &v, AttentionMask::Causal, None).square().sum().backward();
            grads.get([&q, &k, &v][which]).unwrap().clone()
        }, near(32.0));
    }
}

/// A product large enough to split across threads, in row blocks and
/// column panels that do not divide it evenly, with a strided operand.
fn large_half_product_matches_f32<D: Device>() {
    check_half!("matmul (large)", 7, [a: [203, 301], b: [131, 301]] => a.matmul(&b.t()), reordered);
}

/// A small classifier's gradients in the half types, against `f32`: every
/// op of a training step, forward and backward, in one chain.
fn training_steps_gradients_follow_f32<D: Device>() {
    for seed in 0..4u64 {
        check_half!("MLP weight gradient", seed, [x: [16, 12], w1: [20, 12], b1: [20], w2: [5, 20]] => {
            let (w1, b1, w2) = (w1.clone().requires_grad(), b1.clone().requires_grad(), w2.clone().requires_grad());
            let hidden = Linear::from_weights(w1.clone(), Some(b1.clone())).forward(x).gelu();
            let logits = Linear::from_weights(w2.clone(), None).forward(&hidden);
            let labels = Tensor::<D, i64>::from_vec((0..16).map(|i| i % 5).collect(), [16]);
            let grads = cross_entropy(&logits, &labels).backward();
            grads.get(&w1).unwrap().clone()
        }, near(24.0));
    }
}

fn conversions_round_to_nearest_even<D: Device>() {
    let values = [1.0f64, 1.0 + 2f64.powi(-8), 1.0 + 3.0 * 2f64.powi(-8), 65504.0, 65520.0, -0.0, 1e-8];
    let x = Tensor::<D, f64>::from_vec(values.to_vec(), [values.len()]);
    // bf16 has 8 bits: 1 + 2^-8 is a tie, to even (1); 1 + 3·2^-8 is a tie,
    // to even (1 + 2^-6). f16 holds these exactly, and overflows past 65504
    // at 65520 (the tie between 65504 and 65536, to even, which is inf).
    let bf = x.to_dtype::<bf16>().to_vec();
    let expected_bf = [1.0, 1.0, 1.0 + 2f64.powi(-6), 65536.0, 65536.0, -0.0, 1.0011717677116394e-8];
    assert_eq!(as_f64(&bf), expected_bf);
    let half = x.to_dtype::<f16>().to_vec();
    let expected_f16 = [1.0, 1.0 + 2f64.powi(-8), 1.0 + 3.0 * 2f64.powi(-8), 65504.0, f64::INFINITY, -0.0, 0.0];
    assert_eq!(as_f64(&half), expected_f16);
    assert!(as_f64(&half)[5].is_sign_negative());
    // Special values survive every conversion, and back to f32 is exact.
    let special = Tensor::<D, f32>::from_vec(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY], [3]);
    for v in [special.to_dtype::<bf16>().to_dtype::<f32>(), special.to_dtype::<f16>().to_dtype::<f32>()] {
        let v = v.to_vec();
        assert!(v[0].is_nan() && v[1] == f32::INFINITY && v[2] == f32::NEG_INFINITY);
    }
    // f64 -> bf16 goes through f32, as PyTorch's conversion does: f32
    // drops the 2^-30 of 1 + 2^-8 + 2^-30, and the tie that is left goes
    // to even, 1 (rounding once would give 1 + 2^-7).
    let just_above = Tensor::<D, f64>::from_vec(vec![1.0 + 2f64.powi(-8) + 2f64.powi(-30)], [1]);
    assert_eq!(just_above.to_dtype::<bf16>().to_vec(), vec![bf16::ONE]);
    // Where f32 keeps what breaks the tie (2^-22), it rounds up, in both
    // half types (`half`'s own f64 conversion loses it: half-rs issue 151).
    let x = Tensor::<D, f64>::from_vec(
        vec![1.0 + 2f64.powi(-8) + 2f64.powi(-22), 1.0 + 2f64.powi(-11) + 2f64.powi(-22)],
        [2],
    );
    assert_eq!(as_f64(&x.to_dtype::<bf16>().to_vec())[0], 1.0 + 2f64.powi(-7));
    assert_eq!(as_f64(&x.to_dtype::<f16>().to_vec())[1], 1.0 + 2f64.powi(-10));
    // Floats to integers truncate and saturate, NaN to 0, as `as` (and PyTorch on the CPU).
    let ints = Tensor::<D, bf16>::from_vec(vec![bf16::from_f32(-2.75), bf16::from_f32(3e38), bf16::NAN], [3]);
    assert_eq!(ints.to_dtype::<i64>().to_vec(), vec![-2, i64::MAX, 0]);
    assert_eq!(ints.to_dtype::<u8>().to_vec(), vec![0, 255, 0]);
}

#[test]
fn half_tensors_print_their_dtype() {
    let x = Tensor::<Cpu, bf16>::from_vec(vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)], [2]);
    assert_eq!(format!("{x}"), "tensor([ 1.5000, -2.0000], dtype=bf16)");
    let y = Tensor::<Cpu, f16>::from_vec(vec![f16::from_f32(0.25)], [1]);
    assert_eq!(format!("{y}"), "tensor([0.2500], dtype=f16)");
}

#[test]
fn checkpoints_store_half_tensors_as_safetensors_bf16_and_f16() {
    let dir = std::env::temp_dir().join(format!("devtensor-half-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // bf16: 1.5 is 0x3FC0, -2 is 0xC000; f16: 1.5 is 0x3E00, -2 is 0xC000.
    for (dtype, bits, header_dtype) in
        [(DType::BF16, [0x3FC0u16, 0xC000], "BF16"), (DType::F16, [0x3E00, 0xC000], "F16")]
    {
        let path = dir.join(format!("{}.safetensors", dtype.name()));
        let layer = match dtype {
            DType::BF16 => save_and_reload::<bf16>(&path),
            _ => save_and_reload::<f16>(&path),
        };
        assert_eq!(layer, vec![1.5, -2.0]);
        let bytes = std::fs::read(&path).unwrap();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
        assert!(header.contains(&format!("\"dtype\":\"{header_dtype}\"")), "{header}");
        let data: Vec<u16> = bytes[8 + header_len..].chunks(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
        assert_eq!(data, bits, "{header_dtype} bytes");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Saves a bias-free `Linear` of weight `[1.5, -2]` in `H` to `path`, loads
/// it into a fresh layer, and returns the loaded weight.
fn save_and_reload<H: FloatElement>(path: &std::path::Path) -> Vec<f64> {
    let weight = Tensor::<Cpu, H>::from_vec(vec![num::<H>(1.5), num::<H>(-2.0)], [1, 2]);
    Checkpoint::from_model(&Linear::from_weights(weight, None)).save(path);
    let mut fresh = Linear::<Cpu, H>::new(2, 1).without_bias();
    Checkpoint::<Cpu, H>::load(path).load_into(&mut fresh);
    // The other half type's file is refused, naming both.
    let (error, other) = match H::DTYPE {
        DType::BF16 => (Checkpoint::<Cpu, f16>::try_load(path).err(), "f16"),
        _ => (Checkpoint::<Cpu, bf16>::try_load(path).err(), "bf16"),
    };
    let error = error.expect("a file of the other half type is refused").to_string();
    assert!(error.contains(&format!("holds {:?} elements, but the model's are {other}", H::DTYPE)), "{error}");
    as_f64(&fresh.weight.to_vec())
}
