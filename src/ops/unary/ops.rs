//! The unary operations, each declared once: its name (which names its CUDA
//! kernels in `kernels/unary.cu`), its value on one element, and its
//! gradient. The methods on [`Tensor`] that run them are in the parent
//! module; `tests/ops/unary.rs` holds one table row per op.
//!
//! Gradients are written from the input `x` or the result `y`, whichever
//! gives the cheaper expression. They only ever run on float tensors (only
//! those track gradients), but the ops that take every element type write
//! theirs for any [`Element`].

use super::{KernelSource, Params, UnaryOp};
use crate::backend::cpu::{BASELINE_FMA, erfc, exp_nonpositive, sigmoid, tanh};
use crate::element::{DType, Element, FloatElement};
use crate::error::Result;
use crate::ops::compare::masked;
use crate::tensor::Device;
use crate::tensor::Tensor;

/// `-x`: floats multiply by `-1`, which maps `0.0` to `-0.0` (`0 - x` would
/// give `+0.0`); integers subtract from zero, which wraps (`-i64::MIN` is
/// `i64::MIN`, `-1u8` is `255`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Neg;

impl<E: Element> UnaryOp<E> for Neg {
    const NAME: &'static str = "neg";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: E) -> E {
        if E::IS_FLOAT { x.mul(E::from_f64(-1.0)) } else { E::ZERO.sub(x) }
    }

    fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        grad.try_neg()
    }
}

/// `|x|`: `0 - x` on non-positive inputs, which maps `-0.0` to `+0.0` and
/// wraps `i64::MIN` onto itself; NaN fails the comparison and passes through.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Abs;

impl<E: Element> UnaryOp<E> for Abs {
    const NAME: &'static str = "abs";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: E) -> E {
        if x <= E::ZERO { E::ZERO.sub(x) } else { x }
    }

    /// `sign(x) * grad`, 0 at `x = 0` as in PyTorch.
    fn backward<D: Device>(self, x: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        masked(&x.try_gt_scalar(E::ZERO)?, grad)?.try_sub(&masked(&x.try_lt_scalar(E::ZERO)?, grad)?)
    }
}

/// `max(x, 0)`; NaN and `-0.0` pass through.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReluOp;

impl<E: Element> UnaryOp<E> for ReluOp {
    const NAME: &'static str = "relu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: E) -> E {
        if x < E::ZERO { E::ZERO } else { x }
    }

    fn backward<D: Device>(self, _: &Tensor<D, E>, y: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        masked(&y.try_gt_scalar(E::ZERO)?, grad)
    }
}

/// `x`, or `min` where `x` is below it, as `torch.clamp`'s lower step:
/// a NaN element or bound gives NaN, and an element equal to the bound is
/// kept (`clamp(-0.0, min=0)` is `-0.0`, as in PyTorch).
#[inline(always)]
fn clamp_below<E: Element>(x: E, min: E) -> E {
    if x < min || min.is_nan() { min } else { x }
}

/// `x`, or `max` where `x` is above it: [`clamp_below`]'s upper twin.
#[inline(always)]
fn clamp_above<E: Element>(x: E, max: E) -> E {
    if x > max || max.is_nan() { max } else { x }
}

/// `min(max(x, min), max)`, `torch.clamp`: the lower bound applies first,
/// so when `min > max` every element becomes `max`; NaN stays NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Clamp<E> {
    /// Lower bound.
    pub min: E,
    /// Upper bound, applied last.
    pub max: E,
}

impl<E: Element> UnaryOp<E> for Clamp<E> {
    const NAME: &'static str = "clamp";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: E) -> E {
        clamp_above(clamp_below(x, self.min), self.max)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        Clamp { min: self.min.cast::<f32>(), max: self.max.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<E> {
        Params::two(self.min, self.max)
    }

    /// Passed through strictly inside the bounds, and 0 at a bound, as
    /// PyTorch 2.15 gives for scalar bounds (checked against its results in
    /// `tests/ops/pytorch.rs`: `clamp(x, -1, 1)` at `x = ±1`).
    fn backward<D: Device>(self, x: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        masked(&x.try_gt_scalar(self.min)?.try_logical_and(&x.try_lt_scalar(self.max)?)?, grad)
    }
}

/// `max(x, min)`: [`Clamp`] with only its lower bound
/// (`torch.clamp(x, min=min)`, `torch.clamp_min`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClampMin<E> {
    /// Lower bound.
    pub min: E,
}

