//! `TransformerDecoderLayer` and `TransformerDecoder`: self-attention over
//! the target, attention over the encoder's memory and a feed-forward
//! block, each in a residual sum with a layer norm, stacked.

use super::{TransformerActivation, TransformerConfig, clones, feed_forward, residual};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::Result;
use crate::nn::{Dropout, LayerNorm, Linear, MhaInput, MultiheadAttention};
use crate::ops::attention::AttentionMask;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// What a decoder layer or stack reads: the target sequence `tgt`, the
/// encoder's output `memory`, and PyTorch's optional masks by name.
///
/// ```
/// use devtensor::nn::{DecoderInput, TransformerDecoderLayer};
/// use devtensor::ops::attention::AttentionMask;
/// use devtensor::{Cpu, Tensor};
/// let layer = TransformerDecoderLayer::<Cpu>::new(8, 2);
/// let (tgt, memory) = (Tensor::<Cpu>::randn([4, 2, 8]), Tensor::<Cpu>::randn([6, 2, 8]));
/// let y = layer.forward(DecoderInput::new(&tgt, &memory).tgt_mask(AttentionMask::Causal));
/// assert_eq!(y.dims(), &[4, 2, 8]);
/// ```
#[derive(Debug)]
pub struct DecoderInput<'a, D: Device, E: FloatElement = f32> {
    pub(super) tgt: &'a Tensor<D, E>,
    pub(super) memory: &'a Tensor<D, E>,
    pub(super) tgt_mask: AttentionMask<'a, D, E>,
    pub(super) memory_mask: AttentionMask<'a, D, E>,
    pub(super) tgt_key_padding: Option<&'a Tensor<D, u8>>,
    pub(super) memory_key_padding: Option<&'a Tensor<D, u8>>,
}

impl<'a, D: Device, E: FloatElement> DecoderInput<'a, D, E> {
    /// The target `[T, N, E]` and the memory `[S, N, E]` (`[N, T, E]` and
    /// `[N, S, E]` for a batch-first layer), on one device (checked at
    /// compile time), without masks.
    pub fn new<DM: Device, EM: Element>(tgt: &'a Tensor<D, E>, memory: &'a Tensor<DM, EM>) -> Self
    where
        D: SameDevice<DM>,
        E: SameDtype<EM>,
    {
        DecoderInput {
            tgt,
            memory: same_device(memory),
            tgt_mask: AttentionMask::None,
            memory_mask: AttentionMask::None,
            tgt_key_padding: None,
            memory_key_padding: None,
        }
    }

    /// PyTorch's `tgt_mask` on the target's self-attention, `[T, T]`:
    /// [`AttentionMask::Causal`] for `generate_square_subsequent_mask`
    /// (or `tgt_is_causal=True`), `Hide` for a boolean mask, `Add` for a
    /// float one.
    pub fn tgt_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.tgt_mask = mask;
        self
    }

    /// PyTorch's `memory_mask` on the attention over the memory, `[T, S]`.
    pub fn memory_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.memory_mask = mask;
        self
    }

    /// PyTorch's `tgt_key_padding_mask`, `[N, T]`, non-zero at padding.
    pub fn tgt_key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.tgt_key_padding = Some(same_device(mask));
        self
    }

    /// PyTorch's `memory_key_padding_mask`, `[N, S]`, non-zero at padding.
    pub fn memory_key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.memory_key_padding = Some(same_device(mask));
        self
    }

    /// The input on device `D2`, which `D2: SameDevice<D>` and
    /// `E2: SameDtype<E>` proved to be `D` and `E`.
    pub(super) fn on_device<D2: Device, E2: FloatElement>(self) -> DecoderInput<'a, D2, E2> {
        DecoderInput {
            tgt: same_device(self.tgt),
            memory: same_device(self.memory),
            tgt_mask: self.tgt_mask.on_device(),
            memory_mask: self.memory_mask.on_device(),
            tgt_key_padding: self.tgt_key_padding.map(same_device),
            memory_key_padding: self.memory_key_padding.map(same_device),
        }
    }
}

