//! `TransformerEncoderLayer` and `TransformerEncoder`: self-attention and a
//! feed-forward block, each in a residual sum with a layer norm, stacked.

use super::{TransformerActivation, TransformerConfig, clones, feed_forward, residual};
use crate::element::{FloatElement, SameDtype};
use crate::error::Result;
use crate::nn::{Dropout, Forward, LayerNorm, Linear, MhaInput, MultiheadAttention};
use crate::ops::attention::AttentionMask;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// What an encoder layer or stack reads: the sequence `src` and PyTorch's
/// optional `mask` and `src_key_padding_mask`, by name.
///
/// ```
/// use devtensor::nn::{EncoderInput, TransformerEncoderLayer};
/// use devtensor::ops::attention::AttentionMask;
/// use devtensor::{Cpu, Tensor};
/// let layer = TransformerEncoderLayer::<Cpu>::new(8, 2);
/// let src = Tensor::<Cpu>::randn([5, 2, 8]); // [seq, batch, feature]
/// // Sample 1's last two positions are padding.
/// let padding = Tensor::<Cpu, u8>::from_vec([vec![0; 5], vec![0, 0, 0, 1, 1]].concat(), [2, 5]);
/// let y = layer.forward(EncoderInput::new(&src).mask(AttentionMask::Causal).key_padding_mask(&padding));
/// assert_eq!(y.dims(), &[5, 2, 8]);
/// ```
#[derive(Debug)]
pub struct EncoderInput<'a, D: Device, E: FloatElement = f32> {
    pub(super) src: &'a Tensor<D, E>,
    pub(super) mask: AttentionMask<'a, D, E>,
    pub(super) key_padding: Option<&'a Tensor<D, u8>>,
}

impl<'a, D: Device, E: FloatElement> EncoderInput<'a, D, E> {
    /// The sequence `[S, N, E]` (`[N, S, E]` for a batch-first layer),
    /// without masks.
    pub fn new(src: &'a Tensor<D, E>) -> Self {
        EncoderInput { src, mask: AttentionMask::None, key_padding: None }
    }

    /// PyTorch's `mask` (`src_mask` of `nn.Transformer`), `[S, S]` or
    /// `[N * nhead, S, S]`-broadcastable: a boolean mask whose `True` hides
    /// is [`AttentionMask::Hide`], a float one [`AttentionMask::Add`],
    /// `is_causal=True` (or `generate_square_subsequent_mask`)
    /// [`AttentionMask::Causal`].
    pub fn mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.mask = mask;
        self
    }

    /// PyTorch's `src_key_padding_mask`, `[N, S]`, non-zero at padding.
    pub fn key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.key_padding = Some(same_device(mask));
        self
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What an encoder's `forward` takes: a sequence (`&Tensor`) or an
/// [`EncoderInput`] with masks.
pub trait ToEncoderInput<'a>: sealed::Sealed {
    /// The input's device.
    type Device: Device;
    /// The input's element type.
    type Elem: FloatElement;
    /// The input with its masks.
    fn to_encoder_input(self) -> EncoderInput<'a, Self::Device, Self::Elem>;
}

impl<D: Device, E: FloatElement> sealed::Sealed for &Tensor<D, E> {}
impl<D: Device, E: FloatElement> sealed::Sealed for EncoderInput<'_, D, E> {}

impl<'a, D: Device, E: FloatElement> ToEncoderInput<'a> for &'a Tensor<D, E> {
    type Device = D;
    type Elem = E;
    fn to_encoder_input(self) -> EncoderInput<'a, D, E> {
        EncoderInput::new(self)
    }
}

impl<'a, D: Device, E: FloatElement> ToEncoderInput<'a> for EncoderInput<'a, D, E> {
    type Device = D;
    type Elem = E;
    fn to_encoder_input(self) -> EncoderInput<'a, D, E> {
        self
    }
}

