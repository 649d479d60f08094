//! [`Forward`]: modules that map one tensor to one tensor, which is what
//! [`Sequential`](super::Sequential) chains, and what a model of your own
//! implements to be called like a library layer.

use super::{Module, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// A module that maps one tensor to one tensor on its own device.
///
/// Implement [`forward_on`](Self::forward_on) for a model of your own, and
/// call it with [`forward`](Self::forward) or
/// [`try_forward`](Self::try_forward): those take an input on any device
/// type, so an input on another device than the model is a compile error
/// in devtensor's words ("expected all tensors to be on the same device,
/// but found `Cuda<0>` and `Cpu`", with the `.to::<..>()` fix), where a
/// method of your own taking `&Tensor<D>` would get rustc's bare
/// `mismatched types`.
///
/// ```
/// use devtensor::nn::{Forward, Linear, Module, Relu};
/// use devtensor::{Cpu, Device, Result, Tensor};
///
/// struct Mlp<D: Device> {
///     hidden: Linear<D>,
///     out: Linear<D>,
/// }
/// devtensor::module!(Mlp { hidden, out });
///
/// impl<D: Device> Forward<D> for Mlp<D> {
///     fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
///         self.out.try_forward(&self.hidden.try_forward(x)?.try_relu()?)
///     }
/// }
///
/// let mlp = Mlp { hidden: Linear::<Cpu>::new(4, 8), out: Linear::new(8, 2) };
/// assert_eq!(mlp.forward(&Tensor::<Cpu>::ones([3, 4])).dims(), &[3, 2]);
/// ```
///
/// Fed a batch on another device, it does not compile:
/// ```compile_fail,E0277
/// # use devtensor::nn::{Forward, Linear, Module};
/// # use devtensor::{Cpu, Cuda, Device, Result, Tensor};
/// # struct Mlp<D: Device> { out: Linear<D> }
/// # devtensor::module!(Mlp { out });
/// # impl<D: Device> Forward<D> for Mlp<D> {
/// #     fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> { self.out.try_forward(x) }
/// # }
/// fn predict(mlp: &Mlp<Cuda<0>>, batch: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
///     mlp.forward(batch) // error: expected all tensors to be on the same device
/// }
/// ```
///
/// Library layers have the same `forward` and `try_forward` as inherent
/// methods, so they need no import.
pub trait Forward<D: Device, E: FloatElement = f32>: Module<D, E> {
    /// The module applied to `x`, on its own device: what an
    /// implementation writes.
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>>;

    /// The hooks this module keeps, which [`forward`](Self::forward) runs
    /// around [`forward_on`](Self::forward_on): `None` (the default) for a
    /// module without any; a module with a [`ModuleHooks`] field returns
    /// it, and declares itself [`Hookable`](super::Hookable) so that the
    /// methods of [`Hooks`](super::Hooks) register them.
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        None
    }

    /// The module applied to `x`, which must be on the module's device
    /// (checked at compile time, with devtensor's message), with the
    /// module's [hooks](super::Hooks) around it.
    #[fallible]
    fn forward<DX: Device, EX: Element>(&self, x: &Tensor<DX, EX>) -> Tensor<D, E>
    where
        D: SameDevice<DX>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

/// `module.forward_on(x)` with the module's hooks around it: what
/// `forward` runs, and what a container runs for each of its layers.
pub(crate) fn call<D: Device, E: FloatElement, M: Forward<D, E>>(module: &M, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    match module.hooks() {
        Some(hooks) => hooks.run(x, &|x| module.forward_on(x)),
        None => module.forward_on(x),
    }
}