/// Attention of `query` over `key_value` with these masks, its weights
/// not kept (the fused path).
fn attend<D: Device, E: FloatElement>(
    attention: &MultiheadAttention<D, E>,
    query: &Tensor<D, E>,
    key_value: &Tensor<D, E>,
    mask: AttentionMask<'_, D, E>,
    key_padding: Option<&Tensor<D, u8>>,
) -> Result<Tensor<D, E>> {
    let mut input = MhaInput::new(query, key_value, key_value).attn_mask(mask).need_weights(false);
    if let Some(padding) = key_padding {
        input = input.key_padding_mask(padding);
    }
    Ok(attention.try_forward(input)?.0)
}

/// PyTorch's `nn.TransformerDecoderLayer`: self-attention over the target,
/// attention over the memory, then a feed-forward block, each in a
/// residual sum with a layer norm (after it by default, before it with
/// `norm_first`). The fields carry PyTorch's names (`self_attn`,
/// `multihead_attn`, `linear1`, `norm3`, ...), so a PyTorch `state_dict`
/// loads by name.
///
/// ```
/// use devtensor::nn::{DecoderInput, TransformerDecoderLayer};
/// use devtensor::{Cpu, Tensor};
/// // nn.TransformerDecoderLayer(d_model=8, nhead=2)
/// let layer = TransformerDecoderLayer::<Cpu>::new(8, 2);
/// let (tgt, memory) = (Tensor::<Cpu>::randn([4, 3, 8]), Tensor::<Cpu>::randn([6, 3, 8]));
/// assert_eq!(layer.forward(DecoderInput::new(&tgt, &memory)).dims(), &[4, 3, 8]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`]'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransformerDecoderLayer<D: Device, E: FloatElement = f32> {
    /// Self-attention over the target.
    pub self_attn: MultiheadAttention<D, E>,
    /// Attention of the target over the memory.
    pub multihead_attn: MultiheadAttention<D, E>,
    /// The feed-forward block's first layer, `d_model -> dim_feedforward`.
    pub linear1: Linear<D, E>,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// The feed-forward block's second layer, `dim_feedforward -> d_model`.
    pub linear2: Linear<D, E>,
    /// The layer norm of the self-attention block.
    pub norm1: LayerNorm<D, E>,
    /// The layer norm of the attention over the memory.
    pub norm2: LayerNorm<D, E>,
    /// The layer norm of the feed-forward block.
    pub norm3: LayerNorm<D, E>,
    /// Dropout on the self-attention block's output.
    pub dropout1: Dropout,
    /// Dropout on the memory attention's output.
    pub dropout2: Dropout,
    /// Dropout on the feed-forward block's output.
    pub dropout3: Dropout,
    activation: TransformerActivation,
    norm_first: bool,
}

crate::module!(TransformerDecoderLayer<E> {
    self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3;
    activation, norm_first
});

impl<D: Device, E: FloatElement> TransformerDecoderLayer<D, E> {
    /// A layer of width `d_model` with `nhead` attention heads and
    /// PyTorch's defaults ([`TransformerConfig::default`]). Fails unless
    /// `nhead` divides `d_model`, or when `D` is unavailable.
    #[fallible]
    pub fn new(d_model: usize, nhead: usize) -> Self {
        Self::try_with_config(d_model, nhead, TransformerConfig::default())
    }

    /// The layer with `config`'s settings. Fails unless `nhead` divides
    /// `d_model` and `dropout` is a probability.
    #[fallible]
    pub fn with_config(d_model: usize, nhead: usize, config: TransformerConfig) -> Self {
        config.validate("TransformerDecoderLayer", d_model, nhead, D::name())?;
        Ok(TransformerDecoderLayer {
            self_attn: config.attention(d_model, nhead)?,
            multihead_attn: config.attention(d_model, nhead)?,
            linear1: config.linear(d_model, config.dim_feedforward)?,
            dropout: Dropout::try_new(config.dropout)?,
            linear2: config.linear(config.dim_feedforward, d_model)?,
            norm1: config.norm(d_model)?,
            norm2: config.norm(d_model)?,
            norm3: config.norm(d_model)?,
            dropout1: Dropout::try_new(config.dropout)?,
            dropout2: Dropout::try_new(config.dropout)?,
            dropout3: Dropout::try_new(config.dropout)?,
            activation: config.activation,
            norm_first: config.norm_first,
        })
    }

