//! PyTorch's `nn.Transformer` family: the encoder and decoder layers, their
//! stacks, and the whole encoder-decoder model, with PyTorch's settings,
//! defaults and parameter names, so that a PyTorch `state_dict` loads as
//! it is.
//!
//! One concept per file: `encoder.rs` holds the encoder layer and its
//! stack, `decoder.rs` the decoder's, `model.rs` the encoder-decoder
//! `Transformer`; this file the settings and the blocks they share.

mod decoder;
mod encoder;
mod model;

pub use decoder::{DecoderInput, TransformerDecoder, TransformerDecoderLayer};
pub use encoder::{EncoderInput, ToEncoderInput, TransformerEncoder, TransformerEncoderLayer};
pub use model::{Transformer, TransformerInput};

use super::{Dropout, LayerNorm, Linear, MultiheadAttention};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};

/// The settings of the transformer layers, PyTorch's keyword arguments of
/// `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer` and
/// `nn.Transformer`, with its defaults:
///
/// ```
/// use devtensor::nn::{TransformerActivation, TransformerConfig, TransformerEncoderLayer};
/// use devtensor::Cpu;
/// // nn.TransformerEncoderLayer(64, 4, dim_feedforward=256, dropout=0.0,
/// //                            activation="gelu", batch_first=True, norm_first=True)
/// let config = TransformerConfig {
///     dim_feedforward: 256,
///     dropout: 0.0,
///     activation: TransformerActivation::GELU,
///     batch_first: true,
///     norm_first: true,
///     ..Default::default()
/// };
/// let layer = TransformerEncoderLayer::<Cpu>::with_config(64, 4, config);
/// assert_eq!(layer.linear1.weight.dims(), &[256, 64]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerConfig {
    /// The width of the feed-forward block's hidden layer (2048).
    pub dim_feedforward: usize,
    /// The dropout probability after attention, inside and after the
    /// feed-forward block, and on the attention weights, in training (0.1).
    pub dropout: f64,
    /// The feed-forward block's activation (ReLU).
    pub activation: TransformerActivation,
    /// The layer norms' `eps` (1e-5).
    pub layer_norm_eps: f64,
    /// Inputs and outputs `[batch, seq, feature]` instead of
    /// `[seq, batch, feature]` (`false`).
    pub batch_first: bool,
    /// Layer norm before attention and the feed-forward block ("pre-norm",
    /// `true`) or after each residual sum ("post-norm", `false`, the
    /// default, as in "Attention Is All You Need").
    pub norm_first: bool,
    /// Whether the linear layers, the attention projections and the layer
    /// norms have biases (`true`).
    pub bias: bool,
}

impl Default for TransformerConfig {
    fn default() -> Self {
        TransformerConfig {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: TransformerActivation::RELU,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

/// The activation of a transformer layer's feed-forward block, PyTorch's
/// `activation="relu"` ([`RELU`](Self::RELU), the default) or `"gelu"`
/// ([`GELU`](Self::GELU), the exact, erf form).
///
/// Constants rather than enum variants: variants named `Relu` and `Gelu`
/// would share their names with the layers [`Relu`](super::Relu) and
/// [`Gelu`](super::Gelu), and the compiler would then spell those layers
/// out in full (`devtensor::nn::Relu`) in every error message.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct TransformerActivation(ActivationKind);

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum ActivationKind {
    #[default]
    Relu,
    Gelu,
}

impl TransformerActivation {
    /// `relu`, PyTorch's default.
    pub const RELU: Self = TransformerActivation(ActivationKind::Relu);
    /// `gelu`, `x/2 · (1 + erf(x/√2))`.
    pub const GELU: Self = TransformerActivation(ActivationKind::Gelu);

    fn apply<D: Device, E: FloatElement>(self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        match self.0 {
            ActivationKind::Relu => x.try_relu(),
            ActivationKind::Gelu => x.try_gelu(),
        }
    }
}

/// PyTorch's spelling, `"relu"` or `"gelu"`.
impl std::fmt::Debug for TransformerActivation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            ActivationKind::Relu => "\"relu\"",
            ActivationKind::Gelu => "\"gelu\"",
        })
    }
}

