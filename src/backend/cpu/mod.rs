//! The CPU device: its storage (here), the buffer pool for large outputs
//! (`pool.rs`), the strided loops every CPU kernel shares (`loops.rs`), and
//! the threads they run on (`threads.rs`), and the instruction set they
//! use (`isa.rs`).

pub(crate) mod bf16_gemm;
mod gemm;
mod isa;
mod loops;
mod math;
mod pool;
pub(crate) mod skinny_gemm;
mod tasks;
mod threads;
mod widen;

pub(crate) use gemm::*;
pub use isa::CpuIsa;
pub(crate) use loops::*;
pub(crate) use math::*;
pub(crate) use pool::*;
pub(crate) use tasks::*;
pub(crate) use widen::*;

use super::{Backend, sealed};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;

/// The host CPU. Its tensors live in ordinary memory.
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
/// assert_eq!((&x + &x).to_vec(), vec![2.0, 4.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cpu;

impl sealed::Sealed for Cpu {}

/// Element storage of a CPU tensor. Large buffers go back to a pool when
/// dropped, so a training loop stops paying a page fault per 4 KiB of fresh
/// output after its first step.
#[derive(Debug)]
pub struct CpuStorage<E: Element> {
    data: Vec<E>,
}

impl<E: Element> CpuStorage<E> {
    /// Wraps host data.
    pub(crate) fn from_vec(data: Vec<E>) -> Self {
        CpuStorage { data }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[E] {
        &self.data
    }

    /// The elements, for kernels that write in place.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [E] {
        &mut self.data
    }
}

impl<E: Element> Drop for CpuStorage<E> {
    fn drop(&mut self) {
        if size_of_val(self.data.as_slice()) >= POOL_MIN_BYTES {
            pool_for::<E>().give(std::mem::take(&mut self.data));
        }
    }
}

impl Backend for Cpu {
    type Storage<E: Element> = CpuStorage<E>;

    fn name() -> String {
        "Cpu".into()
    }

    fn storage_from_vec<E: Element>(data: Vec<E>) -> Result<CpuStorage<E>> {
        Ok(CpuStorage::from_vec(data))
    }

    fn storage_full<E: Element>(op: &'static str, len: usize, value: E) -> Result<CpuStorage<E>> {
        let mut data = output_buffer(op, len)?;
        data.fill(value);
        Ok(CpuStorage::from_vec(data))
    }

    fn storage_to_vec<E: Element>(storage: &CpuStorage<E>, layout: &Layout) -> Result<Vec<E>> {
        match layout.contiguous_range() {
            // Not a pooled buffer: the caller keeps it.
            Some(range) => try_copy("to_vec", &storage.data[range]),
            None => map_strided("to_vec", &storage.data, layout, |x| x),
        }
    }

    fn storage_len<E: Element>(storage: &CpuStorage<E>) -> usize {
        storage.data.len()
    }

    fn copy_strided<E: Element>(storage: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        Ok(CpuStorage::from_vec(map_strided("contiguous", &storage.data, layout, |x| x)?))
    }

    fn cast<E: Element, T: Element>(storage: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<T>> {
        cast_as_laid_out("to_dtype", storage, layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn pool_recycles_large_buffers() {
        let len = POOL_MIN_BYTES / 8 + 3;
        let storage = CpuStorage::from_vec(vec![1.5f64; len]);
        drop(storage);
        // Another test may race for the buffer; only its contents are checked.
        if let Some(buf) = pool_for::<f64>().take(len) {
            assert_eq!(buf.len(), len);
        }
        assert!(pool_for::<f64>().take(usize::MAX / 16).is_none());
    }

    #[test]
    fn pool_matches_by_capacity_so_a_shorter_use_does_not_strand_a_buffer() {
        // u8 buffers of this odd size are used by no other test.
        let len = POOL_MIN_BYTES * 3 + 7;
        drop(CpuStorage::from_vec(vec![7u8; len]));
        // A shorter request takes the buffer and returns it truncated.
        let short = pool_for::<u8>().take(len - 100).expect("the pooled buffer fits");
        assert_eq!(short.len(), len - 100);
        drop(CpuStorage::from_vec(short));
        // The full size still finds it, with the stale head and a zeroed tail.
        let full = pool_for::<u8>().take(len).expect("the truncated buffer has the capacity");
        assert_eq!(full.len(), len);
        assert!(full[..len - 100].iter().all(|&b| b == 7) && full[len - 100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn impossible_and_refused_allocations_are_errors() {
        // More than isize::MAX bytes: no allocator is even asked.
        let err = output_buffer::<f64>("zeros", usize::MAX / 4).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "zeros", .. }), "{err}");
        assert!(err.to_string().contains("more than isize::MAX bytes"), "{err}");
        // Possible in principle, refused by the allocator (no machine has 2^62 bytes).
        #[cfg(not(miri))]
        {
            let err = output_buffer::<u8>("zeros", 1 << 62).unwrap_err();
            assert!(matches!(err, Error::OutOfMemory { op: "zeros", requested, .. } if requested == 1 << 62), "{err}");
            let err = try_collect::<u8>("to_vec", 1 << 62, std::iter::empty()).unwrap_err();
            assert!(matches!(err, Error::OutOfMemory { op: "to_vec", .. }), "{err}");
        }
        let zeros = zeroed_vec::<i64>("zeros", 1000).unwrap();
        assert!(zeros.len() == 1000 && zeros.iter().all(|&x| x == 0));
    }

    fn check_dense_map<E: Element>() {
        // Small (collected), pooled single-threaded, and parallel outputs.
        for len in [0, 1, 37, 4096, POOL_MIN_BYTES / size_of::<E>() + 5, PARALLEL_MIN_ELEMS * 2 + 7] {
            let src: Vec<E> = (0..len).map(|i| E::from_u8((i % 251) as u8)).collect();
            let layout = Layout::contiguous(crate::Shape::from(len));
            let out = map_strided("test", &src, &layout, |x| x.add(E::from_u8(3))).unwrap();
            let expected: Vec<E> = src.iter().map(|&x| x.add(E::from_u8(3))).collect();
            assert!(out == expected, "len {len}");
        }
    }

    #[test]
    fn dense_map_matches_a_plain_loop_for_every_dtype_and_size() {
        check_dense_map::<f32>();
        check_dense_map::<f64>();
        check_dense_map::<i64>();
        check_dense_map::<u8>();
    }
}
