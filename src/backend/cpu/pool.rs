//! Host buffers for kernel outputs: fallible allocation (an error, never an
//! abort, when memory runs out) and a pool that recycles large buffers, so
//! that a training loop stops paying a page fault per 4 KiB of fresh output
//! after its first step.

use super::Cpu;
use super::loops::is_small_output;
use super::threads::join_pool;
use crate::backend::Backend;
use crate::element::{DType, Element};
use crate::error::checked_bytes;
use crate::error::{Error, Result};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this come from the allocator directly: malloc is
/// fast for them, and only large (mmap-backed) buffers fault page by page.
///
/// Under Miri, which interprets code thousands of times slower, this and
/// `PARALLEL_MIN_ELEMS` are 256 times smaller, so that tests of sizes Miri
/// finishes still take the pooled and multi-threaded paths.
pub(super) const POOL_MIN_BYTES: usize = if cfg!(miri) { 1024 } else { 256 * 1024 };
/// Most bytes the pool keeps per element type before it frees the oldest buffer.
const POOL_MAX_BYTES: usize = 1 << 30;

/// Recycled buffers of one element type.
pub(super) struct BufferPool<E> {
    buffers: Mutex<Vec<Vec<E>>>,
}

impl<E: Element> BufferPool<E> {
    const fn new() -> Self {
        BufferPool { buffers: Mutex::new(Vec::new()) }
    }

    /// A buffer of exactly `len` initialised (stale) elements, if one of a
    /// close size is pooled.
    ///
    /// Sizes are compared by capacity, not length: a buffer handed out for a
    /// shorter request comes back truncated, and matching on its length would
    /// strand its memory for every later request of its original size (the
    /// next step's), which then faults in fresh pages.
    pub(super) fn take(&self, len: usize) -> Option<Vec<E>> {
        let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        // The tightest fit of at most twice the size: more would waste memory.
        let pos = (0..buffers.len())
            .filter(|&i| (len..=len.saturating_mul(2)).contains(&buffers[i].capacity()))
            .min_by_key(|&i| buffers[i].capacity())?;
        let mut buf = buffers.swap_remove(pos);
        drop(buffers);
        if buf.len() >= len {
            buf.truncate(len);
        } else {
            // Resident memory, written only up to the request.
            buf.resize(len, E::ZERO);
        }
        Some(buf)
    }

    /// Keeps `buf` for a later `take`, freeing the oldest buffers beyond
    /// [`POOL_MAX_BYTES`] (counted by capacity: what the pool holds).
    pub(super) fn give(&self, buf: Vec<E>) {
        let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        buffers.push(buf);
        let mut total: usize = buffers.iter().map(|b| b.capacity() * size_of::<E>()).sum();
        while total > POOL_MAX_BYTES {
            let oldest = buffers.remove(0);
            total -= oldest.capacity() * size_of::<E>();
        }
    }
}

static POOL_F32: BufferPool<f32> = BufferPool::new();
static POOL_F64: BufferPool<f64> = BufferPool::new();
static POOL_BF16: BufferPool<half::bf16> = BufferPool::new();
static POOL_F16: BufferPool<half::f16> = BufferPool::new();
static POOL_I64: BufferPool<i64> = BufferPool::new();
static POOL_U8: BufferPool<u8> = BufferPool::new();

/// The pool of `E`'s buffers.
pub(super) fn pool_for<E: Element>() -> &'static BufferPool<E> {
    let pool: &'static dyn std::any::Any = match E::DTYPE {
        DType::F32 => &POOL_F32,
        DType::F64 => &POOL_F64,
        DType::BF16 => &POOL_BF16,
        DType::F16 => &POOL_F16,
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
    match recycled(len) {
        Some(buf) => Ok(buf),
        None => zeroed_vec(op, len),
    }
}

/// A pooled buffer of `len` stale elements, if `len` is large enough to
/// be pooled and the pool has one.
fn recycled<E: Element>(len: usize) -> Option<Vec<E>> {
    // Every kernel asks for its output first, before any parallel loop:
    // the place to settle which threads those loops run on.
    join_pool();
    if len.saturating_mul(size_of::<E>()) >= POOL_MIN_BYTES { pool_for::<E>().take(len) } else { None }
}

/// `len` zeros of `E` in a recycled buffer where the pool has one (see
/// [`output_buffer`]): for outputs that are sums and for scratch space,
/// reused on every call, where clearing memory the process already holds
/// costs far less than faulting in fresh pages one by one (each fault a
/// trip through the kernel, which on a busy virtual machine takes
/// microseconds). Wrap scratch in a [`CpuStorage`](super::CpuStorage) to
/// give it back to the pool when dropped.
pub(crate) fn zeroed_buffer<E: Element>(op: &'static str, len: usize) -> Result<Vec<E>> {
    match recycled(len) {
        Some(mut buf) => {
            buf.fill(E::ZERO);
            Ok(buf)
        }
        // Fresh from calloc: zeros already, no pass over it.
        None => zeroed_vec(op, len),
    }
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
    check_host_request(op, layout.size())?;
    // SAFETY: `layout` has a non-zero size, checked just above.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_host_memory(op, layout.size()));
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
    check_host_request(op, bytes)?;
    out.try_reserve_exact(len).map_err(|_| out_of_host_memory(op, bytes))
}

/// The memory layout of `len` elements of `E` (see [`checked_bytes`]).
fn byte_layout<E: Element>(op: &'static str, len: usize) -> Result<std::alloc::Layout> {
    let bytes = checked_bytes::<E>(op, Cpu::name, len)?;
    Ok(std::alloc::Layout::from_size_align(bytes, align_of::<E>()).expect("checked_bytes bounds the size"))
}

/// The memory the host has available, for out-of-memory messages (Linux's
/// `MemAvailable`; `None` where it cannot be read).
fn host_available_bytes() -> Option<usize> {
    meminfo_bytes(&["MemAvailable:"])
}

/// Whether `bytes` is more than the host's memory and swap together. Such
/// a request can only fail, but where Linux overcommits memory the
/// allocator may grant it, and the kernel then kills the process while the
/// buffer is filled: refusing it up front keeps it an error.
fn exceeds_host_memory(bytes: usize) -> bool {
    static TOTAL: OnceLock<Option<usize>> = OnceLock::new();
    let total = *TOTAL.get_or_init(|| meminfo_bytes(&["MemTotal:", "SwapTotal:"]));
    total.is_some_and(|total| bytes > total)
}

/// The sum of `fields` of Linux's `/proc/meminfo`, in bytes; `None` where
/// it cannot be read.
fn meminfo_bytes(fields: &[&str]) -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    fields.iter().try_fold(0usize, |sum, field| {
        let line = meminfo.lines().find(|l| l.starts_with(field))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        sum.checked_add(kib.checked_mul(1024)?)
    })
}

/// Fails with [`Error::OutOfMemory`] naming `op` when `bytes` is more than
/// the host has (see [`exceeds_host_memory`]), for buffers allocated
/// outside this module.
pub(crate) fn check_host_request(op: &'static str, bytes: usize) -> Result<()> {
    if exceeds_host_memory(bytes) { Err(out_of_host_memory(op, bytes)) } else { Ok(()) }
}

/// The error for a host allocation of `bytes` that cannot be granted.
fn out_of_host_memory(op: &'static str, bytes: usize) -> Error {
    Error::OutOfMemory { op, device: Cpu::name(), requested: bytes, free: host_available_bytes() }
}
