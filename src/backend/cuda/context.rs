//! One CUDA context per ordinal, created on first use, with its streams, its
//! compiled kernel modules, its cuBLAS handle and its caching allocator.
//!
//! Two streams per device: every operation goes on the compute stream, in
//! program order; asynchronous transfers go on a copy stream, so that they
//! overlap computation, and meet the compute stream through events
//! (`backend/cuda/transfer.rs`). Ordering between the two is done by hand,
//! so cudarc's per-buffer event tracking is switched off.

use super::kernel_cache;
use crate::error::{Error, Result};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DriverError, sys,
};
use cudarc::nvrtc::CompileOptions;
use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The kernel files, embedded so that a deployed binary needs no source tree.
/// NVRTC has no file system at run time, so `common.cuh` is prepended to
/// each file's text; the files include it only when it is not defined yet.
const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// The op families' kernel files, by the name the backend asks for.
fn family_source(family: &str) -> Option<&'static str> {
    Some(match family {
        "attention" => include_str!("../../../kernels/attention.cu"),
        "binary" => include_str!("../../../kernels/binary.cu"),
        "compare" => include_str!("../../../kernels/compare.cu"),
        "conv" => include_str!("../../../kernels/conv.cu"),
        "recurrent" => include_str!("../../../kernels/recurrent.cu"),
        "copy" => include_str!("../../../kernels/copy.cu"),
        "index" => include_str!("../../../kernels/index.cu"),
        "reduce" => include_str!("../../../kernels/reduce.cu"),
        "softmax" => include_str!("../../../kernels/softmax.cu"),
        "unary" => include_str!("../../../kernels/unary.cu"),
        _ => return None,
    })
}

/// A CUDA source file the backend compiles: one of `kernels/*.cu`, or a
/// custom op's own source, known by the op's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelFile {
    Family(&'static str),
    Custom(TypeId),
}

/// Everything the backend keeps for one GPU.
pub(crate) struct CudaDevice {
    /// The device as written in a program, `"Cuda<N>"`, for error messages.
    pub(crate) name: String,
    /// The primary context of the GPU.
    pub(crate) ctx: Arc<CudaContext>,
    /// The stream every operation on this device is queued on, so that
    /// operations are ordered without events and a buffer returned to the
    /// cache can be reused by the next operation at once.
    pub(crate) stream: Arc<CudaStream>,
    /// The stream of asynchronous transfers, created on the first one.
    copy_stream: OnceLock<Arc<CudaStream>>,
    /// `compute_XY` of the device, for NVRTC.
    arch: String,
    /// Loaded modules; each is compiled on the first use of one of its kernels.
    modules: Mutex<HashMap<KernelFile, Arc<CudaModule>>>,
    /// Kernels already looked up, by name.
    functions: Mutex<HashMap<KernelFile, HashMap<String, CudaFunction>>>,
    /// The cuBLAS handle, created on the first matrix product.
    blas: OnceLock<std::result::Result<CudaBlas, String>>,
    /// Freed buffers, by size class in bytes.
    pool: Mutex<Pool>,
    /// Freed buffers that the copy stream may write into: only those whose
    /// last use on the compute stream is known to be over.
    transfer_pool: Mutex<Pool>,
    /// What must outlive work still queued on a stream: each entry is
    /// dropped once its event has completed (see [`CudaDevice::defer`]).
    deferred: Mutex<Vec<(CudaEvent, Box<dyn Any + Send>)>>,
}

/// The caching allocator's free lists.
#[derive(Default)]
struct Pool {
    free: BTreeMap<usize, Vec<CudaSlice<u8>>>,
    cached_bytes: usize,
}

/// Most bytes the cache keeps per device; buffers freed beyond that go back
/// to the driver.
const POOL_MAX_BYTES: usize = 4 << 30;

