//! `Transformer`: PyTorch's `nn.Transformer`, an encoder stack and a
//! decoder stack, each with a final layer norm.

use super::decoder::DecoderInput;
use super::encoder::EncoderInput;
use super::{
    TransformerConfig, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
};
use crate::element::{Element, FloatElement, SameDtype};
use crate::nn::init;
use crate::ops::attention::AttentionMask;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// What a [`Transformer`] reads: the source and target sequences and
/// PyTorch's optional masks by name (`src_mask`, `tgt_mask`,
/// `memory_mask` and the three key padding masks).
///
/// ```
/// use devtensor::nn::{Transformer, TransformerConfig, TransformerInput};
/// use devtensor::ops::attention::AttentionMask;
/// use devtensor::{Cpu, Tensor};
/// let config = TransformerConfig { dim_feedforward: 32, ..Default::default() };
/// let model = Transformer::<Cpu>::with_config(8, 2, 1, 1, config);
/// let (src, tgt) = (Tensor::<Cpu>::randn([6, 2, 8]), Tensor::<Cpu>::randn([4, 2, 8]));
/// let y = model.forward(TransformerInput::new(&src, &tgt).tgt_mask(AttentionMask::Causal));
/// assert_eq!(y.dims(), &[4, 2, 8]);
/// ```
#[derive(Debug)]
pub struct TransformerInput<'a, D: Device, E: FloatElement = f32> {
    src: &'a Tensor<D, E>,
    tgt: &'a Tensor<D, E>,
    src_mask: AttentionMask<'a, D, E>,
    tgt_mask: AttentionMask<'a, D, E>,
    memory_mask: AttentionMask<'a, D, E>,
    src_key_padding: Option<&'a Tensor<D, u8>>,
    tgt_key_padding: Option<&'a Tensor<D, u8>>,
    memory_key_padding: Option<&'a Tensor<D, u8>>,
}

impl<'a, D: Device, E: FloatElement> TransformerInput<'a, D, E> {
    /// The source `[S, N, E]` and target `[T, N, E]` (batch first:
    /// `[N, S, E]`, `[N, T, E]`), on one device (checked at compile
    /// time), without masks.
    pub fn new<DT: Device, ET: Element>(src: &'a Tensor<D, E>, tgt: &'a Tensor<DT, ET>) -> Self
    where
        D: SameDevice<DT>,
        E: SameDtype<ET>,
    {
        TransformerInput {
            src,
            tgt: same_device(tgt),
            src_mask: AttentionMask::None,
            tgt_mask: AttentionMask::None,
            memory_mask: AttentionMask::None,
            src_key_padding: None,
            tgt_key_padding: None,
            memory_key_padding: None,
        }
    }

    /// PyTorch's `src_mask`, on the encoder's self-attention (`[S, S]`).
    pub fn src_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.src_mask = mask;
        self
    }

    /// PyTorch's `tgt_mask`, on the decoder's self-attention (`[T, T]`):
    /// [`AttentionMask::Causal`] for `generate_square_subsequent_mask(T)`.
    pub fn tgt_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.tgt_mask = mask;
        self
    }

    /// PyTorch's `memory_mask`, on the decoder's attention over the
    /// encoder's output (`[T, S]`).
    pub fn memory_mask(mut self, mask: AttentionMask<'a, D, E>) -> Self {
        self.memory_mask = mask;
        self
    }

    /// PyTorch's `src_key_padding_mask`, `[N, S]`, non-zero at padding.
    pub fn src_key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.src_key_padding = Some(same_device(mask));
        self
    }

    /// PyTorch's `tgt_key_padding_mask`, `[N, T]`.
    pub fn tgt_key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.tgt_key_padding = Some(same_device(mask));
        self
    }

    /// PyTorch's `memory_key_padding_mask`, `[N, S]`: usually the source's
    /// padding, so that the decoder does not attend to it either.
    pub fn memory_key_padding_mask<DM: Device>(mut self, mask: &'a Tensor<DM, u8>) -> Self
    where
        D: SameDevice<DM>,
    {
        self.memory_key_padding = Some(same_device(mask));
        self
    }

    /// The input on device `D2`, which `D2: SameDevice<D>` and
    /// `E2: SameDtype<E>` proved to be `D` and `E`.
    fn on_device<D2: Device, E2: FloatElement>(self) -> TransformerInput<'a, D2, E2> {
        TransformerInput {
            src: same_device(self.src),
            tgt: same_device(self.tgt),
            src_mask: self.src_mask.on_device(),
            tgt_mask: self.tgt_mask.on_device(),
            memory_mask: self.memory_mask.on_device(),
            src_key_padding: self.src_key_padding.map(same_device),
            tgt_key_padding: self.tgt_key_padding.map(same_device),
            memory_key_padding: self.memory_key_padding.map(same_device),
        }
    }
}

