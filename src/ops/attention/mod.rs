//! Scaled dot-product attention with the semantics of PyTorch's
//! `F.scaled_dot_product_attention`: `softmax(q · kᵀ · scale + mask) · v`
//! over the last two axes, every leading axis a batch axis (batch and
//! heads).
//!
//! Masks follow PyTorch: a `u8` mask either keeps the positions where it
//! is non-zero ([`AttentionMask::Keep`]: `scaled_dot_product_attention`'s
//! boolean `attn_mask`, `True` = take part) or hides them
//! ([`AttentionMask::Hide`]: `nn.MultiheadAttention`'s masks, `True` =
//! masked out), so a port names the convention it means; an additive mask
//! is added to the scores, and [`AttentionMask::Causal`] lets query `i`
//! see keys `0..=i` (`is_causal=True`, aligned to the top left). A query
//! that can see no key gets zeros, and zero gradients, as PyTorch's
//! attention gives since its 2.5 (not the NaN of a softmax over nothing).
//!
//! The masks are tied to the query's device by their type: a mask on
//! another device is rustc's `mismatched types`, as for `cat`.

mod cpu;
mod cuda;
mod kernel;

pub use kernel::{AttentionDims, AttentionKernel, KernelMask, MaskOf};

use super::autocast::{self, autocast_in};
use crate::autograd::{self, no_grad, rule};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