/// The size class of an allocation of `bytes`: a power of two up to 32 MiB,
/// then a multiple of 2 MiB, so that a buffer serves any request of its class
/// and the waste stays bounded.
pub(crate) fn size_class(bytes: usize) -> usize {
    const SMALL: usize = 32 << 20;
    const STEP: usize = 2 << 20;
    if bytes <= 256 {
        256
    } else if bytes <= SMALL {
        bytes.next_power_of_two()
    } else {
        bytes.div_ceil(STEP) * STEP
    }
}

/// A device buffer of one size class. Dropping it returns it to the cache.
pub(crate) struct Block {
    slice: Option<CudaSlice<u8>>,
    /// The raw device address, passed to kernels as a pointer argument.
    pub(crate) ptr: u64,
    device: Arc<CudaDevice>,
    /// Whether the block came from the transfer pool and goes back there.
    for_transfer: bool,
}

impl Drop for Block {
    fn drop(&mut self) {
        let Some(slice) = self.slice.take() else { return };
        if !self.for_transfer {
            // Kernels still queued on the compute stream may read the block;
            // the next compute-stream user comes after them anyway.
            self.device.give_back(slice);
            return;
        }
        // The copy stream is not ordered after those kernels, so the block
        // rejoins the transfer pool only once the compute stream has passed
        // this point.
        let device = self.device.clone();
        let back = ReturnToTransferPool { slice: Some(slice), device: device.clone() };
        if let Err(unreturned) = device.defer(&device.stream, Box::new(back)) {
            // No event could be recorded: wait instead (this drop is the
            // only place left to do it).
            let _ = device.stream.synchronize();
            drop(unreturned);
        }
    }
}

/// A transfer-pool buffer on its way back to the pool; see [`Block`]'s drop.
struct ReturnToTransferPool {
    slice: Option<CudaSlice<u8>>,
    device: Arc<CudaDevice>,
}

impl Drop for ReturnToTransferPool {
    fn drop(&mut self) {
        if let Some(slice) = self.slice.take() {
            self.device.give_back_to(&self.device.transfer_pool, slice);
        }
    }
}

/// The registry: one entry per ordinal that has been initialised.
static DEVICES: Mutex<BTreeMap<usize, Arc<CudaDevice>>> = Mutex::new(BTreeMap::new());

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind
    // (maps of buffers and handles), which stays valid.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn unavailable(ordinal: usize, reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable { device: format!("Cuda<{ordinal}>"), reason: reason.into() }
}

/// The device with `ordinal`, initialised on first use.
///
/// The libraries are looked for *before* any cudarc call, because cudarc
/// panics when a library it needs cannot be loaded.
pub(crate) fn device(ordinal: usize) -> Result<Arc<CudaDevice>> {
    let mut devices = lock(&DEVICES);
    if let Some(device) = devices.get(&ordinal) {
        return Ok(device.clone());
    }
    // Miri cannot call foreign code, `dlopen` included: under it every GPU
    // (and page-locked memory, allocated through `Cuda<0>`) is unavailable.
    if cfg!(miri) {
        return Err(unavailable(ordinal, "Miri cannot load the CUDA driver"));
    }
    // SAFETY: only tries to dlopen the driver library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(unavailable(
            ordinal,
            "no CUDA driver was found (libcuda.so is not on the library search path); \
             run on `Cpu`, or install the NVIDIA driver",
        ));
    }
    // SAFETY: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(unavailable(
            ordinal,
            "NVRTC was not found (libnvrtc.so.13 is not on the library search path), \
             so the kernels cannot be compiled; install the CUDA 13 NVRTC library",
        ));
    }
    let driver = |e: DriverError| unavailable(ordinal, format!("the CUDA driver failed to start: {e}"));
    cudarc::driver::result::init().map_err(driver)?;
    let count = cudarc::driver::result::device::get_count().map_err(driver)?;
    if ordinal >= count.max(0) as usize {
        return Err(unavailable(
            ordinal,
            format!("no GPU with ordinal {ordinal}: the driver reports {count} device(s)"),
        ));
    }
    let ctx = CudaContext::new(ordinal).map_err(driver)?;
    // SAFETY: no buffer exists in this context yet, and the backend orders
    // its two streams itself: the copy stream writes only into buffers no
    // queued compute work uses (the transfer pool), waits for an event of
    // the compute stream before it reads a tensor, and the compute stream
    // waits for a transfer's event before it uses the result (`join`).
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx.compute_capability().map_err(driver)?;
    // A stream of our own rather than the legacy default stream, which
    // would serialise with the copy stream and forbid any overlap.
    let stream = ctx.new_stream().map_err(driver)?;
    let device = Arc::new(CudaDevice {
        name: format!("Cuda<{ordinal}>"),
        ctx,
        stream,
        arch: format!("compute_{major}{minor}"),
        modules: Mutex::new(HashMap::new()),
        functions: Mutex::new(HashMap::new()),
        blas: OnceLock::new(),
        pool: Mutex::new(Pool::default()),
        transfer_pool: Mutex::new(Pool::default()),
        deferred: Mutex::new(Vec::new()),
        copy_stream: OnceLock::new(),
    });
    devices.insert(ordinal, device.clone());
    Ok(device)
}

