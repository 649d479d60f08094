//! `MultiheadAttention`: PyTorch's `nn.MultiheadAttention`, on the fused
//! [`scaled_dot_product_attention`](crate::Tensor::scaled_dot_product_attention).

use super::init::uniform;
use super::{Dropout, Linear};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::ops::attention::AttentionMask;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// Multi-head attention with PyTorch's parameters and names:
/// `in_proj_weight` `[3E, E]` (queries', keys' and values' projections,
/// stacked), `in_proj_bias` `[3E]`, and `out_proj` (a [`Linear`] `E -> E`),
/// so that a PyTorch `state_dict` loads by name. Initialised as PyTorch
/// does: Xavier-uniform projections, zero biases.
///
/// Inputs are `[L, N, E]` (sequence first, PyTorch's default) or, with
/// [`batch_first`](Self::batch_first), `[N, L, E]`; keys and values have
/// `S` positions. Dropout on the attention weights is not supported yet.
///
/// ```
/// use devtensor::nn::MultiheadAttention;
/// use devtensor::ops::attention::AttentionMask;
/// use devtensor::{Cpu, Tensor};
///
/// let mha = MultiheadAttention::<Cpu>::new(8, 2).batch_first(true);
/// let x = Tensor::<Cpu>::randn([3, 5, 8]); // batch 3, 5 positions
/// let (y, weights) = mha.forward(&x, &x, &x, None, AttentionMask::Causal, true);
/// assert_eq!(y.dims(), &[3, 5, 8]);
/// assert_eq!(weights.unwrap().dims(), &[3, 5, 5]); // averaged over the heads
/// ```
#[derive(Clone, Debug)]
pub struct MultiheadAttention<D: Device, E: FloatElement = f32> {
    /// `[3 * embed_dim, embed_dim]`: the query, key and value projections.
    pub in_proj_weight: Tensor<D, E>,
    /// `[3 * embed_dim]`, if the layer has biases.
    pub in_proj_bias: Option<Tensor<D, E>>,
    /// The output projection.
    pub out_proj: Linear<D, E>,
    /// Dropout on the attention weights while training (PyTorch's
    /// `dropout`, 0 by default); see [`with_dropout`](Self::with_dropout).
    pub dropout: Dropout,
    num_heads: usize,
    batch_first: bool,
}

crate::module!(MultiheadAttention<E> { in_proj_weight, in_proj_bias, out_proj, dropout; num_heads, batch_first });