impl<E: Element> UnaryOp<E> for ClampMin<E> {
    const NAME: &'static str = "clamp_min";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: E) -> E {
        clamp_below(x, self.min)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        ClampMin { min: self.min.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<E> {
        Params::one(self.min)
    }

    /// Passed through strictly above the bound, 0 at and below it, as
    /// PyTorch 2.15 gives (`clamp(x, min=0)` at `x = 0`: 0), up to `+inf`.
    fn backward<D: Device>(self, x: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        masked(&x.try_gt_scalar(self.min)?, grad)
    }
}

/// `min(x, max)`: [`Clamp`] with only its upper bound
/// (`torch.clamp(x, max=max)`, `torch.clamp_max`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClampMax<E> {
    /// Upper bound.
    pub max: E,
}

impl<E: Element> UnaryOp<E> for ClampMax<E> {
    const NAME: &'static str = "clamp_max";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: E) -> E {
        clamp_above(x, self.max)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        ClampMax { max: self.max.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<E> {
        Params::one(self.max)
    }

    /// Passed through strictly below the bound, 0 at and above it, as
    /// PyTorch 2.15 gives (`clamp(x, max=1)` at `x = 1`: 0), down to `-inf`.
    fn backward<D: Device>(self, x: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        masked(&x.try_lt_scalar(self.max)?, grad)
    }
}

/// `x * x`, wrapping for integers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Square;

impl<E: Element> UnaryOp<E> for Square {
    const NAME: &'static str = "square";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: E) -> E {
        x.mul(x)
    }

    fn backward<D: Device>(self, x: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        grad.try_mul(x)?.try_mul_scalar(E::from_f64(2.0))
    }
}

/// `e^x`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Exp;

impl<F: FloatElement> UnaryOp<F> for Exp {
    const NAME: &'static str = "exp";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.exp()
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(y)
    }
}

/// The natural logarithm: `log(0) = -inf`, negative inputs give NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Log;

impl<F: FloatElement> UnaryOp<F> for Log {
    const NAME: &'static str = "log";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.ln()
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_div(x)
    }
}

/// `log(1 + x)`, exact for `x` near 0 where `log(1 + x)` rounds to 0
/// (`torch.log1p`); `log1p(-1) = -inf`, below `-1` NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Log1p;

impl<F: FloatElement> UnaryOp<F> for Log1p {
    const NAME: &'static str = "log1p";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.ln_1p()
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_div(&x.try_add_scalar(F::ONE)?)
    }
}

/// `e^x - 1`, exact for `x` near 0 where `e^x - 1` rounds to 0
/// (`torch.expm1`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Expm1;

impl<F: FloatElement> UnaryOp<F> for Expm1 {
    const NAME: &'static str = "expm1";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.exp_m1()
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&y.try_add_scalar(F::ONE)?)
    }
}

/// The square root; negative inputs give NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sqrt;

impl<F: FloatElement> UnaryOp<F> for Sqrt {
    const NAME: &'static str = "sqrt";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.sqrt()
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_div(&y.try_mul_scalar(F::from_f64(2.0))?)
    }
}

/// `1 / √x` (`torch.rsqrt`): `rsqrt(0) = inf`, `rsqrt(-0.0) = -inf`,
/// `rsqrt(inf) = 0`, negative inputs give NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rsqrt;

impl<F: FloatElement> UnaryOp<F> for Rsqrt {
    const NAME: &'static str = "rsqrt";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        F::ONE / x.sqrt()
    }

    /// `-x^(-3/2) / 2`, written from the result as `-y³ / 2`.
    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&y.try_square()?.try_mul(y)?.try_mul_scalar(F::from_f64(-0.5))?)
    }
}

/// The hyperbolic tangent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TanhOp;

impl<F: FloatElement> UnaryOp<F> for TanhOp {
    const NAME: &'static str = "tanh";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    /// The vectorisable `tanh` of the CPU backend (within 2 ulp in `f32`).
    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        tanh::<F, FMA>(x)
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&y.try_square()?.try_rsub_scalar(F::ONE)?)
    }
}

/// The logistic function `1 / (1 + e^-x)`, evaluated through `e^-|x|` so
/// that the exponential never overflows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SigmoidOp;

impl<F: FloatElement> UnaryOp<F> for SigmoidOp {
    const NAME: &'static str = "sigmoid";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        sigmoid::<F, FMA>(x)
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&y.try_mul(&y.try_rsub_scalar(F::ONE)?)?)
    }
}

/// SiLU (swish), `x * sigmoid(x)` (`torch.nn.functional.silu`), with the
/// overflow-free sigmoid of [`SigmoidOp`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Silu;

