//! The CPU device: host memory, a buffer pool for large outputs, and the
//! strided copies every CPU kernel shares.

use super::{Backend, sealed};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::shape::{Layout, checked_bytes, for_each_block};
use rayon::prelude::*;
use std::sync::Mutex;

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

/// Buffers smaller than this come from the allocator directly: malloc is
/// fast for them, and only large (mmap-backed) buffers fault page by page.
///
/// Under Miri, which interprets code thousands of times slower, this and
/// `PARALLEL_MIN_ELEMS` are 256 times smaller, so that tests of sizes Miri
/// finishes still take the pooled and multi-threaded paths.
const POOL_MIN_BYTES: usize = if cfg!(miri) { 1024 } else { 256 * 1024 };
/// Most bytes the pool keeps per element type before it frees the oldest buffer.
const POOL_MAX_BYTES: usize = 1 << 30;

/// Recycled buffers of one element type.
struct BufferPool<E> {
    buffers: Mutex<Vec<Vec<E>>>,
}

impl<E: Element> BufferPool<E> {
    const fn new() -> Self {
        BufferPool { buffers: Mutex::new(Vec::new()) }
    }

    /// A buffer of exactly `len` initialised (stale) elements, if one of a
    /// close size is pooled.
    fn take(&self, len: usize) -> Option<Vec<E>> {
        let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        // Accept up to twice the size: more would waste memory.
        let pos = buffers.iter().position(|b| b.len() >= len && b.len() <= 2 * len)?;
        let mut buf = buffers.swap_remove(pos);
        buf.truncate(len);
        Some(buf)
    }

    fn give(&self, buf: Vec<E>) {
        let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        buffers.push(buf);
        let mut total: usize = buffers.iter().map(|b| b.len() * size_of::<E>()).sum();
        while total > POOL_MAX_BYTES {
            let oldest = buffers.remove(0);
            total -= oldest.len() * size_of::<E>();
        }
    }
}

static POOL_F32: BufferPool<f32> = BufferPool::new();
static POOL_F64: BufferPool<f64> = BufferPool::new();
static POOL_I64: BufferPool<i64> = BufferPool::new();
static POOL_U8: BufferPool<u8> = BufferPool::new();

/// The pool of `E`'s buffers.
fn pool_for<E: Element>() -> &'static BufferPool<E> {
    let pool: &'static dyn std::any::Any = match E::DTYPE {
        DType::F32 => &POOL_F32,
        DType::F64 => &POOL_F64,
        DType::I64 => &POOL_I64,
        DType::U8 => &POOL_U8,
    };
    pool.downcast_ref().expect("DTYPE names the element's own type")
}

/// A buffer of `len` elements for a kernel to overwrite completely. Its
/// contents are unspecified (stale values from a recycled buffer, or zeros).
///
/// Fails with [`Error::OutOfMemory`] naming `op` when the allocator refuses,
/// and with an [`Error::Shape`] when `len` elements cannot exist in memory
/// at all: never an abort.
pub(crate) fn output_buffer<E: Element>(op: &'static str, len: usize) -> Result<Vec<E>> {
    if len.saturating_mul(size_of::<E>()) >= POOL_MIN_BYTES
        && let Some(buf) = pool_for::<E>().take(len)
    {
        return Ok(buf);
    }
    zeroed_vec(op, len)
}

/// `len` zeros of `E`, allocated fallibly (see [`output_buffer`]).
///
/// Zeroed memory from the allocator (calloc) rather than a zero fill: large
/// buffers come as fresh pages that the kernel's first write faults in, with
/// no pass over memory before it.
pub(crate) fn zeroed_vec<E: Element>(op: &'static str, len: usize) -> Result<Vec<E>> {
    let layout = byte_layout::<E>(op, len)?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `layout` has a non-zero size, checked just above.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(Error::OutOfMemory {
            op,
            device: Cpu::name(),
            requested: layout.size(),
            free: host_available_bytes(),
        });
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of
    // `[E; len]` (size `len * size_of::<E>()`, alignment of `E`), which is
    // what a `Vec<E>` of capacity `len` owns. Its `len` elements are
    // initialised: every `Element` (f32, f64, i64, u8; the trait is sealed)
    // is a plain number whose all-zero bytes are the value 0.
    Ok(unsafe { Vec::from_raw_parts(ptr.cast::<E>(), len, len) })
}

