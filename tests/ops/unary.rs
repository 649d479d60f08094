//! The unary ops, tested from one table: each row runs its op on every
//! element type it takes and on every device (`Cpu`, and `Cuda<0>` and
//! `Cuda<1>` where present: the emulated GPUs in CI, so that a row whose
//! CUDA kernel is missing for one element type fails there), on random
//! shapes (empty ones included), non-contiguous views and IEEE special
//! values, against a plain-loop reference computed in `f64` (or `i128` for
//! the integers, wrapped back with `as`); and checks its gradient against
//! finite differences. Below the table: the cases a table row cannot say
//! (operators, random clamp bounds, the exact bits of special values, large
//! inputs, a custom op).

use crate::common::gradcheck::{Values, gradcheck, gradgradcheck, inputs};
use crate::common::*;
use devtensor::ops::unary::UnaryOp;
use devtensor::{Cpu, DType, Device, Element, FloatElement, Result, Tensor};
use proptest::prelude::*;

/// The unary op table. A row reads
/// `name: call, floats: reference [, ints: reference], grad: domain;`:
/// the call on a tensor `t` (of element type `E`), the reference on one
/// `f64` (and on one `i128` for ops that take integers), and the inputs
/// where the gradient is checked ([`Values`]).
macro_rules! unary_table {
    ($($name:ident: $call:expr, floats: $float_ref:expr, $(ints: $int_ref:expr,)? grad: $domain:expr;)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            device_proptests! {
                cases = 24;

                fn f32<D>((dims, data) in shaped(float_value()), v in variant()) {
                    type E = f32;
                    let data: Vec<E> = data.iter().map(|&x| x as E).collect();
                    check_float::<D, E>(stringify!($name), &dims, &data, v, $call, $float_ref, 1e-5);
                }

                fn f64<D>((dims, data) in shaped(float_value()), v in variant()) {
                    type E = f64;
                    check_float::<D, E>(stringify!($name), &dims, &data, v, $call, $float_ref, 1e-12);
                }

                fn gradient<D>((dims, data) in inputs(3, 4, $domain), v in variant()) {
                    type E = f64;
                    let x = [tensor_with::<D, E>(&data, &dims, v)];
                    gradcheck(stringify!($name), &x, |x| apply(&x[0], $call));
                    gradgradcheck(stringify!($name), &x, |x| apply(&x[0], $call));
                }

                $(
                    fn i64<D>((dims, data) in shaped(prop_oneof![any::<i64>(), -10..10i64, Just(i64::MIN)]), v in variant()) {
                        type E = i64;
                        check_int::<D, E>(stringify!($name), &dims, &data, v, $call, $int_ref);
                    }

                    fn u8<D>((dims, data) in shaped(any::<u8>()), v in variant()) {
                        type E = u8;
                        check_int::<D, E>(stringify!($name), &dims, &data, v, $call, $int_ref);
                    }
                )?
            }

            /// The row against PyTorch's own results (`tests/ops/pytorch.rs`).
            fn pytorch<D: Device>() {
                let call64 = { type E = f64; |t: &Tensor<D, E>| -> Tensor<D, E> { apply(t, $call) } };
                let call32 = { type E = f32; |t: &Tensor<D, E>| -> Tensor<D, E> { apply(t, $call) } };
                crate::pytorch::unary_row::<D>(stringify!($name), call64, call32);
            }

            device_tests! {
                matches_pytorch => pytorch,
            }
        }
    )*};
}

