//! Scaled dot-product attention with the semantics of PyTorch's
//! `F.scaled_dot_product_attention`: `softmax(q · kᵀ · scale + mask) · v`
//! over the last two axes, every leading axis a batch axis (batch and
//! heads).
//!
//! Masks follow PyTorch: a `u8` mask keeps the positions where it is
//! non-zero (PyTorch's boolean `attn_mask`, `True` = take part), an additive
//! mask is added to the scores, and [`AttentionMask::Causal`] lets query `i`
//! see keys `0..=i` (`is_causal=True`, aligned to the top left). A query
//! that can see no key gets zeros, and zero gradients, as PyTorch's
//! attention gives since its 2.5 (not the NaN of a softmax over nothing).
//!
//! The masks are tied to the query's device by their type: a mask on
//! another device is rustc's `mismatched types`, as for `cat`.

use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// Which key positions each query of [`Tensor::scaled_dot_product_attention`]
/// takes part with: PyTorch's `attn_mask` and `is_causal`, of which it
/// accepts one at a time, as this enum does.
#[derive(Debug)]
pub enum AttentionMask<'a, D: Device, E: FloatElement> {
    /// Every query sees every key.
    None,
    /// Query `i` sees keys `0..=i` (`is_causal=True`): a lower triangle of
    /// `[queries, keys]` aligned to the top left, as PyTorch's.
    Causal,
    /// Query `i` sees key `j` where the mask is non-zero. Broadcasts to
    /// `[batch.., queries, keys]`.
    Keep(&'a Tensor<D, u8>),
    /// Added to the scaled scores before the softmax (`-inf` hides a key).
    /// Broadcasts to `[batch.., queries, keys]`.
    Add(&'a Tensor<D, E>),
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// Attention of these queries over `key` and `value`, like
    /// `F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=.., scale=..)`
    /// without dropout: `softmax(q · kᵀ · scale + mask) · v`.
    ///
    /// Shapes: queries `[batch.., L, E]`, keys `[batch.., S, E]`, values
    /// `[batch.., S, Ev]`, with the same batch axes (batch, heads, ...);
    /// the result is `[batch.., L, Ev]`. `scale` defaults to `1 / sqrt(E)`.
    /// Queries that see no key give zeros (see the [module](crate::ops::attention)).
    /// Fails when the shapes do not fit, naming them.
    ///
    /// ```
    /// use devtensor::ops::attention::AttentionMask;
    /// use devtensor::{Cpu, Tensor};
    /// // One head, three positions, each a unit vector along its own axis.
    /// let x = Tensor::<Cpu, f64>::eye(3).reshape([1, 1, 3, 3]);
    /// let v = Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0, 3.0], [1, 1, 3, 1]);
    /// let out = x.scaled_dot_product_attention(&x, &v, AttentionMask::Causal, Some(0.0));
    /// // A scale of 0 spreads each query evenly over the keys it sees.
    /// assert_eq!(out.reshape([3]).to_vec(), vec![1.0, 1.5, 2.0]);
    ///
    /// let err = x.try_scaled_dot_product_attention(&x, &v.reshape([1, 3, 1]), AttentionMask::None, None).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "scaled_dot_product_attention on Cpu: shapes [1, 1, 3, 3], [1, 1, 3, 3] and [1, 3, 1]: \
    ///      queries, keys and values need the same rank, at least 2"
    /// );
    /// ```
    ///
    /// Keys and values on another device are a compile error:
    /// ```compile_fail,E0277
    /// use devtensor::ops::attention::AttentionMask;
    /// use devtensor::{Cpu, Cuda, Tensor};
    /// fn attend(q: &Tensor<Cuda<0>>, kv: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
    ///     q.scaled_dot_product_attention(kv, kv, AttentionMask::Causal, None)
    /// }
    /// ```
    #[fallible]
    pub fn scaled_dot_product_attention<D2: Device, D3: Device>(
        &self,
        key: &Tensor<D2, E>,
        value: &Tensor<D3, E>,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
    {
        let (key, value): (&Tensor<D, E>, &Tensor<D, E>) = (same_device(key), same_device(value));
        let scores_shape = check_shapes(self, key, value, &mask)?;
        let scale = scale.unwrap_or_else(|| 1.0 / (self.dims()[self.rank() - 1] as f64).sqrt());
        let scores = self.try_matmul(&key.try_transpose(-2, -1)?)?.try_mul_scalar(E::from_f64(scale))?;
        // `E::MIN` is minus infinity for floats.
        let scores = match mask {
            AttentionMask::None => scores,
            AttentionMask::Causal => {
                let [queries, keys] = [scores_shape[scores_shape.len() - 2], scores_shape[scores_shape.len() - 1]];
                let hidden = Tensor::<D, u8>::try_ones([queries, keys])?.try_triu(1)?;
                scores.try_masked_fill(&hidden, E::MIN)?
            }
            AttentionMask::Keep(keep) => scores.try_masked_fill(&keep.try_logical_not()?, E::MIN)?,
            AttentionMask::Add(add) => scores.try_add(add)?,
        };
        if scores.dims()[scores.rank() - 1] == 0 {
            // No keys: every output is the empty sum, 0.
            return scores.try_matmul(value);
        }
        // A row of -inf scores (a query that sees no key) gives weights of 0,
        // not the softmax's NaN, and so does its gradient: PyTorch's
        // `_safe_softmax`. The row is softmaxed as zeros, then zeroed.
        let unseen = scores.try_eq_scalar(E::MIN)?.try_min_keepdim(-1)?;
        let weights = scores.try_masked_fill(&unseen, E::ZERO)?.try_softmax(-1)?.try_masked_fill(&unseen, E::ZERO)?;
        weights.try_matmul(value)
    }
}

/// Checks the three operands and the mask; returns the scores' shape
/// `[batch.., L, S]`.
fn check_shapes<D: Device, E: FloatElement>(
    q: &Tensor<D, E>,
    k: &Tensor<D, E>,
    v: &Tensor<D, E>,
    mask: &AttentionMask<'_, D, E>,
) -> Result<Vec<usize>> {
    const OP: &str = "scaled_dot_product_attention";
    let fail =
        |shapes: Vec<Shape>, reason: &str| Error::Shape { op: OP, device: D::name(), shapes, reason: reason.into() };
    let operands = || vec![q.shape().clone(), k.shape().clone(), v.shape().clone()];
    let rank = q.rank();
    if rank < 2 || k.rank() != rank || v.rank() != rank {
        return Err(fail(operands(), "queries, keys and values need the same rank, at least 2"));
    }
    let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
    if qd[..rank - 2] != kd[..rank - 2] || qd[..rank - 2] != vd[..rank - 2] {
        return Err(fail(operands(), "queries, keys and values need the same batch axes (all but the last two)"));
    }
    if qd[rank - 1] != kd[rank - 1] {
        return Err(fail(operands(), "queries and keys need the same last dimension (the embedding)"));
    }
    if kd[rank - 2] != vd[rank - 2] {
        return Err(fail(operands(), "keys and values need the same number of positions (their second-last axis)"));
    }
    let mut scores = qd.to_vec();
    scores[rank - 1] = kd[rank - 2];
    let scores_shape = Shape::from(scores.clone());
    let mask_shape = match mask {
        AttentionMask::Keep(m) => Some(m.shape()),
        AttentionMask::Add(m) => Some(m.shape()),
        AttentionMask::None | AttentionMask::Causal => None,
    };
    if let Some(m) = mask_shape
        && m.broadcast_with(&scores_shape).as_ref() != Some(&scores_shape)
    {
        let mut shapes = operands();
        shapes.push(m.clone());
        return Err(fail(shapes, "the mask does not broadcast to the scores' shape [batch.., queries, keys]"));
    }
    Ok(scores)
}
