//! # devtensor
//!
//! Tensors whose device is part of their type. `Tensor<Cpu>`,
//! `Tensor<Cuda<0>>` and `Tensor<Cuda<1>>` are different types, so code that
//! mixes devices does not compile, and the compiler says why in the words of
//! PyTorch's run-time error:
//!
//! ```text
//! error[E0277]: expected all tensors to be on the same device, but found `Cpu` and `Cuda<0>`
//! ```
//!
//! Data moves only when the program says so, with [`Tensor::to`]. Everything
//! that can fail at run time (shapes, axes, indices, an absent GPU) has a
//! `try_*` form returning [`Result`]; the plain form panics with the same message.
//!
//! ```
//! use devtensor::{Cpu, Device, Tensor};
//!
//! // Written once, for any device.
//! fn predict<D: Device>(x: &Tensor<D>, w: &Tensor<D>, b: &Tensor<D>) -> Tensor<D> {
//!     (x.matmul(w) + b).relu()
//! }
//!
//! let x = Tensor::<Cpu>::randn([4, 3]);
//! let w = Tensor::<Cpu>::randn([3, 2]);
//! let b = Tensor::<Cpu>::zeros([2]);
//! let y = predict(&x, &w, &b);
//! assert_eq!(y.dims(), &[4, 2]);
//! ```

//!
//! ## How the crate is layered
//!
//! Each module below uses only the ones above it (`scripts/check-layers.py`
//! checks it in CI):
//!
//! - [`element`], [`layout`], [`random`], [`error`]: element types, shapes and
//!   strided layouts, random numbers, the error type;
//! - [`backend`]: the devices, [`Cpu`] and [`Cuda<N>`](Cuda), with their storage
//!   and copies;
//! - [`tensor`](mod@tensor), [`autograd`], [`ops`]: one layer, the [`Tensor`] with its device
//!   typing, the gradient tape and the operations (a folder per op family,
//!   with a file per backend);
//! - [`nn`], [`optim`], [`data`]: layers, optimizers, data loading;
//! - [`io`]: checkpoints of models and optimizers (safetensors files);
//! - [`static_shapes`] (static shapes for `nn` layers) and [`parallel`] (data-parallel
//!   training over several GPUs).

#![warn(missing_docs)]
// Device bounds sit in `where` clauses (`D: SameDevice<D2>`) on purpose:
// rustc's "required by this bound" note then shows that bound alone, and
// the compile-fail snapshots read better for it.
#![allow(clippy::multiple_bound_locations)]

pub mod autograd;
pub mod backend;
pub mod data;
pub mod element;
pub mod error;
pub mod io;
pub mod layout;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod parallel;
pub mod random;
pub mod static_shapes;
/// The former name of [`static_shapes`], kept for one release: a module of
/// compile-time shapes was easy to mistake for [`Shape`], the run-time one.
/// (rustc does not carry a module's deprecation to the items re-exported
/// through it, so `use devtensor::shapes::STensor` builds without a warning;
/// the documentation is where the new name shows.)
#[deprecated(note = "renamed `devtensor::static_shapes`")]
pub mod shapes {
    pub use crate::static_shapes::*;
}
pub mod tensor;

pub use autograd::{Gradients, LeafId, enable_grad, inference_mode, is_grad_enabled, no_grad};
pub use backend::{Backend, Cpu, Cuda};
pub use element::{DType, Element, FloatElement, InPlaceDivision, Number};
pub use error::{Error, Result};
/// The half-precision element types, from the `half` crate: `bf16`
/// (PyTorch's `torch.bfloat16`) and `f16` (`torch.float16`, `Half`).
pub use half::{bf16, f16};
pub use io::Checkpoint;
pub use layout::{Layout, Shape};
pub use ops::autocast::{autocast, autocast_dtype};
pub use ops::index::{Ellipsis, NewAxis, SliceStep};
pub use ops::matmul::{MatmulPrecision, float32_matmul_precision, set_float32_matmul_precision};
pub use random::{Generator, manual_seed};
pub use tensor::{
    Device, OnDevice, PendingTransfer, PinnedTensor, SameDevice, Tensor, TensorData, TransferCompleted, tensor,
    try_tensor,
};

/// Runs the README's code blocks as doctests, so its claims stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