unary_table! {
    neg: |t| t.neg(), floats: |x| -x, ints: |x| -x, grad: Values::AwayFromZero;
    abs: |t| t.abs(), floats: f64::abs, ints: i128::abs, grad: Values::AwayFromZero;
    relu: |t| t.relu(), floats: |x| if x < 0.0 { 0.0 } else { x }, ints: |x| x.max(0), grad: Values::AwayFromZero;
    square: |t| t.square(), floats: |x| x * x, ints: |x| x * x, grad: Values::AwayFromZero;
    clamp: |t| t.clamp(E::from_f64(-1.0), E::from_f64(1.0)),
        floats: |x| if x.is_nan() { x } else { x.clamp(-1.0, 1.0) }, ints: |x| x.clamp(-1, 1), grad: Values::AwayFromZero;
    clamp_min: |t| t.clamp_min(E::from_f64(-1.0)),
        floats: |x| if x.is_nan() { x } else { x.max(-1.0) }, ints: |x| x.max(-1), grad: Values::AwayFromZero;
    clamp_max: |t| t.clamp_max(E::from_f64(1.0)),
        floats: |x| if x.is_nan() { x } else { x.min(1.0) }, ints: |x| x.min(1), grad: Values::AwayFromZero;
    exp: |t| t.exp(), floats: f64::exp, grad: Values::AwayFromZero;
    log: |t| t.log(), floats: f64::ln, grad: Values::Positive;
    log1p: |t| t.log1p(), floats: f64::ln_1p, grad: Values::Positive;
    expm1: |t| t.expm1(), floats: f64::exp_m1, grad: Values::AwayFromZero;
    sqrt: |t| t.sqrt(), floats: f64::sqrt, grad: Values::Positive;
    rsqrt: |t| t.rsqrt(), floats: |x| 1.0 / x.sqrt(), grad: Values::Positive;
    tanh: |t| t.tanh(), floats: f64::tanh, grad: Values::AwayFromZero;
    sigmoid: |t| t.sigmoid(), floats: sigmoid_reference, grad: Values::AwayFromZero;
    silu: |t| t.silu(), floats: |x| x * sigmoid_reference(x), grad: Values::AwayFromZero;
    sin: |t| t.sin(), floats: f64::sin, grad: Values::AwayFromZero;
    cos: |t| t.cos(), floats: f64::cos, grad: Values::AwayFromZero;
    recip: |t| t.recip(), floats: |x| 1.0 / x, grad: Values::AwayFromZero;
    erf: |t| t.erf(), floats: erf_reference, grad: Values::AwayFromZero;
    gelu: |t| t.gelu(), floats: |x| x * 0.5 * erfc_reference(-x * std::f64::consts::FRAC_1_SQRT_2),
        grad: Values::AwayFromZero;
    // `(1 + tanh(u)) / 2` as `1 / (1 + e^(-2u))`, which keeps its digits where `1 + tanh(u)` cancels.
    gelu_tanh: |t| t.gelu_tanh(), floats: |x| x * sigmoid_reference(2.0 * SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)),
        grad: Values::AwayFromZero;
    powf: |t| t.powf(E::from_f64(2.5)), floats: |x| x.powf(2.5), grad: Values::Positive;
    powf_negative: |t| t.powf(E::from_f64(-1.5)), floats: |x| x.powf(-1.5), grad: Values::Positive;
    powf_integer: |t| t.powf(E::from_f64(3.0)), floats: |x| x.powf(3.0), grad: Values::AwayFromZero;
    powf_zero: |t| t.powf(E::ZERO), floats: |x| x.powf(0.0), grad: Values::AwayFromZero;
    floor: |t| t.floor(), floats: f64::floor, ints: |x| x, grad: Values::BetweenSteps;
    ceil: |t| t.ceil(), floats: f64::ceil, ints: |x| x, grad: Values::BetweenSteps;
    round: |t| t.round(), floats: f64::round_ties_even, ints: |x| x, grad: Values::BetweenSteps;
    trunc: |t| t.trunc(), floats: f64::trunc, ints: |x| x, grad: Values::BetweenSteps;
    sign: |t| t.sign(), floats: |x| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { 0.0 }, ints: i128::signum,
        grad: Values::BetweenSteps;
    frac: |t| t.frac(), floats: |x| x - x.trunc(), grad: Values::BetweenSteps;
    tan: |t| t.tan(), floats: f64::tan, grad: Values::InsideUnit;
    asin: |t| t.asin(), floats: f64::asin, grad: Values::InsideUnit;
    acos: |t| t.acos(), floats: f64::acos, grad: Values::InsideUnit;
    atan: |t| t.atan(), floats: f64::atan, grad: Values::AwayFromZero;
    sinh: |t| t.sinh(), floats: f64::sinh, grad: Values::AwayFromZero;
    cosh: |t| t.cosh(), floats: f64::cosh, grad: Values::AwayFromZero;
    asinh: |t| t.asinh(), floats: f64::asinh, grad: Values::AwayFromZero;
    acosh: |t| t.acosh(), floats: f64::acosh, grad: Values::AboveOne;
    atanh: |t| t.atanh(), floats: f64::atanh, grad: Values::InsideUnit;
    log2: |t| t.log2(), floats: f64::log2, grad: Values::Positive;
    log10: |t| t.log10(), floats: f64::log10, grad: Values::Positive;
    exp2: |t| t.exp2(), floats: f64::exp2, grad: Values::AwayFromZero;
    leaky_relu: |t| t.leaky_relu(E::from_f64(0.25)), floats: |x| if x > 0.0 { x } else { x * 0.25 },
        grad: Values::AwayFromZero;
    elu: |t| t.elu(E::from_f64(1.5)), floats: |x| if x > 0.0 { x } else { 1.5 * x.exp_m1() }, grad: Values::AwayFromZero;
    selu: |t| t.selu(), floats: |x| SELU_SCALE * if x > 0.0 { x } else { SELU_ALPHA * x.exp_m1() },
        grad: Values::AwayFromZero;
    celu: |t| t.celu(E::from_f64(0.5)), floats: |x| if x > 0.0 { x } else { 0.5 * (x / 0.5).exp_m1() },
        grad: Values::AwayFromZero;
    softplus: |t| t.softplus(E::from_f64(2.0), E::from_f64(3.0)),
        floats: |x| if 2.0 * x > 3.0 { x } else { (2.0 * x).exp().ln_1p() / 2.0 }, grad: Values::AwayFromZero;
    mish: |t| t.mish(), floats: |x| x * x.exp().ln_1p().tanh(), grad: Values::AwayFromZero;
    hardswish: |t| t.hardswish(), floats: |x| x * hard_ramp(x) / 6.0, grad: Values::AwayFromZero;
    hardsigmoid: |t| t.hardsigmoid(), floats: |x| hard_ramp(x) / 6.0, grad: Values::AwayFromZero;
    hardtanh: |t| t.hardtanh(E::from_f64(-1.0), E::from_f64(1.0)),
        floats: |x| if x.is_nan() { x } else { x.clamp(-1.0, 1.0) }, grad: Values::AwayFromZero;
    relu6: |t| t.relu6(), floats: |x| if x.is_nan() { x } else { x.clamp(0.0, 6.0) }, grad: Values::AwayFromZero;
    log_sigmoid: |t| t.log_sigmoid(), floats: |x| x.min(0.0) - (-x.abs()).exp().ln_1p(), grad: Values::AwayFromZero;
    softsign: |t| t.softsign(), floats: |x| x / (1.0 + x.abs()), grad: Values::AwayFromZero;
}

