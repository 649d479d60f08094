//! A tensor's device as part of its type.
//!
//! A tensor's device is a type parameter: [`Cpu`], [`Cuda<0>`](Cuda),
//! [`Cuda<1>`](Cuda), ... An operation that receives tensors of two devices
//! is rejected at compile time through [`SameDevice`], and data only moves
//! when the program says [`Tensor::to`].
//!
//! [`Device`] is the one bound generic code needs: `fn f<D: Device>(x:
//! &Tensor<D>)`. Under it, every device runs its operations on a
//! [`CoreDevice`], which gathers one kernel trait per op family (see
//! [`crate::ops`]): the CPU on itself, every GPU on the one core device the
//! GPUs share (`src/tensor/shell.rs` says how).

use crate::backend::cuda::AnyCuda;
use crate::backend::{Backend, Cpu, Cuda, sealed};
use crate::element::Element;
use crate::ops::{
    attention::AttentionKernel, binary::BinaryKernel, compare::CompareKernel, conv::ConvKernel, index::IndexKernel,
    matmul::MatmulKernel, recurrent::RecurrentKernel, reduce::ReduceKernel, unary::UnaryKernel,
};
use crate::tensor::Tensor;

/// A device a tensor can live on. Sealed: [`Cpu`] and [`Cuda<N>`](Cuda).
///
/// Write device-generic code against this one bound:
/// ```
/// use devtensor::{Cpu, Device, Tensor};
/// fn affine<D: Device>(x: &Tensor<D>, w: &Tensor<D>, b: &Tensor<D>) -> Tensor<D> {
///     x.matmul(w) + b
/// }
/// let x = Tensor::<Cpu>::ones([2, 3]);
/// let y = affine(&x, &Tensor::ones([3, 4]), &Tensor::zeros([4]));
/// assert_eq!(y.to_vec(), vec![3.0; 8]);
/// ```
///
/// Every operation on a `Tensor<D, E>` is a thin typed shell over devtensor's
/// core: code compiled once, inside devtensor, for each [`CoreDevice`]
/// (the CPU, and one shared by all GPUs) and element type. The shell checks the
/// device and the element type at compile time and calls the core; that
/// call is all a program compiles of an operation (`docs/decisions/2026-12-01-typed-shell-concrete-core.md`).
pub trait Device: Backend {
    /// The device the core runs this device's operations on: [`Cpu`] for
    /// the CPU, one device shared by all GPUs (the current GPU is set for
    /// the call). Internal, not covered by semver.
    #[doc(hidden)]
    type Core: CoreDevice;

    /// Runs `f`, an operation of the core on tensors of this device, with
    /// this device as the current one of the thread (for `Cuda<N>`, GPU
    /// `N`). Internal, not covered by semver.
    #[doc(hidden)]
    fn enter<R>(f: impl FnOnce() -> R) -> R;
}

impl Device for Cpu {
    type Core = Cpu;

    #[inline(always)]
    fn enter<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

impl<const N: usize> Device for Cuda<N> {
    type Core = AnyCuda;

    #[inline(always)]
    fn enter<R>(f: impl FnOnce() -> R) -> R {
        crate::backend::cuda::current::enter(N, f)
    }
}

impl Device for AnyCuda {
    type Core = AnyCuda;

    #[inline(always)]
    fn enter<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// A device the core is compiled for, with one kernel trait per op family
/// (see [`crate::ops`]): [`Cpu`], and the GPU of the running operation.
/// Internal, not covered by semver.
#[doc(hidden)]
pub trait CoreDevice:
    Device<Core = Self>
    + BinaryKernel
    + UnaryKernel
    + CompareKernel
    + ReduceKernel
    + MatmulKernel
    + IndexKernel
    + ConvKernel
    + AttentionKernel
    + RecurrentKernel
{
    /// Whether this is the CPU (the other core device is the GPUs').
    const IS_CPU: bool;
}

impl CoreDevice for Cpu {
    const IS_CPU: bool = true;
}

impl CoreDevice for AnyCuda {
    const IS_CPU: bool = false;
}

/// Proof that two devices are the same one, required by every operation that
/// takes more than one tensor.
///
/// Only `D: SameDevice<D>` holds, so mixing devices is a compile error that
/// reads like PyTorch's run-time one, with the fix in the note:
/// ```compile_fail
/// use devtensor::{Cpu, Cuda, Tensor};
/// fn mix(a: Tensor<Cpu>, b: Tensor<Cuda<0>>) -> Tensor<Cpu> {
///     a + b // error: expected all tensors to be on the same device, but found `Cpu` and `Cuda<0>`
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "expected all tensors to be on the same device, but found `{Self}` and `{Other}`",
    label = "a `{Self}` tensor meets a `{Other}` tensor here",
    note = "devtensor never moves data behind your back: move one side first, \
            with `.to::<{Self}>()` on the `{Other}` tensor or `.to::<{Other}>()` on the `{Self}` tensor"
)]
pub trait SameDevice<Other>: sealed::Sealed {}

