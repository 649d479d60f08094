//! The element-wise activations of `torch.nn.functional` beyond ReLU,
//! sigmoid, tanh, SiLU and GELU (which are in `ops.rs`): `leaky_relu`,
//! `elu`, `selu`, `celu`, `softplus`, `mish`, `hardswish`, `hardsigmoid`,
//! `logsigmoid`, `softsign`. Each value and gradient is written as
//! PyTorch 2.15's kernel computes it, so that the two agree at the kinks
//! (`leaky_relu` at 0, `hardswish` at ±3, `softplus` at its threshold).
//! The layers that apply them are in `nn::activation`.

use super::{KernelSource, Params, UnaryOp};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::ops::compare::masked;
use crate::tensor::Device;
use crate::tensor::Tensor;

/// `x` where `x > 0`, `negative_slope · x` elsewhere,
/// `F.leaky_relu(x, negative_slope)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeakyReluOp<F> {
    /// The slope below zero (PyTorch's default: 0.01).
    pub negative_slope: F,
}

impl<F: FloatElement> UnaryOp<F> for LeakyReluOp<F> {
    const NAME: &'static str = "leaky_relu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: F) -> F {
        if x > F::ZERO { x } else { x * self.negative_slope }
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        LeakyReluOp { negative_slope: self.negative_slope.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<F> {
        Params::one(self.negative_slope)
    }

    /// `grad` where `x > 0`, `negative_slope · grad` elsewhere (so at 0), as PyTorch.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        x.try_gt_scalar(F::ZERO)?.try_where_cond(grad, &grad.try_mul_scalar(self.negative_slope)?)
    }
}

/// The exponential linear unit with a scale inside and outside:
/// `scale · x` above 0, `scale · alpha · (e^(x · input_scale) - 1)` at and
/// below, as PyTorch's one kernel for ELU, SELU and CELU.
#[inline(always)]
fn elu<F: FloatElement>(x: F, alpha: F, scale: F, input_scale: F) -> F {
    if x > F::ZERO { x * scale } else { (x * input_scale).exp_m1() * (alpha * scale) }
}

/// The gradient of [`elu`]: `scale · grad` above 0,
/// `grad · input_scale · alpha · scale · e^(x · input_scale)` at and below.
fn elu_backward<D: Device, F: FloatElement>(
    x: &Tensor<D, F>,
    grad: &Tensor<D, F>,
    alpha: F,
    scale: F,
    input_scale: F,
) -> Result<Tensor<D, F>> {
    let below = x.try_mul_scalar(input_scale)?.try_exp()?.try_mul_scalar(input_scale * alpha * scale)?;
    x.try_gt_scalar(F::ZERO)?.try_where_cond(&grad.try_mul_scalar(scale)?, &grad.try_mul(&below)?)
}

/// ELU, `x` above 0 and `alpha · (e^x - 1)` at and below, `F.elu(x, alpha)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EluOp<F> {
    /// The value approached as `x → -inf` is `-alpha` (PyTorch's default: 1).
    pub alpha: F,
}

impl<F: FloatElement> UnaryOp<F> for EluOp<F> {
    const NAME: &'static str = "elu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: F) -> F {
        elu(x, self.alpha, F::ONE, F::ONE)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        EluOp { alpha: self.alpha.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<F> {
        Params::one(self.alpha)
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        elu_backward(x, grad, self.alpha, F::ONE, F::ONE)
    }
}

/// SELU's `alpha` (Klambauer et al. 2017, as PyTorch writes it).
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
/// SELU's `scale`.
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// SELU, ELU with PyTorch's fixed `alpha = 1.6732632423543772` and
/// `scale = 1.0507009873554805`, `F.selu`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SeluOp;

impl<F: FloatElement> UnaryOp<F> for SeluOp {
    const NAME: &'static str = "selu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        elu(x, F::from_f64(SELU_ALPHA), F::from_f64(SELU_SCALE), F::ONE)
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        elu_backward(x, grad, F::from_f64(SELU_ALPHA), F::from_f64(SELU_SCALE), F::ONE)
    }
}

/// CELU, `x` above 0 and `alpha · (e^(x / alpha) - 1)` at and below,
/// `F.celu(x, alpha)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CeluOp<F> {
    /// PyTorch's default: 1.
    pub alpha: F,
}

impl<F: FloatElement> UnaryOp<F> for CeluOp<F> {
    const NAME: &'static str = "celu";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: F) -> F {
        elu(x, self.alpha, F::ONE, F::ONE / self.alpha)
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        CeluOp { alpha: self.alpha.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<F> {
        Params::one(self.alpha)
    }

    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        elu_backward(x, grad, self.alpha, F::ONE, F::ONE / self.alpha)
    }
}

