//! An emulated CUDA driver (`libcuda.so`), cuBLAS (`libcublas.so`) and NCCL
//! (`libnccl.so`) for testing devtensor's CUDA backend on machines without a GPU.
//!
//! cudarc opens the driver with `dlopen("libcuda.so")` and resolves each
//! `cu*` symbol on first use; putting this library's folder first on
//! `LD_LIBRARY_PATH` makes it load this one instead. Kernels are the
//! project's own CUDA C sources, compiled a second time as host C++ by
//! `build.rs` and run on fibers (see `shim/runtime.cpp`). See `README.md` for
//! what is and is not modelled.
//!
//! Every exported function follows the C signature of the driver function of
//! the same name (CUDA 13 headers; NCCL 2.30 headers for `nccl*`); pointers
//! are dereferenced only after a null check, and the caller guarantees they
//! point to valid memory, exactly as with the real driver.

#![warn(missing_docs)]
#![allow(non_snake_case, clippy::missing_safety_doc)]

mod cublas;
mod driver;
mod half;
mod kernels;
mod memory;
mod nccl;
mod state;

pub use cublas::*;
pub use driver::*;
pub use memory::devtensor_emu_translate;
pub use nccl::*;