/// The input on the layer's device `D`, which `D: SameDevice<DX>` and
/// `E: SameDtype<EX>` proved to be `DX` and `EX`.
fn on_device<'a, D: Device, E: FloatElement, DX: Device, EX: FloatElement>(
    input: EncoderInput<'a, DX, EX>,
) -> EncoderInput<'a, D, E> {
    EncoderInput {
        src: same_device(input.src),
        mask: input.mask.on_device(),
        key_padding: input.key_padding.map(same_device),
    }
}

/// PyTorch's `nn.TransformerEncoderLayer`: self-attention, then a
/// feed-forward block, each in a residual sum with a layer norm (after it
/// by default, before it with `norm_first`). The fields carry PyTorch's
/// names (`self_attn.in_proj_weight`, `linear1.weight`, `norm2.bias`), so
/// a PyTorch `state_dict` loads by name.
///
/// ```
/// use devtensor::nn::TransformerEncoderLayer;
/// use devtensor::{Cpu, Tensor};
/// // nn.TransformerEncoderLayer(d_model=8, nhead=2)
/// let layer = TransformerEncoderLayer::<Cpu>::new(8, 2);
/// let y = layer.forward(&Tensor::<Cpu>::randn([5, 3, 8]));
/// assert_eq!(y.dims(), &[5, 3, 8]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`]'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransformerEncoderLayer<D: Device, E: FloatElement = f32> {
    /// Self-attention over the sequence.
    pub self_attn: MultiheadAttention<D, E>,
    /// The feed-forward block's first layer, `d_model -> dim_feedforward`.
    pub linear1: Linear<D, E>,
    /// Dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// The feed-forward block's second layer, `dim_feedforward -> d_model`.
    pub linear2: Linear<D, E>,
    /// The layer norm of the attention block.
    pub norm1: LayerNorm<D, E>,
    /// The layer norm of the feed-forward block.
    pub norm2: LayerNorm<D, E>,
    /// Dropout on the attention block's output.
    pub dropout1: Dropout,
    /// Dropout on the feed-forward block's output.
    pub dropout2: Dropout,
    activation: TransformerActivation,
    norm_first: bool,
}

crate::module!(TransformerEncoderLayer<E> {
    self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2; activation, norm_first
});

impl<D: Device, E: FloatElement> TransformerEncoderLayer<D, E> {
    /// A layer of width `d_model` with `nhead` attention heads and
    /// PyTorch's defaults ([`TransformerConfig::default`]: a feed-forward
    /// width of 2048, dropout 0.1, ReLU, post-norm, sequence-first). Fails
    /// unless `nhead` divides `d_model`, or when `D` is unavailable.
    #[fallible]
    pub fn new(d_model: usize, nhead: usize) -> Self {
        Self::try_with_config(d_model, nhead, TransformerConfig::default())
    }

    /// The layer with `config`'s settings. Fails unless `nhead` divides
    /// `d_model` and `dropout` is a probability.
    #[fallible]
    pub fn with_config(d_model: usize, nhead: usize, config: TransformerConfig) -> Self {
        config.validate("TransformerEncoderLayer", d_model, nhead, D::name())?;
        Ok(TransformerEncoderLayer {
            self_attn: config.attention(d_model, nhead)?,
            linear1: config.linear(d_model, config.dim_feedforward)?,
            dropout: Dropout::try_new(config.dropout)?,
            linear2: config.linear(config.dim_feedforward, d_model)?,
            norm1: config.norm(d_model)?,
            norm2: config.norm(d_model)?,
            dropout1: Dropout::try_new(config.dropout)?,
            dropout2: Dropout::try_new(config.dropout)?,
            activation: config.activation,
            norm_first: config.norm_first,
        })
    }

    /// The layer applied to a sequence (`&src`) or to an [`EncoderInput`]
    /// with masks, PyTorch's `layer(src, src_mask=.., src_key_padding_mask=..)`.
    /// The input must be on the layer's device (checked at compile time).
    /// Fails, naming the shapes, when they do not fit.
    #[fallible]
    pub fn forward<'a, X: ToEncoderInput<'a>>(&self, input: X) -> Tensor<D, E>
    where
        D: SameDevice<X::Device>,
        E: SameDtype<X::Elem>,
    {
        self.encode(on_device(input.to_encoder_input()))
    }

