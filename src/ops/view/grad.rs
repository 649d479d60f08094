//! Gradient rules of the views: each maps the gradient of the view back to
//! the shape of the tensor it was taken from.

use crate::autograd::{Backward, rule};
use crate::element::FloatElement;
use crate::layout::Shape;
use crate::tensor::CoreDevice;
use crate::tensor::Tensor;

/// How a view relates to its input, as backward needs it.
pub(super) enum ViewGrad {
    /// Same elements in the same order, another shape (reshape, squeeze,
    /// unsqueeze): the gradient is reshaped back to the input's shape.
    Reshape(Shape),
    /// Axes reordered: the gradient is permuted by the inverse order.
    Permute(Vec<usize>),
    /// Elements `step` apart from `start` along `axis` of an axis of `size`
    /// (`step` 1 for `narrow`): the gradient is spread `step` apart with
    /// zeros between, and padded with zeros on both sides.
    Slice { axis: usize, start: usize, step: usize, size: usize },
    /// Broadcast from the input's shape: the gradient is summed back.
    Broadcast(Shape),
}

pub(super) fn view<D: CoreDevice, F: FloatElement>(how: ViewGrad) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let gx = match &how {
            ViewGrad::Reshape(shape) => g.try_reshape(shape.clone())?,
            ViewGrad::Permute(inverse) => g.try_permute(inverse)?,
            ViewGrad::Slice { axis, start, step, size } => {
                let (axis, step) = (*axis, *step);
                let zeros_along = |t: &Tensor<D, F>, at: usize, n: usize| {
                    let mut dims = t.dims().to_vec();
                    dims[at] = n;
                    Tensor::<D, F>::try_zeros(dims)
                };
                let len = g.dims()[axis];
                let spread = if step == 1 || len == 0 {
                    g.clone()
                } else {
                    // Each element followed by `step - 1` zeros, cut after
                    // the last element that the axis still holds.
                    let g1 = g.try_unsqueeze(axis as isize + 1)?;
                    let gaps = zeros_along(&g1, axis + 1, step - 1)?;
                    let mut dims = g.dims().to_vec();
                    dims[axis] = len * step;
                    let whole = Tensor::try_cat(&[&g1, &gaps], axis as isize + 1)?.try_reshape(dims)?;
                    whole.try_narrow(axis as isize, 0, (len * step).min(size - start))?
                };
                let kept = spread.dims()[axis];
                let (before, after) = (zeros_along(g, axis, *start)?, zeros_along(g, axis, size - start - kept)?);
                Tensor::try_cat(&[&before, &spread, &after], axis as isize)?
            }
            ViewGrad::Broadcast(shape) => g.try_sum_to_shape(shape)?,
        };
        Ok(vec![Some(gx)])
    })
}
