//! The exported `cu*` driver entry points.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::time::Instant;

use crate::kernels::{self, KERNELS, LaunchError};
use crate::memory;
use crate::state::*;

type CUdevice = c_int;
type CUdeviceptr = u64;
type Handle = *mut c_void;

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}

/// Runs one queued op; called by `flush` without the state lock held.
pub(crate) fn execute(dev: usize, op: Op) -> Result<(), CUresult> {
    match op {
        Op::HtoD { dst, src, n } => {
            let p = host_of(dev, dst, n)?;
            // SAFETY: the caller of the async copy keeps the host buffer alive until synchronisation.
            unsafe { std::ptr::copy(src as *const u8, p, n) };
        }
        Op::DtoH { dst, src, n } => {
            let p = host_of(dev, src, n)?;
            // SAFETY: as above.
            unsafe { std::ptr::copy(p, dst as *mut u8, n) };
        }
        Op::DtoD { dst_dev, dst, src_dev, src, n } => {
            let s = host_of(src_dev, src, n)?;
            let d = host_of(dst_dev, dst, n)?;
            // SAFETY: both ranges were bounds-checked against live allocations.
            unsafe { std::ptr::copy(s, d, n) };
        }
        Op::Memset { dst, value, width, count } => {
            let p = host_of(dev, dst, width * count)?;
            for i in 0..count {
                // SAFETY: bounds-checked above.
                unsafe {
                    match width {
                        1 => *p.add(i) = value as u8,
                        2 => (p.add(2 * i) as *mut u16).write_unaligned(value as u16),
                        _ => (p.add(4 * i) as *mut u32).write_unaligned(value),
                    }
                }
            }
        }
        Op::Free { addr } => memory::free(&mut state(), addr)?,
        Op::Launch { kernel, dims, mut params } => run_kernel(dev, kernel, &dims, &mut params)?,
        // SAFETY: the function and its data are the caller's, as with the real driver.
        Op::Host { f, data } => unsafe { f(data as *mut c_void) },
        Op::Gemm(g) => crate::cublas::run_gemm(dev, &g)?,
        Op::Deferred(work) => work()?,
        Op::RecordTime { event } => {
            if let Some(e) = state().events.get_mut(&event) {
                e.time = Some(Instant::now());
            }
        }
    }
    Ok(())
}

fn host_of(dev: usize, addr: u64, n: usize) -> Result<*mut u8, CUresult> {
    memory::translate(&state(), dev, addr, n).map_err(|m| report(ILLEGAL_ADDRESS, m))
}

fn run_kernel(dev: usize, kernel: usize, dims: &[u32; 6], params: &mut [Vec<u8>]) -> Result<(), CUresult> {
    let k = &KERNELS[kernel];
    let mut ptrs: Vec<*mut c_void> = params.iter_mut().map(|p| p.as_mut_ptr() as *mut c_void).collect();
    let mut err = LaunchError::new();
    memory::LAUNCH.with(|l| *l.borrow_mut() = Some((dev, Vec::new())));
    // SAFETY: `ptrs` holds one pointer per kernel parameter, each to a buffer of that parameter's size.
    let rc = unsafe { (k.launch)(ptrs.as_mut_ptr(), dims.as_ptr(), &mut err) };
    let touched = memory::LAUNCH.with(|l| l.borrow_mut().take()).map(|(_, t)| t).unwrap_or_default();
    let st = state();
    if rc != 0 {
        let mut msg = err.message();
        if err.fault_addr != 0 {
            msg.push_str(&format!(" ({})", memory::describe_host(&st, err.fault_addr)));
        }
        let code = if rc as u32 == ILLEGAL_ADDRESS || rc as u32 == INVALID_VALUE || rc as u32 == OUT_OF_MEMORY {
            rc as u32
        } else {
            LAUNCH_FAILED
        };
        return Err(report(code, msg));
    }
    if let Err(m) = memory::check_redzones(&st, &touched) {
        return Err(report(ILLEGAL_ADDRESS, format!("kernel {}: {m}", k.name)));
    }
    Ok(())
}

// ---- initialisation and devices ---------------------------------------------

/// Initialises the emulated driver (reads `DEVTENSOR_EMU_DEVICES`, `DEVTENSOR_EMU_MEM_BYTES[_N]`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(_flags: c_uint) -> CUresult {
    state().init();
    SUCCESS
}