/// SELU's constants, as PyTorch writes them.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// `min(max(x + 3, 0), 6)`, NaN passing, the ramp of the hard activations.
fn hard_ramp(x: f64) -> f64 {
    if x.is_nan() { x } else { (x + 3.0).clamp(0.0, 6.0) }
}

/// `√(2/π)`, the scale inside the tanh GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `call(t)`, with the closure's argument type given by this signature.
fn apply<D: Device, E: Element>(t: &Tensor<D, E>, call: impl Fn(&Tensor<D, E>) -> Tensor<D, E>) -> Tensor<D, E> {
    call(t)
}

/// The logistic function in `f64`, through `e^x` below 0, where
/// `1 / (1 + e^-x)` would overflow to 0 before the result underflows.
fn sigmoid_reference(x: f64) -> f64 {
    if x < 0.0 { x.exp() / (1.0 + x.exp()) } else { 1.0 / (1.0 + (-x).exp()) }
}

/// The error function in `f64` from its series
/// `erf(x) = 2/√π e^(-x²) Σ 2ⁿ x^(2n+1) / (1·3···(2n+1))`, whose terms are
/// all positive (no cancellation); `±1` past 6, where it is 1 to within
/// `1e-17`.
fn erf_reference(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp() * sum
}

/// `erfc(z) = 1 - erf(z)` in `f64`: from the series of [`erf_reference`]
/// below 2, from the continued fraction
/// `erfc(z) = e^(-z²)/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))`
/// above, where `1 - erf(z)` would cancel.
fn erfc_reference(z: f64) -> f64 {
    if z.is_nan() {
        return z;
    }
    if z < 0.0 {
        return 2.0 - erfc_reference(-z);
    }
    if z < 2.0 {
        return 1.0 - erf_reference(z);
    }
    // Evaluated from the tail; 200 terms are exact to f64 from z = 2 on.
    let tail = (1..=200).rev().fold(z, |acc, n| z + n as f64 / 2.0 / acc);
    (-z * z).exp() / std::f64::consts::PI.sqrt() / tail
}

/// The input tensor of `data` laid out as `variant`, and `call` of it, which
/// must have the input's shape and be contiguous.
#[track_caller]
fn applied<D: Device, E: Element>(
    name: &str,
    dims: &[usize],
    data: &[E],
    variant: Variant,
    call: impl Fn(&Tensor<D, E>) -> Tensor<D, E>,
) -> (Tensor<D, E>, Tensor<D, E>) {
    let t = tensor_with::<D, E>(data, dims, variant);
    let got = call(&t);
    assert_eq!(got.dims(), dims, "{name}");
    assert!(got.is_contiguous(), "{name}");
    (t, got)
}