/// `len` elements gathered from an iterator into a fallibly allocated vector.
pub(crate) fn try_collect<E: Element>(op: &'static str, len: usize, values: impl Iterator<Item = E>) -> Result<Vec<E>> {
    let mut out = Vec::new();
    reserve(op, &mut out, len)?;
    out.extend(values.take(len));
    Ok(out)
}

/// A copy of `src` in a fallibly allocated vector (see [`output_buffer`]).
pub(crate) fn try_copy<E: Element>(op: &'static str, src: &[E]) -> Result<Vec<E>> {
    if is_small_output::<E>(src.len()) {
        return Ok(src.to_vec()); // small: no size a user could make impossible
    }
    let mut out = Vec::new();
    reserve(op, &mut out, src.len())?;
    out.extend_from_slice(src);
    Ok(out)
}

/// Reserves room for exactly `len` elements, or fails as [`output_buffer`] does.
fn reserve<E: Element>(op: &'static str, out: &mut Vec<E>, len: usize) -> Result<()> {
    let bytes = checked_bytes::<E>(op, Cpu::name, len)?;
    out.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        op,
        device: Cpu::name(),
        requested: bytes,
        free: host_available_bytes(),
    })
}

/// The memory layout of `len` elements of `E` (see [`checked_bytes`]).
fn byte_layout<E: Element>(op: &'static str, len: usize) -> Result<std::alloc::Layout> {
    let bytes = checked_bytes::<E>(op, Cpu::name, len)?;
    Ok(std::alloc::Layout::from_size_align(bytes, align_of::<E>()).expect("checked_bytes bounds the size"))
}

/// The memory the host has available, for out-of-memory messages (Linux's
/// `MemAvailable`; `None` where it cannot be read).
fn host_available_bytes() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Output sizes from which elementwise kernels split work across threads;
/// below it, thread hand-off costs more than it saves.
pub(crate) const PARALLEL_MIN_ELEMS: usize = if cfg!(miri) { 1 << 8 } else { 1 << 16 };
/// Elements per parallel work item: large enough to amortise scheduling,
/// small enough to balance two to a few dozen cores. A multiple of the
/// reductions' block (1024), so under Miri only 32 times smaller.
pub(crate) const PARALLEL_CHUNK: usize = if cfg!(miri) { 1 << 10 } else { 1 << 15 };

/// Whether an output of `len` elements of `T` is built with `collect`: a
/// fresh allocation written once, with no zero-fill first and no thread
/// hand-off. Larger outputs come from the pool and may be split across threads.
pub(crate) fn is_small_output<T>(len: usize) -> bool {
    len < PARALLEL_MIN_ELEMS && len * size_of::<T>() < POOL_MIN_BYTES
}

/// Runs `body`, a loop for the compiler to vectorise, compiled for the
/// widest vector unit this CPU has.
///
/// The crate is built for baseline x86-64 (SSE2), so without this a dense
/// elementwise loop uses 128-bit vectors even on an AVX-512 machine. `body`
/// is inlined into a copy of this function built with AVX-512 or AVX2
/// enabled, chosen at run time (the feature checks are cached loads).
#[inline(always)]
pub(crate) fn vectorized<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the four AVX-512 subsets `with_avx512` enables were
            // detected on this CPU just above.
            return unsafe { with_avx512(body) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected on this CPU just above.
            return unsafe { with_avx2(body) };
        }
    }
    body()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