/// Reports driver version 13.0, matching the `cuda-13000` build of cudarc.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CUresult {
    if v.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: checked non-null; the caller passes a valid out pointer.
    unsafe { *v = 13000 };
    SUCCESS
}

/// Device handle for an ordinal (the handle is the ordinal).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    let dev = tri!(state().device(ordinal));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *d = dev as c_int };
    SUCCESS
}

/// Number of emulated devices (2 unless `DEVTENSOR_EMU_DEVICES` says otherwise).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CUresult {
    let st = state();
    tri!(st.check_init());
    // SAFETY: out pointer supplied by the caller.
    unsafe { *n = st.devices.len() as c_int };
    SUCCESS
}

/// Device name, which says plainly that this is the emulator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, d: CUdevice) -> CUresult {
    let dev = tri!(state().device(d));
    let s = format!("devtensor-emu emulated GPU {dev}");
    if name.is_null() || len <= 0 {
        return INVALID_VALUE;
    }
    let n = s.len().min(len as usize - 1);
    // SAFETY: the caller's buffer holds `len` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), name as *mut u8, n);
        *name.add(n) = 0;
    }
    SUCCESS
}

/// A UUID derived from the ordinal.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut u8, d: CUdevice) -> CUresult {
    let dev = tri!(state().device(d));
    let mut bytes = *b"devtensor-emu-00";
    bytes[15] = b'0' + dev as u8;
    // SAFETY: CUuuid is 16 bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), uuid, 16) };
    SUCCESS
}

/// Same as [`cuDeviceGetUuid`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut u8, d: CUdevice) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDeviceGetUuid(uuid, d) }
}

/// The memory budget of the device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, d: CUdevice) -> CUresult {
    let st = state();
    let dev = tri!(st.device(d));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *bytes = st.devices[dev].total as usize };
    SUCCESS
}

/// Attributes of an sm_90-like device; unlisted attributes read 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(v: *mut c_int, attrib: c_int, d: CUdevice) -> CUresult {
    tri!(state().device(d));
    let value = match attrib {
        1..=3 => 1024,        // max threads per block, max block dim x/y
        4 => 64,              // max block dim z
        5 => i32::MAX,        // max grid dim x
        6 | 7 => 65535,       // max grid dim y/z
        8 | 97 => 48 * 1024,  // shared memory per block (static limit, opt-in)
        9 => 64 * 1024,       // total constant memory
        10 => 32,             // warp size
        12 | 82 => 64 * 1024, // registers per block / per SM
        13 => 1_000_000,      // clock rate kHz
        16 => 4,              // multiprocessors
        19 | 41 | 115 => 1,   // map host memory, unified addressing, memory pools
        39 => 2048,           // max threads per SM
        75 => 9,              // compute capability major
        76 => 0,              // minor
        81 => 228 * 1024,     // shared memory per SM
        _ => 0,
    };
    // SAFETY: out pointer supplied by the caller.
    unsafe { *v = value };
    SUCCESS
}

/// Peer access is possible between every pair of distinct emulated devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceCanAccessPeer(can: *mut c_int, d: CUdevice, peer: CUdevice) -> CUresult {
    let st = state();
    let a = tri!(st.device(d));
    let b = tri!(st.device(peer));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *can = (a != b) as c_int };
    SUCCESS
}

// ---- contexts -----------------------------------------------------------------

/// Retains the device's primary context (one per device, never destroyed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut Handle, d: CUdevice) -> CUresult {
    let mut st = state();
    let dev = tri!(st.device(d));
    st.devices[dev].primary_refs += 1;
    // SAFETY: out pointer supplied by the caller.
    unsafe { *ctx = context_handle(dev) };
    SUCCESS
}

/// Releases one reference to the primary context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(d: CUdevice) -> CUresult {
    let mut st = state();
    let dev = tri!(st.device(d));
    let refs = &mut st.devices[dev].primary_refs;
    if *refs == 0 {
        return report(INVALID_CONTEXT, format!("primary context of device {dev} released more often than retained"));
    }
    *refs -= 1;
    SUCCESS
}

/// Whether the primary context is retained by anyone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(d: CUdevice, flags: *mut c_uint, active: *mut c_int) -> CUresult {
    let st = state();
    let dev = tri!(st.device(d));
    // SAFETY: out pointers supplied by the caller.
    unsafe {
        *flags = 0;
        *active = (st.devices[dev].primary_refs > 0) as c_int;
    }
    SUCCESS
}