impl TransformerConfig {
    fn validate(&self, op: &'static str, d_model: usize, nhead: usize, device: String) -> Result<()> {
        let reason = if d_model == 0 || self.dim_feedforward == 0 {
            format!("d_model ({d_model}) and dim_feedforward ({}) must be greater than zero", self.dim_feedforward)
        } else if nhead == 0 || !d_model.is_multiple_of(nhead) {
            format!("d_model {d_model} must be divisible by nhead {nhead}")
        } else if !(0.0..=1.0).contains(&self.dropout) {
            format!("dropout must be a probability between 0 and 1, got {}", self.dropout)
        } else {
            return Ok(());
        };
        Err(Error::Argument { op, device, reason })
    }

    /// A self- or cross-attention block of these settings.
    fn attention<D: Device, E: FloatElement>(&self, d_model: usize, nhead: usize) -> Result<MultiheadAttention<D, E>> {
        let attention =
            MultiheadAttention::try_new(d_model, nhead)?.try_with_dropout(self.dropout)?.batch_first(self.batch_first);
        Ok(if self.bias { attention } else { attention.without_bias() })
    }

    /// A linear layer of these settings (with or without a bias).
    fn linear<D: Device, E: FloatElement>(&self, inputs: usize, outputs: usize) -> Result<Linear<D, E>> {
        let linear = Linear::try_new(inputs, outputs)?;
        Ok(if self.bias { linear } else { linear.without_bias() })
    }

    /// A layer norm of these settings over `d_model` features.
    fn norm<D: Device, E: FloatElement>(&self, d_model: usize) -> Result<LayerNorm<D, E>> {
        let norm = LayerNorm::try_new(&[d_model])?.eps(self.layer_norm_eps);
        Ok(if self.bias { norm } else { norm.without_bias() })
    }
}

/// The feed-forward block, `linear2(dropout(activation(linear1(x))))`.
fn feed_forward<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    linear1: &Linear<D, E>,
    activation: TransformerActivation,
    dropout: &Dropout,
    linear2: &Linear<D, E>,
) -> Result<Tensor<D, E>> {
    linear2.try_forward(&dropout.try_forward(&activation.apply(&linear1.try_forward(x)?)?)?)
}

/// A residual block in either order: `norm(x + block(x))` (post-norm) or
/// `x + block(norm(x))` (pre-norm).
fn residual<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    norm: &LayerNorm<D, E>,
    norm_first: bool,
    block: impl FnOnce(&Tensor<D, E>) -> Result<Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    if norm_first { x.try_add(&block(&norm.try_forward(x)?)?) } else { norm.try_forward(&x.try_add(&block(x)?)?) }
}

/// `layer` copied `num_layers` times into fresh parameters, as PyTorch's
/// stacks deep-copy the layer they are given: every copy starts with the
/// same values and trains on its own.
fn clones<D: Device, E: FloatElement, M: super::Module<D, E> + Clone>(layer: &M, num_layers: usize) -> Result<Vec<M>> {
    let mut layers = Vec::with_capacity(num_layers);
    for _ in 0..num_layers {
        let mut copy = layer.clone();
        let mut failure = None;
        copy.visit_mut("", &mut |_, _, t| {
            if failure.is_some() {
                return;
            }
            // `* 1` is a new tensor with the same bits, -0.0 included (a
            // clone would share the storage, and the copies would be one
            // tied parameter).
            match t.detach().try_mul_scalar(E::ONE) {
                Ok(fresh) => {
                    let tracks = t.tracks_grad();
                    *t = fresh;
                    t.set_requires_grad(tracks);
                }
                Err(e) => failure = Some(e),
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        layers.push(copy);
    }
    Ok(layers)
}
