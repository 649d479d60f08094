//! Neural-network layers, losses and the [`Module`] trait.
//!
//! Every layer is generic over its device, `Linear<D>`, and keeps its
//! parameters as tensors that require grad. A model is a plain struct of
//! layers given [`Module`] by [`module!`](crate::module); it moves to
//! another device with `model.to::<Cuda<0>>()`, which returns the model's
//! type on that device. A layer's `forward` takes an input of any device
//! type and requires it to be the layer's own at compile time, so feeding a
//! CPU batch to a GPU model fails to build with devtensor's "expected all
//! tensors to be on the same device" message.
//!
//! # Calling a layer, and writing one
//!
//! There is one way in: `layer.forward(&x)`, or `layer.try_forward(&x)`
//! for an [`Error`](crate::Error) instead of a panic. Every layer has both
//! as inherent methods (no import needed), and a model of your own gets
//! them from [`Forward`] once it implements [`Forward::forward_on`], which
//! is what you write and never need to call: it receives the input already
//! on the model's device. In generic code, `Forward::forward(&model, &x)`
//! is the same call. [`MultiheadAttention`] takes its several inputs and
//! PyTorch's optional arguments as one [`MhaInput`].
//!
//! Layers are built by their constructors: `new` (PyTorch's
//! initialisation), `from_weights` from your own tensors (with the shape
//! checks of `new`, and a tied weight staying one parameter),
//! [`Embedding::from_pretrained`], and `with_config` where a layer has
//! several settings ([`Conv2dConfig`]). Their fields are public to read and
//! assign, as in PyTorch (`head.weight = wte.weight.clone()` ties two
//! layers), and the structs are `#[non_exhaustive]`, so that a field added
//! to a layer breaks no program:
//!
//! ```
//! use devtensor::nn::{Embedding, Linear};
//! use devtensor::{Cpu, Tensor};
//! let wte = Embedding::from_weights(Tensor::<Cpu>::randn([10, 4]), None);
//! let head = Linear::from_weights(wte.weight.clone(), None); // tied
//! let logits = head.forward(&wte.forward(&Tensor::<Cpu, i64>::from_vec(vec![3, 1], [2])));
//! assert_eq!(logits.dims(), &[2, 10]);
//! ```

mod activation;
mod attention;
mod batch_norm;
mod buffer;
mod checkpoint_sequential;
mod conv;
mod distance;
mod dropout;
mod embedding;
mod embedding_bag;
mod fold;
mod forward;
mod group_norm;
mod hooks;
pub mod init;
mod instance_norm;
mod layer_norm;
mod linear;
mod loss;
mod module;
mod module_dict;
mod module_fields;
pub(crate) mod parameter;
pub(crate) use module::stateless_module;
mod pixel_shuffle;
mod pool;
mod recurrent;
mod rms_norm;
mod sequential;
mod to_dtype;
mod transformer;
mod upsample;

pub use activation::{
    Celu, Elu, Flatten, Gelu, Glu, Hardsigmoid, Hardswish, Hardtanh, Identity, LeakyRelu, LogSigmoid, LogSoftmax, Mish,
    Prelu, Relu, Relu6, Selu, Sigmoid, Silu, Softmax, Softplus, Softsign, Tanh,
};
pub use attention::{MhaInput, MultiheadAttention};
pub use batch_norm::{BatchNorm1d, BatchNorm2d, BatchNorm3d};
pub use buffer::Buffer;
pub use checkpoint_sequential::{checkpoint_sequential, try_checkpoint_sequential};
pub use conv::{
    Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, Conv3d, Conv3dConfig, ConvTranspose1d, ConvTranspose1dConfig,
    ConvTranspose2d, ConvTranspose2dConfig,
};
pub use distance::{
    cdist, cosine_similarity, normalize, pairwise_distance, try_cdist, try_cosine_similarity, try_normalize,
    try_pairwise_distance,
};
pub use dropout::{Dropout, Dropout1d, Dropout2d, Dropout3d};
pub use embedding::Embedding;
pub use embedding_bag::{EmbeddingBag, EmbeddingBagInput, EmbeddingBagMode, ToEmbeddingBagInput};
pub use fold::{Fold, Unfold, fold, try_fold, try_unfold, unfold};
pub use forward::Forward;
pub use group_norm::GroupNorm;
pub use hooks::{Hookable, Hooked, Hooks, ModuleHooks};
pub use instance_norm::{InstanceNorm1d, InstanceNorm2d, InstanceNorm3d};
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use loss::{
    CrossEntropy, CtcLoss, KlReduction, Reduction, TripletMargin, binary_cross_entropy,
    binary_cross_entropy_with_logits, binary_cross_entropy_with_logits_weighted, cosine_embedding_loss, cross_entropy,
    cross_entropy_probs, cross_entropy_weighted, cross_entropy_with, ctc_loss, hinge_embedding_loss, huber_loss,
    kl_div, l1_loss, margin_ranking_loss, mse_loss, nll_loss, nll_loss_with, smooth_l1_loss, soft_margin_loss,
    triplet_margin_loss, try_binary_cross_entropy, try_binary_cross_entropy_with_logits,
    try_binary_cross_entropy_with_logits_weighted, try_cosine_embedding_loss, try_cross_entropy,
    try_cross_entropy_probs, try_cross_entropy_weighted, try_cross_entropy_with, try_ctc_loss,
    try_hinge_embedding_loss, try_huber_loss, try_kl_div, try_l1_loss, try_margin_ranking_loss, try_mse_loss,
    try_nll_loss, try_nll_loss_with, try_smooth_l1_loss, try_soft_margin_loss, try_triplet_margin_loss,
};
pub use module::{Module, TensorKind, child_name, moving};
pub use module_dict::ModuleDict;
#[doc(hidden)]
pub use module_fields::{
    Access, ConvertTo, Exclusive, Field, FieldOfDtype, FieldVisitor, MoveTo, OfDtype, OnDevice, Rebuild, SetTraining,
    Shared, Visit, VisitInts, VisitIntsMut, VisitMut,
};
pub use pixel_shuffle::{PixelShuffle, PixelUnshuffle};
pub use pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d,
    MaxPool2d, MaxUnpool1d, MaxUnpool2d,
};
pub use recurrent::{
    Gru, GruCell, Lstm, LstmCell, PackedSequence, RecurrentConfig, RecurrentInput, Rnn, RnnCell, RnnNonlinearity,
    pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence, try_pack_padded_sequence,
    try_pack_sequence, try_pad_packed_sequence, try_pad_sequence,
};
pub use rms_norm::RmsNorm;
pub use sequential::Sequential;
pub use to_dtype::ToDtype;
pub use transformer::{
    DecoderInput, EncoderInput, ToEncoderInput, Transformer, TransformerActivation, TransformerConfig,
    TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerInput,
};
pub use upsample::{Interpolate, InterpolateMode, Resize, Upsample, interpolate, try_interpolate};
