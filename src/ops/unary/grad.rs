//! Gradient rules of the elementwise functions, each from the input `x` or
//! the result `y`, whichever gives the cheaper expression.

use super::{FloatUnaryOp, UnaryOp};
use crate::autograd::{Backward, rule};
use crate::device::Device;
use crate::element::FloatElement;
use crate::ops::binary::grad::masked;
use crate::tensor::Tensor;

pub(super) fn unary<D: Device, F: FloatElement>(op: UnaryOp<F>, x: Tensor<D, F>, y: Tensor<D, F>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let gx = match op {
            UnaryOp::Neg => g.try_neg()?,
            // sign(x) * g, 0 at x = 0 as in PyTorch.
            UnaryOp::Abs => masked(&x.try_gt_scalar(F::ZERO)?, g)?.try_sub(&masked(&x.try_lt_scalar(F::ZERO)?, g)?)?,
            UnaryOp::Relu => masked(&y.try_gt_scalar(F::ZERO)?, g)?,
            // Passed through inside the bounds, bounds included (PyTorch's rule).
            UnaryOp::Clamp { min, max } => masked(&x.try_ge_scalar(min)?.try_logical_and(&x.try_le_scalar(max)?)?, g)?,
            UnaryOp::Square => g.try_mul(&x)?.try_mul_scalar(F::from_f64(2.0))?,
        };
        Ok(vec![Some(gx)])
    })
}

pub(super) fn unary_float<D: Device, F: FloatElement>(
    op: FloatUnaryOp<F>,
    x: Tensor<D, F>,
    y: Tensor<D, F>,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let one = F::ONE;
        let gx = match op {
            FloatUnaryOp::Exp => g.try_mul(&y)?,
            FloatUnaryOp::Log => g.try_div(&x)?,
            FloatUnaryOp::Sqrt => g.try_div(&y.try_mul_scalar(F::from_f64(2.0))?)?,
            FloatUnaryOp::Tanh => g.try_mul(&y.try_square()?.try_rsub_scalar(one)?)?,
            FloatUnaryOp::Sigmoid => g.try_mul(&y.try_mul(&y.try_rsub_scalar(one)?)?)?,
            // PyTorch's rule, zero for a zero exponent (also at x = 0).
            FloatUnaryOp::Powf(p) if p == F::ZERO => g.try_zeros_like()?,
            FloatUnaryOp::Powf(p) => g.try_mul(&x.try_powf(p - one)?.try_mul_scalar(p)?)?,
            FloatUnaryOp::Sin => g.try_mul(&x.try_cos()?)?,
            FloatUnaryOp::Cos => g.try_mul(&x.try_sin()?)?.try_neg()?,
            FloatUnaryOp::Recip => g.try_mul(&y.try_square()?)?.try_neg()?,
            // d erf(x) = 2/√π e^(-x²)
            FloatUnaryOp::Erf => g.try_mul(
                &x.try_square()?.try_neg()?.try_exp()?.try_mul_scalar(F::from_f64(std::f64::consts::FRAC_2_SQRT_PI))?,
            )?,
        };
        Ok(vec![Some(gx)])
    })
}