/// `call(t)` against `reference` on each element of a tensor of `data`
/// laid out as `variant`: the result has `t`'s shape, is contiguous, and
/// equals the reference rounded to `E` within `tol` (relative, and absolute
/// near 0), NaN for NaN, with the sign of zero. A result in the subnormal
/// range may come out as the zero of its sign (GPUs and vector units
/// compute `silu(-107)` as `-107 * 0`, where the exact value is a subnormal),
/// and one whose exact value underflows to zero in `E` as either zero (`f32`
/// `log_sigmoid(182)` is `0 - log1p(0)`, `+0.0` as in PyTorch, where the
/// exact `-1e-79` rounds to `-0.0`).
#[track_caller]
fn check_float<D: Device, E: FloatElement>(
    name: &str,
    dims: &[usize],
    data: &[E],
    variant: Variant,
    call: impl Fn(&Tensor<D, E>) -> Tensor<D, E>,
    reference: impl Fn(f64) -> f64,
    tol: f64,
) {
    let (t, got) = applied(name, dims, data, variant, call);
    let smallest_normal = if E::DTYPE == DType::F32 { f32::MIN_POSITIVE as f64 } else { f64::MIN_POSITIVE };
    for (i, (g, &x)) in as_f64(&got.to_vec()).into_iter().zip(data).enumerate() {
        let exact = reference(x.to_f64());
        let e = E::from_f64(exact).to_f64();
        let same_sign = g.is_sign_negative() == e.is_sign_negative();
        let ok = (g.is_nan() && e.is_nan())
            || (g == e && same_sign)
            || (g == 0.0 && e == 0.0 && exact != 0.0)
            || (g != 0.0 && e != 0.0 && (g - e).abs() <= tol * (1.0 + e.abs()))
            || (same_sign && g.abs().max(e.abs()) < smallest_normal);
        assert!(ok, "{name}({x}) on {}, element {i}: got {g:?}, expected {e:?}", D::name());
    }
    let unchanged = as_f64(&t.to_vec()).iter().zip(as_f64(data)).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(unchanged, "{name}: the input changed");
}

/// The integer types, converted exactly to and from `i128`; `from_i128`
/// wraps like `as`, which is the wrapping arithmetic PyTorch gives.
trait Int: Element {
    fn to_i128(self) -> i128;
    fn from_i128(v: i128) -> Self;
}

impl Int for i64 {
    fn to_i128(self) -> i128 {
        self.into()
    }
    fn from_i128(v: i128) -> Self {
        v as i64
    }
}

impl Int for u8 {
    fn to_i128(self) -> i128 {
        self.into()
    }
    fn from_i128(v: i128) -> Self {
        v as u8
    }
}

/// As [`check_float`], exactly, for an integer type.
#[track_caller]
fn check_int<D: Device, E: Int>(
    name: &str,
    dims: &[usize],
    data: &[E],
    variant: Variant,
    call: impl Fn(&Tensor<D, E>) -> Tensor<D, E>,
    reference: impl Fn(i128) -> i128,
) {
    let (t, got) = applied(name, dims, data, variant, call);
    let expected: Vec<E> = data.iter().map(|&x| E::from_i128(reference(x.to_i128()))).collect();
    assert_eq!(got.to_vec(), expected, "{name} on {} of {data:?}", D::name());
    assert_eq!(t.to_vec(), data, "{name}: the input changed");
}

/// A possibly empty shape and `len` elements drawn from `elem`.
fn shaped<S>(elem: S) -> impl Strategy<Value = (Vec<usize>, Vec<S::Value>)>
where
    S: Strategy + Clone + 'static,
{
    shape_maybe_empty(4, 5).prop_flat_map(move |dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(elem.clone(), len))
    })
}

/// Ordinary floats, large magnitudes (overflow of `exp`), and special values.
fn float_value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        10 => -10.0..10.0f64,
        3 => -1000.0..1000.0f64,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(-1.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
    ]
}

// ---- Beyond the table ----

/// torch.clamp on random bounds, ordered or reversed: the lower bound
/// applies first, so `min > max` gives `max` everywhere; NaN stays NaN.
fn clamp_reference(x: f64, min: f64, max: f64) -> f64 {
    if x.is_nan() || min.is_nan() || max.is_nan() {
        return f64::NAN;
    }
    let lower = if x < min { min } else { x };
    if lower > max { max } else { lower }
}

