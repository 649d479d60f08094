//! Operations, one folder per family.
//!
//! Each family's `mod.rs` holds the public API, the shape checks and the
//! family's kernel trait; `cpu.rs` and `cuda.rs` implement that trait for
//! each device. The unary, binary, compare and reduce families declare each
//! op once, as a type implementing [`unary::UnaryOp`], [`binary::BinaryOp`],
//! [`compare::CompareOp`] or [`reduce::ReduceOp`], from which its kernels
//! follow (and, for unary and binary ops, its gradient); index, conv,
//! matmul, attention and recurrent (the fused gates of the recurrent cells)
//! are a few single operations with kernels of their own. Every
//! fallible operation comes as `try_x` returning [`Result`](crate::Result)
//! and as `x`, which panics with the same message, both written by
//! `#[fallible]` from one definition.
//! Operations taking several tensors require them on one device through
//! [`SameDevice`](crate::SameDevice), checked at compile time.

pub mod attention;
pub mod autocast;
pub mod binary;
pub mod compare;
pub mod conv;
pub mod index;
mod kernel_source;
pub mod matmul;
pub mod recurrent;
pub mod reduce;
pub mod unary;
pub mod view;

pub use kernel_source::KernelSource;