/// Accepted and ignored: scheduling flags have no meaning here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags_v2(d: CUdevice, _flags: c_uint) -> CUresult {
    tri!(state().device(d));
    SUCCESS
}

/// Binds a context to the calling thread (null unbinds).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: Handle) -> CUresult {
    if ctx.is_null() {
        set_current(None);
        return SUCCESS;
    }
    let st = state();
    tri!(st.check_init());
    let dev = tri!(context_device(ctx, &st));
    set_current(Some(dev));
    SUCCESS
}

/// The calling thread's context, or null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut Handle) -> CUresult {
    tri!(state().check_init());
    // SAFETY: out pointer supplied by the caller.
    unsafe { *ctx = current().map(context_handle).unwrap_or(std::ptr::null_mut()) };
    SUCCESS
}

/// The device of the calling thread's context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(d: *mut CUdevice) -> CUresult {
    let dev = tri!(current());
    // SAFETY: out pointer supplied by the caller.
    unsafe { *d = dev as CUdevice };
    SUCCESS
}

/// Pushes a context; the emulator keeps only the current one, so this is `cuCtxSetCurrent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: Handle) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuCtxSetCurrent(ctx) }
}

/// Pops the current context (unbinds it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut Handle) -> CUresult {
    if !ctx.is_null() {
        // SAFETY: out pointer supplied by the caller.
        unsafe { *ctx = current().map(context_handle).unwrap_or(std::ptr::null_mut()) };
    }
    set_current(None);
    SUCCESS
}

/// Runs all queued work of the current context's streams; returns the first error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    let dev = tri!(current());
    tri!(flush_device(dev));
    SUCCESS
}

/// Primary contexts only: destroying one is accepted and does nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: Handle) -> CUresult {
    let st = state();
    tri!(context_device(ctx, &st));
    SUCCESS
}

/// Peer access is always available between the emulated devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxEnablePeerAccess(ctx: Handle, _flags: c_uint) -> CUresult {
    let st = state();
    tri!(context_device(ctx, &st));
    SUCCESS
}

/// See [`cuCtxEnablePeerAccess`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDisablePeerAccess(ctx: Handle) -> CUresult {
    let st = state();
    tri!(context_device(ctx, &st));
    SUCCESS
}

/// No stream priorities: both ends of the range are 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> CUresult {
    // SAFETY: out pointers supplied by the caller (null allowed).
    unsafe {
        if !least.is_null() {
            *least = 0;
        }
        if !greatest.is_null() {
            *greatest = 0;
        }
    }
    SUCCESS
}

// ---- streams and events ---------------------------------------------------------

/// Creates a stream on the current context's device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(s: *mut Handle, _flags: c_uint) -> CUresult {
    let dev = tri!(current());
    let mut st = state();
    tri!(st.check_init());
    let h = st.handle();
    st.streams.insert(h, Stream::new(dev));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *s = h as Handle };
    SUCCESS
}

/// Priorities are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreateWithPriority(s: *mut Handle, flags: c_uint, _prio: c_int) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuStreamCreate(s, flags) }
}

/// Runs the stream's remaining work, then destroys it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy_v2(s: Handle) -> CUresult {
    let id = tri!(state().stream(s));
    let r = flush(id, None);
    let mut st = state();
    if st.devices.iter().any(|d| d.default_stream == id) {
        return report(INVALID_HANDLE, "cannot destroy a default stream");
    }
    st.streams.remove(&id);
    match r {
        Ok(()) => SUCCESS,
        Err(c) => c,
    }
}

/// Runs everything queued on the stream; returns the first error of that work.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamSynchronize(s: Handle) -> CUresult {
    let id = tri!(state().stream(s));
    tri!(flush(id, None));
    SUCCESS
}

/// Completes the stream's work (the emulator never reports "not ready").
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamQuery(s: Handle) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuStreamSynchronize(s) }
}

/// Makes `s` wait for `e`: the recording stream is run up to the event at once,
/// which keeps every ordering the real driver guarantees.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamWaitEvent(s: Handle, e: Handle, _flags: c_uint) -> CUresult {
    let rec = {
        let st = state();
        tri!(st.stream(s));
        match st.events.get(&(e as u64)) {
            Some(ev) => ev.recorded,
            None => return INVALID_HANDLE,
        }
    };
    if let Some((stream, seq)) = rec {
        tri!(flush(stream, Some(seq)));
    }
    SUCCESS
}

