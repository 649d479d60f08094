//! `Embedding`: a lookup table of vectors.

use crate::element::FloatElement;
use crate::error::Error;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.Embedding`: row `i` of `weight` (`[num_embeddings,
/// embedding_dim]`, initialised from `N(0, 1)`) for each index `i`.
///
/// ```
/// use devtensor::nn::Embedding;
/// use devtensor::{Cpu, Tensor};
/// let table = Embedding::<Cpu>::new(10, 4);
/// let tokens = Tensor::<Cpu, i64>::from_vec(vec![1, 7, 1], [3]);
/// let vectors = table.forward(&tokens);
/// assert_eq!(vectors.dims(), &[3, 4]);
/// assert_eq!(vectors.select(0, 0).to_vec(), vectors.select(0, 2).to_vec());
/// ```
#[derive(Clone, Debug)]
pub struct Embedding<D: Device, E: FloatElement = f32> {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor<D, E>,
}

impl<D: Device, E: FloatElement> Embedding<D, E> {
    /// A table of `num_embeddings` vectors of `embedding_dim` elements.
    #[fallible]
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Self {
        Ok(Embedding { weight: Tensor::try_randn([num_embeddings, embedding_dim])?.requires_grad() })
    }

    /// The vectors of `indices` (any shape), as `[indices.., embedding_dim]`.
    /// Fails on an index outside `0..num_embeddings`.
    #[fallible]
    pub fn forward<D2: Device>(&self, indices: &Tensor<D2, i64>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        let indices: &Tensor<D, i64> = same_device(indices);
        let flat: Tensor<D, i64> = indices.try_reshape([indices.elem_count()])?;
        // The selection checks the indices; its error is put in the layer's words.
        let rows = self.weight.try_index_select::<D>(0, &flat).map_err(|e| match e {
            Error::Index { index, .. } => {
                let (count, dim) = (self.weight.dims()[0], self.weight.dims()[1]);
                Error::Argument {
                    op: "Embedding",
                    device: D::name(),
                    reason: format!(
                        "index {index} is out of range for Embedding({count}, {dim}): indices must be in 0..{count}"
                    ),
                }
            }
            other => other,
        })?;
        let mut dims = indices.dims().to_vec();
        dims.push(self.weight.dims()[1]);
        rows.try_reshape(dims)
    }
}

crate::module!(Embedding<E> { weight });
