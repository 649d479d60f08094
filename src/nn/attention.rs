//! `MultiheadAttention`: PyTorch's `nn.MultiheadAttention`, on the fused
//! [`scaled_dot_product_attention`](crate::Tensor::scaled_dot_product_attention).

use super::init::uniform;
use super::parameter::{check, parameter};
use super::{Dropout, Linear};
use crate::element::{Element, FloatElement, SameDtype};
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
/// `S` positions. [`forward`](Self::forward) takes one [`MhaInput`], which
/// names each of PyTorch's arguments it sets:
///
/// ```
/// use devtensor::nn::{MhaInput, MultiheadAttention};
/// use devtensor::ops::attention::AttentionMask;
/// use devtensor::{Cpu, Tensor};
///
/// let mha = MultiheadAttention::<Cpu>::new(8, 2).batch_first(true);
/// let x = Tensor::<Cpu>::randn([3, 5, 8]); // batch 3, 5 positions
/// let (y, weights) = mha.forward(MhaInput::self_attention(&x).attn_mask(AttentionMask::Causal));
/// assert_eq!(y.dims(), &[3, 5, 8]);
/// assert_eq!(weights.unwrap().dims(), &[3, 5, 5]); // averaged over the heads
/// ```
///
/// Built from your own tensors with [`from_weights`](Self::from_weights).
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`]'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
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

    /// A layer of `num_heads` heads with your own parameters, PyTorch's:
    /// `in_proj_weight` (`[3E, E]`, the query, key and value projections
    /// stacked), `in_proj_bias` (`[3E]`) and `out_proj` (a [`Linear`]
    /// `E -> E`, with or without a bias). The tensors become parameters as
    /// in [`Linear::from_weights`]. Sequence-first and without dropout, as
    /// [`new`](Self::new). Fails, naming the shapes, when they do not fit
    /// or `num_heads` does not divide `E`.
    ///
    /// ```
    /// use devtensor::nn::{Linear, MhaInput, MultiheadAttention};
    /// use devtensor::{Cpu, Tensor};
    /// let e = 4;
    /// let out_proj = Linear::from_weights(Tensor::<Cpu>::eye(e), None);
    /// let mha = MultiheadAttention::from_weights(2, Tensor::<Cpu>::randn([3 * e, e]), None, out_proj);
    /// let x = Tensor::<Cpu>::randn([5, 1, e]);
    /// assert_eq!(mha.forward(MhaInput::self_attention(&x)).0.dims(), &[5, 1, e]);
    /// ```
    #[fallible]
    pub fn from_weights(
        num_heads: usize,
        in_proj_weight: Tensor<D, E>,
        in_proj_bias: Option<Tensor<D, E>>,
        out_proj: Linear<D, E>,
    ) -> Self {
        const OP: &str = "MultiheadAttention::from_weights";
        let e = in_proj_weight.dims().get(1).copied().unwrap_or(0);
        let mut tensors = vec![&in_proj_weight];
        tensors.extend(in_proj_bias.as_ref());
        tensors.push(&out_proj.weight);
        tensors.extend(out_proj.bias.as_ref());
        let fits = in_proj_weight.dims() == [3 * e, e]
            && in_proj_bias.as_ref().is_none_or(|b| b.dims() == [3 * e])
            && out_proj.weight.dims() == [e, e]
            && out_proj.bias.as_ref().is_none_or(|b| b.dims() == [e]);
        check(fits, OP, &tensors, || {
            "expected in_proj_weight [3E, E], in_proj_bias [3E], and out_proj's weight [E, E] and bias [E]".into()
        })?;
        if num_heads == 0 || !e.is_multiple_of(num_heads) {
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: format!("embed_dim {e} must be divisible by num_heads {num_heads}"),
            });
        }
        Ok(MultiheadAttention {
            in_proj_weight: parameter(in_proj_weight),
            in_proj_bias: in_proj_bias.map(parameter),
            out_proj,
            dropout: Dropout::try_new(0.0)?,
            num_heads,
            batch_first: false,
        })
    }

    /// The layer without biases (PyTorch's `bias=False`): neither the input
    /// projections nor the output projection has one.
    pub fn without_bias(mut self) -> Self {
        self.in_proj_bias = None;
        self.out_proj.bias = None;
        self
    }

    /// The layer with dropout `p` on the attention weights while training
    /// (PyTorch's `dropout=p`): the weights it returns are then the ones
    /// after dropout, as PyTorch's. Fails unless `0 <= p <= 1`.
    ///
    /// ```
    /// use devtensor::nn::{MhaInput, Module, MultiheadAttention};
    /// use devtensor::{Cpu, Tensor};
    /// let mut mha = MultiheadAttention::<Cpu>::new(8, 2).with_dropout(1.0);
    /// let x = Tensor::<Cpu>::randn([3, 1, 8]);
    /// let (y, _) = mha.forward(MhaInput::self_attention(&x));
    /// // Every weight dropped: only the output projection's bias (0) is left.
    /// assert_eq!(y.to_vec(), vec![0.0; 24]);
    /// mha.eval(); // no dropout in evaluation
    /// assert_ne!(mha.forward(MhaInput::self_attention(&x)).0.to_vec(), vec![0.0; 24]);
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

    /// Attention of the input's query over its key and value, PyTorch's
    /// `mha(query, key, value, key_padding_mask=.., need_weights=..,
    /// attn_mask=.., is_causal=..)`: returns the output and, when the input
    /// asks for them (as it does unless told
    /// [`need_weights(false)`](MhaInput::need_weights)), the attention
    /// weights averaged over the heads, `[N, L, S]`. Every tensor of the
    /// input must be on the layer's device (checked at compile time).
    /// Fails on shapes that do not fit, naming them.
    #[fallible]
    pub fn forward<DX: Device, EX: FloatElement>(
        &self,
        input: MhaInput<'_, DX, EX>,
    ) -> (Tensor<D, E>, Option<Tensor<D, E>>)
    where
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        let MhaInput { query, key, value, key_padding, mask, need_weights } = input;
        self.attend(MhaInput {
            query: same_device(query),
            key: same_device(key),
            value: same_device(value),
            key_padding: key_padding.map(same_device),
            mask: mask.on_device(),
            need_weights,
        })
    }

    /// [`forward`](Self::forward) once the input is known to be on `D`
    /// (apart from it, so that no other device is in scope to infer).
    fn attend(&self, input: MhaInput<'_, D, E>) -> Result<(Tensor<D, E>, Option<Tensor<D, E>>)> {
        const OP: &str = "MultiheadAttention";
        let MhaInput { query, key, value, key_padding, mask, need_weights } = input;
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

/// What [`MultiheadAttention::forward`] attends with: a query, key and
/// value, and PyTorch's optional arguments by name, with PyTorch's
/// defaults (no masks, weights returned).
///
/// ```
/// use devtensor::nn::{MhaInput, MultiheadAttention};
/// use devtensor::{Cpu, Tensor};
/// let mha = MultiheadAttention::<Cpu>::new(8, 2);
/// let (target, memory) = (Tensor::<Cpu>::randn([4, 2, 8]), Tensor::<Cpu>::randn([6, 2, 8]));
/// // The last two of sample 1's six memory positions are padding.
/// let padding = Tensor::<Cpu, u8>::from_vec([vec![0; 6], vec![0, 0, 0, 0, 1, 1]].concat(), [2, 6]);
/// let input = MhaInput::new(&target, &memory, &memory).key_padding_mask(&padding).need_weights(false);
/// let (y, weights) = mha.forward(input);
/// assert_eq!(y.dims(), &[4, 2, 8]);
/// assert!(weights.is_none());
/// ```
///
/// A mask on another device than the query does not compile:
/// ```compile_fail,E0277
/// use devtensor::nn::MhaInput;
/// use devtensor::{Cpu, Cuda, Tensor};
/// fn input<'a>(x: &'a Tensor<Cuda<0>>, padding: &'a Tensor<Cpu, u8>) -> MhaInput<'a, Cuda<0>> {
///     MhaInput::self_attention(x).key_padding_mask(padding) // error: expected all tensors to be on the same device
/// }
/// ```
#[derive(Debug)]
pub struct MhaInput<'a, D: Device, E: FloatElement = f32> {
    query: &'a Tensor<D, E>,
    key: &'a Tensor<D, E>,
    value: &'a Tensor<D, E>,
    key_padding: Option<&'a Tensor<D, u8>>,
    mask: AttentionMask<'a, D, E>,
    need_weights: bool,
}