impl<F: FloatElement> UnaryOp<F> for Silu {
    const NAME: &'static str = "silu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        x * sigmoid::<F, FMA>(x)
    }

    /// `sigmoid(x) * (1 + x * (1 - sigmoid(x)))`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let s = x.try_sigmoid()?;
        let slope = s.try_mul(&x.try_mul(&s.try_rsub_scalar(F::ONE)?)?.try_add_scalar(F::ONE)?)?;
        grad.try_mul(&slope)
    }
}

/// `x^exponent`, `torch.pow` with a float exponent: negative bases with
/// non-integer exponents give NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Powf<F> {
    /// The exponent.
    pub exponent: F,
}

impl<F: FloatElement> UnaryOp<F> for Powf<F> {
    const NAME: &'static str = "powf";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.powf(self.exponent)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        x.powf(self.exponent.cast::<f32>())
    }

    fn params(self) -> Params<F> {
        Params::one(self.exponent)
    }

    /// PyTorch's rule, which is zero for a zero exponent (also at `x = 0`).
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let p = self.exponent;
        if p == F::ZERO {
            return grad.try_zeros_like();
        }
        grad.try_mul(&x.try_powf(p - F::ONE)?.try_mul_scalar(p)?)
    }
}

/// The sine (radians).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sin;

impl<F: FloatElement> UnaryOp<F> for Sin {
    const NAME: &'static str = "sin";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.sin()
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&x.try_cos()?)
    }
}

/// The cosine (radians).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cos;

impl<F: FloatElement> UnaryOp<F> for Cos {
    const NAME: &'static str = "cos";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.cos()
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&x.try_sin()?)?.try_neg()
    }
}

/// `1 / x`; `1 / 0 = inf`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Recip;

impl<F: FloatElement> UnaryOp<F> for Recip {
    const NAME: &'static str = "recip";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x.recip()
    }

    fn backward<D: Device>(self, _: &Tensor<D, F>, y: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&y.try_square()?)?.try_neg()
    }
}

/// The error function `2/√π ∫₀ˣ e^(-t²) dt`, the core of the exact GELU;
/// from `libm` on the CPU (Rust's standard library has none).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Erf;

impl<F: FloatElement> UnaryOp<F> for Erf {
    const NAME: &'static str = "erf";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        match F::DTYPE {
            DType::F64 => F::from_f64(libm::erf(Element::to_f64(x))),
            DType::F32 | DType::BF16 | DType::F16 => F::from_f32(libm::erff(Element::to_f64(x) as f32)),
            DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
        }
    }

    /// `d erf(x) = 2/√π e^(-x²)`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let slope =
            x.try_square()?.try_neg()?.try_exp()?.try_mul_scalar(F::from_f64(std::f64::consts::FRAC_2_SQRT_PI))?;
        grad.try_mul(&slope)
    }
}

/// `Φ(x)`, the standard normal CDF, as `erfc(-x/√2) / 2`: accurate for
/// negative `x`, where `(1 + erf(x/√2)) / 2` cancels to 0 long before `Φ`
/// underflows (at `x = -6` in `f32`, where `Φ` is `1e-9`).
#[inline(always)]
fn normal_cdf<F: FloatElement, const FMA: bool>(x: F) -> F {
    F::from_f64(0.5) * erfc::<F, FMA>(x * F::from_f64(-std::f64::consts::FRAC_1_SQRT_2))
}

/// `φ(x)`, the standard normal density `e^(-x²/2) / √(2π)`.
#[inline(always)]
fn normal_density<F: FloatElement, const FMA: bool>(x: F) -> F {
    exp_nonpositive::<F, FMA>(x * x * F::from_f64(-0.5))
        * F::from_f64(0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2)
}

/// `2√(2/π)`: the tanh GELU's `1 + tanh(u)` is computed as `2 sigmoid(2u)`.
const TWO_SQRT_2_OVER_PI: f64 = 1.595_769_121_605_730_8;
/// The cubic coefficient of the tanh GELU.
const GELU_CUBIC: f64 = 0.044_715;

/// `sigmoid(2u)`, with `u = √(2/π) · (x + 0.044715 x³)`, the tanh GELU's
/// `(1 + tanh(u)) / 2` without the cancellation of `1 + tanh(u)` for
/// negative `x`.
#[inline(always)]
fn gelu_tanh_gate<F: FloatElement, const FMA: bool>(x: F) -> F {
    sigmoid::<F, FMA>(F::from_f64(TWO_SQRT_2_OVER_PI) * (x + F::from_f64(GELU_CUBIC) * x * x * x))
}