const OP: &str = "scaled_dot_product_attention";

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
    /// Query `i` does not see key `j` where the mask is non-zero: the
    /// boolean masks of `nn.MultiheadAttention` (`attn_mask`,
    /// `key_padding_mask`), whose `True` hides. Broadcasts like `Keep`.
    Hide(&'a Tensor<D, u8>),
    /// Added to the scaled scores before the softmax (`-inf` hides a key).
    /// Broadcasts to `[batch.., queries, keys]`.
    Add(&'a Tensor<D, E>),
}

// By hand: derived impls would ask `D` and `E` to be `Copy`, and a mask
// only borrows its tensor.
impl<D: Device, E: FloatElement> Clone for AttentionMask<'_, D, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: Device, E: FloatElement> Copy for AttentionMask<'_, D, E> {}

impl<'a, D: Device, E: FloatElement> AttentionMask<'a, D, E> {
    /// The mask as one on `D2` of `E2`, which `D2: SameDevice<D>` and
    /// `E2: SameDtype<E>` proved to be `D` and `E` (panics otherwise).
    pub(crate) fn on_device<D2: Device, E2: FloatElement>(self) -> AttentionMask<'a, D2, E2> {
        match self {
            AttentionMask::None => AttentionMask::None,
            AttentionMask::Causal => AttentionMask::Causal,
            AttentionMask::Keep(keep) => AttentionMask::Keep(same_device(keep)),
            AttentionMask::Hide(hide) => AttentionMask::Hide(same_device(hide)),
            AttentionMask::Add(add) => AttentionMask::Add(same_device(add)),
        }
    }
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
    pub fn scaled_dot_product_attention<D2: Device, D3: Device, E2: Element, E3: Element>(
        &self,
        key: &Tensor<D2, E2>,
        value: &Tensor<D3, E3>,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (key, value): (&Tensor<D, E>, &Tensor<D, E>) = (same_device(key), same_device(value));
        core_call!(D, Fns<E>.attention(self.core(), key.core(), value.core(), mask.core(), scale, false))
    }

    /// Grouped-query attention, PyTorch's
    /// `F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=.., scale=.., enable_gqa=True)`
    /// (Llama's and Mistral's attention): keys and values with fewer heads
    /// than the queries, each shared by a group of consecutive query heads.
    ///
    /// Shapes: queries `[batch.., Hq, L, E]`, keys `[batch.., Hkv, S, E]`,
    /// values `[batch.., Hkv, S, Ev]`, where `Hkv` divides `Hq`; query head
    /// `h` attends with key and value head `h / (Hq / Hkv)`, as PyTorch's
    /// `repeat_interleave` of the keys gives it. The fused kernels read the
    /// shared heads where they lie: the keys are never repeated in memory,
    /// and the gradient of a shared head sums its group's. Everything else
    /// is [`scaled_dot_product_attention`](Self::scaled_dot_product_attention)'s;
    /// with `Hkv == Hq` it is that attention. Fails when the shapes do not
    /// fit, naming them.
    ///
    /// ```
    /// use devtensor::ops::attention::AttentionMask;
    /// use devtensor::{Cpu, Tensor};
    /// let q = Tensor::<Cpu>::randn([2, 8, 5, 16]); // 8 query heads
    /// let kv = Tensor::<Cpu>::randn([2, 2, 5, 16]); // 2 key/value heads
    /// let out = q.scaled_dot_product_attention_gqa(&kv, &kv, AttentionMask::Causal, None);
    /// assert_eq!(out.dims(), &[2, 8, 5, 16]);
    /// // The same as repeating each key/value head for its 4 query heads.
    /// let repeated = kv.repeat_interleave(4, -3);
    /// let expected = q.scaled_dot_product_attention(&repeated, &repeated, AttentionMask::Causal, None);
    /// let close = out.to_vec().iter().zip(expected.to_vec()).all(|(a, b)| (a - b).abs() < 1e-6);
    /// assert!(close);
    ///
    /// let err = q.try_scaled_dot_product_attention_gqa(&kv.narrow(1, 0, 1).repeat([1, 3, 1, 1]), &kv, AttentionMask::None, None);
    /// assert_eq!(
    ///     err.unwrap_err().to_string(),
    ///     "scaled_dot_product_attention on Cpu: shapes [2, 8, 5, 16], [2, 3, 5, 16] and [2, 2, 5, 16]: \
    ///      the query heads (axis -3) must be a multiple of the key heads, and keys and values need as many heads"
    /// );
    /// ```
    #[fallible]
    pub fn scaled_dot_product_attention_gqa<D2: Device, D3: Device, E2: Element, E3: Element>(
        &self,
        key: &Tensor<D2, E2>,
        value: &Tensor<D3, E3>,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (key, value): (&Tensor<D, E>, &Tensor<D, E>) = (same_device(key), same_device(value));
        core_call!(D, Fns<E>.attention(self.core(), key.core(), value.core(), mask.core(), scale, true))
    }

    /// [`scaled_dot_product_attention`](Self::scaled_dot_product_attention)
    /// with dropout on the attention weights, PyTorch's `dropout_p` (pass
    /// it only while training, as PyTorch's models do): each weight is
    /// zeroed with probability `dropout_p` and the rest scaled by
    /// `1 / (1 - dropout_p)`, drawn from this thread's generator. With
    /// `dropout_p` 0 this is the fused attention; otherwise the weights are
    /// materialised (`[batch.., L, S]`), as dropout needs them. Fails unless
    /// `0 <= dropout_p <= 1`, and where the attention fails.
    ///
    /// ```
    /// use devtensor::ops::attention::AttentionMask;
    /// use devtensor::{Cpu, Tensor, manual_seed};
    /// let q = Tensor::<Cpu>::randn([2, 4, 8]);
    /// manual_seed(0);
    /// let out = q.scaled_dot_product_attention_dropout(&q, &q, AttentionMask::Causal, None, 0.1);
    /// assert_eq!(out.dims(), &[2, 4, 8]);
    /// let all = q.scaled_dot_product_attention_dropout(&q, &q, AttentionMask::Causal, None, 1.0);
    /// assert_eq!(all.to_vec(), vec![0.0; 64]);
    /// ```
    #[fallible]
    pub fn scaled_dot_product_attention_dropout<D2: Device, D3: Device, E2: Element, E3: Element>(
        &self,
        key: &Tensor<D2, E2>,
        value: &Tensor<D3, E3>,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
        dropout_p: f64,
    ) -> Self
    where
        D: SameDevice<D2> + SameDevice<D3>,
        E: SameDtype<E2> + SameDtype<E3>,
    {
        let (key, value): (&Tensor<D, E>, &Tensor<D, E>) = (same_device(key), same_device(value));
        core_call!(D, Fns<E>.attention_dropout(self.core(), key.core(), value.core(), mask.core(), scale, dropout_p))
    }

    /// The attention weights `softmax(q · kᵀ · scale + mask)` alone, for a
    /// layer that applies dropout to them before the product with `value`.
    pub(crate) fn attention_weights(
        &self,
        key: &Self,
        value: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Result<Self> {
        core_call!(D, Fns<E>.attention_weights(self.core(), key.core(), value.core(), mask.core(), scale))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// The attention weights `softmax(q · kᵀ · scale + mask)`,
    /// `[batch.., L, S]`, which `nn::MultiheadAttention` returns when asked
    /// for them. `value` is only checked against the others.
    fn core_attention_weights(
        &self,
        key: &Self,
        value: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
    ) -> Result<Self> {
        let (scores_shape, _) = check_shapes(self, key, value, &mask, false)?;
        let scale = scale.unwrap_or_else(|| 1.0 / (self.dims()[self.rank() - 1] as f64).sqrt());
        self.weights_of(key, mask, scale, &scores_shape)
    }

    /// The fused kernels' attention, recorded as one operation whose
    /// gradient recomputes the weights from the saved log-sum-exps; `None`
    /// where the device has no fused kernel.
    fn fused_attention(
        &self,
        key: &Self,
        value: &Self,
        mask: OwnedMask<D, E>,
        dims: AttentionDims,
        scale: f64,
        scores_shape: &[usize],
    ) -> Result<Option<Self>> {
        // Detached: the gradient rule keeps these, not the inputs' graph.
        // Copied contiguous unless the kernels read their rows in place.
        let readable = |t: &Self| {
            let rows_in_place = D::STRIDED_ROWS && t.layout().strides().last() == Some(&1);
            if rows_in_place { Ok(t.detach()) } else { no_grad(|| t.try_contiguous()).map(|t| t.detach()) }
        };
        let (q, k, v) = (readable(self)?, readable(key)?, readable(value)?);
        // Results in the memory order of the operands they belong to, where
        // the kernels can write rows at a stride: attention over heads split
        // off a projection then gives `[B, T, H, D]` in memory, which
        // `transpose(1, 2).reshape([B, T, H * D])` reads with no copy, as
        // PyTorch's CPU attention does; and so do the gradients.
        let like = |t: &Self, last: usize| {
            let mut dims = t.dims().to_vec();
            dims[t.rank() - 1] = last;
            let shape = Shape::from(dims);
            if D::STRIDED_ROWS { Layout::dense_like(shape, t.layout()) } else { Layout::contiguous(shape) }
        };
        let out_layout = like(self, dims.value_width);
        let forward = D::attention_forward(
            (q.storage(), q.layout()),
            (k.storage(), k.layout()),
            (v.storage(), v.layout()),
            &out_layout,
            dims,
            mask.kernel(),
            scale,
        )?;
        let Some((out, lse)) = forward else { return Ok(None) };
        let out = Tensor::from_storage_with(out, out_layout);
        let lse = Tensor::<D, E::Accumulator>::from_storage(lse, Shape::from(dims.batch * dims.queries));
        let grad_layouts = [like(self, dims.width), like(key, dims.width), like(value, dims.value_width)];
        let inputs = [self.node(), key.node(), value.node()];
        autograd::track(
            OP,
            &inputs,
            || Ok(out),
            |out| {
                let out = out.clone();
                // The operands with their nodes, for a recorded backward.
                let operands = [q.with_node_of(self), k.with_node_of(key), v.with_node_of(value)];
                let scores_shape = scores_shape.to_vec();
                rule(move |g: &Tensor<D, E>, _| {
                    if autograd::is_grad_enabled() {
                        // Recorded (`create_graph`): the gradients of the
                        // same attention composed of recorded ops, which
                        // can be differentiated again.
                        let [q, k, v] = &operands;
                        return autograd::composed_gradients(&[q, k, v], g, || {
                            q.composed_attention(k, v, mask.borrowed(), scale, &scores_shape, dims.group)
                        });
                    }
                    let g = readable(g)?;
                    let grads = D::attention_backward(
                        (q.storage(), q.layout()),
                        (k.storage(), k.layout()),
                        (v.storage(), v.layout()),
                        (out.storage(), out.layout()),
                        lse.storage(),
                        (g.storage(), g.layout()),
                        [&grad_layouts[0], &grad_layouts[1], &grad_layouts[2]],
                        dims,
                        mask.kernel(),
                        scale,
                    )?;
                    let Some(grads) = grads else {
                        return Err(Error::Argument {
                            op: OP,
                            device: D::name(),
                            reason: "the device ran the fused forward but has no fused backward".into(),
                        });
                    };
                    Ok(grads
                        .into_iter()
                        .zip(&grad_layouts)
                        .map(|(g, l)| Some(Tensor::from_storage_with(g, l.clone())))
                        .collect())
                })
            },
        )
        .map(Some)
    }

    /// Attention from matmul, masked_fill and softmax, differentiated by
    /// their rules: for an additive mask that needs a gradient, empty
    /// sizes, and widths the fused kernels do not take (over 1024 on CUDA).
    /// Keys and values shared by `group` query heads are repeated for them
    /// here, as PyTorch's own composed attention does.
    fn composed_attention(
        &self,
        key: &Self,
        value: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: f64,
        scores_shape: &[usize],
        group: usize,
    ) -> Result<Self> {
        if group != 1 {
            let (key, value) = (key.try_repeat_interleave(group, -3)?, value.try_repeat_interleave(group, -3)?);
            return self.composed_attention(&key, &value, mask, scale, scores_shape, 1);
        }
        self.weights_of(key, mask, scale, scores_shape)?.try_matmul(value)
    }

    fn weights_of(
        &self,
        key: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: f64,
        scores_shape: &[usize],
    ) -> Result<Self> {
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
            AttentionMask::Hide(hide) => scores.try_masked_fill(hide, E::MIN)?,
            AttentionMask::Add(add) => scores.try_add(add)?,
        };
        if scores.dims()[scores.rank() - 1] == 0 {
            // No keys: no weights, and every output is the empty sum, 0.
            return Ok(scores);
        }
        // A row of -inf scores (a query that sees no key) gives weights of 0,
        // not the softmax's NaN, and so does its gradient: PyTorch's
        // `_safe_softmax`. The row is softmaxed as zeros, then zeroed.
        let unseen = scores.try_eq_scalar(E::MIN)?.try_min_keepdim(-1)?;
        scores.try_masked_fill(&unseen, E::ZERO)?.try_softmax(-1)?.try_masked_fill(&unseen, E::ZERO)
    }

    pub(super) fn core_attention(
        &self,
        key: &Self,
        value: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
        gqa: bool,
    ) -> Result<Self> {
        if let Some(half) = autocast::lowered::<E>() {
            return autocast_in!(half, H => {
                let (q, k, v) = (self.try_to_dtype::<H>()?, key.try_to_dtype::<H>()?, value.try_to_dtype::<H>()?);
                let additive = match mask {
                    AttentionMask::Add(m) => Some(m.try_to_dtype::<H>()?),
                    _ => None,
                };
                let mask = match (mask, &additive) {
                    (AttentionMask::Add(_), Some(m)) => AttentionMask::Add(m),
                    (AttentionMask::Keep(m), _) => AttentionMask::Keep(m),
                    (AttentionMask::Hide(m), _) => AttentionMask::Hide(m),
                    (AttentionMask::Causal, _) => AttentionMask::Causal,
                    (AttentionMask::None | AttentionMask::Add(_), _) => AttentionMask::None,
                };
                q.core_attention(&k, &v, mask, scale, gqa)?.try_to_dtype::<E>()
            });
        }
        let (scores_shape, group) = check_shapes(self, key, value, &mask, gqa)?;
        let rank = self.rank();
        let scale = scale.unwrap_or_else(|| 1.0 / (self.dims()[rank - 1] as f64).sqrt());
        let dims = AttentionDims {
            batch: self.dims()[..rank - 2].iter().product(),
            queries: self.dims()[rank - 2],
            keys: key.dims()[rank - 2],
            width: self.dims()[rank - 1],
            value_width: value.dims()[rank - 1],
            group,
        };
        let sizes = [dims.batch, dims.queries, dims.keys, dims.width, dims.value_width];
        // The fused kernels give no gradient for an additive mask.
        let mask_learns = matches!(mask, AttentionMask::Add(m) if m.tracks_grad());
        if sizes.iter().all(|&n| n > 0) && !mask_learns {
            let mask = OwnedMask::of(&mask, &scores_shape)?;
            if let Some(out) = self.fused_attention(key, value, mask, dims, scale, &scores_shape)? {
                return Ok(out);
            }
        }
        self.composed_attention(key, value, mask, scale, &scores_shape, group)
    }

    pub(super) fn core_attention_dropout(
        &self,
        key: &Self,
        value: &Self,
        mask: AttentionMask<'_, D, E>,
        scale: Option<f64>,
        dropout_p: f64,
    ) -> Result<Self> {
        if !(0.0..=1.0).contains(&dropout_p) {
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: format!("dropout_p must be between 0 and 1, got {dropout_p}"),
            });
        }
        if dropout_p == 0.0 {
            return self.core_attention(key, value, mask, scale, false);
        }
        let weights = self.core_attention_weights(key, value, mask, scale)?;
        let kept = if dropout_p == 1.0 {
            weights.try_mul_scalar(E::ZERO)?
        } else {
            let keep = Tensor::<D, E>::try_rand(weights.shape().clone())?.try_ge_scalar(E::from_f64(dropout_p))?;
            let scaled = weights.try_mul_scalar(E::from_f64(1.0 / (1.0 - dropout_p)))?;
            keep.try_where_cond::<D, D, E, E>(&scaled, &Tensor::try_scalar(E::ZERO)?)?
        };
        kept.try_matmul(value)
    }
}