impl<D: Device> SameDevice<D> for D {}

/// Not a device: the type of the second, hidden impl of [`SameDevice`],
/// whose name is what rustc shows when an operand's device cannot be
/// inferred.
///
/// Without this impl rustc would see a single impl, unify the two devices of
/// every `SameDevice` bound, and report a bare `mismatched types` instead of
/// "expected all tensors to be on the same device". It has to cover every
/// device on the left, or rustc would still infer the right-hand device of a
/// method call such as `x.maximum(y)` from `x` alone.
///
/// The price: a right-hand operand whose device could only have come from
/// the left needs it written. rustc then reports `E0283 type annotations
/// needed` and lists this impl, `impl<D> SameDevice<NameTheDeviceOfEachTensor> for D`:
///
/// ```compile_fail,E0283
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu>::ones([3]);
/// let b = &a + &Tensor::ones([3]); // which device is the new tensor on?
/// ```
///
/// The fix is to name the device, as every tensor's type does:
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu>::ones([3]);
/// let b = &a + &Tensor::<Cpu>::ones([3]); // or `Tensor::<D>` in generic code
/// ```
#[allow(dead_code)] // Never constructed, by design.
pub enum NameTheDeviceOfEachTensor {}

impl sealed::Sealed for NameTheDeviceOfEachTensor {}

#[diagnostic::do_not_recommend]
impl<D: Device> SameDevice<NameTheDeviceOfEachTensor> for D {}

/// A tensor on device `D`, as an argument of a function you write: take
/// `x: &impl OnDevice<D>` where you would take `x: &Tensor<D>`, and start
/// with `let x = x.tensor();`. A caller that passes a tensor on another
/// device then gets devtensor's message ("expected all tensors to be on the
/// same device, but found `Cuda<0>` and `Cpu`", with the `.to::<..>()` fix)
/// instead of rustc's bare `mismatched types`. Inside, `x` is a plain
/// `&Tensor<D, E>`.
///
/// ```
/// use devtensor::{Cpu, Device, OnDevice, Tensor};
/// fn accuracy<D: Device>(logits: &Tensor<D>, labels: &impl OnDevice<D, i64>) -> f32 {
///     let labels = labels.tensor();
///     logits.argmax(-1).eq(labels).to_dtype::<f32>().mean().item()
/// }
/// let logits = Tensor::<Cpu>::from_vec(vec![0.1, 0.9, 0.8, 0.2], [2, 2]);
/// assert_eq!(accuracy(&logits, &Tensor::<Cpu, i64>::from_vec(vec![1, 1], [2])), 0.5);
/// ```
///
/// Labels on another device than the logits do not compile:
/// ```compile_fail,E0277
/// # use devtensor::{Cpu, Cuda, Device, OnDevice, Tensor};
/// # fn accuracy<D: Device>(logits: &Tensor<D>, labels: &impl OnDevice<D, i64>) -> f32 { 0.0 }
/// fn report(logits: &Tensor<Cuda<0>>, labels: &Tensor<Cpu, i64>) -> f32 {
///     accuracy(logits, labels) // error: expected all tensors to be on the same device
/// }
/// ```
///
/// Why not a generic device `DX` with a `D: SameDevice<DX>` bound on the
/// function: inside it, rustc would then read every other `SameDevice`
/// question about `D` through that bound, and mixing two tensors of `D`
/// would stop compiling.
pub trait OnDevice<D: Device, E: Element = f32> {
    /// The tensor, typed on `D`.
    fn tensor(&self) -> &Tensor<D, E>;
}