device_proptests! {
    cases = 32;

    fn clamp_on_random_bounds_f64<D>((dims, data) in shaped(float_value()), v in variant(), a in -20.0..20.0f64, b in -20.0..20.0f64) {
        let t = tensor_with::<D, f64>(&data, &dims, v);
        let expected: Vec<f64> = data.iter().map(|&x| clamp_reference(x, a, b)).collect();
        // The sign of a zero result is left open, as PyTorch leaves it.
        let same = |g: &f64, e: &f64| (g.is_nan() && e.is_nan()) || g == e;
        let got = t.clamp(a, b).to_vec();
        assert!(got.iter().zip(&expected).all(|(g, e)| same(g, e)), "clamp({a}, {b}): {got:?} vs {expected:?}");
        let got = t.try_clamp(a, b).unwrap().to_vec();
        assert!(got.iter().zip(&expected).all(|(g, e)| same(g, e)), "try_clamp({a}, {b})");
        // One bound: the other one infinite.
        let expected: Vec<f64> = data.iter().map(|&x| clamp_reference(x, a, f64::INFINITY)).collect();
        let got = t.clamp_min(a).to_vec();
        assert!(got.iter().zip(&expected).all(|(g, e)| same(g, e)), "clamp_min({a}): {got:?} vs {expected:?}");
        let expected: Vec<f64> = data.iter().map(|&x| clamp_reference(x, f64::NEG_INFINITY, b)).collect();
        let got = t.clamp_max(b).to_vec();
        assert!(got.iter().zip(&expected).all(|(g, e)| same(g, e)), "clamp_max({b}): {got:?} vs {expected:?}");
    }

    fn clamp_on_random_bounds_i64<D>((dims, data) in shaped(prop_oneof![any::<i64>(), -10..10i64]), v in variant(), a in -20..20i64, b in -20..20i64) {
        let t = tensor_with::<D, i64>(&data, &dims, v);
        let expected: Vec<i64> = data.iter().map(|&x| Ord::min(Ord::max(x, a), b)).collect();
        assert_eq!(t.clamp(a, b).to_vec(), expected);
    }

    fn clamp_on_random_bounds_u8<D>((dims, data) in shaped(any::<u8>()), v in variant(), a in any::<u8>(), b in any::<u8>()) {
        let t = tensor_with::<D, u8>(&data, &dims, v);
        let expected: Vec<u8> = data.iter().map(|&x| Ord::min(Ord::max(x, a), b)).collect();
        assert_eq!(t.clamp(a, b).to_vec(), expected);
    }

    fn negation_operators<D>((dims, data) in shaped(float_value()), v in variant()) {
        let t = tensor_with::<D, f64>(&data, &dims, v);
        let bits = |t: Tensor<D, f64>| t.to_vec().iter().map(|x| format!("{x:?}")).collect::<Vec<_>>();
        let expected: Vec<String> = data.iter().map(|x| format!("{:?}", -x)).collect();
        assert_eq!(bits(-&t), expected);
        assert_eq!(bits(-t.clone()), expected);
    }
}