/// Creates an event on the current context's device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(e: *mut Handle, _flags: c_uint) -> CUresult {
    let dev = tri!(current());
    let mut st = state();
    let h = st.handle();
    st.events.insert(h, Event { dev, recorded: None, time: None });
    // SAFETY: out pointer supplied by the caller.
    unsafe { *e = h as Handle };
    SUCCESS
}

/// Destroys an event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(e: Handle) -> CUresult {
    if state().events.remove(&(e as u64)).is_some() { SUCCESS } else { INVALID_HANDLE }
}

/// Records the stream's current position (and, when it runs, the time).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(e: Handle, s: Handle) -> CUresult {
    let mut st = state();
    let id = tri!(st.stream(s));
    let sdev = st.streams[&id].dev;
    match st.events.get(&(e as u64)) {
        None => return INVALID_HANDLE,
        Some(ev) if ev.dev != sdev => {
            return report(INVALID_HANDLE, "event recorded on a stream of another device");
        }
        _ => {}
    }
    st.enqueue(id, Op::RecordTime { event: e as u64 });
    let seq = st.streams[&id].enqueued;
    st.events.get_mut(&(e as u64)).unwrap().recorded = Some((id, seq));
    SUCCESS
}

/// See [`cuEventRecord`]; flags are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecordWithFlags(e: Handle, s: Handle, _flags: c_uint) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventRecord(e, s) }
}

/// Runs the recording stream up to the event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventSynchronize(e: Handle) -> CUresult {
    let rec = match state().events.get(&(e as u64)) {
        Some(ev) => ev.recorded,
        None => return INVALID_HANDLE,
    };
    if let Some((stream, seq)) = rec {
        tri!(flush(stream, Some(seq)));
    }
    SUCCESS
}

/// Completes the work before the event and reports it done.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventQuery(e: Handle) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventSynchronize(e) }
}

/// Host time between the moments the two events' positions ran.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime(ms: *mut f32, start: Handle, end: Handle) -> CUresult {
    let st = state();
    let (Some(a), Some(b)) = (st.events.get(&(start as u64)), st.events.get(&(end as u64))) else {
        return INVALID_HANDLE;
    };
    let (Some(ta), Some(tb)) = (a.time, b.time) else {
        return report(INVALID_HANDLE, "event not completed");
    };
    let d = if tb >= ta { (tb - ta).as_secs_f32() * 1e3 } else { -((ta - tb).as_secs_f32() * 1e3) };
    // SAFETY: out pointer supplied by the caller.
    unsafe { *ms = d };
    SUCCESS
}

/// See [`cuEventElapsedTime`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime_v2(ms: *mut f32, start: Handle, end: Handle) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventElapsedTime(ms, start, end) }
}

/// Queues a host function on the stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchHostFunc(
    s: Handle,
    f: Option<unsafe extern "C" fn(*mut c_void)>,
    data: *mut c_void,
) -> CUresult {
    let Some(f) = f else { return INVALID_VALUE };
    let mut st = state();
    let id = tri!(st.stream(s));
    st.enqueue(id, Op::Host { f, data: data as usize });
    SUCCESS
}

// ---- memory ---------------------------------------------------------------------

/// Allocates on the current context's device, failing with `CUDA_ERROR_OUT_OF_MEMORY` over budget.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(p: *mut CUdeviceptr, size: usize) -> CUresult {
    let dev = tri!(current());
    let mut st = state();
    let a = tri!(memory::alloc(&mut st, dev, size));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *p = a };
    SUCCESS
}

/// Stream-ordered allocation: the memory exists at once, which every stream order allows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocAsync(p: *mut CUdeviceptr, size: usize, s: Handle) -> CUresult {
    let mut st = state();
    let id = tri!(st.stream(s));
    let dev = st.streams[&id].dev;
    let a = tri!(memory::alloc(&mut st, dev, size));
    // SAFETY: out pointer supplied by the caller.
    unsafe { *p = a };
    SUCCESS
}