impl CudaDevice {
    /// Whether the device has the tensor cores' `mma.sync` products of the
    /// half types (compute capability 8.0 or later).
    pub(crate) fn tensor_cores(&self) -> bool {
        self.arch.strip_prefix("compute_").and_then(|cc| cc.parse::<u32>().ok()).is_some_and(|cc| cc >= 80)
    }

    /// Wraps a driver error into one naming the operation and the device.
    pub(crate) fn error(&self, op: &'static str, what: impl std::fmt::Display) -> Error {
        Error::Driver { op, device: self.name.clone(), reason: what.to_string() }
    }

    /// The kernel `name` of the file `family`, compiling and loading the
    /// file on its first use on this device.
    pub(crate) fn function(&self, op: &'static str, family: &'static str, name: &str) -> Result<CudaFunction> {
        self.function_in(op, KernelFile::Family(family), name, || {
            family_source(family).map(|source| (format!("kernels/{family}.cu"), source))
        })
    }

    /// The kernel `name` of a custom op's CUDA `source` (`UnaryOp::KERNELS`),
    /// compiled on its first use on this device. `op_type` tells ops apart
    /// even where two share a name.
    pub(crate) fn custom_function(
        &self,
        op: &'static str,
        op_type: TypeId,
        source: &'static str,
        name: &str,
    ) -> Result<CudaFunction> {
        self.function_in(op, KernelFile::Custom(op_type), name, || {
            Some((format!("the CUDA source of op `{op}`"), source))
        })
    }

    fn function_in(
        &self,
        op: &'static str,
        file: KernelFile,
        name: &str,
        source: impl FnOnce() -> Option<(String, &'static str)>,
    ) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(&file).and_then(|functions| functions.get(name)) {
            return Ok(f.clone());
        }
        let (module, what) = self.module(op, file, source)?;
        let f = module
            .load_function(name)
            .map_err(|e| self.error(op, format_args!("cannot find kernel `{name}` in {what}: {e}")))?;
        lock(&self.functions).entry(file).or_default().insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// The loaded module of `file`, and how to name it in messages.
    fn module(
        &self,
        op: &'static str,
        file: KernelFile,
        source: impl FnOnce() -> Option<(String, &'static str)>,
    ) -> Result<(Arc<CudaModule>, String)> {
        let Some((what, source)) = source() else {
            return Err(self.error(op, format_args!("no kernel file for `{file:?}`")));
        };
        let mut modules = lock(&self.modules);
        if let Some(m) = modules.get(&file) {
            return Ok((m.clone(), what));
        }
        let text = format!("{COMMON}\n{source}");
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture={}", self.arch), "--std=c++17".into()],
            name: Some(match file {
                KernelFile::Family(family) => format!("{family}.cu"),
                KernelFile::Custom(_) => format!("{op}.cu"),
            }),
            ..Default::default()
        };
        let ptx = kernel_cache::compile(&text, options)
            .map_err(|e| self.error(op, format_args!("NVRTC could not compile {what}: {e}")))?;
        let module = self.ctx.load_module(ptx).map_err(|e| self.error(op, format_args!("cannot load {what}: {e}")))?;
        modules.insert(file, module.clone());
        Ok((module, what))
    }

    /// The cuBLAS handle of this device, bound to its stream.
    pub(crate) fn blas(&self) -> Result<&CudaBlas> {
        let blas = self.blas.get_or_init(|| {
            // SAFETY: only tries to dlopen cuBLAS; cudarc panics if it is
            // missing when a handle is created, so look first.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err("cuBLAS was not found (libcublas.so is not on the library search path)".into());
            }
            CudaBlas::new(self.stream.clone()).map_err(|e| format!("cannot create a cuBLAS handle: {e}"))
        });
        match blas {
            Ok(blas) => Ok(blas),
            Err(reason) => Err(Error::DeviceUnavailable { device: self.name.clone(), reason: reason.clone() }),
        }
    }