impl<D: Device, DX: Device, E: Element> OnDevice<D, E> for Tensor<DX, E>
where
    D: SameDevice<DX>,
{
    fn tensor(&self) -> &Tensor<D, E> {
        same_device(self)
    }
}

/// Reinterprets a tensor of device `D2` and elements `E2` as one of `D1` and
/// `E1` once `D1: SameDevice<D2>` and `E1: SameDtype<E2>` have proved them
/// equal. The check is a `TypeId` comparison the optimiser folds.
pub(crate) fn same_device<D1: Device, D2: Device, E1: Element, E2: Element>(
    tensor: &Tensor<D2, E2>,
) -> &Tensor<D1, E1> {
    let any: &dyn std::any::Any = tensor;
    any.downcast_ref().expect("SameDevice and SameDtype only hold for a type and itself")
}

/// Owned form of [`same_device`].
pub(crate) fn same_device_owned<D1: Device, D2: Device, E1: Element, E2: Element>(
    tensor: Tensor<D2, E2>,
) -> Tensor<D1, E1> {
    let mut slot = Some(tensor);
    let any: &mut dyn std::any::Any = &mut slot;
    let slot: &mut Option<Tensor<D1, E1>> =
        any.downcast_mut().expect("SameDevice and SameDtype only hold for a type and itself");
    slot.take().expect("the slot was filled just above")
}

/// Runs `body` with `D` naming this process's GPU, `Cuda<LOCAL_RANK>`, in a
/// job of one process per GPU: `on_local_gpu!(job, D => train::<D>(&job))`
/// compiles `body` for `Cuda<0>` to `Cuda<7>` and enters the one that
/// `job.local_rank` names, so that inside it the model, its optimizer
/// state, the batches and the gradients are all typed on that GPU.
/// Evaluates to `Result<T>` (`T` the type of `body`): a `LOCAL_RANK` of 8 or
/// more is an [`Error::Distributed`](crate::Error::Distributed).
///
/// ```
/// use devtensor::parallel::Job;
/// use devtensor::Device;
/// fn describe<D: Device>() -> String {
///     D::name()
/// }
/// let job = Job::local(2, 1, 29500)?;
/// assert_eq!(devtensor::on_local_gpu!(job, D => describe::<D>())?, "Cuda<1>");
/// # Ok::<(), devtensor::Error>(())
/// ```
#[macro_export]
macro_rules! on_local_gpu {
    ($job:expr, $D:ident => $body:expr) => {
        match $job.local_rank {
            0 => Ok({ type $D = $crate::Cuda<0>; $body }),
            1 => Ok({ type $D = $crate::Cuda<1>; $body }),
            2 => Ok({ type $D = $crate::Cuda<2>; $body }),
            3 => Ok({ type $D = $crate::Cuda<3>; $body }),
            4 => Ok({ type $D = $crate::Cuda<4>; $body }),
            5 => Ok({ type $D = $crate::Cuda<5>; $body }),
            6 => Ok({ type $D = $crate::Cuda<6>; $body }),
            7 => Ok({ type $D = $crate::Cuda<7>; $body }),
            local_rank => Err($crate::Error::Distributed {
                rank: Some($job.rank),
                reason: format!(
                    "LOCAL_RANK={local_rank}: on_local_gpu! enters Cuda<0> to Cuda<7>; start at most 8 processes per node"
                ),
            }),
        }
    };
}

/// Runs `body` with `D` naming `Cuda<0>` when a GPU is present, and `Cpu`
/// otherwise: PyTorch's `device = "cuda" if torch.cuda.is_available() else
/// "cpu"`, with the code inside still typed by its device.
/// `on_best_device!(D => train::<D>(&data))` compiles `body` for both
/// devices and picks one at run time.
///
/// ```
/// use devtensor::{Device, Tensor};
/// fn total<D: Device>(values: &[f32]) -> f32 {
///     Tensor::<D>::from_slice(values, [values.len()]).sum().item()
/// }
/// let sum = devtensor::on_best_device!(D => total::<D>(&[1.0, 2.0, 3.0]));
/// assert_eq!(sum, 6.0);
/// ```
#[macro_export]
macro_rules! on_best_device {
    ($D:ident => $body:expr) => {
        if $crate::Cuda::<0>::is_available() {
            type $D = $crate::Cuda<0>;
            $body
        } else {
            type $D = $crate::Cpu;
            $body
        }
    };
}