/// Frees after all work of the device has run (the real call synchronises too).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(p: CUdeviceptr) -> CUresult {
    let dev = {
        let st = state();
        tri!(st.check_init());
        memory::find(&st, p).map(|(_, a)| a.dev)
    };
    if let Some(dev) = dev {
        tri!(flush_device(dev));
    }
    tri!(memory::free(&mut state(), p));
    SUCCESS
}

/// Stream-ordered free: queued work that still uses the memory runs first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeAsync(p: CUdeviceptr, s: Handle) -> CUresult {
    let mut st = state();
    let id = tri!(st.stream(s));
    if memory::find(&st, p).is_none_or(|(start, _)| start != p) {
        return report(INVALID_VALUE, format!("cuMemFreeAsync of 0x{p:x}, which is not a live allocation"));
    }
    st.enqueue(id, Op::Free { addr: p });
    SUCCESS
}

/// Free and total bytes of the current context's device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    let dev = tri!(current());
    let st = state();
    let d = &st.devices[dev];
    // SAFETY: out pointers supplied by the caller.
    unsafe {
        *free = (d.total - d.used) as usize;
        *total = d.total as usize;
    }
    SUCCESS
}

/// Base and size of the allocation holding `p`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut usize, p: CUdeviceptr) -> CUresult {
    let st = state();
    let Some((start, a)) = memory::find(&st, p) else {
        return NOT_FOUND;
    };
    // SAFETY: out pointers supplied by the caller (null allowed).
    unsafe {
        if !base.is_null() {
            *base = start;
        }
        if !size.is_null() {
            *size = a.size;
        }
    }
    SUCCESS
}

fn check_range(st: &State, dev: usize, addr: u64, n: usize, what: &str) -> Result<(), CUresult> {
    memory::translate(st, dev, addr, n).map(|_| ()).map_err(|m| report(INVALID_VALUE, format!("{what}: {m}")))
}

/// Enqueues on stream `s` (or the current default stream) after checking the device ranges.
fn enqueue_copy(s: Handle, op: Op, what: &str, sync: bool) -> CUresult {
    let id = {
        let mut st = state();
        let id = tri!(st.stream(s));
        let dev = st.streams[&id].dev;
        match &op {
            Op::HtoD { dst, n, .. } => tri!(check_range(&st, dev, *dst, *n, what)),
            Op::DtoH { src, n, .. } => tri!(check_range(&st, dev, *src, *n, what)),
            Op::DtoD { dst_dev, dst, src_dev, src, n } => {
                tri!(check_range(&st, *src_dev, *src, *n, what));
                tri!(check_range(&st, *dst_dev, *dst, *n, what));
            }
            Op::Memset { dst, width, count, .. } => tri!(check_range(&st, dev, *dst, width * count, what)),
            _ => {}
        }
        // As on the real driver, an async copy to or from pageable host memory
        // has finished with the host buffer when the call returns; only copies
        // to and from page-locked memory stay pending until synchronisation.
        let pageable = match &op {
            Op::HtoD { src: h, n, .. } | Op::DtoH { dst: h, n, .. } => !st.is_pinned(*h, *n),
            _ => false,
        };
        st.enqueue(id, op);
        (id, pageable)
    };
    let (id, pageable) = id;
    if sync {
        // Synchronous copies wait for the device's earlier work and complete before returning.
        let dev = state().streams[&id].dev;
        tri!(flush_device(dev));
    } else if pageable {
        tri!(flush(id, None));
    }
    SUCCESS
}

/// Synchronous host-to-device copy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) -> CUresult {
    enqueue_copy(std::ptr::null_mut(), Op::HtoD { dst, src: src as usize, n }, "cuMemcpyHtoD", true)
}

/// Asynchronous host-to-device copy: from page-locked memory it happens at the
/// stream's next synchronisation point; from pageable memory before returning.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, s: Handle) -> CUresult {
    enqueue_copy(s, Op::HtoD { dst, src: src as usize, n }, "cuMemcpyHtoDAsync", false)
}

/// Synchronous device-to-host copy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    enqueue_copy(std::ptr::null_mut(), Op::DtoH { dst: dst as usize, src, n }, "cuMemcpyDtoH", true)
}

/// Asynchronous device-to-host copy: into page-locked memory the host buffer is
/// written only at the stream's next synchronisation point, so reading it
/// earlier sees old data; into pageable memory before returning.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, s: Handle) -> CUresult {
    enqueue_copy(s, Op::DtoH { dst: dst as usize, src, n }, "cuMemcpyDtoHAsync", false)
}