fn special_values<D: Device>() {
    let x = Tensor::<D, f64>::from_vec(vec![0.0, -0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN], [6]);
    let bits = |t: Tensor<D, f64>| t.to_vec().iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" ");
    assert_eq!(bits(x.log()), "-inf -inf NaN inf NaN NaN");
    assert_eq!(bits(x.log1p()), "0.0 -0.0 -inf inf NaN NaN");
    assert_eq!(bits(x.sqrt()), "0.0 -0.0 NaN inf NaN NaN");
    // As PyTorch: 1 / sqrt(-0.0) = 1 / -0.0 = -inf.
    assert_eq!(bits(x.rsqrt()), "inf -inf NaN 0.0 NaN NaN");
    // The finite, non-zero results of exp, tanh, sigmoid, sin and cos may
    // differ by an ulp or two between the host's libm and CUDA's libdevice,
    // so off the `Cpu` they get the transcendental tolerance; NaN, the
    // infinities and the signs of zeros are exact everywhere.
    let near = |name: &str, t: Tensor<D, f64>, expected: [f64; 6]| {
        let (abs, rel) = if D::name() == "Cpu" { (0.0, 0.0) } else { tolerance::<f64>(Family::Transcendental) };
        for (i, (&g, e)) in t.to_vec().iter().zip(expected).enumerate() {
            let ok = if e.is_finite() && e != 0.0 {
                (g - e).abs() <= abs + rel * e.abs()
            } else {
                format!("{g:?}") == format!("{e:?}")
            };
            assert!(ok, "{name}: element {i}: got {g:?}, expected {e:?}");
        }
    };
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    near("exp", x.exp(), [1.0, 1.0, (-1.0f64).exp(), inf, 0.0, nan]);
    near("tanh", x.tanh(), [0.0, -0.0, (-1.0f64).tanh(), 1.0, -1.0, nan]);
    near("sigmoid", x.sigmoid(), [0.5, 0.5, 1.0 / (1.0 + 1.0f64.exp()), 1.0, 0.0, nan]);
    assert_eq!(bits(x.recip()), "inf -inf -1.0 0.0 -0.0 NaN");
    assert_eq!(bits(x.neg()), "-0.0 0.0 1.0 -inf inf NaN");
    assert_eq!(bits(x.abs()), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.relu()), "0.0 -0.0 0.0 inf 0.0 NaN");
    assert_eq!(bits(x.clamp(-0.5, 0.5)), "0.0 -0.0 -0.5 0.5 -0.5 NaN");
    assert_eq!(bits(x.square()), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.powf(2.0)), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.powf(-1.0)), "inf -inf -1.0 0.0 -0.0 NaN");
    assert_eq!(bits(x.powf(0.0)), "1.0 1.0 1.0 1.0 1.0 1.0");
    // Rounding keeps zeros' signs and the infinities; sign gives +0.0 for
    // both zeros and 0 for NaN, as PyTorch 2.15.
    for (name, t) in [("floor", x.floor()), ("ceil", x.ceil()), ("round", x.round()), ("trunc", x.trunc())] {
        assert_eq!(bits(t), "0.0 -0.0 -1.0 inf -inf NaN", "{name}");
    }
    assert_eq!(bits(x.sign()), "0.0 0.0 -1.0 1.0 -1.0 0.0");
    assert_eq!(bits(x.frac()), "0.0 0.0 0.0 NaN NaN NaN");
    // torch.clamp keeps an element equal to a bound: -0.0 at a bound of 0.
    assert_eq!(bits(x.clamp_min(0.0)), "0.0 -0.0 0.0 inf 0.0 NaN");
    assert_eq!(bits(x.relu6()), "0.0 -0.0 0.0 6.0 0.0 NaN");
    assert_eq!(bits(x.leaky_relu(0.5)), "0.0 -0.0 -0.5 inf -inf NaN");
    let half_pi = std::f64::consts::FRAC_PI_2;
    near("atan", x.atan(), [0.0, -0.0, -std::f64::consts::FRAC_PI_4, half_pi, -half_pi, nan]);
    near("exp2", x.exp2(), [1.0, 1.0, 0.5, inf, 0.0, nan]);
    near("log2", x.log2(), [-inf, -inf, nan, inf, nan, nan]);
    near("sin", x.sin(), [0.0, -0.0, -0.8414709848078965, nan, nan, nan]);
    near("cos", x.cos(), [1.0, 1.0, 0.5403023058681398, nan, nan, nan]);

    near("expm1", x.expm1(), [0.0, -0.0, (-1.0f64).exp_m1(), inf, -1.0, nan]);
    // PyTorch's silu(-inf) is NaN too: -inf / (1 + e^inf).
    near("silu", x.silu(), [0.0, -0.0, -1.0 / (1.0 + 1.0f64.exp()), inf, nan, nan]);
    // PyTorch's formulas give NaN at -inf too: -inf · (1 + erf(-inf)) = -inf · 0.
    let specials = Tensor::<D, f64>::from_vec(vec![0.0, -0.0, inf, -inf, nan], [5]);
    assert_eq!(bits(specials.gelu()), "0.0 -0.0 inf NaN NaN");
    assert_eq!(bits(specials.gelu_tanh()), "0.0 -0.0 inf NaN NaN");
    // log1p keeps the digits that log(1 + x) loses.
    let tiny = Tensor::<D, f64>::from_vec(vec![1e-20, -1e-17, 1e-10], [3]);
    let got = tiny.log1p().to_vec();
    let expected = [1e-20, -1e-17, 1e-10 - 5e-21];
    assert!(got.iter().zip(expected).all(|(g, e)| (g - e).abs() <= 1e-15 * e.abs()), "{got:?}");

    // Sigmoid stays finite and exact at the extremes of f32, where the naive
    // `e^x / (1 + e^x)` would give inf / inf = NaN.
    let big = Tensor::<D>::from_vec(vec![-200.0, -88.0, 89.0, 200.0, f32::MAX, f32::MIN], [6]);
    let s = big.sigmoid().to_vec();
    assert!(s.iter().all(|v| v.is_finite()), "{s:?}");
    assert_eq!((s[0], s[3], s[4], s[5]), (0.0, 1.0, 1.0, 0.0));

    // Integers wrap, as in PyTorch.
    let i = Tensor::<D, i64>::from_vec(vec![i64::MIN, -3, 0, i64::MAX], [4]);
    assert_eq!(i.neg().to_vec(), vec![i64::MIN, 3, 0, -i64::MAX]);
    assert_eq!(i.abs().to_vec(), vec![i64::MIN, 3, 0, i64::MAX]);
    assert_eq!(i.square().to_vec(), vec![0, 9, 0, 1]);
    assert_eq!(i.relu().to_vec(), vec![0, 0, 0, i64::MAX]);
    let u = Tensor::<D, u8>::from_vec(vec![0, 1, 128, 255], [4]);
    assert_eq!((-&u).to_vec(), vec![0, 255, 128, 1]);
    assert_eq!(u.square().to_vec(), vec![0, 1, 0, 1]);
    assert_eq!(u.abs().to_vec(), vec![0, 1, 128, 255]);
    // min > max: everything becomes max, like torch.clamp.
    assert_eq!(u.clamp(200, 100).to_vec(), vec![100; 4]);
    assert_eq!(i.clamp(5, -5).to_vec(), vec![-5; 4]);
}

