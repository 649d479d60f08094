//! Gradient rules of the reductions and of softmax.

use super::axes::{AxisList, without_axes};
use super::{ExtremeOp, Fns, Product, Sum, reduced_shape, scale_by_repeat};
use crate::autograd::{self, Backward, float_rule, rule, saved_output};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::{Dims, Shape};
use crate::ops::compare::masked;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};

impl<D: Device, E: Element> Tensor<D, E> {
    /// This gradient of a broadcast result summed back to `shape`, the
    /// shape of the operand that was broadcast: over the leading axes it
    /// lacked and over its size-1 axes. In the element type itself (gradient
    /// rules run on floats, whose sums keep their type). Recorded as
    /// PyTorch's `sum_to_size`, whose gradient is the broadcast back, so
    /// that a gradient of a broadcast operand can be differentiated again.
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
        let forward = || self.sum_to_shape_untracked(shape);
        autograd::track("sum_to_size", &[self.node()], forward, |_| {
            let input = self.shape().clone();
            float_rule!(E, F => rule(move |g: &Tensor<D, F>, _| Ok(vec![Some(g.try_broadcast_to(input.clone())?)])))
        })
    }

    fn sum_to_shape_untracked(&self, shape: &Shape) -> Result<Self> {
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
    pub(super) fn sum_same_type(&self, axis: usize, keepdim: bool) -> Result<Self> {
        let (len, stride) = (self.dims()[axis], self.layout().strides()[axis]);
        if stride == 0 && len > 1 {
            return scale_by_repeat(self.broadcast_slice(axis, keepdim)?, len);
        }
        let storage = D::reduce(Sum, self.storage(), self.layout(), axis)?;
        Ok(Tensor::from_storage(storage, reduced_shape(self.shape(), axis, keepdim)))
    }
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    /// A reduced gradient spread back over `shape`: the reduced `axes`
    /// (increasing; removed from `self` unless `keepdim`) are restored as
    /// size 1 and broadcast.
    fn spread_over(&self, shape: &Shape, axes: &[usize], keepdim: bool) -> Result<Self> {
        let g = if keepdim { self.clone() } else { self.try_reshape(without_axes(shape, axes, true))? };
        g.try_broadcast_to(shape.clone())
    }
}

/// `sum` of `input` over the (increasing) `axes`.
pub(super) fn sum<D: CoreDevice, F: FloatElement>(input: Shape, axes: Dims, keepdim: bool) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| Ok(vec![Some(g.spread_over(&input, &axes, keepdim)?)]))
}

/// `amax` or `amin` of `x` over the (increasing) `axes` (`max` and `min`
/// over everything are every axis, removed): the gradient is shared evenly
/// by the elements equal to the result (NaN ones when it is NaN), as
/// PyTorch shares it.
pub(super) fn extreme_over<D: CoreDevice, F: FloatElement>(
    x: Tensor<D, F>,
    out: Tensor<D, F>,
    axes: Dims,
    keepdim: bool,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let kept = without_axes(x.shape(), &axes, true);
        let (out, g) =
            if keepdim { (out.clone(), g.clone()) } else { (out.try_reshape(&kept)?, g.try_reshape(&kept)?) };
        let hits = x.try_eq(&out)?.try_logical_or(&x.try_ne(&x)?.try_logical_and(&out.try_ne(&out)?)?)?;
        let signed: AxisList = axes.iter().map(|&a| a as isize).collect();
        let count = hits.try_sum_keepdim(&signed[..])?.try_to_dtype::<F>()?;
        Ok(vec![Some(masked(&hits, &g.try_div(&count)?.try_broadcast_to(x.shape().clone())?)?)])
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
    rule(move |g: &Tensor<D, F>, _| {
        // A rank-0 tensor (no axis) is its own running sum.
        let Some(axis) = axis else { return Ok(vec![Some(g.clone())]) };
        if autograd::is_grad_enabled() {
            // Recorded (`create_graph`): the sum from the end as the whole
            // line's sum less the running sum before each element, from
            // recorded ops.
            let ax = axis as isize;
            return Ok(vec![Some(g.try_sum_keepdim(ax)?.try_sub(&g.try_cumsum(ax)?)?.try_add(g)?)]);
        }
        Ok(vec![Some(g.running(Sum, Some(axis), true)?)])
    })
}

/// `cumprod` of `x` along `axis`: the gradient of the running products
/// written as a scan of recorded multiplications (each element times the
/// one `2^s` places before it, for `s = 0, 1, ..`: Hillis and Steele's),
/// recomputed from `x` by `composed_gradients`. Exact where elements are 0
/// (nothing divides by them) and differentiable again, for `log2(len)`
/// passes over the line where the forward's fused scan takes one.
pub(super) fn cumprod<D: CoreDevice, F: FloatElement>(x: Tensor<D, F>, axis: Option<usize>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        // A rank-0 tensor (no axis) is its own running product.
        let Some(axis) = axis else { return Ok(vec![Some(g.clone())]) };
        autograd::composed_gradients(&[&x], g, || running_product_scan(&x, axis as isize))
    })
}

