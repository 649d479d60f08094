//! Gradient rules of indexing, scattering and concatenation: each is the
//! opposite movement of the gradient (a gather's gradient is a scatter).

use crate::autograd::{Backward, rule};
use crate::element::FloatElement;
use crate::error::Result;
use crate::layout::Shape;
use crate::tensor::CoreDevice;
use crate::tensor::Tensor;

/// `x.index_select(axis, indices)` of an `x` of shape `input`: the rows of
/// the gradient are added back where they were taken from.
pub(super) fn index_select<D: CoreDevice, F: FloatElement>(
    input: Shape,
    axis: usize,
    indices: Tensor<D, i64>,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        Ok(vec![Some(Tensor::<D, F>::try_zeros(input.clone())?.try_index_add(axis as isize, &indices, g)?)])
    })
}

/// `x.gather(axis, index)` of an `x` of shape `input`.
pub(super) fn gather<D: CoreDevice, F: FloatElement>(
    input: Shape,
    axis: usize,
    index: Tensor<D, i64>,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        Ok(vec![Some(Tensor::<D, F>::try_zeros(input.clone())?.try_scatter_add(axis as isize, &index, g)?)])
    })
}

/// `x.scatter_add(axis, index, src)`: `x` gets the gradient as it is, and
/// `src` the entries its elements were added to (zero where `src` is
/// larger than `index` and so was not read).
pub(super) fn scatter_add<D: CoreDevice, F: FloatElement>(
    axis: usize,
    index: Tensor<D, i64>,
    src: Shape,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let g_src = needs.then(1, || pad_with_zeros(&g.try_gather(axis as isize, &index)?, &src))?;
        Ok(vec![needs.then(0, || Ok(g.clone()))?, g_src])
    })
}

/// `x.index_add(axis, indices, src)`: `x` gets the gradient as it is, and
/// `src` the rows its rows were added to.
pub(super) fn index_add<D: CoreDevice, F: FloatElement>(axis: usize, indices: Tensor<D, i64>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let g_src = needs.then(1, || g.try_index_select(axis as isize, &indices))?;
        Ok(vec![needs.then(0, || Ok(g.clone()))?, g_src])
    })
}

/// `cat` along `axis` of tensors whose sizes on that axis are `sizes`:
/// each gets its own slice of the gradient.
pub(super) fn cat<D: CoreDevice, F: FloatElement>(axis: usize, sizes: Vec<usize>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let mut start = 0;
        let mut grads = Vec::with_capacity(sizes.len());
        for (i, &len) in sizes.iter().enumerate() {
            grads.push(needs.then(i, || g.try_narrow(axis as isize, start, len))?);
            start += len;
        }
        Ok(grads)
    })
}

/// `t` extended with zeros at the end of each axis to `shape`.
pub(super) fn pad_with_zeros<D: CoreDevice, F: FloatElement>(t: &Tensor<D, F>, shape: &Shape) -> Result<Tensor<D, F>> {
    let mut t = t.clone();
    for (axis, &want) in shape.dims().iter().enumerate() {
        let have = t.dims()[axis];
        if have < want {
            let mut dims = t.dims().to_vec();
            dims[axis] = want - have;
            t = Tensor::try_cat(&[&t, &Tensor::try_zeros(dims)?], axis as isize)?;
        }
    }
    Ok(t)
}
