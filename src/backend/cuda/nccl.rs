//! NCCL communicators over several GPUs of one process (one rank per GPU),
//! for data-parallel training's all-reduce. NCCL is loaded at run time like
//! the other CUDA libraries; its absence is an error, not a panic.

use super::CudaStorage;
use super::context::{self, CudaDevice};
use crate::error::{Error, Result};
use cudarc::nccl::{result, sys};
use std::any::Any;
use std::sync::Arc;

/// One communicator per GPU of a list, made together by `ncclCommInitAll`:
/// rank `r` is the `r`-th GPU.
pub struct NcclClique {
    comms: Vec<sys::ncclComm_t>,
    devices: Vec<Arc<CudaDevice>>,
}

// SAFETY: an NCCL communicator is a handle that NCCL lets any thread use;
// devtensor issues each rank's calls from one thread at a time (the rank's
// replica thread), and `Drop` runs when no call is in flight.
unsafe impl Send for NcclClique {}
// SAFETY: as above; shared references only issue calls on distinct ranks.
unsafe impl Sync for NcclClique {}

/// Fails unless NCCL can be loaded: cudarc panics on the first call into a
/// library it cannot load, so every entry point looks first.
fn require_nccl() -> Result<()> {
    // SAFETY: only tries to dlopen NCCL.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(unavailable("NCCL was not found (libnccl.so is not on the library search path)"))
    }
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable { device: "NCCL".into(), reason: reason.into() }
}

/// A dense GPU buffer as NCCL sees it: its address, element count and
/// NCCL's name for its element type.
pub(crate) struct NcclBuffer {
    ptr: *mut std::ffi::c_void,
    count: usize,
    dtype: sys::ncclDataType_t,
}

impl NcclBuffer {
    /// The buffer of the storage of a dense tensor on a GPU (of any of
    /// devtensor's element types, each of which NCCL has); an error naming
    /// `op` and `device` for storage that is not GPU memory.
    pub(crate) fn of(storage: &dyn Any, op: &'static str, device: &str) -> Result<Self> {
        fn typed<E: crate::element::Element>(storage: &dyn Any, dtype: sys::ncclDataType_t) -> Option<NcclBuffer> {
            let storage = storage.downcast_ref::<CudaStorage<E>>()?;
            Some(NcclBuffer { ptr: storage.ptr() as *mut std::ffi::c_void, count: storage.len(), dtype })
        }
        typed::<f32>(storage, sys::ncclDataType_t::ncclFloat32)
            .or_else(|| typed::<half::bf16>(storage, sys::ncclDataType_t::ncclBfloat16))
            .or_else(|| typed::<half::f16>(storage, sys::ncclDataType_t::ncclFloat16))
            .or_else(|| typed::<f64>(storage, sys::ncclDataType_t::ncclFloat64))
            .or_else(|| typed::<i64>(storage, sys::ncclDataType_t::ncclInt64))
            .or_else(|| typed::<u8>(storage, sys::ncclDataType_t::ncclUint8))
            .ok_or_else(|| Error::Argument {
                op,
                device: device.to_string(),
                reason: "NCCL works on GPU memory only".into(),
            })
    }
}

/// How a collective combines the ranks' values (NCCL's `ncclRedOp_t`).
pub(crate) type NcclOp = sys::ncclRedOp_t;

