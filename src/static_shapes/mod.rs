//! Compile-time shapes, opt-in over the dynamic core.
//!
//! An [`STensor<D, S>`](STensor) is a [`Tensor<D>`](crate::Tensor) whose
//! shape `S` is a tuple of dimensions in its type: [`Const<N>`] for a size
//! the compiler knows, `usize` for one known at run time (typically the
//! batch). Layers with their sizes in their types ([`SLinear`],
//! [`SConv2d`], [`SMaxPool2d`]) compute the sizes they produce
//! ([`ConvOut`], [`Prod`]), so a model states its input size and its
//! layers, and a size that does not fit fails to build, with the sizes in
//! decimal:
//!
//! ```text
//! error[E0080]: evaluation panicked: `Linear(4096, 10)` expects 4096 input features, but its input has 16384
//! ```
//!
//! Element-wise operations broadcast a shape against its trailing axes
//! (`[B, 10]` with `[10]`), [`SForward`] chains layers held in a tuple, and
//! every static layer is a [`Module`](crate::nn::Module), so optimizers,
//! checkpoints and `.to::<D2>()` work on static models unchanged.
//!
//! # Limits
//!
//! A size mismatch is a constant evaluated when generic code is
//! instantiated, so it fires at `cargo build`, not at `cargo check`
//! (rust-lang/rust#99682). A chain of more than about 120 layers nests
//! computed sizes past rustc's default recursion limit (raise it with
//! `#![recursion_limit = "256"]`). Two computed sizes that are equal but
//! spelled differently are different types (layers compare their values,
//! not their types), and broadcasting along a size-1 axis is not followed
//! in the types. Why const generics rather than `typenum`, with the
//! measurements: `docs/decisions/2026-11-23-static-shapes-const-generics.md`.

mod dim;
mod elementwise;
mod forward;
mod layers;
mod message;
mod shape;
mod tensor;

pub use dim::{Const, ConvOut, Dim, Prod, StaticDim};
pub use elementwise::Broadcast;
pub use forward::SForward;
pub use layers::{SAvgPool2d, SConv2d, SFlatten, SLinear, SMaxPool2d};
pub use shape::{RemoveAxis, StaticShape, SwapAxes};
pub use tensor::STensor;