fn dtod(dst: CUdeviceptr, src: CUdeviceptr, n: usize, s: Handle, sync: bool) -> CUresult {
    let dev = {
        let st = state();
        let id = tri!(st.stream(s));
        st.streams[&id].dev
    };
    // Copies within one context stay within one device; cross-device copies
    // must say so (cuMemcpyPeer), which catches a pointer from the wrong device.
    enqueue_copy(s, Op::DtoD { dst_dev: dev, dst, src_dev: dev, src, n }, "cuMemcpyDtoD", sync)
}

/// Synchronous device-to-device copy within the current device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    dtod(dst, src, n, std::ptr::null_mut(), true)
}

/// Asynchronous device-to-device copy within the stream's device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, s: Handle) -> CUresult {
    dtod(dst, src, n, s, false)
}

fn peer(dst: CUdeviceptr, dctx: Handle, src: CUdeviceptr, sctx: Handle, n: usize, s: Handle, sync: bool) -> CUresult {
    let (dd, sd) = {
        let st = state();
        (tri!(context_device(dctx, &st)), tri!(context_device(sctx, &st)))
    };
    enqueue_copy(s, Op::DtoD { dst_dev: dd, dst, src_dev: sd, src, n }, "cuMemcpyPeer", sync)
}

/// Synchronous copy between devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeer(
    dst: CUdeviceptr,
    dctx: Handle,
    src: CUdeviceptr,
    sctx: Handle,
    n: usize,
) -> CUresult {
    peer(dst, dctx, src, sctx, n, std::ptr::null_mut(), true)
}

/// Asynchronous copy between devices, ordered on `s`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: CUdeviceptr,
    dctx: Handle,
    src: CUdeviceptr,
    sctx: Handle,
    n: usize,
    s: Handle,
) -> CUresult {
    peer(dst, dctx, src, sctx, n, s, false)
}

fn memset(dst: CUdeviceptr, value: u32, width: usize, count: usize, s: Handle, sync: bool) -> CUresult {
    enqueue_copy(s, Op::Memset { dst, value, width, count }, "cuMemset", sync)
}

/// Synchronous byte fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: usize) -> CUresult {
    memset(dst, v as u32, 1, n, std::ptr::null_mut(), true)
}

/// Stream-ordered byte fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: usize, s: Handle) -> CUresult {
    memset(dst, v as u32, 1, n, s, false)
}

/// Synchronous 16-bit fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16_v2(dst: CUdeviceptr, v: u16, n: usize) -> CUresult {
    memset(dst, v as u32, 2, n, std::ptr::null_mut(), true)
}

/// Stream-ordered 16-bit fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16Async(dst: CUdeviceptr, v: u16, n: usize, s: Handle) -> CUresult {
    memset(dst, v as u32, 2, n, s, false)
}

/// Synchronous 32-bit fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD32_v2(dst: CUdeviceptr, v: c_uint, n: usize) -> CUresult {
    memset(dst, v, 4, n, std::ptr::null_mut(), true)
}

/// Stream-ordered 32-bit fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD32Async(dst: CUdeviceptr, v: c_uint, n: usize, s: Handle) -> CUresult {
    memset(dst, v, 4, n, s, false)
}

/// "Pinned" host memory: page-aligned host memory, tracked so that frees are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(p: *mut *mut c_void, size: usize, _flags: c_uint) -> CUresult {
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign with a power-of-two alignment and a valid out pointer.
    if unsafe { libc::posix_memalign(&mut out, 4096, size.max(1)) } != 0 {
        return OUT_OF_MEMORY;
    }
    state().pinned.insert(out as usize, size);
    // SAFETY: out pointer supplied by the caller.
    unsafe { *p = out };
    SUCCESS
}

/// See [`cuMemHostAlloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost_v2(p: *mut *mut c_void, size: usize) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemHostAlloc(p, size, 0) }
}

/// Frees pinned host memory from [`cuMemHostAlloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    if state().pinned.remove(&(p as usize)).is_none() {
        return report(INVALID_VALUE, "cuMemFreeHost of a pointer cuMemHostAlloc did not return");
    }
    // SAFETY: allocated by posix_memalign in cuMemHostAlloc and removed from the table once.
    unsafe { libc::free(p) };
    SUCCESS
}