impl NcclClique {
    /// Communicators for the GPUs `ordinals` (distinct), rank `r` on
    /// `Cuda<ordinals[r]>`. Fails when NCCL is not installed
    /// (`libnccl.so` not on the library path), a GPU is unavailable, or
    /// NCCL cannot set up.
    pub(crate) fn try_new(ordinals: &[usize]) -> Result<Self> {
        require_nccl()?;
        let devices = ordinals.iter().map(|&o| context::device(o)).collect::<Result<Vec<_>>>()?;
        let list: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); list.len()];
        // SAFETY: `comms` has room for one communicator per entry of `list`,
        // and both outlive the call.
        unsafe { result::comm_init_all(comms.as_mut_ptr(), list.len() as i32, list.as_ptr()) }
            .map_err(|e| unavailable(format!("ncclCommInitAll failed: {e:?}")))?;
        Ok(NcclClique { comms, devices })
    }

    /// Sums rank `rank`'s `buffer` with the other ranks' in place, queued
    /// on the rank's compute stream after the work that wrote it. Every
    /// rank must make the same calls in the same order.
    pub(crate) fn all_reduce_sum(&self, rank: usize, buffer: &NcclBuffer) -> Result<()> {
        let device = &self.devices[rank];
        device.ctx.bind_to_thread().map_err(|e| device.error("all_reduce", e))?;
        // SAFETY: the buffer holds `count` elements of `dtype` on this
        // rank's GPU and stays alive while the call is queued: the caller
        // keeps the tensor until later work on the same stream has read the
        // result.
        unsafe {
            result::all_reduce(
                buffer.ptr,
                buffer.ptr,
                buffer.count,
                buffer.dtype,
                sys::ncclRedOp_t::ncclSum,
                self.comms[rank],
                device.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map(|_| ())
        .map_err(|e| device.error("all_reduce", format_args!("ncclAllReduce failed: {e:?}")))
    }

    /// Aborts every communicator, so that a rank waiting for one that
    /// failed returns instead of waiting forever.
    pub(crate) fn abort(&self) {
        for &comm in &self.comms {
            // SAFETY: `comm` came from `ncclCommInitAll` and is not yet destroyed.
            let _ = unsafe { result::comm_abort(comm) };
        }
    }
}

impl Drop for NcclClique {
    fn drop(&mut self) {
        for &comm in &self.comms {
            // SAFETY: as in `abort`; destroying an aborted communicator is allowed.
            let _ = unsafe { result::comm_destroy(comm) };
        }
    }
}

/// This process's rank of a communicator across processes (one GPU per
/// process), made by `ncclCommInitRankConfig` in NCCL's non-blocking mode
/// so that no call can block past a deadline or an abort.
///
/// Collectives run on a communication stream of their own, so that on a
/// GPU they overlap the compute stream's backward kernels (as PyTorch's DDP
/// does): each waits for the compute stream's work queued before it (the
/// gradients it sums), and [`finish`](Self::finish) makes the compute stream
/// wait for all of them before anything reads the sums.
///
/// The handle sits behind a lock: calls take it shared, and
/// [`abort`](Self::abort) (from a watchdog thread, while the owner may be
/// waiting on a stream) takes it exclusively and leaves it empty, so no
/// call can reach NCCL with an aborted communicator.
pub(crate) struct NcclRank {
    comm: std::sync::RwLock<Option<usize>>,
    device: Arc<CudaDevice>,
    stream: Arc<cudarc::driver::CudaStream>,
}

/// `NCCL_CONFIG_INITIALIZER` with `blocking = 0`: every other field left to
/// NCCL (`NCCL_CONFIG_UNDEF_INT`, null), so an older library reads only
/// what it knows.
fn non_blocking_config() -> sys::ncclConfig_t {
    const UNDEF: i32 = i32::MIN;
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: 23000,
        blocking: 0,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: UNDEF,
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
        graphUsageMode: UNDEF,
        numRmaCtx: UNDEF,
        maxP2pPeers: UNDEF,
    }
}

/// NCCL's description of the calling thread's last error (`ncclGetLastError`,
/// which says, for one, which ranks share a GPU), as ` (...)`; nothing when
/// it has none.
fn last_error(comm: sys::ncclComm_t) -> String {
    // SAFETY: NCCL returns a NUL-terminated string it owns (possibly empty),
    // valid until its next failing call on this thread; it is copied at once.
    let text = unsafe {
        let p = sys::ncclGetLastError(comm);
        if p.is_null() { String::new() } else { std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned() }
    };
    if text.trim().is_empty() { String::new() } else { format!(" ({})", text.trim()) }
}

/// A new `ncclUniqueId`, as bytes to hand to the other ranks.
pub(crate) fn unique_id() -> Result<Vec<u8>> {
    require_nccl()?;
    let id = result::get_uniqueid().map_err(|e| unavailable(format!("ncclGetUniqueId failed: {e:?}")))?;
    Ok(id.internal.iter().map(|&c| c as u8).collect())
}

impl NcclRank {
    /// Joins rank `rank` of `nranks` on `Cuda<ordinal>` to the
    /// communicator of `id` (from [`unique_id`] on one rank). Polls until
    /// every rank has joined, `deadline` passes, or `cancelled` returns an
    /// error (another rank failed); on either of the last two the
    /// communicator is aborted and the error returned.
    pub(crate) fn try_join(
        ordinal: usize,
        nranks: usize,
        rank: usize,
        id: &[u8],
        deadline: std::time::Instant,
        cancelled: &dyn Fn() -> Option<Error>,
    ) -> Result<Self> {
        require_nccl()?;
        let device = context::device(ordinal)?;
        device.ctx.bind_to_thread().map_err(|e| device.error("nccl_init", e))?;
        let mut unique = sys::ncclUniqueId { internal: [0; 128] };
        if id.len() != unique.internal.len() {
            return Err(unavailable(format!("an ncclUniqueId has 128 bytes, not {}", id.len())));
        }
        for (slot, &b) in unique.internal.iter_mut().zip(id) {
            *slot = b as _;
        }
        let stream = device
            .ctx
            .new_stream()
            .map_err(|e| device.error("nccl_init", format_args!("cannot create a stream: {e}")))?;
        let mut config = non_blocking_config();
        let mut comm = std::ptr::null_mut();
        // SAFETY: `comm` and `config` outlive the call; NCCL copies the config.
        let started =
            unsafe { sys::ncclCommInitRankConfig(&mut comm, nranks as i32, unique, rank as i32, &mut config) };
        if !matches!(started, sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress) {
            let why = last_error(comm);
            return Err(device.error("nccl_init", format_args!("ncclCommInitRankConfig failed: {started:?}{why}")));
        }
        let joined = NcclRank { comm: std::sync::RwLock::new(Some(comm as usize)), device, stream };
        joined.wait_until_done("ncclCommInitRankConfig", deadline, cancelled)?;
        Ok(joined)
    }