fn with_avx512<R>(body: impl FnOnce() -> R) -> R {
    body()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn with_avx2<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// Gathers the elements `layout` selects into a new row-major vector,
/// applying `f`; dense inputs run as one vectorised loop, split across
/// threads when large.
///
/// `op` names the operation in an allocation error.
pub(crate) fn map_strided<E: Element, T: Element>(
    op: &'static str,
    src: &[E],
    layout: &Layout,
    f: impl Fn(E) -> T + Send + Sync,
) -> Result<Vec<T>> {
    let len = layout.elem_count();
    if let Some(range) = layout.contiguous_range() {
        let src = &src[range];
        if is_small_output::<T>(len) {
            return Ok(vectorized(|| src.iter().map(|&x| f(x)).collect()));
        }
        let mut out = output_buffer(op, len)?;
        let run = |out: &mut [T], src: &[E]| {
            vectorized(|| {
                for (o, &x) in out.iter_mut().zip(src) {
                    *o = f(x);
                }
            })
        };
        if out.len() >= PARALLEL_MIN_ELEMS {
            out.par_chunks_mut(PARALLEL_CHUNK).zip(src.par_chunks(PARALLEL_CHUNK)).for_each(|(o, s)| run(o, s));
        } else {
            run(&mut out, src);
        }
        return Ok(out);
    }
    let mut out = output_buffer(op, len)?;
    let mut next = 0;
    for_each_block(layout.dims(), [layout.strides()], [layout.offset()], |[base], len, [stride]| {
        let out = &mut out[next..next + len];
        if stride == 1 {
            for (o, &x) in out.iter_mut().zip(&src[base..base + len]) {
                *o = f(x);
            }
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f(src[base + i * stride]);
            }
        }
        next += len;
    });
    Ok(out)
}

/// `out[i] = f(a[i], b[i])` over two operands laid out with one shape.
/// Dense operands run as one vectorised loop, split across threads when
/// large; a broadcast (stride-0) operand of the inner block is hoisted.
pub(crate) fn zip_into<A: Element, B: Element, T: Element>(
    out: &mut [T],
    a: &[A],
    al: &Layout,
    b: &[B],
    bl: &Layout,
    f: impl Fn(A, B) -> T + Sync,
) {
    if let (Some(ra), Some(rb)) = (al.contiguous_range(), bl.contiguous_range()) {
        let (a, b) = (&a[ra], &b[rb]);
        let run = |out: &mut [T], a: &[A], b: &[B]| {
            vectorized(|| {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = f(x, y);
                }
            })
        };
        if out.len() >= PARALLEL_MIN_ELEMS {
            out.par_chunks_mut(PARALLEL_CHUNK)
                .zip(a.par_chunks(PARALLEL_CHUNK).zip(b.par_chunks(PARALLEL_CHUNK)))
                .for_each(|(o, (a, b))| run(o, a, b));
        } else {
            run(out, a, b);
        }
        return;
    }
    let mut next = 0;
    for_each_block(al.dims(), [al.strides(), bl.strides()], [al.offset(), bl.offset()], |[x, y], len, [sx, sy]| {
        let out = &mut out[next..next + len];
        match (sx, sy) {
            (1, 1) => {
                for ((o, &p), &q) in out.iter_mut().zip(&a[x..x + len]).zip(&b[y..y + len]) {
                    *o = f(p, q);
                }
            }
            (1, 0) => {
                let q = b[y];
                for (o, &p) in out.iter_mut().zip(&a[x..x + len]) {
                    *o = f(p, q);
                }
            }
            (0, 1) => {
                let p = a[x];
                for (o, &q) in out.iter_mut().zip(&b[y..y + len]) {
                    *o = f(p, q);
                }
            }
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f(a[x + i * sx], b[y + i * sy]);
                }
            }
        }
        next += len;
    });
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
        Ok(CpuStorage::from_vec(map_strided("to_dtype", &storage.data, layout, |x| x.cast::<T>())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