    /// The layer applied to a [`DecoderInput`], PyTorch's
    /// `layer(tgt, memory, tgt_mask=.., memory_mask=..,
    /// tgt_key_padding_mask=.., memory_key_padding_mask=..)`. The input
    /// must be on the layer's device (checked at compile time). Fails,
    /// naming the shapes, when they do not fit.
    #[fallible]
    pub fn forward<DX: Device, EX: FloatElement>(&self, input: DecoderInput<'_, DX, EX>) -> Tensor<D, E>
    where
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        self.decode(input.on_device())
    }

    fn decode(&self, input: DecoderInput<'_, D, E>) -> Result<Tensor<D, E>> {
        let x = residual(input.tgt, &self.norm1, self.norm_first, |x| {
            let y = attend(&self.self_attn, x, x, input.tgt_mask, input.tgt_key_padding)?;
            self.dropout1.try_forward(&y)
        })?;
        let x = residual(&x, &self.norm2, self.norm_first, |x| {
            let y = attend(&self.multihead_attn, x, input.memory, input.memory_mask, input.memory_key_padding)?;
            self.dropout2.try_forward(&y)
        })?;
        residual(&x, &self.norm3, self.norm_first, |x| {
            let y = feed_forward(x, &self.linear1, self.activation, &self.dropout, &self.linear2)?;
            self.dropout3.try_forward(&y)
        })
    }
}

/// PyTorch's `nn.TransformerDecoder`: a stack of decoder layers
/// (`layers.0`, ...), each reading the one below and the same memory, and
/// an optional final layer norm (`norm`).
///
/// ```
/// use devtensor::nn::{DecoderInput, TransformerDecoder, TransformerDecoderLayer};
/// use devtensor::{Cpu, Tensor};
/// let layer = TransformerDecoderLayer::<Cpu>::new(8, 2);
/// let decoder = TransformerDecoder::new(&layer, 2, None);
/// let (tgt, memory) = (Tensor::<Cpu>::randn([4, 3, 8]), Tensor::<Cpu>::randn([6, 3, 8]));
/// assert_eq!(decoder.forward(DecoderInput::new(&tgt, &memory)).dims(), &[4, 3, 8]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`]'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransformerDecoder<D: Device, E: FloatElement = f32> {
    /// The layers, bottom first.
    pub layers: Vec<TransformerDecoderLayer<D, E>>,
    /// The layer norm after the last layer, if any.
    pub norm: Option<LayerNorm<D, E>>,
}

crate::module!(TransformerDecoder<E> { layers, norm });

impl<D: Device, E: FloatElement> TransformerDecoder<D, E> {
    /// `num_layers` copies of `decoder_layer`, as PyTorch deep-copies it:
    /// the copies start with its values and are separate parameters. Fails
    /// when `D` runs out of memory.
    #[fallible]
    pub fn new(
        decoder_layer: &TransformerDecoderLayer<D, E>,
        num_layers: usize,
        norm: Option<LayerNorm<D, E>>,
    ) -> Self {
        Ok(TransformerDecoder { layers: clones(decoder_layer, num_layers)?, norm })
    }

    /// The stack applied to a [`DecoderInput`], every layer with the same
    /// memory and masks, PyTorch's `decoder(tgt, memory, ..)`. The input
    /// must be on the stack's device (checked at compile time).
    #[fallible]
    pub fn forward<DX: Device, EX: FloatElement>(&self, input: DecoderInput<'_, DX, EX>) -> Tensor<D, E>
    where
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        self.decode(input.on_device())
    }

    pub(super) fn decode(&self, input: DecoderInput<'_, D, E>) -> Result<Tensor<D, E>> {
        let mut x = input.tgt.clone();
        for layer in &self.layers {
            x = layer.decode(DecoderInput { tgt: &x, ..input })?;
        }
        match &self.norm {
            Some(norm) => norm.try_forward(&x),
            None => Ok(x),
        }
    }
}
