//! Gradient rules of the elementwise arithmetic. A broadcast operand's
//! gradient is summed back to its own shape, as in PyTorch.

use super::BinaryOp;
use crate::autograd::{Backward, rule};
use crate::device::Device;
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::tensor::Tensor;

/// `g` where `keep` is true, 0 elsewhere (0 also where `g` is NaN or
/// infinite, as PyTorch's `masked_fill` gives).
pub(crate) fn masked<D: Device, E: Element>(keep: &Tensor<D, u8>, g: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    keep.try_where_cond(g, &Tensor::<D, E>::try_scalar(E::ZERO)?)
}

/// The share of `g` that `maximum(a, b)` (or `minimum`) passes to `a`:
/// all of it where `a` won, none where `b` won, half on a tie, PyTorch's
/// rule. `b_wins` is `a < b` for maximum and `a > b` for minimum; NaN
/// propagates from either side, so both sides get all of it.
fn winner_share<D: Device, F: FloatElement>(
    g: &Tensor<D, F>,
    b_wins: Tensor<D, u8>,
    tie: Tensor<D, u8>,
) -> Result<Tensor<D, F>> {
    let half = tie.try_where_cond(&g.try_mul_scalar(F::from_f64(0.5))?, g)?;
    masked(&b_wins.try_logical_not()?, &half)
}

pub(super) fn binary<D: Device, F: FloatElement>(op: BinaryOp, a: Tensor<D, F>, b: Tensor<D, F>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let (ga, gb) = match op {
            BinaryOp::Add => (needs.then(0, || Ok(g.clone()))?, needs.then(1, || Ok(g.clone()))?),
            BinaryOp::Sub => (needs.then(0, || Ok(g.clone()))?, needs.then(1, || g.try_neg())?),
            BinaryOp::Mul => (needs.then(0, || g.try_mul(&b))?, needs.then(1, || g.try_mul(&a))?),
            BinaryOp::Div => (
                needs.then(0, || g.try_div(&b))?,
                // d(a/b)/db = -a / b^2
                needs.then(1, || g.try_mul(&a)?.try_div(&b.try_square()?)?.try_neg())?,
            ),
            // Piecewise constant: zero almost everywhere, as PyTorch defines it.
            BinaryOp::DivTrunc | BinaryOp::DivFloor => {
                (needs.then(0, || g.try_zeros_like())?, needs.then(1, || g.try_zeros_like())?)
            }
            BinaryOp::Maximum | BinaryOp::Minimum => {
                let max = op == BinaryOp::Maximum;
                let a_below = || if max { a.try_lt(&b) } else { a.try_gt(&b) };
                let b_below = || if max { b.try_lt(&a) } else { b.try_gt(&a) };
                (
                    needs.then(0, || winner_share(g, a_below()?, a.try_eq(&b)?))?,
                    needs.then(1, || winner_share(g, b_below()?, a.try_eq(&b)?))?,
                )
            }
        };
        Ok(vec![sum_to(ga, &a)?, sum_to(gb, &b)?])
    })
}

/// A broadcast gradient summed back to `operand`'s shape.
fn sum_to<D: Device, F: FloatElement>(g: Option<Tensor<D, F>>, operand: &Tensor<D, F>) -> Result<Option<Tensor<D, F>>> {
    g.map(|g| g.try_sum_to_shape(operand.shape())).transpose()
}

/// `x op s`, or `s op x` when `scalar_first`.
pub(super) fn binary_scalar<D: Device, F: FloatElement>(
    op: BinaryOp,
    x: Tensor<D, F>,
    s: F,
    scalar_first: bool,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let gx = match op {
            BinaryOp::Add => g.clone(),
            BinaryOp::Sub if scalar_first => g.try_neg()?,
            BinaryOp::Sub => g.clone(),
            BinaryOp::Mul => g.try_mul_scalar(s)?,
            // d(s/x)/dx = -s / x^2
            BinaryOp::Div if scalar_first => g.try_mul_scalar(s)?.try_div(&x.try_square()?)?.try_neg()?,
            BinaryOp::Div => g.try_div_scalar(s)?,
            BinaryOp::DivTrunc | BinaryOp::DivFloor => g.try_zeros_like()?,
            BinaryOp::Maximum => winner_share(g, x.try_lt_scalar(s)?, x.try_eq_scalar(s)?)?,
            BinaryOp::Minimum => winner_share(g, x.try_gt_scalar(s)?, x.try_eq_scalar(s)?)?,
        };
        Ok(vec![Some(gx)])
    })
}