/// GELU, `x · Φ(x)` with `Φ` the standard normal CDF, exactly
/// (`torch.nn.functional.gelu`, `approximate="none"`), in one pass over the
/// elements where composing it from `erf` and arithmetic takes five. `Φ`
/// comes from `erfc`, as in JAX, so that `gelu(-7)` is `-9e-12` and not the
/// `-0.0` of PyTorch's `1 + erf`; `gelu(-inf)` is NaN (`-inf · 0`), as in
/// PyTorch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GeluErf;

impl<F: FloatElement> UnaryOp<F> for GeluErf {
    const NAME: &'static str = "gelu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        x * normal_cdf::<F, FMA>(x)
    }

    /// `Φ(x) + x φ(x)`, with `φ` the standard normal density, in one pass.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&x.try_apply_unary(GeluErfSlope)?)
    }
}

/// The derivative of [`GeluErf`], `Φ(x) + x φ(x)`: its backward in one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct GeluErfSlope;

impl<F: FloatElement> UnaryOp<F> for GeluErfSlope {
    const NAME: &'static str = "gelu_slope";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        normal_cdf::<F, FMA>(x) + x * normal_density::<F, FMA>(x)
    }

    /// `φ(x) (2 - x²)`, composed (recorded only for a second derivative).
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let x2 = x.try_square()?;
        let density = x2.try_mul_scalar(F::from_f64(-0.5))?.try_exp()?.try_mul_scalar(F::from_f64(FRAC_1_SQRT_2PI))?;
        grad.try_mul(&density.try_mul(&x2.try_rsub_scalar(F::from_f64(2.0))?)?)
    }
}

/// `1/√(2π)`, the standard normal density at 0.
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// GELU with PyTorch's tanh approximation,
/// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`
/// (`gelu(x, approximate="tanh")`), in one pass, computed as
/// `x · sigmoid(2u)` (the same function) so that negative inputs keep
/// their digits. `gelu_tanh(-inf)` is NaN, as in PyTorch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GeluTanh;

impl<F: FloatElement> UnaryOp<F> for GeluTanh {
    const NAME: &'static str = "gelu_tanh";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        x * gelu_tanh_gate::<F, FMA>(x)
    }

    /// `s + 2x · s(1 - s) · √(2/π) · (1 + 3 · 0.044715 x²)`, with `s` the
    /// forward's `sigmoid(2u)`, in one pass.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&x.try_apply_unary(GeluTanhSlope)?)
    }
}

/// The derivative of [`GeluTanh`]: its backward in one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct GeluTanhSlope;

impl<F: FloatElement> UnaryOp<F> for GeluTanhSlope {
    const NAME: &'static str = "gelu_tanh_slope";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        self.apply_in_loop::<BASELINE_FMA>(x)
    }

    #[inline(always)]
    fn apply_in_loop<const FMA: bool>(self, x: F) -> F {
        let s = gelu_tanh_gate::<F, FMA>(x);
        let du = F::from_f64(TWO_SQRT_2_OVER_PI / 2.0) * (F::ONE + F::from_f64(3.0 * GELU_CUBIC) * x * x);
        s + F::from_f64(2.0) * x * s * (F::ONE - s) * du
    }

    /// With `s = sigmoid(2u)`, `u' = √(2/π)(1 + 3a x²)` and `q = s(1 - s)`:
    /// `q (4u' + 4x u'² (1 - 2s) + 12 a √(2/π) x²)`, composed (recorded
    /// only for a second derivative).
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let c = TWO_SQRT_2_OVER_PI / 2.0;
        let x2 = x.try_square()?;
        let u = x2
            .try_mul_scalar(F::from_f64(GELU_CUBIC))?
            .try_add_scalar(F::ONE)?
            .try_mul(x)?
            .try_mul_scalar(F::from_f64(c))?;
        let s = u.try_mul_scalar(F::from_f64(2.0))?.try_sigmoid()?;
        let q = s.try_mul(&s.try_rsub_scalar(F::ONE)?)?;
        let du =
            x2.try_mul_scalar(F::from_f64(3.0 * GELU_CUBIC))?.try_add_scalar(F::ONE)?.try_mul_scalar(F::from_f64(c))?;
        let curve =
            x.try_mul(&du.try_square()?)?.try_mul(&s.try_mul_scalar(F::from_f64(-2.0))?.try_add_scalar(F::ONE)?)?;
        let sum = du
            .try_add(&curve)?
            .try_mul_scalar(F::from_f64(4.0))?
            .try_add(&x2.try_mul_scalar(F::from_f64(12.0 * GELU_CUBIC * c))?)?;
        grad.try_mul(&q.try_mul(&sum)?)
    }
}