/// PyTorch's `nn.Transformer`: an encoder stack over the source and a
/// decoder stack over the target that attends to the encoder's output,
/// each ending in a layer norm (`encoder.layers.0...`, `encoder.norm`,
/// `decoder.layers.0...`, `decoder.norm`, PyTorch's names). As in PyTorch,
/// every parameter of two or more axes is initialised Xavier-uniform.
///
/// ```
/// use devtensor::nn::{Module, Transformer, TransformerInput};
/// use devtensor::{Cpu, Tensor};
/// // nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2)
/// let model = Transformer::<Cpu>::new(16, 4, 2, 2);
/// assert!(model.parameters().iter().any(|(name, _)| name == "decoder.layers.1.multihead_attn.in_proj_weight"));
/// let (src, tgt) = (Tensor::<Cpu>::randn([7, 2, 16]), Tensor::<Cpu>::randn([5, 2, 16]));
/// assert_eq!(model.forward(TransformerInput::new(&src, &tgt)).dims(), &[5, 2, 16]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](crate::nn::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Transformer<D: Device, E: FloatElement = f32> {
    /// The encoder stack, with its final layer norm.
    pub encoder: TransformerEncoder<D, E>,
    /// The decoder stack, with its final layer norm.
    pub decoder: TransformerDecoder<D, E>,
}

crate::module!(Transformer<E> { encoder, decoder });

impl<D: Device, E: FloatElement> Transformer<D, E> {
    /// A model of width `d_model`, `nhead` heads and the given numbers of
    /// layers, with PyTorch's other defaults ([`TransformerConfig::default`];
    /// PyTorch's own defaults for the sizes are `(512, 8, 6, 6)`). Fails
    /// unless `nhead` divides `d_model`, or when `D` is unavailable.
    #[fallible]
    pub fn new(d_model: usize, nhead: usize, num_encoder_layers: usize, num_decoder_layers: usize) -> Self {
        Self::try_with_config(d_model, nhead, num_encoder_layers, num_decoder_layers, TransformerConfig::default())
    }

    /// The model with `config`'s settings.
    #[fallible]
    pub fn with_config(
        d_model: usize,
        nhead: usize,
        num_encoder_layers: usize,
        num_decoder_layers: usize,
        config: TransformerConfig,
    ) -> Self {
        let encoder_layer = TransformerEncoderLayer::try_with_config(d_model, nhead, config)?;
        let decoder_layer = TransformerDecoderLayer::try_with_config(d_model, nhead, config)?;
        let mut model = Transformer {
            encoder: TransformerEncoder::try_new(&encoder_layer, num_encoder_layers, Some(config.norm(d_model)?))?,
            decoder: TransformerDecoder::try_new(&decoder_layer, num_decoder_layers, Some(config.norm(d_model)?))?,
        };
        init::apply(&mut model, |_, p| {
            if p.rank() < 2 {
                return Ok(None);
            }
            let mut p = p.detach();
            init::try_xavier_uniform_(&mut p, 1.0)?;
            Ok(Some(p))
        })?;
        Ok(model)
    }

    /// The model applied to a [`TransformerInput`], PyTorch's
    /// `model(src, tgt, src_mask=.., tgt_mask=.., ..)`: the decoder's
    /// output `[T, N, E]` (`[N, T, E]` batch first). The input must be on
    /// the model's device (checked at compile time). Fails, naming the
    /// shapes, when they do not fit.
    #[fallible]
    pub fn forward<DX: Device, EX: FloatElement>(&self, input: TransformerInput<'_, DX, EX>) -> Tensor<D, E>
    where
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        let input: TransformerInput<'_, D, E> = input.on_device();
        let memory = self.encoder.encode(EncoderInput {
            src: input.src,
            mask: input.src_mask,
            key_padding: input.src_key_padding,
        })?;
        self.decoder.decode(DecoderInput {
            tgt: input.tgt,
            memory: &memory,
            tgt_mask: input.tgt_mask,
            memory_mask: input.memory_mask,
            tgt_key_padding: input.tgt_key_padding,
            memory_key_padding: input.memory_key_padding,
        })
    }
}