    fn encode(&self, input: EncoderInput<'_, D, E>) -> Result<Tensor<D, E>> {
        let EncoderInput { src, mask, key_padding } = input;
        let x = residual(src, &self.norm1, self.norm_first, |x| {
            let mut attention = MhaInput::self_attention(x).attn_mask(mask).need_weights(false);
            if let Some(padding) = key_padding {
                attention = attention.key_padding_mask(padding);
            }
            self.dropout1.try_forward(&self.self_attn.try_forward(attention)?.0)
        })?;
        residual(&x, &self.norm2, self.norm_first, |x| {
            let y = feed_forward(x, &self.linear1, self.activation, &self.dropout, &self.linear2)?;
            self.dropout2.try_forward(&y)
        })
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for TransformerEncoderLayer<D, E> {
    /// The layer without masks, so that it can sit in a
    /// [`Sequential`](crate::nn::Sequential).
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.encode(EncoderInput::new(x))
    }
}

/// PyTorch's `nn.TransformerEncoder`: a stack of encoder layers (`layers.0`,
/// `layers.1`, ...), each reading the one below, and an optional final
/// layer norm (`norm`), as `nn.Transformer` and pre-norm models use.
///
/// ```
/// use devtensor::nn::{LayerNorm, TransformerEncoder, TransformerEncoderLayer};
/// use devtensor::{Cpu, Tensor};
/// // nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), num_layers=3, norm=nn.LayerNorm(8))
/// let layer = TransformerEncoderLayer::<Cpu>::new(8, 2);
/// let encoder = TransformerEncoder::new(&layer, 3, Some(LayerNorm::new(&[8])));
/// assert_eq!(encoder.layers.len(), 3);
/// assert_eq!(encoder.forward(&Tensor::<Cpu>::randn([5, 3, 8])).dims(), &[5, 3, 8]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`]'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransformerEncoder<D: Device, E: FloatElement = f32> {
    /// The layers, bottom first.
    pub layers: Vec<TransformerEncoderLayer<D, E>>,
    /// The layer norm after the last layer, if any.
    pub norm: Option<LayerNorm<D, E>>,
}

crate::module!(TransformerEncoder<E> { layers, norm });

impl<D: Device, E: FloatElement> TransformerEncoder<D, E> {
    /// `num_layers` copies of `encoder_layer`, as PyTorch deep-copies it:
    /// the copies start with its values and are separate parameters. Fails
    /// when `D` runs out of memory.
    #[fallible]
    pub fn new(
        encoder_layer: &TransformerEncoderLayer<D, E>,
        num_layers: usize,
        norm: Option<LayerNorm<D, E>>,
    ) -> Self {
        Ok(TransformerEncoder { layers: clones(encoder_layer, num_layers)?, norm })
    }

    /// The stack applied to a sequence or an [`EncoderInput`], every layer
    /// with the same masks, PyTorch's `encoder(src, mask=.., src_key_padding_mask=..)`.
    /// The input must be on the stack's device (checked at compile time).
    #[fallible]
    pub fn forward<'a, X: ToEncoderInput<'a>>(&self, input: X) -> Tensor<D, E>
    where
        D: SameDevice<X::Device>,
        E: SameDtype<X::Elem>,
    {
        self.encode(on_device(input.to_encoder_input()))
    }

    pub(super) fn encode(&self, input: EncoderInput<'_, D, E>) -> Result<Tensor<D, E>> {
        let mut x = input.src.clone();
        for layer in &self.layers {
            x = layer.encode(EncoderInput { src: &x, mask: input.mask, key_padding: input.key_padding })?;
        }
        match &self.norm {
            Some(norm) => norm.try_forward(&x),
            None => Ok(x),
        }
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for TransformerEncoder<D, E> {
    /// The stack without masks.
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.encode(EncoderInput::new(x))
    }
}
