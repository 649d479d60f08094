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

use super::tasks::for_each_chunk;
use super::{CpuStorage, PARALLEL_CHUNK, map_strided, output_buffer, split_across_threads};
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, Shape};
use half::f16;
use half::slice::HalfFloatSliceExt;
use std::any::Any;

/// Every element of `x` as an `f32` (exact for the half types).
pub(crate) fn widened<E: Element>(op: &'static str, x: &CpuStorage<E>) -> Result<CpuStorage<f32>> {
    converted(op, x)
}

/// Every element of `x` rounded to the nearest `E`.
pub(crate) fn narrowed<E: Element>(op: &'static str, x: &CpuStorage<f32>) -> Result<CpuStorage<E>> {
    converted(op, x)
}

/// Every element of `x` converted to `T` (a copy where the types are the
/// same): for storages whose type is only known to be equal at run time.
pub(crate) fn converted<S: Element, T: Element>(op: &'static str, x: &CpuStorage<S>) -> Result<CpuStorage<T>> {
    cast_as_laid_out(op, x, &Layout::contiguous(Shape::from([x.as_slice().len()])))
}

/// The elements of `x` that `layout` reads, converted to `T`, dense:
/// `Tensor::to_dtype`'s kernel.
pub(crate) fn cast_as_laid_out<S: Element, T: Element>(
    op: &'static str,
    x: &CpuStorage<S>,
    layout: &Layout,
) -> Result<CpuStorage<T>> {
    if let Some(range) = layout.contiguous_range()
        && let Some(cast) = f16_slices(op, x, range)?
    {
        return Ok(cast);
    }
    Ok(CpuStorage::from_vec(map_strided(op, x.as_slice(), layout, |v: S| v.cast::<T>())?))
}

/// `x[range]` converted between `f32` and `f16` by `half`'s slice
/// conversions, which use F16C where the CPU has it; `None` for other
/// pairs of types. An `f16` conversion element by element checks for
/// F16C each time and is not vectorized: 3.5 ms for 4M elements from
/// `f32`, 15 times `bf16`'s (AMD EPYC, 2 threads).
fn f16_slices<S: Element, T: Element>(
    op: &'static str,
    x: &CpuStorage<S>,
    range: std::ops::Range<usize>,
) -> Result<Option<CpuStorage<T>>> {
    /// `convert` over `src` and a new `dst` of its length, in parallel
    /// chunks where it is large.
    fn each_chunk<A: Sync, B: Element>(op: &'static str, src: &[A], convert: fn(&[A], &mut [B])) -> Result<Vec<B>> {
        let mut dst = output_buffer::<B>(op, src.len())?;
        if split_across_threads(src.len()) {
            for_each_chunk(&mut dst, PARALLEL_CHUNK, &|i, d| convert(&src[i * PARALLEL_CHUNK..][..d.len()], d));
        } else {
            convert(src, &mut dst);
        }
        Ok(dst)
    }
    let x = x as &dyn Any;
    let cast: Box<dyn Any> = if let (Some(x), true) = (x.downcast_ref::<CpuStorage<f32>>(), T::DTYPE == f16::DTYPE) {
        Box::new(CpuStorage::from_vec(each_chunk(op, &x.as_slice()[range], |s, d: &mut [f16]| {
            d.convert_from_f32_slice(s)
        })?))
    } else if let (Some(x), true) = (x.downcast_ref::<CpuStorage<f16>>(), T::DTYPE == f32::DTYPE) {
        Box::new(CpuStorage::from_vec(each_chunk(op, &x.as_slice()[range], |s: &[f16], d| s.convert_to_f32_slice(d))?))
    } else {
        return Ok(None);
    };
    Ok(Some(*cast.downcast::<CpuStorage<T>>().expect("T is the type just made")))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice conversions against `half`'s conversion of one value, on
    /// every `f16` and on `f32` patterns over every exponent (ties,
    /// overflow to infinity, subnormals, NaN payloads), in lengths that
    /// leave partial vectors and that split across threads.
    #[test]
    fn f16_slice_conversions_match_one_value_at_a_time() {
        let every_f16: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut patterns: Vec<f32> = [0x3f80_1000u32, 0x3f80_3000, 0x477f_f000, 0x477f_efff, 0x3380_0000, 0x7fa1_2345]
            .into_iter()
            .map(f32::from_bits)
            .collect();
        patterns.extend((0..300_001).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f32::from_bits((state >> 32) as u32)
        }));
        let widened: CpuStorage<f32> = converted("test", &CpuStorage::from_vec(every_f16.clone())).unwrap();
        for (h, w) in every_f16.iter().zip(widened.as_slice()) {
            assert_eq!(w.to_bits(), h.to_f32().to_bits(), "{:#06x}", h.to_bits());
        }
        for len in [3, 17, patterns.len()] {
            let narrowed: CpuStorage<f16> = narrowed("test", &CpuStorage::from_vec(patterns[..len].to_vec())).unwrap();
            for (v, h) in patterns.iter().zip(narrowed.as_slice()) {
                assert_eq!(h.to_bits(), f16::from_f32(*v).to_bits(), "{:#010x}", v.to_bits());
            }
        }
    }
}
