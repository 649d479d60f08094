//! Masking: `masked_fill`, and the triangles `tril` and `triu` that causal
//! attention masks are made of, built on `where_cond`, whose gradient rule
//! routes each element's gradient to the side that was chosen.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// A copy of this tensor with `value` wherever `mask` is non-zero, like
    /// `x.masked_fill(mask, value)`. The mask broadcasts to this tensor's
    /// shape (NumPy rules) and must be on the same device, checked at compile
    /// time. The gradient reaches only the elements that were kept. Fails
    /// when the mask does not broadcast to this tensor's shape.
    ///
    /// Hiding padded positions from attention:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let scores = Tensor::<Cpu>::zeros([2, 3]);
    /// let padding = Tensor::<Cpu, u8>::from_vec(vec![0, 0, 1], [3]);
    /// let masked = scores.masked_fill(&padding, f32::NEG_INFINITY);
    /// assert_eq!(masked.to_vec2()[1], vec![0.0, 0.0, f32::NEG_INFINITY]);
    /// let err = scores.try_masked_fill(&Tensor::<Cpu, u8>::zeros([4]), 1.0).unwrap_err();
    /// assert_eq!(err.to_string(), "masked_fill on Cpu: shapes [2, 3] and [4]: the mask does not broadcast to the tensor's shape");
    /// ```
    #[fallible]
    pub fn masked_fill<D2: Device>(&self, mask: &Tensor<D2, u8>, value: E) -> Self
    where
        D: SameDevice<D2>,
    {
        let mask: &Tensor<D, u8> = same_device(mask);
        core_call!(D, Fns<E>.masked_fill(self.core(), mask.core(), value))
    }

    /// The lower triangle of the last two axes (each matrix of a batch): the
    /// elements with `column <= row + diagonal` are kept and the rest are 0,
    /// like `torch.tril(x, diagonal)`. `diagonal` 0 is the main diagonal,
    /// positive values reach above it, negative ones stop below it. Fails on
    /// a tensor of fewer than two axes.
    ///
    /// The causal mask of attention, `true` where a position may attend:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let causal = Tensor::<Cpu, u8>::ones([3, 3]).tril(0);
    /// assert_eq!(causal.to_vec2(), vec![vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 1]]);
    /// let x = Tensor::<Cpu, i64>::arange(1, 7).reshape([2, 3]);
    /// assert_eq!(x.tril(-1).to_vec2(), vec![vec![0, 0, 0], vec![4, 0, 0]]);
    /// ```
    #[fallible]
    pub fn tril(&self, diagonal: i64) -> Self {
        core_call!(D, Fns<E>.triangle(self.core(), "tril", diagonal, false))
    }

    /// The upper triangle of the last two axes: the elements with
    /// `column >= row + diagonal` are kept and the rest are 0, like
    /// `torch.triu(x, diagonal)`. Fails on a tensor of fewer than two axes.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(1, 10).reshape([3, 3]);
    /// assert_eq!(x.triu(1).to_vec2(), vec![vec![0, 2, 3], vec![0, 0, 6], vec![0, 0, 0]]);
    /// ```
    #[fallible]
    pub fn triu(&self, diagonal: i64) -> Self {
        core_call!(D, Fns<E>.triangle(self.core(), "triu", diagonal, true))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// `tril` (`upper` false) or `triu`: a `[rows, columns]` mask of
    /// `column - row` against `diagonal`, broadcast over the batch axes.
    pub(super) fn triangle(&self, op: &'static str, diagonal: i64, upper: bool) -> Result<Self> {
        let rank = self.rank();
        if rank < 2 {
            return Err(Error::Shape {
                op,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("a tensor of rank {rank} has no matrix; {op} needs at least two axes"),
            });
        }
        let (rows, columns) = (self.dims()[rank - 2] as i64, self.dims()[rank - 1] as i64);
        let row = Tensor::<D, i64>::try_arange(0, rows)?.try_reshape([rows as usize, 1])?;
        let offset = Tensor::<D, i64>::try_arange(0, columns)?.try_reshape([1, columns as usize])?.try_sub(&row)?;
        let keep = if upper { offset.try_ge_scalar(diagonal)? } else { offset.try_le_scalar(diagonal)? };
        keep.try_where_cond(self, &Tensor::<D, E>::try_scalar(E::ZERO)?)
    }

    pub(super) fn core_masked_fill(&self, mask: &Tensor<D, u8>, value: E) -> Result<Self> {
        if mask.shape().broadcast_with(self.shape()).as_ref() != Some(self.shape()) {
            return Err(Error::Shape {
                op: "masked_fill",
                device: D::name(),
                shapes: vec![self.shape().clone(), mask.shape().clone()],
                reason: "the mask does not broadcast to the tensor's shape".into(),
            });
        }
        mask.try_where_cond(&Tensor::<D, E>::try_scalar(value)?, self)
    }
}