impl<'a, D: Device, E: FloatElement> AttentionMask<'a, D, E> {
    /// The mask as the core sees it, its tensor lent as the core's.
    fn core(self) -> AttentionMask<'a, D::Core, E> {
        match self {
            AttentionMask::None => AttentionMask::None,
            AttentionMask::Causal => AttentionMask::Causal,
            AttentionMask::Keep(m) => AttentionMask::Keep(m.core()),
            AttentionMask::Hide(m) => AttentionMask::Hide(m.core()),
            AttentionMask::Add(m) => AttentionMask::Add(m.core()),
        }
    }
}

core_table! {
    /// The core's attention.
    pub(crate) struct Fns<C, F: FloatElement> {
        attention: for<'a> fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>, AttentionMask<'a, C, F>, Option<f64>, bool) -> Result<Tensor<C, F>> =
            Tensor::core_attention,
        attention_dropout: for<'a> fn(
            &Tensor<C, F>,
            &Tensor<C, F>,
            &Tensor<C, F>,
            AttentionMask<'a, C, F>,
            Option<f64>,
            f64,
        ) -> Result<Tensor<C, F>> = Tensor::core_attention_dropout,
        attention_weights: for<'a> fn(&Tensor<C, F>, &Tensor<C, F>, &Tensor<C, F>, AttentionMask<'a, C, F>, Option<f64>) -> Result<Tensor<C, F>> =
            Tensor::core_attention_weights,
    }
}