fn scalar_and_empty<D: Device>() {
    let s = Tensor::<D, f64>::scalar(4.0);
    assert_eq!(s.sqrt().dims(), &[] as &[usize]);
    assert_eq!(s.sqrt().item(), 2.0);
    let e = Tensor::<D>::zeros([2, 0, 3]);
    for t in [e.neg(), e.abs(), e.relu(), e.clamp(0.0, 1.0), e.square(), e.exp(), e.log(), e.powf(2.0), e.sigmoid()] {
        assert_eq!(t.dims(), &[2, 0, 3]);
        assert!(t.to_vec().is_empty());
    }
    // An empty view cut from a non-empty tensor.
    let v = Tensor::<D, i64>::arange(0, 6).reshape([2, 3]).narrow(1, 1, 0);
    assert_eq!(v.neg().dims(), &[2, 0]);
}

fn large_inputs<D: Device>() {
    // Past the parallel threshold, with a length that is not a chunk multiple,
    // contiguous and transposed; a multiple of 5, for the reshape below.
    let n = sized((1 << 17) + 3, (1 << 10) + 6);
    let data: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) / 1000.0).collect();
    let x = Tensor::<D>::from_vec(data.clone(), [n]);
    let got = x.sigmoid().to_vec();
    assert!(got.iter().zip(&data).all(|(&g, &x)| (g as f64 - 1.0 / (1.0 + (-(x as f64)).exp())).abs() < 1e-6));
    let got = x.neg().to_vec();
    assert!(got.iter().zip(&data).all(|(&g, &x)| g == -x));
    let m = x.reshape([5, n / 5]).t();
    let got = m.abs();
    assert_eq!(got.dims(), &[n / 5, 5]);
    assert_eq!(got.to_vec(), m.contiguous().to_vec().iter().map(|v| v.abs()).collect::<Vec<_>>());
}

