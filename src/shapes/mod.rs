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
//! Why const generics and not `typenum`: typenum's arithmetic works on
//! stable Rust, but its numbers print as nested binary
//! (`UInt<UInt<UTerm, B1>, B0>`) in every error and every type. Here the
//! leaves are `Const<N>` (printed in decimal), computed sizes are types that
//! name their inputs (`ConvOut<Const<64>, 3, 1, 1, 1>`) and evaluate to a
//! `const N: usize`, and mismatches are constants that panic with a message
//! assembled in decimal when the generic code is instantiated. The cost:
//! those checks fire at `cargo build`, not at `cargo check`, and two
//! computed sizes that are equal but spelled differently are different
//! types (layers compare their values, not their types).

mod dim;
mod layers;
mod message;
mod shape;
mod tensor;

pub use dim::{Const, ConvOut, Dim, Prod, StaticDim};
pub use layers::{SAvgPool2d, SConv2d, SLinear, SMaxPool2d};
pub use shape::{RemoveAxis, StaticShape};
pub use tensor::{NameTheShapeOfEachTensor, SameShape, STensor};
