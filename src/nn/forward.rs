//! [`Forward`]: modules that map one tensor to one tensor, which is what
//! [`Sequential`](super::Sequential) chains.

use super::Module;
use crate::device::Device;
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::Tensor;

/// A module that maps one tensor to one tensor on its own device.
///
/// Layers also have inherent `forward`/`try_forward` methods, generic over
/// the input's device, so that an input on another device is a compile
/// error with devtensor's "expected all tensors to be on the same device"
/// message; this trait's method is the same computation for code that is
/// generic over layers.
pub trait Forward<D: Device, E: FloatElement = f32>: Module<D, E> {
    /// The layer applied to `x`.
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>>;
}
