//! One CUDA context per ordinal, created on first use, with its stream, its
//! compiled kernel modules, its cuBLAS handle and its caching allocator.

use crate::error::{Error, Result};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DriverError, sys};
use cudarc::nvrtc::{CompileOptions, Ptx};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The kernel files, embedded so that a deployed binary needs no source tree.
/// NVRTC has no file system at run time, so `common.cuh` is prepended to
/// each file's text; the files include it only when it is not defined yet.
const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// The op families' kernel files, by the name the backend asks for.
fn family_source(family: &str) -> Option<&'static str> {
    Some(match family {
        "binary" => include_str!("../../../kernels/binary.cu"),
        "compare" => include_str!("../../../kernels/compare.cu"),
        "copy" => include_str!("../../../kernels/copy.cu"),
        "index" => include_str!("../../../kernels/index.cu"),
        "reduce" => include_str!("../../../kernels/reduce.cu"),
        "softmax" => include_str!("../../../kernels/softmax.cu"),
        "unary" => include_str!("../../../kernels/unary.cu"),
        _ => return None,
    })
}

/// Everything the backend keeps for one GPU.
pub(crate) struct CudaDevice {
    /// The device as written in a program, `"Cuda<N>"`, for error messages.
    pub(crate) name: String,
    /// The primary context of the GPU.
    pub(crate) ctx: Arc<CudaContext>,
    /// The one stream every operation on this device is queued on, so that
    /// operations are ordered without events and a buffer returned to the
    /// cache can be reused by the next operation at once.
    pub(crate) stream: Arc<CudaStream>,
    /// `compute_XY` of the device, for NVRTC.
    arch: String,
    /// Loaded modules, by family; each is compiled on the first use of its family.
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    /// Kernels already looked up, by name.
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// The cuBLAS handle, created on the first matrix product.
    blas: OnceLock<std::result::Result<CudaBlas, String>>,
    /// Freed buffers, by size class in bytes.
    pool: Mutex<Pool>,
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
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(slice) = self.slice.take() {
            self.device.give_back(slice);
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
    let (major, minor) = ctx.compute_capability().map_err(driver)?;
    let stream = ctx.default_stream();
    let device = Arc::new(CudaDevice {
        name: format!("Cuda<{ordinal}>"),
        ctx,
        stream,
        arch: format!("compute_{major}{minor}"),
        modules: Mutex::new(HashMap::new()),
        functions: Mutex::new(HashMap::new()),
        blas: OnceLock::new(),
        pool: Mutex::new(Pool::default()),
    });
    devices.insert(ordinal, device.clone());
    Ok(device)
}

impl CudaDevice {
    /// Wraps a driver error into one naming the operation and the device.
    pub(crate) fn error(&self, op: &'static str, what: impl std::fmt::Display) -> Error {
        Error::Driver { op, device: self.name.clone(), reason: what.to_string() }
    }

    /// The kernel `name` of the file `family`, compiling and loading the
    /// file on its first use on this device.
    pub(crate) fn function(&self, op: &'static str, family: &'static str, name: &str) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(name) {
            return Ok(f.clone());
        }
        let module = self.module(op, family)?;
        let f = module
            .load_function(name)
            .map_err(|e| self.error(op, format_args!("cannot find kernel `{name}` in kernels/{family}.cu: {e}")))?;
        lock(&self.functions).insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn module(&self, op: &'static str, family: &'static str) -> Result<Arc<CudaModule>> {
        let mut modules = lock(&self.modules);
        if let Some(m) = modules.get(family) {
            return Ok(m.clone());
        }
        let source = family_source(family).ok_or_else(|| self.error(op, format_args!("no kernel file `{family}`")))?;
        let text = format!("{COMMON}\n{source}");
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture={}", self.arch), "--std=c++17".into()],
            name: Some(format!("{family}.cu")),
            ..Default::default()
        };
        let ptx: Ptx = cudarc::nvrtc::compile_ptx_with_opts(text, options)
            .map_err(|e| self.error(op, format_args!("NVRTC could not compile kernels/{family}.cu: {e}")))?;
        let module = self
            .ctx
            .load_module(ptx)
            .map_err(|e| self.error(op, format_args!("cannot load kernels/{family}.cu: {e}")))?;
        modules.insert(family, module.clone());
        Ok(module)
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

    /// A buffer of at least `bytes` bytes, from the cache when one of its
    /// size class is free. When the driver is out of memory, the cache is
    /// emptied and the allocation tried once more.
    pub(crate) fn alloc(self: &Arc<Self>, op: &'static str, bytes: usize) -> Result<Block> {
        let class = size_class(bytes);
        let cached = {
            let mut pool = lock(&self.pool);
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
                            let free = self.ctx.mem_get_info().map(|(free, _)| free).unwrap_or(0);
                            return Err(Error::OutOfMemory { device: self.name.clone(), requested: bytes, free });
                        }
                        Err(e) => return Err(self.error(op, format_args!("cannot allocate {bytes} bytes: {e}"))),
                    }
                }
                Err(e) => return Err(self.error(op, format_args!("cannot allocate {bytes} bytes: {e}"))),
            },
        };
        let (ptr, _sync) = slice.device_ptr(&self.stream);
        drop(_sync);
        Ok(Block { slice: Some(slice), ptr, device: self.clone() })
    }

    fn alloc_fresh(&self, class: usize) -> std::result::Result<CudaSlice<u8>, DriverError> {
        // SAFETY: the bytes are uninitialised, and every user of a block
        // writes it (a copy or a kernel's dense output) before reading it.
        unsafe { self.stream.alloc::<u8>(class) }
    }

    fn give_back(&self, slice: CudaSlice<u8>) {
        let class = slice.len();
        let mut pool = lock(&self.pool);
        if pool.cached_bytes + class <= POOL_MAX_BYTES {
            pool.cached_bytes += class;
            pool.free.entry(class).or_default().push(slice);
        }
        // Otherwise `slice` drops here and goes back to the driver.
    }

    /// Frees every cached buffer and waits for the frees to happen.
    fn empty_cache(&self, op: &'static str) -> Result<()> {
        let freed = std::mem::take(&mut *lock(&self.pool));
        drop(freed);
        // Frees are stream-ordered: they take effect once the stream gets there.
        self.stream.synchronize().map_err(|e| self.error(op, e))
    }

    /// Waits for every queued operation, reporting a failed kernel.
    pub(crate) fn synchronize(&self, op: &'static str) -> Result<()> {
        self.stream.synchronize().map_err(|e| self.error(op, e))
    }

    /// Waits for every stream of the device: operations and transfers.
    pub(crate) fn synchronize_all(&self, op: &'static str) -> Result<()> {
        self.synchronize(op)
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
