//! `Embedding`: a lookup table of vectors.

use super::parameter::{check, parameter};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::Error;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.Embedding`: row `i` of `weight` (`[num_embeddings,
/// embedding_dim]`, initialised from `N(0, 1)`) for each index `i`. With a
/// [`padding_idx`](Self::padding_idx), that row starts at zeros and gets
/// no gradient, as PyTorch's `padding_idx` gives.
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
///
/// Built from your own table with [`from_weights`](Self::from_weights)
/// (trainable) or [`from_pretrained`](Self::from_pretrained) (frozen, as
/// PyTorch's). The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Embedding<D: Device, E: FloatElement = f32> {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor<D, E>,
    /// The row that padding positions index: its output is the row as it
    /// is, but no gradient reaches it.
    pub padding_idx: Option<usize>,
}

impl<D: Device, E: FloatElement> Embedding<D, E> {
    /// A table of `num_embeddings` vectors of `embedding_dim` elements.
    #[fallible]
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Self {
        Ok(Embedding { weight: Tensor::try_randn([num_embeddings, embedding_dim])?.requires_grad(), padding_idx: None })
    }

    /// A table of the rows of `weight` (`[num_embeddings, embedding_dim]`),
    /// which becomes its trainable parameter (a leaf stays the same leaf, so
    /// it can be tied to a [`Linear`](super::Linear)), with row
    /// `padding_idx` for padding, kept as given (PyTorch's
    /// `from_pretrained(weight, freeze=False, padding_idx=..)`). Fails,
    /// naming the shape, unless `weight` is a matrix with row `padding_idx`.
    ///
    /// ```
    /// use devtensor::nn::Embedding;
    /// use devtensor::{Cpu, Tensor};
    /// let weight = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [3, 2]);
    /// let table = Embedding::from_weights(weight, None);
    /// let tokens = Tensor::<Cpu, i64>::from_vec(vec![2, 0], [2]);
    /// assert_eq!(table.forward(&tokens).to_vec(), vec![4.0, 5.0, 0.0, 1.0]);
    /// assert!(Embedding::try_from_weights(Tensor::<Cpu>::zeros([3, 2]), Some(3)).is_err());
    /// ```
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, padding_idx: Option<usize>) -> Self {
        let fits = weight.rank() == 2 && padding_idx.is_none_or(|i| i < weight.dims()[0]);
        check(fits, "Embedding::from_weights", &[&weight], || match padding_idx {
            Some(i) => format!("expected a weight [num_embeddings, embedding_dim] with a row {i} for padding_idx"),
            None => "expected a weight [num_embeddings, embedding_dim]".into(),
        })?;
        Ok(Embedding { weight: parameter(weight), padding_idx })
    }

    /// PyTorch's `nn.Embedding.from_pretrained(weight, padding_idx=..)`:
    /// the table of [`from_weights`](Self::from_weights), frozen as
    /// PyTorch's default `freeze=True` freezes it: the weight requires no
    /// grad, so no gradient reaches it and optimizers leave it as it is.
    /// (`freeze=False` is [`from_weights`](Self::from_weights).)
    ///
    /// ```
    /// use devtensor::nn::{Embedding, Module};
    /// use devtensor::{Cpu, Tensor};
    /// let table = Embedding::from_pretrained(Tensor::<Cpu>::ones([4, 3]), None);
    /// assert!(!table.weight.tracks_grad());
    /// let tokens = Tensor::<Cpu, i64>::from_vec(vec![1, 3], [2]);
    /// assert!(!table.forward(&tokens).tracks_grad());
    /// ```
    #[fallible]
    pub fn from_pretrained(weight: Tensor<D, E>, padding_idx: Option<usize>) -> Self {
        let mut table = Self::try_from_weights(weight, padding_idx)?;
        table.weight = table.weight.detach();
        Ok(table)
    }

    /// The layer with row `index` for padding (PyTorch's `padding_idx`):
    /// the row is set to zeros, and no gradient reaches it through
    /// [`forward`](Self::forward). Fails when `index` is not a row. (A
    /// table of your own keeps its padding row as given when the index is
    /// passed to [`from_weights`](Self::from_weights), as PyTorch's
    /// `from_pretrained` keeps it.)
    ///
    /// ```
    /// use devtensor::nn::Embedding;
    /// use devtensor::{Cpu, Tensor};
    /// let table = Embedding::<Cpu>::new(5, 3).padding_idx(0);
    /// let tokens = Tensor::<Cpu, i64>::from_vec(vec![2, 0, 0], [3]);
    /// let out = table.forward(&tokens);
    /// assert_eq!(out.select(0, 1).to_vec(), vec![0.0; 3]);
    /// let grads = out.sum().backward();
    /// assert_eq!(grads.get(&table.weight).unwrap().to_vec2()[0], vec![0.0; 3]); // the padding row
    /// assert_eq!(grads.get(&table.weight).unwrap().to_vec2()[2], vec![1.0; 3]);
    /// ```
    #[fallible]
    pub fn padding_idx(self, index: usize) -> Self {
        let rows = self.weight.dims()[0];
        if index >= rows {
            return Err(Error::Argument {
                op: "Embedding",
                device: D::name(),
                reason: format!("padding_idx {index} is out of range for Embedding({rows}, {})", self.weight.dims()[1]),
            });
        }
        let is_padding = Tensor::<D, i64>::try_arange(0, rows as i64)?.try_eq_scalar(index as i64)?.try_unsqueeze(1)?;
        let mut weight = self.weight.detach().try_masked_fill(&is_padding, E::ZERO)?;
        // A frozen table stays frozen.
        weight.set_requires_grad(self.weight.tracks_grad());
        Ok(Embedding { weight, padding_idx: Some(index) })
    }

    /// The vectors of `indices` (any shape), as `[indices.., embedding_dim]`.
    /// Fails on an index outside `0..num_embeddings`.
    #[fallible]
    pub fn forward<D2: Device, I: Element>(&self, indices: &Tensor<D2, I>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        i64: SameDtype<I>,
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
        // Padding positions take their row as a constant: no gradient.
        let rows = match self.padding_idx {
            Some(index) => flat
                .try_eq_scalar(index as i64)?
                .try_unsqueeze(1)?
                .try_where_cond::<D, D, E, E>(&rows.detach(), &rows)?,
            None => rows,
        };
        let mut dims = indices.dims().to_vec();
        dims.push(self.weight.dims()[1]);
        rows.try_reshape(dims)
    }
}

crate::module!(Embedding<E> { weight; padding_idx });
