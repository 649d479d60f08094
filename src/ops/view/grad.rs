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
    /// `len` elements from `start` along `axis` of an axis of `size`: the
    /// gradient is padded with zeros on both sides.
    Narrow { axis: usize, start: usize, size: usize },
    /// Broadcast from the input's shape: the gradient is summed back.
    Broadcast(Shape),
}

pub(super) fn view<D: CoreDevice, F: FloatElement>(how: ViewGrad) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let gx = match &how {
            ViewGrad::Reshape(shape) => g.try_reshape(shape.clone())?,
            ViewGrad::Permute(inverse) => g.try_permute(inverse)?,
            ViewGrad::Narrow { axis, start, size } => {
                let (axis, len) = (*axis, g.dims()[*axis]);
                let zeros = |n: usize| {
                    let mut dims = g.dims().to_vec();
                    dims[axis] = n;
                    Tensor::<D, F>::try_zeros(dims)
                };
                let (before, after) = (zeros(*start)?, zeros(size - start - len)?);
                Tensor::try_cat(&[&before, g, &after], axis as isize)?
            }
            ViewGrad::Broadcast(shape) => g.try_sum_to_shape(shape)?,
        };
        Ok(vec![Some(gx)])
    })
}
