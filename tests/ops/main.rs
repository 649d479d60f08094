//! The operation suites, one test binary: every tensor operation checked
//! against plain-loop references on random shapes and layouts, the gradient
//! tables, the bad-input errors, asynchronous transfers, and the CUDA backend
//! compared with the CPU, each on `Cpu`, `Cuda<0>` and `Cuda<1>`.
//!
//! One binary rather than one per file: each test binary links its own copy
//! of every device-generic instantiation, and on CI's two cores ten of them
//! took minutes to build. `cargo test --test ops binary::` runs one suite.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

/// The user's own ops of `examples/custom_op.rs` (squareplus, hypot,
/// is_close), with their CUDA kernels from `examples/kernels/` (which the
/// emulated GPU compiles in too): the unary, binary and compare suites run
/// them on every device.
#[allow(dead_code)] // its `main`
#[path = "../../examples/custom_op.rs"]
mod custom_op;

mod async_transfer;
mod attention;
mod bad_input;
mod binary;
mod compare;
mod cuda_backend;
mod einsum;
mod half;
mod index;
mod matmul;
mod order_statistics;
mod pytorch;
mod reduce;
mod reduce_axes;
mod sort;
mod subscript;
mod tensor;
mod unary;
