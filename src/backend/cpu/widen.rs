//! The half types (`bf16`, `f16`) compute in `f32` on the CPU, as PyTorch's
//! CPU kernels do: a kernel that sums (reductions, softmax, norms, products,
//! convolutions, attention) widens its half inputs to `f32`, runs its `f32`
//! kernel, and rounds each output once. Element-wise kernels widen element
//! by element instead (`Element`'s arithmetic, `UnaryOp::apply_f32`).
//!
//! The copies keep the storage's own indexing: element `i` of the `f32`
//! copy is element `i` of the half storage, so every layout the kernel was
//! given reads the same values in the copy, and an output written through
//! a layout is rounded back the same way.

use super::{CpuStorage, map_strided};
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, Shape};

/// Every element of `x` as an `f32` (exact for the half types).
pub(crate) fn widened<E: Element>(op: &'static str, x: &CpuStorage<E>) -> Result<CpuStorage<f32>> {
    converted(op, x)
}

/// Every element of `x` rounded to the nearest `E`.
pub(crate) fn narrowed<E: Element>(op: &'static str, x: &CpuStorage<f32>) -> Result<CpuStorage<E>> {
    let all = Layout::contiguous(Shape::from([x.as_slice().len()]));
    Ok(CpuStorage::from_vec(map_strided(op, x.as_slice(), &all, |v: f32| E::from_f32(v))?))
}

/// Every element of `x` converted to `T` (a copy where the types are the
/// same): for storages whose type is only known to be equal at run time.
pub(crate) fn converted<S: Element, T: Element>(op: &'static str, x: &CpuStorage<S>) -> Result<CpuStorage<T>> {
    let all = Layout::contiguous(Shape::from([x.as_slice().len()]));
    Ok(CpuStorage::from_vec(map_strided(op, x.as_slice(), &all, |v: S| v.cast::<T>())?))
}

/// [`narrowed`] for a kernel's several outputs.
pub(crate) fn narrowed_all<E: Element, const N: usize>(
    op: &'static str,
    outputs: [CpuStorage<f32>; N],
) -> Result<[CpuStorage<E>; N]> {
    let mut narrowed_outputs = Vec::with_capacity(N);
    for out in &outputs {
        narrowed_outputs.push(narrowed(op, out)?);
    }
    Ok(narrowed_outputs.try_into().unwrap_or_else(|_| unreachable!("one output for each of N")))
}