/// Checks the three operands and the mask; returns the scores' shape
/// `[batch.., L, S]` and how many query heads share each key and value
/// head (1 unless `gqa`).
fn check_shapes<D: Device, E: FloatElement>(
    q: &Tensor<D, E>,
    k: &Tensor<D, E>,
    v: &Tensor<D, E>,
    mask: &AttentionMask<'_, D, E>,
    gqa: bool,
) -> Result<(Vec<usize>, usize)> {
    let fail =
        |shapes: Vec<Shape>, reason: &str| Error::Shape { op: OP, device: D::name(), shapes, reason: reason.into() };
    let operands = || vec![q.shape().clone(), k.shape().clone(), v.shape().clone()];
    let rank = q.rank();
    let least = if gqa { 3 } else { 2 };
    if rank < least || k.rank() != rank || v.rank() != rank {
        let reason = if gqa {
            "grouped-query attention needs queries, keys and values of the same rank, at least 3 (heads, positions, embedding)"
        } else {
            "queries, keys and values need the same rank, at least 2"
        };
        return Err(fail(operands(), reason));
    }
    let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
    if !gqa && rank >= 3 && qd[..rank - 3] == kd[..rank - 3] && kd[..rank - 2] == vd[..rank - 2] {
        // Only the heads differ: the grouped-query form is what was meant.
        let (heads, kv_heads) = (qd[rank - 3], kd[rank - 3]);
        if heads != kv_heads && kv_heads > 0 && heads % kv_heads == 0 {
            return Err(fail(
                operands(),
                "the keys and values have fewer heads (axis -3) than the queries: \
                 grouped-query attention is scaled_dot_product_attention_gqa (PyTorch's enable_gqa=True)",
            ));
        }
    }
    // Under grouped-query attention the heads (axis -3) may differ.
    let shared = if gqa { rank - 3 } else { rank - 2 };
    if qd[..shared] != kd[..shared] || qd[..shared] != vd[..shared] {
        let reason = if gqa {
            "queries, keys and values need the same batch axes (all but the heads and the last two)"
        } else {
            "queries, keys and values need the same batch axes (all but the last two)"
        };
        return Err(fail(operands(), reason));
    }
    let group = if gqa {
        let (heads, kv_heads) = (qd[rank - 3], kd[rank - 3]);
        if kv_heads != vd[rank - 3] || heads.checked_rem(kv_heads).unwrap_or(heads) != 0 {
            return Err(fail(
                operands(),
                "the query heads (axis -3) must be a multiple of the key heads, and keys and values need as many heads",
            ));
        }
        // 0 for queries of no heads (their keys repeated 0 times, as
        // PyTorch's), 1 for no heads at all: empty attentions either way.
        heads.checked_div(kv_heads).unwrap_or(1)
    } else {
        1
    };
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
        AttentionMask::Keep(m) | AttentionMask::Hide(m) => Some(m.shape()),
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
    Ok((scores, group))
}