/// The running products of `x` along `axis` from recorded ops (see [`cumprod`]).
fn running_product_scan<D: CoreDevice, F: FloatElement>(x: &Tensor<D, F>, axis: isize) -> Result<Tensor<D, F>> {
    let len = x.dims()[axis as usize];
    let (mut y, mut step) = (x.clone(), 1);
    while step < len {
        let (head, tail) = (y.try_narrow(axis, 0, step)?, y.try_narrow(axis, step, len - step)?);
        let times_earlier = tail.try_mul(&y.try_narrow(axis, 0, len - step)?)?;
        y = Tensor::try_cat(&[&head, &times_earlier], axis)?;
        step *= 2;
    }
    Ok(y)
}

/// `prod` of `x` along `axis`: each element's gradient is the product of
/// the others on its line, the running product of the elements before it
/// times that of the elements after it. Exact with zeros, where `out / x`
/// divides by 0 (PyTorch's rule also special-cases them). The running
/// products are not recorded ops: a recorded backward (`create_graph`)
/// differentiates the product written as a tree of recorded
/// multiplications instead, exact with zeros too.
pub(super) fn prod<D: CoreDevice, F: FloatElement>(x: Tensor<D, F>, axis: usize, keepdim: bool) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let (a, len) = (axis as isize, x.dims()[axis]);
        if len == 0 {
            return Ok(vec![Some(x.try_zeros_like()?)]);
        }
        if autograd::is_grad_enabled() {
            return autograd::composed_gradients(&[&x], g, || product_tree(&x, a, keepdim));
        }
        let ones = Tensor::<D, F>::try_ones(reduced_shape(x.shape(), axis, true))?;
        let before = x.try_narrow(a, 0, len - 1)?.running(Product, Some(axis), false)?;
        let after = x.try_narrow(a, 1, len - 1)?.running(Product, Some(axis), true)?;
        let before = Tensor::try_cat(&[&ones, &before], a)?;
        let after = Tensor::try_cat(&[&after, &ones], a)?;
        let g = if keepdim { g.clone() } else { g.try_unsqueeze(a)? };
        Ok(vec![Some(before.try_mul(&after)?.try_mul(&g)?)])
    })
}

/// The product of `x` along `axis` (of length at least 1) from recorded
/// ops: the first half of the line times the second, halving until one
/// element is left, an odd length's last element set aside and
/// multiplied in at the end. `log2(len)` multiplications, each
/// differentiable to any order.
fn product_tree<D: CoreDevice, F: FloatElement>(x: &Tensor<D, F>, axis: isize, keepdim: bool) -> Result<Tensor<D, F>> {
    let (mut line, mut left_over) = (x.clone(), None::<Tensor<D, F>>);
    loop {
        let len = line.dims()[axis as usize];
        if len == 1 {
            break;
        }
        let half = len / 2;
        if len % 2 == 1 {
            let last = line.try_narrow(axis, len - 1, 1)?;
            left_over = Some(match left_over {
                Some(earlier) => earlier.try_mul(&last)?,
                None => last,
            });
        }
        line = line.try_narrow(axis, 0, half)?.try_mul(&line.try_narrow(axis, half, half)?)?;
    }
    let product = match left_over {
        Some(rest) => line.try_mul(&rest)?,
        None => line,
    };
    if keepdim { Ok(product) } else { product.try_squeeze(axis) }
}

/// The standard deviation `out` of `x` over the (increasing) `axes` with
/// divisor `N - correction`: `(x - mean) / (divisor * out)`, and 0 where
/// `out` is 0, as PyTorch's rule gives.
pub(super) fn std<D: CoreDevice, F: FloatElement>(
    x: Tensor<D, F>,
    out: Tensor<D, F>,
    axes: Dims,
    keepdim: bool,
    divisor: F,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let out = saved_output(&out);
        let scale = masked(&out.try_ne_scalar(F::ZERO)?, &g.try_div(&out)?)?;
        let signed: AxisList = axes.iter().map(|&a| a as isize).collect();
        let centred = x.try_sub(&x.try_mean_keepdim(&signed[..])?)?.try_div_scalar(divisor)?;
        Ok(vec![Some(scale.spread_over(x.shape(), &axes, keepdim)?.try_mul(&centred)?)])
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
        if autograd::is_grad_enabled() {
            // Recorded (`create_graph`): the same rule composed, so that it
            // can be differentiated again.
            let (y, ax) = (saved_output(&y), axis as isize);
            return Ok(vec![Some(match log {
                true => g.try_sub(&y.try_exp()?.try_mul(&g.try_sum_keepdim(ax)?)?)?,
                false => y.try_mul(&g.try_sub(&g.try_mul(&y)?.try_sum_keepdim(ax)?)?)?,
            })]);
        }
        // One fused pass instead of four composed ops (each its own trip
        // over memory): y · (g − Σ g·y), or g − exp(y) · Σ g for log_softmax.
        let storage = D::softmax_backward((y.storage(), y.layout()), (g.storage(), g.layout()), axis, log)?;
        Ok(vec![Some(Tensor::from_storage(storage, y.shape().clone()))])
    })
}
