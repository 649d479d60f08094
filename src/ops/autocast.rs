//! Mixed precision: [`autocast`] runs the products of `f32` tensors in a
//! half type, as PyTorch's `torch.autocast` does, without changing any
//! tensor's type.
//!
//! Inside `autocast::<bf16, _>(|| ..)`, a product of `f32` tensors
//! (`matmul`, `Linear`, the convolutions, attention: PyTorch's autocast
//! lists for lower precision) casts its inputs to `bf16`, runs the `bf16`
//! kernel (the tensor cores, or the CPU's `bf16` dot products) with `f32`
//! sums, and casts the result back to `f32`. Every other op (element-wise,
//! reductions, softmax, norms, losses) runs in `f32` as written. The casts
//! are recorded for autograd, so the gradients of `f32` parameters arrive
//! in `f32`: the parameters are the master weights, and optimizers,
//! checkpoints and gradient reductions across GPUs stay as they are.
//!
//! Why results stay `f32` where PyTorch's autocast returns `bf16`: a
//! tensor's dtype is part of its type here, and the policy must not change
//! what the code says. The cost is that activations are stored in `f32`
//! and the casts take a pass each; the products, which dominate, run at
//! the half type's rate. On the CPU, a convolution that the direct
//! kernels take skips the casts: the kernels round their inputs and
//! outputs to the half type's values in `f32` storage, which gives the
//! cast convolution's results and gradients bit for bit (the half
//! convolution there runs the same `f32` kernel between casts).
//!
//! The setting is per thread and per scope, as PyTorch's. A
//! [`DataParallel`](crate::parallel::DataParallel) step taken inside a
//! scope runs its replicas' threads inside it too; a thread of your own
//! calls `autocast` itself.

use crate::element::{DType, Element, FloatElement};
use half::{bf16, f16};
use std::cell::Cell;

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// The half types [`autocast`] can compute products in: `bf16` and `f16`.
pub trait LowerPrecision: FloatElement + sealed::Sealed {}
impl LowerPrecision for bf16 {}
impl LowerPrecision for f16 {}

thread_local! {
    static AUTOCAST: Cell<Option<DType>> = const { Cell::new(None) };
}

/// Runs `f` with the products of `f32` tensors computed in `H` (see the
/// [module documentation](self)), and returns what it returns. Scopes nest;
/// the innermost wins. `bf16` has `f32`'s range; with `f16`, scale the loss
/// with a [`GradScaler`](crate::optim::GradScaler).
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::{Cpu, Tensor, autocast, bf16};
/// let layer = Linear::<Cpu>::new(64, 8);
/// let x = Tensor::<Cpu>::randn([4, 64]);
/// let y: Tensor<Cpu> = autocast::<bf16, _>(|| layer.forward(&x)); // f32 in, f32 out
/// let exact = layer.forward(&x);
/// let gap = (&y - &exact).abs().max().item();
/// assert!(gap > 0.0 && gap < 0.1); // the product ran in bf16
/// let grads = y.sum().backward();
/// assert_eq!(grads.get(&layer.weight).unwrap().dims(), [8, 64]); // an f32 gradient
/// ```
pub fn autocast<H: LowerPrecision, T>(f: impl FnOnce() -> T) -> T {
    autocast_as(Some(H::DTYPE), f)
}

/// `f` with this thread's autocast setting `dtype` (`None`: products in
/// their own type), restored afterwards even if `f` panics: what
/// [`autocast`] does, and how a data-parallel step carries its caller's
/// setting to the replicas' threads.
pub(crate) fn autocast_as<T>(dtype: Option<DType>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<DType>);
    impl Drop for Restore {
        fn drop(&mut self) {
            AUTOCAST.with(|a| a.set(self.0));
        }
    }
    let _restore = Restore(AUTOCAST.with(|a| a.replace(dtype)));
    f()
}

/// The half type that products compute in on this thread, if an
/// [`autocast`] scope is active.
///
/// ```
/// use devtensor::{DType, autocast, autocast_dtype, f16};
/// assert_eq!(autocast_dtype(), None);
/// assert_eq!(autocast::<f16, _>(autocast_dtype), Some(DType::F16));
/// ```
pub fn autocast_dtype() -> Option<DType> {
    AUTOCAST.with(Cell::get)
}

/// The half type a product of `E` tensors runs in here: `Some` only for
/// `f32` inside an [`autocast`] scope.
pub(crate) fn lowered<E: Element>() -> Option<DType> {
    match E::DTYPE {
        DType::F32 => autocast_dtype(),
        _ => None,
    }
}

/// `autocast_in!(dtype, H => expr)`: `expr` with `H` the half type named
/// by `dtype` (`DType::BF16` or `DType::F16`, from [`lowered`]).
macro_rules! autocast_in {
    ($dtype:expr, $h:ident => $body:expr) => {
        match $dtype {
            $crate::element::DType::F16 => {
                type $h = half::f16;
                $body
            }
            _ => {
                type $h = half::bf16;
                $body
            }
        }
    };
}
pub(crate) use autocast_in;
