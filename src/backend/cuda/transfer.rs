//! Asynchronous transfers on a device's copy stream.
//!
//! A transfer is queued on the copy stream of the GPU that runs it and
//! returns at once with a [`Fence`]: the event that marks its end, and
//! everything that must live until then (the source tensor, a staging
//! buffer). The copy stream and the compute stream meet only through
//! events:
//! - before reading a GPU tensor, the copy stream waits for an event of the
//!   compute stream recorded at the call, so it reads the finished values;
//! - it writes only into buffers of the transfer pool, which no queued
//!   compute work uses;
//! - the consumer either waits on the host ([`Fence::wait`]) or has its
//!   compute stream wait for the event ([`Fence::join`]), and what the fence
//!   kept alive is then dropped once the event has completed.

use super::CudaStorage;
use super::context::CudaDevice;
use super::pinned::PinnedBuffer;
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use cudarc::driver::{CudaEvent, sys};
use std::any::Any;
use std::sync::Arc;

/// The end of an asynchronous transfer, and what it needs until then.
pub(crate) struct Fence {
    /// The event recorded after the copy, with the device whose copy stream
    /// ran it; `None` when nothing is in flight.
    pending: Option<(CudaEvent, Arc<CudaDevice>)>,
    /// Dropped only once the copy has completed.
    keep_alive: Vec<Box<dyn Any + Send>>,
}

impl Fence {
    /// A fence with nothing in flight.
    pub(crate) fn done() -> Self {
        Fence { pending: None, keep_alive: Vec::new() }
    }

    /// Whether the transfer has completed (a failed one counts as complete;
    /// waiting reports the error).
    pub(crate) fn is_complete(&self) -> bool {
        self.pending.as_ref().is_none_or(|(event, _)| event.try_is_complete().unwrap_or(true))
    }

    /// Blocks the host until the transfer has completed.
    pub(crate) fn wait(mut self, op: &'static str) -> Result<()> {
        if let Some((event, device)) = self.pending.take() {
            event.synchronize().map_err(|e| device.error(op, format_args!("asynchronous transfer failed: {e}")))?;
        }
        Ok(())
    }

    /// Makes everything queued on `consumer`'s compute stream from now on
    /// wait for the transfer, without blocking the host.
    pub(crate) fn join(mut self, op: &'static str, consumer: &Arc<CudaDevice>) -> Result<()> {
        if let Some((event, device)) = self.pending.take() {
            consumer.stream.wait(&event).map_err(|e| consumer.error(op, e))?;
            // What the copy reads must outlive it, though nobody waits.
            let keep_alive = std::mem::take(&mut self.keep_alive);
            device.defer_until(event, Box::new(keep_alive));
        }
        Ok(())
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // Dropped unfinished: hand what the copy uses to its device, which
        // drops it once the copy is over.
        if let Some((event, device)) = self.pending.take()
            && !self.keep_alive.is_empty()
        {
            device.defer_until(event, Box::new(std::mem::take(&mut self.keep_alive)));
        }
    }
}

/// A fence for work just queued on `device`'s copy stream.
fn fence_after(
    device: &Arc<CudaDevice>,
    op: &'static str,
    copy_stream: &cudarc::driver::CudaStream,
    keep_alive: Vec<Box<dyn Any + Send>>,
) -> Result<Fence> {
    let event = device.record(op, copy_stream)?;
    Ok(Fence { pending: Some((event, device.clone())), keep_alive })
}

/// Queues a copy of the first `len` elements of `src` onto `to`.
pub(crate) fn upload<E: Element>(
    to: &Arc<CudaDevice>,
    op: &'static str,
    src: Arc<PinnedBuffer>,
    len: usize,
) -> Result<(CudaStorage<E>, Fence)> {
    let out = CudaStorage::<E>::alloc_for_transfer(to, op, len)?;
    if len == 0 {
        return Ok((out, Fence::done()));
    }
    let copy = to.copy_stream(op)?;
    to.ctx.bind_to_thread().map_err(|e| to.error(op, e))?;
    // SAFETY: `src` holds at least `len` elements (its callers' contract),
    // is page-locked and kept alive by the fence until the copy completes;
    // `out` is a fresh transfer-pool buffer of `len` elements that no other
    // queued work uses.
    unsafe { sys::cuMemcpyHtoDAsync_v2(out.ptr(), src.ptr().cast(), len * size_of::<E>(), copy.cu_stream()) }
        .result()
        .map_err(|e| to.error(op, format_args!("host-to-device copy: {e}")))?;
    src.add_use(to.record(op, copy)?);
    let fence = fence_after(to, op, copy, vec![Box::new(src)])?;
    Ok((out, fence))
}

