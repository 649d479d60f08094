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
//! # Why const generics and not `typenum`
//!
//! Both were tried on seed 002's model and on deeper chains (2026-11-23,
//! a stand-alone experiment with the same design as this module):
//!
//! - **Messages.** typenum's numbers are types, and a diagnostic can only
//!   print types: the seed's bug reads "a layer expects
//!   `UInt<UInt<UInt<..., ...>, ...>, ...>` features, but its input has
//!   `UInt<UInt<UInt<..., ...>, ...>, ...>`", both numbers elided alike, and
//!   a window larger than its input reads "`UTerm: PrivateSub<UInt<UTerm,
//!   B1>>` is not satisfied". Here the message is assembled in decimal by
//!   `const fn`s: "`Linear(4096, 10)` expects 4096 input features, but its
//!   input has 16384". Sizes also stay readable in types: leaves are
//!   `Const<N>`, computed sizes name their inputs
//!   (`ConvOut<Const<64>, 3, 1, 1, 1>`).
//! - **Writing sizes.** typenum's `U<N>` covers 0 to 1024 only; larger
//!   sizes (16384 features) must be spelled as sums and products of types.
//! - **Compile time.** For models of realistic depth both are within noise
//!   of the dynamic version (`examples/static_cnn.rs` builds as fast as
//!   `train_cnn.rs`, see `BENCHMARKS.md`). For 124 layers of different
//!   sizes typenum took 3.4 s to build against 0.23 s, and for 512 layers
//!   13.8 s against 1.4 s.
//! - **What typenum does better.** Its mismatches are trait errors, so they
//!   appear at `cargo check`; here they are constants evaluated when generic
//!   code is instantiated, so they fire at `cargo build` and not at `cargo
//!   check` (rust-lang/rust#99682). And a chain of more than about 120
//!   layers nests computed sizes past rustc's default recursion limit
//!   (raise it with `#![recursion_limit = "256"]`); typenum has no such
//!   limit.
//!
//! Other costs: two computed sizes that are equal but spelled differently
//! are different types (layers compare their values, not their types), and
//! broadcasting along a size-1 axis is not followed in the types.

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
