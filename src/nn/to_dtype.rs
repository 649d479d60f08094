//! [`ToDtype`]: a whole model converted to another float dtype, PyTorch's
//! `model.to(torch.bfloat16)` (or `model.half()`, `model.double()`).

use super::Module;
use crate::element::FloatElement;
use crate::error::{Result, or_panic};
use crate::tensor::{Device, Tensor};

/// A module whose element type is a parameter of its type (`Linear<D, E>`,
/// or a model declared with [`module!(Net<E> { .. })`](crate::module)): the
/// same module with every float parameter and buffer converted to `T`.
///
/// This is PyTorch's `model.to(torch.bfloat16)`, with the new dtype in the
/// model's type. Parameters become fresh leaves of `T` that track gradients
/// (a frozen one stays frozen), and a parameter held under several names
/// (tied weights) stays one tensor. Float buffers (`BatchNorm2d`'s running
/// statistics) are converted too; integer buffers and masks are kept as
/// they are, and so are plain fields. The conversion rounds to nearest,
/// ties to even, as [`Tensor::to_dtype`] does.
///
/// For training in a half type with `f32` master weights, keep the model
/// in `f32` and use [`autocast`](crate::autocast) instead: this conversion
/// is for a model that runs in `T` throughout (inference in `bf16`, or a
/// model kept in `f64` for a gradient check).
///
/// ```
/// use devtensor::nn::{Linear, Module, ToDtype};
/// use devtensor::{Cpu, Device, FloatElement, Tensor, bf16};
///
/// struct Mlp<D: Device, E: FloatElement> {
///     hidden: Linear<D, E>,
///     out: Linear<D, E>,
/// }
/// devtensor::module!(Mlp<E> { hidden, out });
///
/// let mlp = Mlp { hidden: Linear::<Cpu>::new(4, 8), out: Linear::new(8, 2) };
/// let half: Mlp<Cpu, bf16> = mlp.to_dtype::<bf16>();
/// assert_eq!(half.out.weight.to_vec()[0], bf16::from_f32(mlp.out.weight.to_vec()[0]));
/// let x = Tensor::<Cpu>::ones([3, 4]).to_dtype::<bf16>();
/// assert_eq!(half.out.forward(&half.hidden.forward(&x).relu()).dims(), &[3, 2]);
/// ```
///
/// A model declared with a fixed `f32` element type (`module!(Net { .. })`)
/// has no other dtype to go to: declare it generic over `E` to convert it.
pub trait ToDtype<D: Device, E: FloatElement>: Module<D, E> {
    /// This module with its float tensors of dtype `T`.
    type Of<T: FloatElement>: ToDtype<D, T> + 'static;

    /// This module with every float parameter and buffer converted to `T`.
    /// Fails only when the device cannot allocate the new tensors.
    fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>>;

    /// Panicking form of [`try_to_dtype`](Self::try_to_dtype).
    #[track_caller]
    fn to_dtype<T: FloatElement>(&self) -> Self::Of<T> {
        or_panic(super::moving(|| self.try_to_dtype()))
    }
}

/// A parameter field: a fresh leaf of `T` (see [`ToDtype`]). A tensor's own
/// [`Tensor::to_dtype`] is the tracked conversion inside a computation;
/// this one is only reached through a model's.
impl<D: Device, E: FloatElement> ToDtype<D, E> for Tensor<D, E> {
    type Of<T: FloatElement> = Tensor<D, T>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Tensor<D, T>> {
        super::module::convert_parameter(self)
    }
}

/// Integer buffers keep their dtype in a model of any float dtype.
impl<D: Device, E: FloatElement> ToDtype<D, E> for Tensor<D, i64> {
    type Of<T: FloatElement> = Tensor<D, i64>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Tensor<D, i64>> {
        Ok(self.clone())
    }
}

/// Masks keep their dtype in a model of any float dtype.
impl<D: Device, E: FloatElement> ToDtype<D, E> for Tensor<D, u8> {
    type Of<T: FloatElement> = Tensor<D, u8>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Tensor<D, u8>> {
        Ok(self.clone())
    }
}

impl<D: Device, E: FloatElement, M: ToDtype<D, E>> ToDtype<D, E> for Option<M> {
    type Of<T: FloatElement> = Option<M::Of<T>>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
        self.as_ref().map(M::try_to_dtype).transpose()
    }
}

impl<D: Device, E: FloatElement, M: ToDtype<D, E>> ToDtype<D, E> for Vec<M> {
    type Of<T: FloatElement> = Vec<M::Of<T>>;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Self::Of<T>> {
        super::moving(|| self.iter().map(M::try_to_dtype).collect())
    }
}