// ---- modules and launches ----------------------------------------------------------

fn load_ptx(m: *mut Handle, text: &[u8]) -> CUresult {
    let dev = tri!(current());
    if text.starts_with(b"\x7fELF") {
        return report(INVALID_IMAGE, "the emulator loads PTX text only, not cubins");
    }
    let Ok(text) = std::str::from_utf8(text) else {
        return report(INVALID_PTX, "PTX is not UTF-8");
    };
    let entries = kernels::ptx_entries(text);
    let mut st = state();
    let h = st.handle();
    st.modules.insert(h, Module { dev, entries });
    // SAFETY: out pointer supplied by the caller.
    unsafe { *m = h as Handle };
    SUCCESS
}

/// Loads a PTX module: its `.entry` names are resolved to host-compiled kernels.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadData(m: *mut Handle, image: *const c_void) -> CUresult {
    if image.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: PTX images are NUL-terminated strings.
    let text = unsafe { CStr::from_ptr(image as *const c_char) };
    load_ptx(m, text.to_bytes())
}

/// See [`cuModuleLoadData`]; flags and JIT options are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    m: *mut Handle,
    image: *const c_void,
    _n: c_uint,
    _opts: *mut c_int,
    _vals: *mut *mut c_void,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuModuleLoadData(m, image) }
}

/// Loads a PTX file.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoad(m: *mut Handle, fname: *const c_char) -> CUresult {
    // SAFETY: a NUL-terminated path.
    let path = unsafe { CStr::from_ptr(fname) }.to_string_lossy().into_owned();
    match std::fs::read(&path) {
        Ok(bytes) => load_ptx(m, &bytes),
        Err(e) => report(FILE_NOT_FOUND, format!("cuModuleLoad {path}: {e}")),
    }
}

/// Unloads a module.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleUnload(m: Handle) -> CUresult {
    let mut st = state();
    if st.modules.remove(&(m as u64)).is_none() {
        return INVALID_HANDLE;
    }
    st.functions.retain(|_, f| f.module != m as u64);
    SUCCESS
}

/// Resolves a PTX entry to the host-compiled kernel of the same name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetFunction(f: *mut Handle, m: Handle, name: *const c_char) -> CUresult {
    // SAFETY: a NUL-terminated kernel name.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    let mut st = state();
    let Some(module) = st.modules.get(&(m as u64)) else {
        return INVALID_HANDLE;
    };
    let dev = module.dev;
    let Some((_, ptx_params)) = module.entries.iter().find(|(n, _)| *n == name) else {
        return report(NOT_FOUND, format!("the module has no entry `{name}`"));
    };
    let Some(k) = kernels::find(&name) else {
        return report(
            NOT_FOUND,
            format!("kernel `{name}` is in the PTX but not compiled into the emulator (rebuild devtensor-emu)"),
        );
    };
    // The PTX and the emulator's build must agree on the signature, or the
    // emulator would unpack the arguments differently from the GPU.
    let host_params: Vec<usize> = KERNELS[k].params().iter().map(|&(size, _)| size).collect();
    if host_params != *ptx_params {
        return report(
            INVALID_PTX,
            format!(
                "kernel `{name}`: the PTX declares parameters of {ptx_params:?} bytes, the emulator's build {host_params:?}; \
                 rebuild devtensor-emu from the same kernel sources"
            ),
        );
    }
    let h = st.handle();
    st.functions.insert(h, Function { module: m as u64, dev, kernel: k });
    // SAFETY: out pointer supplied by the caller.
    unsafe { *f = h as Handle };
    SUCCESS
}

/// Only the thread limit is meaningful; other attributes read 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetAttribute(v: *mut c_int, attrib: c_int, f: Handle) -> CUresult {
    if !state().functions.contains_key(&(f as u64)) {
        return INVALID_HANDLE;
    }
    // SAFETY: out pointer supplied by the caller.
    unsafe { *v = if attrib == 0 { 1024 } else { 0 } };
    SUCCESS
}

/// Accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetAttribute(f: Handle, _attrib: c_int, _v: c_int) -> CUresult {
    if state().functions.contains_key(&(f as u64)) { SUCCESS } else { INVALID_HANDLE }
}

/// Accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetCacheConfig(f: Handle, _c: c_int) -> CUresult {
    if state().functions.contains_key(&(f as u64)) { SUCCESS } else { INVALID_HANDLE }
}

