//! [`Buffer`]: a float tensor a model holds but does not train, PyTorch's
//! `register_buffer` (a rotary embedding's `inv_freq`, a fixed positional
//! table, running statistics of your own).

use super::{Module, TensorKind, ToDtype};
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::{Device, Tensor};

/// A float tensor held by a model that is not a parameter: PyTorch's
/// `self.register_buffer(name, tensor, persistent=..)`. It is moved by
/// [`to`](Module::to) and converted by [`to_dtype`](ToDtype::to_dtype)
/// with the model, never tracks gradients and is never given to an
/// optimizer. A persistent buffer ([`Buffer::new`], PyTorch's default) is
/// in the model's [`named_tensors`](Module::named_tensors) as a
/// [`TensorKind::Buffer`], so checkpoints save and load it under its
/// field's name; a [`non_persistent`](Buffer::non_persistent) one
/// (`persistent=False`) is in neither, as it is not in PyTorch's
/// `state_dict`.
///
/// A float `Tensor` field is a parameter; wrap it in `Buffer` to make it a
/// buffer. It reads as the tensor it holds (`Deref`):
///
/// ```
/// use devtensor::io::Checkpoint;
/// use devtensor::nn::{Buffer, Linear, Module};
/// use devtensor::{Cpu, Device, Tensor};
/// struct Rotary<D: Device> {
///     proj: Linear<D>,
///     inv_freq: Buffer<D>, // register_buffer("inv_freq", .., persistent=False)
///     scale: Buffer<D>,    // register_buffer("scale", ..)
/// }
/// devtensor::module!(Rotary { proj, inv_freq, scale });
///
/// let inv_freq = Tensor::<Cpu>::from_vec(vec![1.0, 0.01], [2]);
/// let model = Rotary {
///     proj: Linear::new(4, 4),
///     inv_freq: Buffer::non_persistent(inv_freq),
///     scale: Buffer::new(Tensor::ones([4])),
/// };
/// let names: Vec<String> = model.named_tensors().into_iter().map(|(n, _, _)| n).collect();
/// assert_eq!(names, ["proj.weight", "proj.bias", "scale"]); // PyTorch's state_dict keys
/// assert_eq!(model.parameters().len(), 2);
/// assert_eq!(model.inv_freq.dims(), &[2]); // read as a tensor
/// let moved = model.to::<Cpu>(); // or Cuda<0>: both buffers move
/// assert_eq!(moved.inv_freq.to_vec(), vec![1.0, 0.01]);
/// let saved = Checkpoint::try_from_model(&model)?;
/// assert_eq!(saved.tensors().len(), 3);
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Buffer<D: Device, E: FloatElement = f32> {
    tensor: Tensor<D, E>,
    persistent: bool,
}

impl<D: Device, E: FloatElement> Buffer<D, E> {
    /// A persistent buffer holding `tensor` (detached): saved in
    /// checkpoints, as PyTorch's `register_buffer(name, tensor)`.
    pub fn new(tensor: Tensor<D, E>) -> Self {
        Buffer { tensor: tensor.detach(), persistent: true }
    }

    /// A buffer holding `tensor` (detached) that checkpoints leave out, as
    /// PyTorch's `register_buffer(name, tensor, persistent=False)`: moved
    /// and converted with the model, but not in its `named_tensors`.
    pub fn non_persistent(tensor: Tensor<D, E>) -> Self {
        Buffer { tensor: tensor.detach(), persistent: false }
    }

    /// The tensor held (also reached through `Deref`, as `&*buffer`).
    pub fn tensor(&self) -> &Tensor<D, E> {
        &self.tensor
    }

    /// Whether checkpoints save this buffer.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// Replaces the tensor held (detached), keeping the persistence: a
    /// buffer recomputed in place, as PyTorch code assigns `self.name = ..`.
    ///
    /// ```
    /// use devtensor::nn::Buffer;
    /// use devtensor::{Cpu, Tensor};
    /// let mut steps = Buffer::new(Tensor::<Cpu>::zeros([1]));
    /// steps.set(&*steps + 1.0);
    /// assert_eq!(steps.to_vec(), vec![1.0]);
    /// ```
    pub fn set(&mut self, tensor: Tensor<D, E>) {
        self.tensor = tensor.detach();
    }
}

impl<D: Device, E: FloatElement> std::ops::Deref for Buffer<D, E> {
    type Target = Tensor<D, E>;

    fn deref(&self) -> &Tensor<D, E> {
        &self.tensor
    }
}

impl<D: Device, E: FloatElement> Module<D, E> for Buffer<D, E> {
    type On<D2: Device> = Buffer<D2, E>;

    fn try_to<D2: Device>(&self) -> Result<Buffer<D2, E>> {
        Ok(Buffer { tensor: self.tensor.try_to::<D2>()?, persistent: self.persistent })
    }

    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {
        if self.persistent {
            f(prefix, TensorKind::Buffer, &self.tensor)
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {
        if self.persistent {
            f(prefix, TensorKind::Buffer, &mut self.tensor)
        }
    }
}

impl<D: Device, E: FloatElement> ToDtype<D, E> for Buffer<D, E> {
    type Of<T: FloatElement> = Buffer<D, T>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Buffer<D, T>> {
        Ok(Buffer { tensor: self.tensor.try_to_dtype::<T>()?, persistent: self.persistent })
    }
}