/// Queues a copy of the elements `layout` selects in `src` (on `from`) into
/// a new page-locked buffer. `owner` is kept alive until the copy is done.
pub(crate) fn download<E: Element>(
    from: &Arc<CudaDevice>,
    op: &'static str,
    src: &CudaStorage<E>,
    layout: &Layout,
    owner: Box<dyn Any + Send>,
) -> Result<(Arc<PinnedBuffer>, Fence)> {
    let n = layout.elem_count();
    // Checked: `layout` may be a broadcast view far larger than memory.
    let bytes = crate::error::checked_bytes::<E>(op, || from.name.clone(), n)?;
    let staging = Arc::new(PinnedBuffer::alloc(op, bytes)?);
    if n == 0 {
        return Ok((staging, Fence::done()));
    }
    let (dense, src_ptr) = super::dense_ptr(from, op, src, layout)?;
    let copy = from.copy_stream(op)?;
    // The values, and the dense copy, are written by the compute stream.
    copy.wait(&from.record(op, &from.stream)?).map_err(|e| from.error(op, e))?;
    from.ctx.bind_to_thread().map_err(|e| from.error(op, e))?;
    // SAFETY: `src_ptr` addresses `n` live elements, kept alive by the fence
    // (`owner`, `dense`) until the copy completes; `staging` is page-locked,
    // holds `n` elements, and host code waits for its uses before touching it.
    unsafe { sys::cuMemcpyDtoHAsync_v2(staging.ptr().cast(), src_ptr, bytes, copy.cu_stream()) }
        .result()
        .map_err(|e| from.error(op, format_args!("device-to-host copy: {e}")))?;
    staging.add_use(from.record(op, copy)?);
    let fence = fence_after(from, op, copy, vec![owner, Box::new(dense)])?;
    Ok((staging, fence))
}

/// Queues a copy of the elements `layout` selects in `src` (on `from`) onto
/// `to`, on `to`'s copy stream. `owner` is kept alive until the copy is done.
pub(crate) fn peer<E: Element>(
    from: &Arc<CudaDevice>,
    op: &'static str,
    src: &CudaStorage<E>,
    layout: &Layout,
    owner: Box<dyn Any + Send>,
    to: &Arc<CudaDevice>,
) -> Result<(CudaStorage<E>, Fence)> {
    let n = layout.elem_count();
    let out = CudaStorage::<E>::alloc_for_transfer(to, op, n)?;
    if n == 0 {
        return Ok((out, Fence::done()));
    }
    let (dense, src_ptr) = super::dense_ptr(from, op, src, layout)?;
    let copy = to.copy_stream(op)?;
    // A stream may wait for an event of another device's stream.
    copy.wait(&from.record(op, &from.stream)?).map_err(|e| to.error(op, e))?;
    to.ctx.bind_to_thread().map_err(|e| to.error(op, e))?;
    // SAFETY: `src_ptr` addresses `n` live elements on `from`, kept alive by
    // the fence until the copy completes; `out` is a fresh transfer-pool
    // buffer of `n` elements on `to` that no other queued work uses.
    unsafe {
        cudarc::driver::result::memcpy_peer_async(
            to.ctx.cu_ctx(),
            out.ptr(),
            from.ctx.cu_ctx(),
            src_ptr,
            n * size_of::<E>(),
            copy.cu_stream(),
        )
    }
    .map_err(|e| to.error(op, format_args!("peer copy from {}: {e}", from.name)))?;
    let fence = fence_after(to, op, copy, vec![owner, Box::new(dense)])?;
    Ok((out, fence))
}