impl<D: Device, E: FloatElement> MultiheadAttention<D, E> {
    /// A layer of width `embed_dim` split into `num_heads` heads, with
    /// biases, sequence-first; fails unless `num_heads` divides
    /// `embed_dim`, or when `D` is unavailable or out of memory.
    #[fallible]
    pub fn new(embed_dim: usize, num_heads: usize) -> Self {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::Argument {
                op: "MultiheadAttention",
                device: D::name(),
                reason: format!("embed_dim {embed_dim} must be divisible by num_heads {num_heads}"),
            });
        }
        let xavier = (6.0 / (embed_dim + 3 * embed_dim) as f64).sqrt();
        let mut out_proj = Linear::try_new(embed_dim, embed_dim)?;
        out_proj.bias = Some(Tensor::try_zeros([embed_dim])?.requires_grad());
        Ok(MultiheadAttention {
            in_proj_weight: uniform::<D, E>([3 * embed_dim, embed_dim], xavier)?.requires_grad(),
            in_proj_bias: Some(Tensor::try_zeros([3 * embed_dim])?.requires_grad()),
            out_proj,
            dropout: Dropout::try_new(0.0)?,
            num_heads,
            batch_first: false,
        })
    }

    /// The layer with dropout `p` on the attention weights while training
    /// (PyTorch's `dropout=p`): the weights it returns are then the ones
    /// after dropout, as PyTorch's. Fails unless `0 <= p <= 1`.
    ///
    /// ```
    /// use devtensor::nn::{Module, MultiheadAttention};
    /// use devtensor::ops::attention::AttentionMask;
    /// use devtensor::{Cpu, Tensor};
    /// let mut mha = MultiheadAttention::<Cpu>::new(8, 2).with_dropout(1.0);
    /// let x = Tensor::<Cpu>::randn([3, 1, 8]);
    /// let (y, _) = mha.forward(&x, &x, &x, None, AttentionMask::None, false);
    /// // Every weight dropped: only the output projection's bias (0) is left.
    /// assert_eq!(y.to_vec(), vec![0.0; 24]);
    /// mha.eval(); // no dropout in evaluation
    /// assert_ne!(mha.forward(&x, &x, &x, None, AttentionMask::None, false).0.to_vec(), vec![0.0; 24]);
    /// ```
    #[fallible]
    pub fn with_dropout(self, p: f64) -> Self {
        Ok(MultiheadAttention { dropout: Dropout::try_new(p)?, ..self })
    }

    /// Inputs and output as `[N, L, E]` (`batch_first=True`) rather than
    /// `[L, N, E]`.
    pub fn batch_first(mut self, batch_first: bool) -> Self {
        self.batch_first = batch_first;
        self
    }

    /// The number of heads.
    pub fn num_heads(&self) -> usize {
        self.num_heads
    }

    /// Attention of `query` over `key` and `value`, like PyTorch's
    /// `mha(query, key, value, key_padding_mask, need_weights, attn_mask)`:
    /// returns the output and, when `need_weights`, the attention weights
    /// averaged over the heads, `[N, L, S]`.
    ///
    /// `key_padding` (`[N, S]`, non-zero = padding, PyTorch's boolean
    /// `key_padding_mask`) hides keys from every query of their sequence.
    /// `mask` broadcasts to `[N, heads, L, S]`: write PyTorch's boolean
    /// `attn_mask` (`True` hides) as [`AttentionMask::Hide`], a float one
    /// as [`AttentionMask::Add`]; [`AttentionMask::Causal`] is
    /// `is_causal=True` with the causal mask. Fails on shapes that do not
    /// fit, naming them.
    #[fallible]
    pub fn forward<DQ: Device, DK: Device, DV: Device>(
        &self,
        query: &Tensor<DQ, E>,
        key: &Tensor<DK, E>,
        value: &Tensor<DV, E>,
        key_padding: Option<&Tensor<D, u8>>,
        mask: AttentionMask<'_, D, E>,
        need_weights: bool,
    ) -> (Tensor<D, E>, Option<Tensor<D, E>>)
    where
        D: SameDevice<DQ> + SameDevice<DK> + SameDevice<DV>,
    {
        const OP: &str = "MultiheadAttention";
        let (query, key, value): (&Tensor<D, E>, &Tensor<D, E>, &Tensor<D, E>) =
            (same_device(query), same_device(key), same_device(value));
        let width = self.in_proj_weight.dims()[1];
        let fits = |t: &Tensor<D, E>| t.rank() == 3 && t.dims()[2] == width;
        // The batch axis, and the positions' axis.
        let (batch, along) = if self.batch_first { (0, 1) } else { (1, 0) };
        let fit = fits(query) && fits(key) && fits(value);
        if !(fit && key.dims()[batch] == query.dims()[batch] && key.dims() == value.dims()) {
            return Err(Error::Shape {
                op: OP,
                device: D::name(),
                shapes: vec![query.shape().clone(), key.shape().clone(), value.shape().clone()],
                reason: format!(
                    "expected query [L, N, {width}] and key and value [S, N, {width}] \
                     ([N, L, {width}] and [N, S, {width}] with batch_first)"
                ),
            });
        }
        let (n, l, s) = (query.dims()[batch], query.dims()[along], key.dims()[along]);
        let heads = self.num_heads;
        // [N, L, E] -> [N, heads, L, E / heads], through the projection's third.
        let project = |x: &Tensor<D, E>, third: usize| -> Result<Tensor<D, E>> {
            let x = if self.batch_first { x.clone() } else { x.try_transpose(0, 1)? };
            let w = self.in_proj_weight.try_narrow(0, third * width, width)?;
            let mut y = x.try_matmul(&w.try_t()?)?;
            if let Some(b) = &self.in_proj_bias {
                y = y.try_add(&b.try_narrow(0, third * width, width)?)?;
            }
            let len = y.dims()[1];
            y.try_reshape([n, len, heads, width / heads])?.try_transpose(1, 2)
        };
        let (q, k, v) = (project(query, 0)?, project(key, 1)?, project(value, 2)?);
        let padding;
        let combined;
        let mask = match key_padding {
            None => mask,
            Some(pad) => {
                if pad.dims() != [n, s] {
                    return Err(Error::Shape {
                        op: OP,
                        device: D::name(),
                        shapes: vec![pad.shape().clone()],
                        reason: format!("expected a key padding mask [N, S] = [{n}, {s}]"),
                    });
                }
                padding = pad.try_reshape([n, 1, 1, s])?;
                combined = combine(mask, &padding, [l, s])?;
                combined.as_mask()
            }
        };
        let (out, weights) = if need_weights || self.dropout.is_active() {
            let weights = self.dropout.try_forward(&q.attention_weights(&k, &v, mask, None)?)?;
            (weights.try_matmul(&v)?, need_weights.then(|| weights.try_mean_axis(1)).transpose()?)
        } else {
            (q.try_scaled_dot_product_attention(&k, &v, mask, None)?, None)
        };
        // [N, heads, L, d] -> [N, L, E], then the output projection.
        let merged = out.try_transpose(1, 2)?.try_reshape([n, l, width])?;
        let y = self.out_proj.try_forward(&merged)?;
        let y = if self.batch_first { y } else { y.try_transpose(0, 1)?.try_contiguous()? };
        Ok((y, weights))
    }
}

/// An owned mask made of the caller's and the key padding.
enum Combined<D: Device, E: FloatElement> {
    Hide(Tensor<D, u8>),
    Add(Tensor<D, E>),
}

impl<D: Device, E: FloatElement> Combined<D, E> {
    fn as_mask(&self) -> AttentionMask<'_, D, E> {
        match self {
            Combined::Hide(h) => AttentionMask::Hide(h),
            Combined::Add(a) => AttentionMask::Add(a),
        }
    }
}

/// `mask` with the padded keys (`padding`, `[N, 1, 1, S]`) hidden too.
fn combine<D: Device, E: FloatElement>(
    mask: AttentionMask<'_, D, E>,
    padding: &Tensor<D, u8>,
    [l, s]: [usize; 2],
) -> Result<Combined<D, E>> {
    Ok(match mask {
        AttentionMask::None => Combined::Hide(padding.clone()),
        AttentionMask::Causal => {
            Combined::Hide(Tensor::<D, u8>::try_ones([l, s])?.try_triu(1)?.try_logical_or(padding)?)
        }
        AttentionMask::Keep(keep) => Combined::Hide(keep.try_logical_not()?.try_logical_or(padding)?),
        AttentionMask::Hide(hide) => Combined::Hide(hide.try_logical_or(padding)?),
        AttentionMask::Add(add) => {
            Combined::Add(add.try_add(&Tensor::<D, E>::try_zeros(padding.dims())?.try_masked_fill(padding, E::MIN)?)?)
        }
    })
}
