//! `checkpoint_sequential`: a stack of layers run in checkpointed segments.

use super::Forward;
use crate::autograd::checkpoint_fallible;
use crate::element::FloatElement;
use crate::error::Error;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// `layers` applied to `input` in turn, in `segments` segments of equal
/// length (the last one takes what remains) whose activations are not
/// kept: each segment but the last is [`checkpoint`](crate::autograd::checkpoint)ed,
/// so that the backward pass runs it again, and only the segments' inputs
/// stay in memory (PyTorch's
/// `torch.utils.checkpoint.checkpoint_sequential(layers, segments, input, use_reentrant=False)`,
/// which also runs the last segment as it is, since its activations are
/// needed at once). Hugging Face's `gradient_checkpointing_enable()` does
/// the same with one segment per transformer block: `segments =
/// layers.len()`.
///
/// The layers are cloned into the segments (a layer's clone shares its
/// parameters, so gradients still reach them). Fails when `segments` is 0
/// or more than the layers, and with a layer's own error.
///
/// ```
/// use devtensor::nn::{Linear, Module, checkpoint_sequential};
/// use devtensor::{Cpu, Tensor};
/// let layers: Vec<Linear<Cpu>> = (0..4).map(|_| Linear::new(3, 3)).collect();
/// let x = Tensor::<Cpu>::ones([2, 3]);
/// let y = checkpoint_sequential(&layers, 2, &x).tanh().sum();
/// let plain = layers.iter().fold(x.clone(), |h, l| l.forward(&h)).tanh().sum();
/// assert_eq!(y.item(), plain.item());
/// let (grads, plain_grads) = (y.backward(), plain.backward());
/// for layer in &layers {
///     assert_eq!(grads.get(&layer.weight).unwrap().to_vec(), plain_grads.get(&layer.weight).unwrap().to_vec());
/// }
/// ```
#[fallible(free)]
pub fn checkpoint_sequential<D, E, L>(layers: &[L], segments: usize, input: &Tensor<D, E>) -> Tensor<D, E>
where
    D: Device,
    E: FloatElement,
    L: Forward<D, E> + Clone + Send + Sync + 'static,
{
    if segments == 0 || segments > layers.len() {
        return Err(Error::Argument {
            op: "checkpoint_sequential",
            device: D::name(),
            reason: format!("{segments} segments of {} layers: between 1 and {} segments", layers.len(), layers.len()),
        });
    }
    let size = layers.len() / segments;
    let mut x = input.clone();
    for start in (0..size * (segments - 1)).step_by(size) {
        let segment: Vec<L> = layers[start..start + size].to_vec();
        x = checkpoint_fallible(&[&x], move |xs| {
            segment.iter().try_fold(xs[0].clone(), |h, layer| super::forward::call(layer, &h))
        })?;
    }
    layers[size * (segments - 1)..].iter().try_fold(x, |h, layer| super::forward::call(layer, &h))
}