impl<'a, D: Device, E: FloatElement> MhaInput<'a, D, E> {
    /// Attention of `query` over `key` and `value`: queries `[L, N, E]`,
    /// keys and values `[S, N, E]` (`[N, L, E]` and `[N, S, E]` for a
    /// batch-first layer), all on one device (checked at compile time).
    pub fn new<DK: Device, DV: Device, EK: Element, EV: Element>(
        query: &'a Tensor<D, E>,
        key: &'a Tensor<DK, EK>,
        value: &'a Tensor<DV, EV>,
    ) -> Self
    where
        D: SameDevice<DK> + SameDevice<DV>,
        E: SameDtype<EK> + SameDtype<EV>,
    {
        MhaInput {
            query,
            key: same_device(key),
            value: same_device(value),
            key_padding: None,
            mask: AttentionMask::None,
            need_weights: true,
        }
    }

    /// Self-attention: `x` is the query, the key and the value.
    pub fn self_attention(x: &'a Tensor<D, E>) -> Self {
        Self::new(x, x, x)
    }

    /// PyTorch's boolean `key_padding_mask` (`[N, S]`, non-zero =
    /// padding): hides those keys from every query of their sample.
    pub fn key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.key_padding = Some(same_device(mask));
        self
    }

    /// The attention mask, broadcast to `[N, heads, L, S]`: PyTorch's
    /// boolean `attn_mask` (`True` hides) is [`AttentionMask::Hide`], a
    /// float one [`AttentionMask::Add`], and `is_causal=True` with the
    /// causal mask is [`AttentionMask::Causal`].
    ///
    /// (Not generic over the mask's device as the tensors are: `Causal`
    /// holds no tensor to tell it, so a mask on another device is rustc's
    /// "mismatched types", as for
    /// [`scaled_dot_product_attention`](Tensor::scaled_dot_product_attention).)
    pub fn attn_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.mask = mask;
        self
    }

    /// Whether to return the attention weights (PyTorch's `need_weights`,
    /// `true` by default). Without them the layer takes the fused
    /// attention, which never holds the `[N, heads, L, S]` weights.
    pub fn need_weights(mut self, need_weights: bool) -> Self {
        self.need_weights = need_weights;
        self
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