/// A mask held by the fused operation's gradient rule: the user's mask
/// broadcast (as a view) to the scores' shape.
enum OwnedMask<D: Device, E: FloatElement> {
    None,
    Causal,
    Keep(Tensor<D, u8>),
    Add(Tensor<D, E>),
}

impl<D: CoreDevice, E: FloatElement> OwnedMask<D, E> {
    fn of(mask: &AttentionMask<'_, D, E>, scores_shape: &[usize]) -> Result<Self> {
        Ok(match mask {
            AttentionMask::None => OwnedMask::None,
            AttentionMask::Causal => OwnedMask::Causal,
            AttentionMask::Keep(keep) => OwnedMask::Keep(keep.try_broadcast_to(scores_shape)?),
            AttentionMask::Hide(hide) => OwnedMask::Keep(hide.try_logical_not()?.try_broadcast_to(scores_shape)?),
            AttentionMask::Add(add) => OwnedMask::Add(add.detach().try_broadcast_to(scores_shape)?),
        })
    }

    /// The mask as the composed attention takes it.
    fn borrowed(&self) -> AttentionMask<'_, D, E> {
        match self {
            OwnedMask::None => AttentionMask::None,
            OwnedMask::Causal => AttentionMask::Causal,
            OwnedMask::Keep(t) => AttentionMask::Keep(t),
            OwnedMask::Add(t) => AttentionMask::Add(t),
        }
    }

    fn kernel(&self) -> MaskOf<'_, D, E> {
        match self {
            OwnedMask::None => KernelMask::None,
            OwnedMask::Causal => KernelMask::Causal,
            OwnedMask::Keep(t) => KernelMask::Keep(t.storage(), t.layout()),
            OwnedMask::Add(t) => KernelMask::Add(t.storage(), t.layout()),
        }
    }
}