    /// Polls `ncclCommGetAsyncError` until the communicator's last call
    /// has finished; aborts it on an error, at `deadline`, or when
    /// `cancelled` says so.
    fn wait_until_done(
        &self,
        what: &str,
        deadline: std::time::Instant,
        cancelled: &dyn Fn() -> Option<Error>,
    ) -> Result<()> {
        let mut pause = std::time::Duration::from_micros(50);
        loop {
            match self.async_state()? {
                sys::ncclResult_t::ncclSuccess => return Ok(()),
                sys::ncclResult_t::ncclInProgress => {}
                error => {
                    let why = self.last_error();
                    self.abort();
                    return Err(self.device.error("nccl", format_args!("{what} failed: {error:?}{why}")));
                }
            }
            if let Some(error) = cancelled() {
                self.abort();
                return Err(error);
            }
            if std::time::Instant::now() >= deadline {
                self.abort();
                return Err(self.device.error("nccl", format_args!("{what} did not finish in time")));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(10));
        }
    }

    /// The communicator's state: `ncclInProgress`, `ncclSuccess` or its error.
    fn async_state(&self) -> Result<sys::ncclResult_t> {
        let guard = self.comm.read().unwrap_or_else(|e| e.into_inner());
        let Some(comm) = *guard else {
            return Err(self.device.error("nccl", "the communicator was aborted"));
        };
        let mut state = sys::ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator (the read lock keeps `abort` out).
        unsafe { sys::ncclCommGetAsyncError(comm as sys::ncclComm_t, &mut state) };
        Ok(state)
    }

    /// NCCL's own words for its last error, as ` (...)`, or nothing.
    fn last_error(&self) -> String {
        let guard = self.comm.read().unwrap_or_else(|e| e.into_inner());
        guard.map_or_else(String::new, |comm| last_error(comm as sys::ncclComm_t))
    }

    /// Fails with the communicator's error, if a collective has failed.
    /// Meaningful once the stream has run the collectives in question.
    pub(crate) fn check(&self) -> Result<()> {
        match self.async_state()? {
            sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(()),
            error => {
                Err(self.device.error("nccl", format_args!("a collective failed: {error:?}{}", self.last_error())))
            }
        }
    }