    /// A buffer of at least `bytes` bytes for the compute stream, from the
    /// cache when one of its size class is free. When the driver is out of
    /// memory, the cache is emptied and the allocation tried once more.
    pub(crate) fn alloc(self: &Arc<Self>, op: &'static str, bytes: usize) -> Result<Block> {
        self.alloc_from(op, bytes, false)
    }

    /// A buffer the copy stream may write into at once: no work queued on
    /// the compute stream uses it. Dropping it returns it to the transfer
    /// pool once the compute stream is done with it.
    pub(crate) fn alloc_for_transfer(self: &Arc<Self>, op: &'static str, bytes: usize) -> Result<Block> {
        self.alloc_from(op, bytes, true)
    }

    fn alloc_from(self: &Arc<Self>, op: &'static str, bytes: usize, for_transfer: bool) -> Result<Block> {
        self.reap_deferred();
        let class = size_class(bytes);
        let pool = if for_transfer { &self.transfer_pool } else { &self.pool };
        let cached = {
            let mut pool = lock(pool);
            let slice = pool.free.get_mut(&class).and_then(Vec::pop);
            if slice.is_some() {
                pool.cached_bytes -= class;
            }
            slice
        };
        let slice = match cached {
            Some(slice) => slice,
            None => match self.alloc_fresh(class) {
                Ok(slice) => slice,
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                    self.empty_cache(op)?;
                    match self.alloc_fresh(class) {
                        Ok(slice) => slice,
                        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                            let free = self.ctx.mem_get_info().map(|(free, _)| free).ok();
                            return Err(Error::OutOfMemory { op, device: self.name.clone(), requested: bytes, free });
                        }
                        Err(e) => return Err(self.error(op, format_args!("cannot allocate {bytes} bytes: {e}"))),
                    }
                }
                Err(e) => return Err(self.error(op, format_args!("cannot allocate {bytes} bytes: {e}"))),
            },
        };
        let (ptr, _sync) = slice.device_ptr(&self.stream);
        drop(_sync);
        Ok(Block { slice: Some(slice), ptr, device: self.clone(), for_transfer })
    }

    fn alloc_fresh(&self, class: usize) -> std::result::Result<CudaSlice<u8>, DriverError> {
        // SAFETY: the bytes are uninitialised, and every user of a block
        // writes it (a copy or a kernel's dense output) before reading it.
        unsafe { self.stream.alloc::<u8>(class) }
    }

    fn give_back(&self, slice: CudaSlice<u8>) {
        self.give_back_to(&self.pool, slice);
    }

    fn give_back_to(&self, pool: &Mutex<Pool>, slice: CudaSlice<u8>) {
        let class = slice.len();
        let mut pool = lock(pool);
        if pool.cached_bytes + class <= POOL_MAX_BYTES {
            pool.cached_bytes += class;
            pool.free.entry(class).or_default().push(slice);
        }
        // Otherwise `slice` drops here and goes back to the driver.
    }

    /// Frees every cached buffer and waits for the frees to happen.
    fn empty_cache(&self, op: &'static str) -> Result<()> {
        self.synchronize_all(op)?;
        let freed = (std::mem::take(&mut *lock(&self.pool)), std::mem::take(&mut *lock(&self.transfer_pool)));
        drop(freed);
        // Frees are stream-ordered: they take effect once the stream gets there.
        self.stream.synchronize().map_err(|e| self.error(op, e))
    }

    /// Waits for every queued operation, reporting a failed kernel.
    pub(crate) fn synchronize(&self, op: &'static str) -> Result<()> {
        self.stream.synchronize().map_err(|e| self.error(op, e))
    }

    /// Waits for every stream of the device, operations and transfers, and
    /// drops what was kept alive for them.
    pub(crate) fn synchronize_all(&self, op: &'static str) -> Result<()> {
        if let Some(copy) = self.copy_stream.get() {
            copy.synchronize().map_err(|e| self.error(op, e))?;
        }
        self.synchronize(op)?;
        self.reap_deferred();
        Ok(())
    }

    /// The copy stream, created on first use.
    pub(crate) fn copy_stream(&self, op: &'static str) -> Result<&Arc<CudaStream>> {
        if let Some(stream) = self.copy_stream.get() {
            return Ok(stream);
        }
        let stream = self.ctx.new_stream().map_err(|e| self.error(op, format_args!("cannot create a stream: {e}")))?;
        Ok(self.copy_stream.get_or_init(|| stream))
    }

    /// A new event recorded on `stream` (a stream of this device): it
    /// completes once the stream has run everything queued so far.
    pub(crate) fn record(&self, op: &'static str, stream: &CudaStream) -> Result<CudaEvent> {
        stream.record_event(None).map_err(|e| self.error(op, format_args!("cannot record an event: {e}")))
    }

    /// Keeps `payload` alive until `stream` (of this device) has run
    /// everything queued on it so far, then drops it. Gives the payload
    /// back when no event can be recorded.
    pub(crate) fn defer(
        &self,
        stream: &CudaStream,
        payload: Box<dyn Any + Send>,
    ) -> std::result::Result<(), Box<dyn Any + Send>> {
        match stream.record_event(None) {
            Ok(event) => {
                self.defer_until(event, payload);
                Ok(())
            }
            Err(_) => Err(payload),
        }
    }

    /// Keeps `payload` alive until `event` completes, then drops it.
    pub(crate) fn defer_until(&self, event: CudaEvent, payload: Box<dyn Any + Send>) {
        lock(&self.deferred).push((event, payload));
    }

    /// Drops the deferred payloads whose events have completed. Called on
    /// every allocation, so buffers come back without a synchronisation.
    fn reap_deferred(&self) {
        let done: Vec<(CudaEvent, Box<dyn Any + Send>)> = {
            let mut deferred = lock(&self.deferred);
            if deferred.is_empty() {
                return;
            }
            // A failed query counts as done: the error resurfaces at the
            // next synchronisation, and keeping the payload would leak it.
            let (done, pending) = std::mem::take(&mut *deferred)
                .into_iter()
                .partition(|(event, _)| event.try_is_complete().unwrap_or(true));
            *deferred = pending;
            done
        };
        // Dropped outside the lock: a payload's drop may defer again.
        drop(done);
    }
}

impl Block {
    /// The slice, for cudarc's copies.
    pub(crate) fn slice(&self) -> &CudaSlice<u8> {
        self.slice.as_ref().expect("a live block holds its slice")
    }

    /// The slice, for cudarc's copies into it.
    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        self.slice.as_mut().expect("a live block holds its slice")
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_the_request() {
        for bytes in [0, 1, 255, 256, 257, 4096, 5000, (32 << 20) - 1, 32 << 20, (32 << 20) + 1, 100 << 20] {
            let class = size_class(bytes);
            assert!(class >= bytes && class >= 256, "{bytes} -> {class}");
            assert_eq!(size_class(class), class, "a class is its own class");
        }
    }
}
