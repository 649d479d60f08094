//! The half types (`bf16`, `f16`) on CUDA: element-wise kernels load and
//! store them in 16 bits and compute in `float` (`kernels/common.cuh`), but
//! the kernel families that sum (reductions, softmax, norms, convolutions,
//! attention) have `f32` and `f64` kernels only. For those the host widens
//! the half inputs to `f32` buffers with the cast kernel, runs the `f32`
//! kernels, and rounds each output once, as the CPU backend does
//! (`backend/cpu/widen.rs`): the results are the `f32` results rounded.
//!
//! The copies keep the storage's own indexing, so every layout the kernel
//! was given reads the same values in the copy.

use super::{CudaStorage, context, copy_into};
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, Shape};

/// Every element of `x` as an `f32` (exact for the half types).
pub(crate) fn widened<E: Element>(op: &'static str, x: &CudaStorage<E>) -> Result<CudaStorage<f32>> {
    converted(op, x)
}

/// Every element of `x` rounded to the nearest `E`.
pub(crate) fn narrowed<E: Element>(op: &'static str, x: &CudaStorage<f32>) -> Result<CudaStorage<E>> {
    converted(op, x)
}

/// [`narrowed`] for a kernel's several outputs.
pub(crate) fn narrowed_all<E: Element, const N: usize>(
    op: &'static str,
    outputs: [CudaStorage<f32>; N],
) -> Result<[CudaStorage<E>; N]> {
    let mut narrowed_outputs = Vec::with_capacity(N);
    for out in &outputs {
        narrowed_outputs.push(narrowed(op, out)?);
    }
    Ok(narrowed_outputs.try_into().unwrap_or_else(|_| unreachable!("one output for each of N")))
}

/// Every element of `x` converted to `T` (a copy where the types are the
/// same): for storages whose type is only known to be equal at run time.
pub(crate) fn converted<S: Element, T: Element>(op: &'static str, x: &CudaStorage<S>) -> Result<CudaStorage<T>> {
    let device = context::device(x.ordinal)?;
    copy_into(&device, op, x, &Layout::contiguous(Shape::from([x.len()])))
}