    /// Queues a collective built by `call` on the communication stream,
    /// after the compute stream's work queued so far.
    fn queue(
        &self,
        what: &'static str,
        call: impl FnOnce(sys::ncclComm_t, sys::cudaStream_t) -> sys::ncclResult_t,
    ) -> Result<()> {
        self.device.ctx.bind_to_thread().map_err(|e| self.device.error(what, e))?;
        let computed = self.device.record(what, &self.device.stream)?;
        self.stream.wait(&computed).map_err(|e| self.device.error(what, e))?;
        let code = {
            let guard = self.comm.read().unwrap_or_else(|e| e.into_inner());
            let Some(comm) = *guard else {
                return Err(self.device.error(what, "the communicator was aborted (another rank failed)"));
            };
            call(comm as sys::ncclComm_t, self.stream.cu_stream() as sys::cudaStream_t)
        };
        match code {
            sys::ncclResult_t::ncclSuccess => Ok(()),
            // Non-blocking mode: the call is still being enqueued.
            sys::ncclResult_t::ncclInProgress => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
                self.wait_until_done(what, deadline, &|| None)
            }
            error => Err(self.device.error(what, format_args!("NCCL failed: {error:?}{}", self.last_error()))),
        }
    }

    /// Waits until the compute stream, and so every collective it waits
    /// for ([`finish`](Self::finish)), has run.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.device.synchronize("collective")
    }

    /// Makes the compute stream wait for every collective queued so far:
    /// what must come before the results are read. The buffers handed to
    /// the collectives must stay alive until then.
    pub(crate) fn finish(&self) -> Result<()> {
        let reduced = self.device.record("all_reduce", &self.stream)?;
        self.device.stream.wait(&reduced).map_err(|e| self.device.error("all_reduce", e))
    }

    /// Sums `buffer` with every rank's in place, queued on the
    /// communication stream; read it after [`finish`](Self::finish).
    pub(crate) fn all_reduce_sum(&self, buffer: &NcclBuffer) -> Result<()> {
        self.all_reduce(buffer, NcclOp::ncclSum)
    }

    /// Combines `buffer` with every rank's in place by `op`, queued on the
    /// communication stream; read it after [`finish`](Self::finish).
    pub(crate) fn all_reduce(&self, buffer: &NcclBuffer, op: NcclOp) -> Result<()> {
        // SAFETY: the buffer holds `count` elements of `dtype` on this GPU
        // and outlives the queued call (the caller keeps the tensor until
        // later work on the same stream has read the result).
        self.queue("all_reduce", |comm, stream| unsafe {
            sys::ncclAllReduce(buffer.ptr, buffer.ptr, buffer.count, buffer.dtype, op, comm, stream)
        })
    }

    /// Replaces `buffer` by rank `root`'s, queued on the communication
    /// stream; read it after [`finish`](Self::finish).
    pub(crate) fn broadcast(&self, buffer: &NcclBuffer, root: usize) -> Result<()> {
        // SAFETY: as in `all_reduce`.
        self.queue("broadcast", |comm, stream| unsafe {
            sys::ncclBroadcast(buffer.ptr, buffer.ptr, buffer.count, buffer.dtype, root as i32, comm, stream)
        })
    }

    /// Writes every rank's `send`, in rank order, into `recv`, which holds
    /// `ranks` times as many elements of the same type; queued on the
    /// communication stream, read it after [`finish`](Self::finish).
    pub(crate) fn all_gather(&self, send: &NcclBuffer, recv: &NcclBuffer, ranks: usize) -> Result<()> {
        self.check_sizes("all_gather", send, recv, send.count.checked_mul(ranks))?;
        // SAFETY: `send` holds `count` elements and `recv` `ranks` times as
        // many (checked above), both of one type on this GPU, alive until
        // the caller's `finish`.
        self.queue("all_gather", |comm, stream| unsafe {
            sys::ncclAllGather(send.ptr, recv.ptr, send.count, send.dtype, comm, stream)
        })
    }

    /// Combines every rank's `send` by `op` and writes this rank's share,
    /// the `rank`-th of `ranks` equal parts, into `recv`; queued on the
    /// communication stream, read it after [`finish`](Self::finish).
    pub(crate) fn reduce_scatter(&self, send: &NcclBuffer, recv: &NcclBuffer, op: NcclOp, ranks: usize) -> Result<()> {
        self.check_sizes("reduce_scatter", recv, send, recv.count.checked_mul(ranks))?;
        // SAFETY: `recv` holds `count` elements and `send` `ranks` times as
        // many (checked above), both of one type on this GPU, alive until
        // the caller's `finish`.
        self.queue("reduce_scatter", |comm, stream| unsafe {
            sys::ncclReduceScatter(send.ptr, recv.ptr, recv.count, recv.dtype, op, comm, stream)
        })
    }

    /// Fails unless `large` holds `expected` elements of `small`'s type:
    /// what NCCL assumes of a gather's or scatter's buffers.
    fn check_sizes(
        &self,
        what: &'static str,
        small: &NcclBuffer,
        large: &NcclBuffer,
        expected: Option<usize>,
    ) -> Result<()> {
        if small.dtype != large.dtype || Some(large.count) != expected {
            return Err(self.device.error(
                what,
                format_args!("buffers of {} and {} elements do not fit the collective", small.count, large.count),
            ));
        }
        Ok(())
    }

    /// Aborts the communicator: a wait of this process on its collectives
    /// ends, and later calls fail. Safe to call from any thread, twice.
    pub(crate) fn abort(&self) {
        let mut guard = self.comm.write().unwrap_or_else(|e| e.into_inner());
        if let Some(comm) = guard.take() {
            // SAFETY: a live communicator, taken out so nothing uses it again.
            let _ = unsafe { result::comm_abort(comm as sys::ncclComm_t) };
        }
    }
}

impl Drop for NcclRank {
    fn drop(&mut self) {
        let guard = self.comm.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(comm) = guard.take() {
            // SAFETY: a live communicator with nothing in flight: the owner
            // synchronised its stream after the last step.
            let _ = unsafe { result::comm_destroy(comm as sys::ncclComm_t) };
        }
    }
}