/// Checks the configuration and arguments now, copies the argument values,
/// and queues the launch on the stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchKernel(
    f: Handle,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared_bytes: c_uint,
    s: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let mut st = state();
    let id = tri!(st.stream(s));
    let sdev = st.streams[&id].dev;
    let Some(func) = st.functions.get(&(f as u64)) else {
        return report(INVALID_HANDLE, "unknown CUfunction");
    };
    let (kernel, fdev) = (func.kernel, func.dev);
    let k = &KERNELS[kernel];
    if fdev != sdev {
        return report(
            INVALID_HANDLE,
            format!("kernel {} was loaded on device {fdev} but launched on a stream of device {sdev}", k.name),
        );
    }
    let threads = bx as u64 * by as u64 * bz as u64;
    if gx == 0
        || gy == 0
        || gz == 0
        || bx == 0
        || by == 0
        || bz == 0
        || threads > 1024
        || bz > 64
        || gy > 65535
        || gz > 65535
        || gx > i32::MAX as u32
    {
        return report(
            INVALID_VALUE,
            format!("kernel {}: invalid launch configuration grid ({gx},{gy},{gz}) block ({bx},{by},{bz})", k.name),
        );
    }
    if shared_bytes != 0 {
        return report(
            INVALID_VALUE,
            format!("kernel {}: dynamic shared memory ({shared_bytes} bytes) is outside the kernel contract", k.name),
        );
    }
    if !extra.is_null() {
        return report(NOT_SUPPORTED, "kernel arguments through `extra` are not emulated");
    }
    let layout = k.params();
    if !layout.is_empty() && params.is_null() {
        return report(
            INVALID_VALUE,
            format!("kernel {} takes {} arguments, kernelParams is null", k.name, layout.len()),
        );
    }
    let mut copied = Vec::with_capacity(layout.len());
    for (i, &(size, is_ptr)) in layout.iter().enumerate() {
        // SAFETY: the caller passes one pointer per kernel parameter, each to a value of that parameter's type.
        let bytes = unsafe { std::slice::from_raw_parts(*params.add(i) as *const u8, size) }.to_vec();
        if is_ptr {
            let addr = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
            if addr != 0
                && let Err(m) = memory::translate(&st, sdev, addr, 0)
            {
                return report(INVALID_VALUE, format!("kernel {}, argument {i}: {m}", k.name));
            }
        }
        copied.push(bytes);
    }
    st.enqueue(id, Op::Launch { kernel, dims: [gx, gy, gz, bx, by, bz], params: copied });
    SUCCESS
}

// ---- errors -----------------------------------------------------------------------

fn error_text(code: CUresult) -> (&'static CStr, &'static CStr) {
    match code {
        0 => (c"CUDA_SUCCESS", c"no error"),
        1 => (c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
        2 => (c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
        3 => (c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
        101 => (c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
        200 => (c"CUDA_ERROR_INVALID_IMAGE", c"device kernel image is invalid"),
        201 => (c"CUDA_ERROR_INVALID_CONTEXT", c"invalid device context"),
        218 => (c"CUDA_ERROR_INVALID_PTX", c"a PTX JIT compilation failed"),
        301 => (c"CUDA_ERROR_FILE_NOT_FOUND", c"file not found"),
        400 => (c"CUDA_ERROR_INVALID_HANDLE", c"invalid resource handle"),
        500 => (c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
        600 => (c"CUDA_ERROR_NOT_READY", c"device not ready"),
        700 => (c"CUDA_ERROR_ILLEGAL_ADDRESS", c"an illegal memory access was encountered"),
        719 => (c"CUDA_ERROR_LAUNCH_FAILED", c"unspecified launch failure"),
        801 => (c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
        _ => (c"CUDA_ERROR_UNKNOWN", c"unknown error"),
    }
}

/// Name of an error code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(code: CUresult, s: *mut *const c_char) -> CUresult {
    // SAFETY: out pointer supplied by the caller; the strings are static.
    unsafe { *s = error_text(code).0.as_ptr() };
    SUCCESS
}

/// Description of an error code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(code: CUresult, s: *mut *const c_char) -> CUresult {
    // SAFETY: out pointer supplied by the caller; the strings are static.
    unsafe { *s = error_text(code).1.as_ptr() };
    SUCCESS
}
