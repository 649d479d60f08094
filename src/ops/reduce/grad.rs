//! Gradient rules of the reductions and of softmax.

use super::{ExtremeOp, Fns, Sum, reduced_shape, scale_by_repeat};
use crate::autograd::{Backward, rule};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::Shape;
use crate::ops::compare::masked;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};

impl<D: Device, E: Element> Tensor<D, E> {
    /// This gradient of a broadcast result summed back to `shape`, the
    /// shape of the operand that was broadcast: over the leading axes it
    /// lacked and over its size-1 axes. In the element type itself (gradient
    /// rules run on floats, whose sums keep their type), untracked (rules
    /// run under `no_grad`).
    pub(crate) fn try_sum_to_shape(&self, shape: &Shape) -> Result<Self> {
        core_call!(D, Fns<E>.sum_to_shape(self.core(), shape))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The core of [`try_sum_to_shape`](Self::try_sum_to_shape).
    pub(super) fn core_sum_to_shape(&self, shape: &Shape) -> Result<Self> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let mut g = self.clone();
        for _ in shape.rank()..self.rank() {
            g = g.sum_same_type(0, false)?;
        }
        for (axis, &d) in shape.dims().iter().enumerate() {
            if d == 1 && g.dims()[axis] != 1 {
                g = g.sum_same_type(axis, true)?;
            }
        }
        Ok(g)
    }

    /// The sum along `axis` in the element type, as `sum_axis` computes it.
    fn sum_same_type(&self, axis: usize, keepdim: bool) -> Result<Self> {
        let (len, stride) = (self.dims()[axis], self.layout().strides()[axis]);
        if stride == 0 && len > 1 {
            return scale_by_repeat(self.broadcast_slice(axis, keepdim)?, len);
        }
        let storage = D::reduce(Sum, self.storage(), self.layout(), axis)?;
        Ok(Tensor::from_storage(storage, reduced_shape(self.shape(), axis, keepdim)))
    }
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    /// A reduced gradient spread back over `shape`: `axis` (removed from
    /// `self` unless `keepdim`) is restored as size 1 and broadcast.
    fn spread_over(&self, shape: &Shape, axis: Option<usize>, keepdim: bool) -> Result<Self> {
        let g = match axis {
            Some(axis) if !keepdim => self.try_unsqueeze(axis as isize)?,
            _ => self.clone(),
        };
        g.try_reshape(broadcastable_rank(g.shape(), shape))?.try_broadcast_to(shape.clone())
    }
}

/// `reduced` (of the same rank as `full`, or rank 0) as a shape that
/// broadcasts to `full`.
fn broadcastable_rank(reduced: &Shape, full: &Shape) -> Shape {
    if reduced.rank() == full.rank() { reduced.clone() } else { Shape::from_dims(vec![1; full.rank()].into()) }
}

/// `sum` over everything (`axis` `None`) or along `axis` of `input`.
pub(super) fn sum<D: CoreDevice, F: FloatElement>(
    input: Shape,
    axis: Option<usize>,
    keepdim: bool,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| Ok(vec![Some(g.spread_over(&input, axis, keepdim)?)]))
}

/// `max` or `min` of `x` over everything: the gradient is shared evenly by
/// the elements equal to the result (NaN ones when it is NaN), as PyTorch
/// shares it.
pub(super) fn extreme_all<D: CoreDevice, F: FloatElement>(x: Tensor<D, F>, out: Tensor<D, F>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let hits = x.try_eq(&out)?.try_logical_or(&x.try_ne(&x)?.try_logical_and(&out.try_ne(&out)?)?)?;
        let count = hits.try_sum()?.try_to_dtype::<F>()?;
        let share = g.try_div(&count)?;
        Ok(vec![Some(masked(&hits, &share.try_broadcast_to(x.shape().clone())?)?)])
    })
}

/// `max` or `min` of `x` along `axis`: the whole gradient goes to the
/// element the result was taken from (the first occurrence), as PyTorch's
/// `max(dim)` sends it to the index it returns.
pub(super) fn extreme_axis<D: CoreDevice, F: FloatElement, Op: ExtremeOp>(
    op: Op,
    x: Tensor<D, F>,
    axis: Option<usize>,
    keepdim: bool,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let Some(axis) = axis else {
            return Ok(vec![Some(g.try_reshape(x.shape().clone())?)]);
        };
        let ax = axis as isize;
        let index = x.arg_reduce_axis(op, Op::ARG_NAME, ax, true)?;
        let g = if keepdim { g.clone() } else { g.try_unsqueeze(ax)? };
        Ok(vec![Some(x.try_zeros_like()?.try_scatter_add(ax, &index, &g)?)])
    })
}

/// `cumsum` along `axis`: each element's gradient is the sum of the
/// gradients of the running sums it is part of, the running sum of `g`
/// taken from the end of the line.
pub(super) fn cumsum<D: CoreDevice, F: FloatElement>(axis: Option<usize>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| Ok(vec![Some(g.running(Sum, axis, true)?)]))
}

/// The standard deviation `out` of `x` over `axis` (or every element)
/// with divisor `N - correction`: `(x - mean) / (divisor * out)`, and 0
/// where `out` is 0, as PyTorch's rule gives.
pub(super) fn std<D: CoreDevice, F: FloatElement>(
    x: Tensor<D, F>,
    out: Tensor<D, F>,
    axis: Option<usize>,
    keepdim: bool,
    divisor: F,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let scale = masked(&out.try_ne_scalar(F::ZERO)?, &g.try_div(&out)?)?;
        let mean = match axis {
            Some(axis) => x.try_mean_keepdim(axis as isize)?,
            None => x.try_mean()?,
        };
        let centred = x.try_sub(&mean)?.try_div_scalar(divisor)?;
        Ok(vec![Some(scale.spread_over(x.shape(), axis, keepdim)?.try_mul(&centred)?)])
    })
}

/// `softmax` (or `log_softmax`) of `x` along `axis`, given its result `y`.
pub(super) fn softmax<D: CoreDevice, F: FloatElement>(
    y: Tensor<D, F>,
    axis: Option<usize>,
    log: bool,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        // On a rank-0 tensor the result is the constant 1 (or 0).
        let Some(axis) = axis else { return Ok(vec![Some(g.try_zeros_like()?)]) };
        // One fused pass instead of four composed ops (each its own trip
        // over memory): y · (g − Σ g·y), or g − exp(y) · Σ g for log_softmax.
        let storage = D::softmax_backward((y.storage(), y.layout()), (g.storage(), g.layout()), axis, log)?;
        Ok(vec![Some(Tensor::from_storage(storage, y.shape().clone()))])
    })
}