/// Softplus, `log(1 + e^(beta · x)) / beta`, and `x` itself where
/// `beta · x > threshold` (where the two agree to the type's precision),
/// `F.softplus(x, beta, threshold)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftplusOp<F> {
    /// PyTorch's default: 1.
    pub beta: F,
    /// PyTorch's default: 20.
    pub threshold: F,
}

impl<F: FloatElement> UnaryOp<F> for SoftplusOp<F> {
    const NAME: &'static str = "softplus";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, x: F) -> F {
        let z = x * self.beta;
        if z > self.threshold { x } else { z.exp().ln_1p() / self.beta }
    }

    #[inline(always)]
    fn apply_f32<const FMA: bool>(self, x: f32) -> f32 {
        SoftplusOp { beta: self.beta.cast::<f32>(), threshold: self.threshold.cast::<f32>() }.apply(x)
    }

    fn params(self) -> Params<F> {
        Params::two(self.beta, self.threshold)
    }

    /// `grad · sigmoid(beta · x)`, and `grad` past the threshold.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let z = x.try_mul_scalar(self.beta)?;
        z.try_gt_scalar(self.threshold)?.try_where_cond(grad, &grad.try_mul(&z.try_sigmoid()?)?)
    }
}

/// Mish, `x · tanh(softplus(x))`, `F.mish`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MishOp;

impl<F: FloatElement> UnaryOp<F> for MishOp {
    const NAME: &'static str = "mish";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x * x.exp().ln_1p().tanh()
    }

    /// `t + x · sigmoid(x) · (1 - t²)`, with `t = tanh(softplus(x))`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let t = x.try_exp()?.try_log1p()?.try_tanh()?;
        let slope = t.try_add(&x.try_mul(&x.try_sigmoid()?)?.try_mul(&t.try_square()?.try_rsub_scalar(F::ONE)?)?)?;
        grad.try_mul(&slope)
    }
}

/// `min(max(x + 3, 0), 6)`, the ramp inside the hard activations.
#[inline(always)]
fn relu6_of_x_plus_3<F: FloatElement>(x: F) -> F {
    Element::min(Element::max(x + F::from_f64(3.0), F::ZERO), F::from_f64(6.0))
}

/// Hardswish, `x · min(max(x + 3, 0), 6) / 6` (Howard et al. 2019),
/// `F.hardswish`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HardswishOp;

impl<F: FloatElement> UnaryOp<F> for HardswishOp {
    const NAME: &'static str = "hardswish";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x * relu6_of_x_plus_3(x) / F::from_f64(6.0)
    }

    /// PyTorch 2.15's: 0 up to -3, `grad · (x / 3 + 1/2)` strictly
    /// between -3 and 3, `grad` from 3 on.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let inside = grad.try_mul(&x.try_div_scalar(F::from_f64(3.0))?.try_add_scalar(F::from_f64(0.5))?)?;
        let upper = x.try_lt_scalar(F::from_f64(3.0))?.try_where_cond(&inside, grad)?;
        x.try_le_scalar(F::from_f64(-3.0))?.try_where_cond(&grad.try_zeros_like()?, &upper)
    }
}

/// Hardsigmoid, `min(max(x + 3, 0), 6) / 6`, `F.hardsigmoid`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HardsigmoidOp;

impl<F: FloatElement> UnaryOp<F> for HardsigmoidOp {
    const NAME: &'static str = "hardsigmoid";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        relu6_of_x_plus_3(x) / F::from_f64(6.0)
    }

    /// `grad / 6` strictly inside `(-3, 3)`, 0 elsewhere, as PyTorch.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        let inside = x.try_gt_scalar(F::from_f64(-3.0))?.try_logical_and(&x.try_lt_scalar(F::from_f64(3.0))?)?;
        masked(&inside, &grad.try_div_scalar(F::from_f64(6.0))?)
    }
}

/// `log(sigmoid(x))`, as `min(x, 0) - log(1 + e^-|x|)` so that neither
/// end overflows, `F.logsigmoid`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LogSigmoidOp;

impl<F: FloatElement> UnaryOp<F> for LogSigmoidOp {
    const NAME: &'static str = "logsigmoid";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        Element::min(x, F::ZERO) - (-x.abs()).exp().ln_1p()
    }

    /// `grad · sigmoid(-x)`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_mul(&x.try_neg()?.try_sigmoid()?)
    }
}

/// Softsign, `x / (1 + |x|)`, `F.softsign`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SoftsignOp;

impl<F: FloatElement> UnaryOp<F> for SoftsignOp {
    const NAME: &'static str = "softsign";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    apply_in_f32!();

    #[inline(always)]
    fn apply(self, x: F) -> F {
        x / (F::ONE + x.abs())
    }

    /// `grad / (1 + |x|)²`.
    fn backward<D: Device>(self, x: &Tensor<D, F>, _: &Tensor<D, F>, grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
        grad.try_div(&x.try_abs()?.try_add_scalar(F::ONE)?.try_square()?)
    }
}
