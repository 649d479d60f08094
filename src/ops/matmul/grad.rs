//! Gradient rule of `matmul`, batched and broadcast products included.

use crate::autograd::{Backward, Needs, rule};
use crate::element::FloatElement;
use crate::error::Result;
use crate::layout::count_of;
use crate::tensor::CoreDevice;
use crate::tensor::Tensor;

/// `a · b` with `torch.matmul`'s semantics: the products run on the
/// operands as `[batch.., m, k]` and `[batch.., k, n]` stacks (vectors
/// promoted as the forward promotes them), and a broadcast batch axis has
/// its gradient summed back (as one product over all rows when the right
/// operand is a single matrix).
pub(super) fn matmul<D: CoreDevice, F: FloatElement>(a: Tensor<D, F>, b: Tensor<D, F>) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| Ok(product_grads(&a, &b, g, needs)?.into()))
}

/// `a · b + bias`, with `bias` a row added to every row of the product (a
/// `Linear`): the product's gradients as [`matmul`]'s, and the bias's, the
/// sum of `g` over every axis but the last.
pub(super) fn matmul_bias<D: CoreDevice, F: FloatElement>(
    a: Tensor<D, F>,
    b: Tensor<D, F>,
    bias: Tensor<D, F>,
) -> Box<dyn Backward> {
    rule(move |g: &Tensor<D, F>, needs| {
        let [ga, gb] = product_grads(&a, &b, g, needs)?;
        Ok(vec![ga, gb, needs.then(2, || g.try_sum_to_shape(bias.shape()))?])
    })
}

/// The gradients of `a` and `b` in `a · b` (operands 0 and 1) from `g`,
/// the gradient of the product.
fn product_grads<D: CoreDevice, F: FloatElement>(
    a: &Tensor<D, F>,
    b: &Tensor<D, F>,
    g: &Tensor<D, F>,
    needs: Needs<'_>,
) -> Result<[Option<Tensor<D, F>>; 2]> {
    let (a_vector, b_vector) = (a.rank() == 1, b.rank() == 1);
    let a2 = if a_vector { a.try_unsqueeze(0)? } else { a.clone() };
    let b2 = if b_vector { b.try_unsqueeze(1)? } else { b.clone() };
    let g2 = match (a_vector, b_vector) {
        (false, false) => g.clone(),
        (true, false) => g.try_unsqueeze(-2)?,
        (false, true) => g.try_unsqueeze(-1)?,
        (true, true) => g.try_reshape([1, 1])?,
    };
    let ga = needs.then(0, || {
        g2.try_matmul(&b2.try_transpose(-1, -2)?)?.try_sum_to_shape(a2.shape())?.try_reshape(a.shape().clone())
    })?;
    let gb = needs.then(1, || {
        if b2.rank() == 2 {
            // One matrix against a matrix or a stack (a `Linear` on `[batch,
            // seq, features]`): the batch sum of `aᵀ · g` is one product
            // over all rows, `[k, batch·m] · [batch·m, n]`, with no
            // `[batch.., k, n]` stack to materialise and sum.
            let (rows, k, n) = (count_of(&a2.dims()[..a2.rank() - 1]), b2.dims()[0], b2.dims()[1]);
            let (a_rows, g_rows) = (a2.try_reshape([rows, k])?, g2.try_reshape([rows, n])?);
            if !b_vector && b2.try_t()?.is_contiguous() {
                // A transposed matrix (a `Linear`'s `x · wᵀ`): the gradient
                // as the transpose of `gᵀ · a`, so that the weight's own
                // (the transpose's) is dense, as PyTorch's is, and clipping
                // and the optimiser read it in order, not a column apart.
                return g_rows.try_t()?.try_matmul(&a_rows)?.try_t();
            }
            return a_rows.try_t()?.try_matmul(&g_rows)?.try_reshape(b.shape().clone());
        }
        a2.try_transpose(-1, -2)?.try_matmul(&g2)?.try_sum_to_shape(b2.shape())?.try_reshape(b.shape().clone())
    })?;
    Ok([ga, gb])
}
