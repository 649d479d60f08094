//! Page-locked ("pinned") host memory: the only host memory a GPU's copy
//! engine reads and writes while the host goes on, and so the source or
//! destination of every asynchronous transfer.
//!
//! A buffer remembers the events of the copies queued on it. Host code reads
//! or writes it only after those have completed, so a transfer in flight
//! never sees the host change the bytes under it, and the host never reads
//! bytes the GPU has not finished writing. Allocating page-locked memory is
//! slow (the driver maps and locks every page), so freed buffers are cached
//! by size class, as the device allocator does.

use super::context::{self, size_class};
use crate::element::Element;
use crate::error::{Error, Result};
use cudarc::driver::{CudaEvent, result, sys};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Most bytes of freed page-locked memory kept for reuse; beyond that,
/// buffers go back to the driver.
const CACHE_MAX_BYTES: usize = 1 << 30;

/// Freed page-locked allocations, by size class (addresses as `usize`,
/// since raw pointers are not `Send`).
#[derive(Default)]
struct HostCache {
    free: BTreeMap<usize, Vec<usize>>,
    bytes: usize,
}

static CACHE: Mutex<HostCache> = Mutex::new(HostCache { free: BTreeMap::new(), bytes: 0 });

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks (addresses, events) stays valid after a panic.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A page-locked host buffer of at least `len` bytes.
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    /// Bytes in use.
    len: usize,
    /// Bytes allocated: the size class of `len`.
    class: usize,
    /// Events of the copies queued on this buffer that may still run.
    uses: Mutex<Vec<CudaEvent>>,
}

// SAFETY: the buffer is plain host memory owned by this value; host access
// goes through `&self`/`&mut self` methods that first wait for the
// asynchronous copies using it, and the event list is behind a mutex.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above; shared references only read the bytes, after waiting.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// A buffer of `len` bytes whose contents are not yet written, from the
    /// cache when possible. Page-locked memory is allocated in the context
    /// of `Cuda<0>` as portable memory, which every GPU can copy from.
    pub(crate) fn alloc(op: &'static str, len: usize) -> Result<Self> {
        let class = size_class(len);
        let cached = lock(&CACHE).free.get_mut(&class).and_then(Vec::pop);
        let ptr = match cached {
            Some(addr) => {
                lock(&CACHE).bytes -= class;
                addr as *mut u8
            }
            None => {
                let device = context::device(0)?;
                let failed = |e: sys::CUresult| Error::Driver {
                    op,
                    device: "Cpu (page-locked memory)".into(),
                    reason: format!("cannot allocate {class} bytes of page-locked memory: {e:?}"),
                };
                device.ctx.bind_to_thread().map_err(|e| failed(e.0))?;
                // SAFETY: a plain allocation call; the memory is written
                // before it is read (see the callers).
                let ptr =
                    unsafe { result::malloc_host(class, sys::CU_MEMHOSTALLOC_PORTABLE) }.map_err(|e| match e.0 {
                        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory {
                            op,
                            device: "Cpu (page-locked memory)".into(),
                            requested: class,
                            free: None,
                        },
                        other => failed(other),
                    })?;
                ptr.cast::<u8>()
            }
        };
        Ok(PinnedBuffer { ptr, len, class, uses: Mutex::new(Vec::new()) })
    }

    /// A buffer holding `values`.
    pub(crate) fn from_slice<E: Element>(op: &'static str, values: &[E]) -> Result<Self> {
        let mut buffer = Self::alloc(op, size_of_val(values))?;
        buffer.write(op, values)?;
        Ok(buffer)
    }

    /// A buffer of `len` zero bytes (zero elements of every element type).
    pub(crate) fn zeroed(op: &'static str, len: usize) -> Result<Self> {
        let buffer = Self::alloc(op, len)?;
        // SAFETY: `ptr` is valid for `len` bytes, freshly allocated (or
        // taken from the cache, where no copy uses it any more), and no other
        // value refers to it yet.
        unsafe { std::ptr::write_bytes(buffer.ptr, 0, len) };
        Ok(buffer)
    }

    /// Address of the first byte, for the driver's copies.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes in use.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Records that a copy queued on a stream uses this buffer until `event`.
    pub(crate) fn add_use(&self, event: CudaEvent) {
        lock(&self.uses).push(event);
    }

    /// Waits for every copy queued on this buffer.
    pub(crate) fn wait(&self, op: &'static str) -> Result<()> {
        let uses = std::mem::take(&mut *lock(&self.uses));
        for event in &uses {
            event.synchronize().map_err(|e| Error::Driver {
                op,
                device: "Cpu (page-locked memory)".into(),
                reason: format!("an asynchronous copy failed: {e}"),
            })?;
        }
        Ok(())
    }

    /// Copies `values` into the start of the buffer, once no copy uses it.
    pub(crate) fn write<E: Element>(&mut self, op: &'static str, values: &[E]) -> Result<()> {
        assert!(size_of_val(values) <= self.len, "write past the end of a pinned buffer");
        self.wait(op)?;
        // SAFETY: `ptr` is valid for `len >= size_of_val(values)` bytes, the
        // copies that used the buffer are over (waited above) and `&mut self`
        // excludes other host access; element types are plain numbers.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), self.ptr, size_of_val(values)) };
        Ok(())
    }

    /// The first `count` elements, once every copy into the buffer is done.
    pub(crate) fn read<E: Element>(&self, op: &'static str, count: usize) -> Result<Vec<E>> {
        assert!(
            count.checked_mul(size_of::<E>()).is_some_and(|bytes| bytes <= self.len),
            "read past the end of a pinned buffer"
        );
        self.wait(op)?;
        // A recycled host buffer: fresh pages cost a fault each on first touch.
        let mut out = crate::backend::cpu::output_buffer::<E>(op, count)?;
        // SAFETY: `ptr` is valid for `count * size_of::<E>()` bytes, written
        // by a completed copy or `write`; `out` holds `count` elements, and
        // every bit pattern is a valid element.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr().cast::<u8>(), count * size_of::<E>()) };
        Ok(out)
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // A copy in flight may still read or write the bytes: let it finish.
        // Errors were reported to whoever waited on the transfer.
        let _ = self.wait("drop");
        let mut cache = lock(&CACHE);
        if cache.bytes + self.class <= CACHE_MAX_BYTES {
            cache.bytes += self.class;
            cache.free.entry(self.class).or_default().push(self.ptr as usize);
            return;
        }
        drop(cache);
        // SAFETY: `ptr` came from `malloc_host` and no copy uses it any more.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}