/// The float functions at [`LARGE_SIZES`] on a strided view (every other
/// element of a `[n, 2]` tensor), against `f64` references; returns the
/// results, which the CUDA instances also compare with the `Cpu` ones.
fn large_float_functions<D: Device>() -> Vec<f32> {
    let mut all = Vec::new();
    for n in LARGE_SIZES {
        let data: Vec<f32> = (0..2 * n).map(|i| (i as f32 - n as f32) / 50_000.0).collect();
        let x = Tensor::<D>::from_vec(data.clone(), [n, 2]).select(1, 0);
        assert!(!x.is_contiguous());
        let cases: [(&str, Tensor<D>, fn(f64) -> f64); 5] = [
            ("exp", x.exp(), f64::exp),
            ("tanh", x.tanh(), f64::tanh),
            ("sigmoid", x.sigmoid(), |v| 1.0 / (1.0 + (-v).exp())),
            ("sqrt of abs", x.abs().sqrt(), |v| v.abs().sqrt()),
            ("sin", x.sin(), f64::sin),
        ];
        for (name, got, f) in cases {
            assert_eq!(got.dims(), &[n], "{name}");
            let got = got.to_vec();
            for (i, &g) in got.iter().enumerate() {
                let e = f(data[2 * i] as f64);
                assert!(
                    (g as f64 - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "{name} of {n}: element {i}: got {g}, expected {e}"
                );
            }
            all.extend(got);
        }
    }
    all
}

use crate::custom_op::Squareplus;

/// `Squareplus` without a CUDA kernel.
#[derive(Clone, Copy)]
struct CpuOnlySquareplus;

impl<F: FloatElement> UnaryOp<F> for CpuOnlySquareplus {
    const NAME: &'static str = "cpu_only_squareplus";

    fn apply(self, x: F) -> F {
        Squareplus.apply(x)
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        Squareplus.backward(x, y, grad)
    }
}

fn custom_op<D: Device>() {
    let squareplus = |v: f64| (v + (v * v + 4.0).sqrt()) / 2.0;
    let data = [-2.0, -0.5, 0.0, -0.0, 3.0, 1e3];
    let x = Tensor::<D, f64>::from_slice(&data, [2, 3]).t();
    let got = x.apply_unary(Squareplus).to_vec();
    for (g, v) in got.iter().zip(x.to_vec()) {
        assert!((g - squareplus(v)).abs() <= 1e-15 * squareplus(v), "squareplus({v}) = {g}");
    }
    let x32 = Tensor::<D>::from_vec(vec![3.0, -1.0], [2]);
    let near = |got: Vec<f32>| got.iter().zip([3.0, -1.0]).all(|(g, v)| (f64::from(*g) - squareplus(v)).abs() < 1e-6);
    assert!(near(x32.try_apply_unary(Squareplus).unwrap().to_vec()));
    gradcheck("squareplus", &[Tensor::<D, f64>::from_vec(vec![0.5, -1.5, 2.0], [3])], |x| x[0].apply_unary(Squareplus));

    // An op without a kernel runs on the CPU, and on a GPU fails in words.
    let plain = x32.try_apply_unary(CpuOnlySquareplus);
    if D::name() == "Cpu" {
        assert!(near(plain.unwrap().to_vec()));
    } else {
        let message = plain.unwrap_err().to_string();
        assert!(message.contains("cpu_only_squareplus") && message.contains(&D::name()), "{message}");
        assert!(message.contains("has no CUDA kernel"), "{message}");
    }
}

device_tests! {
    special_values_follow_ieee_and_pytorch => special_values,
    scalars_and_empty_tensors => scalar_and_empty,
    large_inputs_on_two_layouts => large_inputs,
    custom_ops_run_like_built_in_ones => custom_op,
}

device_tests_vs_cpu! {
    large_float_functions_on_a_strided_view => large_float_functions, Family::Transcendental;
}

#[test]
fn unary_ops_cannot_fail_on_the_cpu() {
    // Unary ops have no shape, axis or index arguments: their `try_` forms
    // fail only when a device cannot run the kernel, which never happens on
    // the CPU.
    let x = Tensor::<Cpu>::from_vec(vec![-1.0, 2.0], [2]);
    assert!(x.try_neg().is_ok() && x.try_relu().is_ok() && x.try_square().is_ok());
    assert!(x.try_exp().is_ok() && x.try_log().is_ok() && x.try_sqrt().is_ok() && x.try_tanh().is_ok());
    assert!(x.try_powf(0.5).is_ok() && x.try_sin().is_ok() && x.try_cos().is_ok() && x.try_recip().is_ok());
    assert!(x.try_log1p().is_ok() && x.try_erf().is_ok() && x.try_abs().is_ok() && x.try_clamp(0.0, 1.0).is_ok());
    assert!(x.try_expm1().is_ok() && x.try_silu().is_ok() && x.try_gelu().is_ok() && x.try_gelu_tanh().is_ok());
    assert!(x.try_rsqrt().is_ok() && x.try_floor().is_ok() && x.try_round().is_ok() && x.try_sign().is_ok());
    assert!(x.try_tan().is_ok() && x.try_asin().is_ok() && x.try_acosh().is_ok() && x.try_log2().is_ok());
    assert!(x.try_leaky_relu(0.1).is_ok() && x.try_elu(1.0).is_ok() && x.try_softplus(1.0, 20.0).is_ok());
    assert!(x.try_mish().is_ok() && x.try_hardswish().is_ok() && x.try_log_sigmoid().is_ok() && x.try_relu6().is_ok());
}
