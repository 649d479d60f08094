//! The CUDA devices, one type per ordinal: `Cuda<0>`, `Cuda<1>`, ...
//!
//! Each GPU gets, on first use, a context with one stream, the kernels of
//! `kernels/*.cu` compiled by NVRTC (one file per op family, on the first use
//! of that family; the PTX is kept for the other GPUs and the next process,
//! see `kernel_cache.rs`), a cuBLAS handle and a caching allocator. Every operation
//! is queued on the device's stream; reading data back to the host waits for
//! it. Without a driver, a GPU of that ordinal or NVRTC, creating a tensor
//! returns [`Error::DeviceUnavailable`]
//! with the reason; cudarc is never called before the libraries are known
//! to be there, since it panics when one is missing. Moves between two GPUs
//! use the driver's peer copy, without a trip through the host.

pub(crate) mod context;
pub(crate) mod current;
mod kernel_cache;
pub(crate) mod launch;
pub(crate) mod nccl;
pub(crate) mod pinned;
pub(crate) mod transfer;
mod widen;

pub(crate) use widen::{converted, narrowed, narrowed_all, widened};

use super::{Backend, sealed};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use context::{Block, CudaDevice};
use launch::{Strided, elementwise, launch_kernel};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// The CUDA GPU with ordinal `N`, as a type.
///
/// ```
/// use devtensor::{Cuda, Error, Tensor};
/// match Tensor::<Cuda<0>>::try_zeros([2, 2]) {
///     Ok(x) => assert_eq!(x.to_vec(), vec![0.0; 4]),
///     // No driver or no GPU here: the error says which.
///     Err(err) => assert!(matches!(err, Error::DeviceUnavailable { .. })),
/// }
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Cuda<const N: usize>;

impl<const N: usize> fmt::Debug for Cuda<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cuda<{N}>")
    }
}

impl<const N: usize> sealed::Sealed for Cuda<N> {}

impl<const N: usize> Cuda<N> {
    /// Whether this GPU can be used by this program.
    pub fn is_available() -> bool {
        Self::try_init().is_ok()
    }

    /// Checks up front that the GPU can be used, with the reason if not:
    /// no CUDA driver, no GPU with ordinal `N`, or no NVRTC to compile the
    /// kernels with. Initialises the device's context on success.
    pub fn try_init() -> Result<()> {
        context::device(N).map(drop)
    }

    /// Waits until every operation queued on this GPU has finished, like
    /// `torch.cuda.synchronize()`; reports a kernel that failed.
    ///
    /// Not needed for correctness (reading a tensor back waits by itself);
    /// it is for timing, and for surfacing an asynchronous failure at a
    /// chosen point.
    ///
    /// ```
    /// use devtensor::{Cuda, Tensor};
    /// if let Ok(x) = Tensor::<Cuda<0>>::try_ones([1024]) {
    ///     let _y = &x + &x; // queued, not yet run
    ///     Cuda::<0>::synchronize().unwrap();
    /// }
    /// ```
    pub fn synchronize() -> Result<()> {
        Self::device()?.synchronize_all("synchronize")
    }

    /// The device's state, initialised on first use.
    pub(crate) fn device() -> Result<Arc<CudaDevice>> {
        context::device(N)
    }
}

/// The GPU of the operation running on this thread: the device under the
/// CUDA half of devtensor's core, where the ordinal is a run-time value.
///
/// The typed API's `Cuda<N>` is what programs write; its operations run
/// in the core as operations on `AnyCuda`, compiled once inside devtensor
/// for every ordinal, after [`Device::enter`](crate::Device) has made `N`
/// the current GPU of the thread (PyTorch's device guard). Every device
/// check stays in the types of `Cuda<N>`; a program has no reason to name
/// this type, though the `backward` of a custom op on a GPU sees it as its
/// device (its `D` is the core device).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AnyCuda;

impl sealed::Sealed for AnyCuda {}

impl AnyCuda {
    /// The state of the current GPU, initialised on first use. Fails
    /// outside every `Cuda<N>` operation (a tensor of this type made by a
    /// program, not by an operation's core), which has no current GPU.
    pub(crate) fn device() -> Result<Arc<CudaDevice>> {
        match current::try_ordinal() {
            Some(ordinal) => context::device(ordinal),
            None => Err(Error::DeviceUnavailable {
                device: "Cuda<?>".into(),
                reason: "no GPU is current: an operation on the GPUs' core device ran outside every Cuda<N> \
                         operation; use Cuda<N>"
                    .into(),
            }),
        }
    }
}

/// Element storage of a CUDA tensor: a device buffer from the device's
/// caching allocator (none for an empty tensor), its length in elements and
/// the ordinal of the GPU it lives on.
pub struct CudaStorage<E> {
    block: Option<Block>,
    len: usize,
    ordinal: usize,
    _element: PhantomData<E>,
}

impl<E> fmt::Debug for CudaStorage<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaStorage {{ len: {}, device: Cuda<{}> }}", self.len, self.ordinal)
    }
}

impl<E: Element> CudaStorage<E> {
    /// A new storage of `len` elements whose contents are not yet written.
    pub(crate) fn alloc(device: &Arc<CudaDevice>, op: &'static str, len: usize) -> Result<Self> {
        Self::alloc_in(device, op, len, false)
    }

    /// Like [`alloc`](Self::alloc), for the copy stream to write into.
    pub(crate) fn alloc_for_transfer(device: &Arc<CudaDevice>, op: &'static str, len: usize) -> Result<Self> {
        Self::alloc_in(device, op, len, true)
    }

    fn alloc_in(device: &Arc<CudaDevice>, op: &'static str, len: usize, for_transfer: bool) -> Result<Self> {
        // Checked: a wrapped byte count would allocate a small buffer that
        // the next kernel writes past.
        let bytes = crate::error::checked_bytes::<E>(op, || device.name.clone(), len)?;
        let block = match (len, for_transfer) {
            (0, _) => None,
            (_, false) => Some(device.alloc(op, bytes)?),
            (_, true) => Some(device.alloc_for_transfer(op, bytes)?),
        };
        let ordinal = device.ctx.ordinal();
        Ok(CudaStorage { block, len, ordinal, _element: PhantomData })
    }

    /// Device address of element `index`, for a kernel argument. An empty
    /// storage has no buffer; kernels are never launched on one, but the
    /// argument still needs a value, so it is 0.
    pub(crate) fn ptr_at(&self, index: usize) -> u64 {
        match &self.block {
            Some(block) => block.ptr + (index * size_of::<E>()) as u64,
            None => 0,
        }
    }

    /// Device address of the first element.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr_at(0)
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes host values into the start of the storage (queued on the stream).
    pub(crate) fn write(&mut self, device: &CudaDevice, op: &'static str, values: &[E]) -> Result<()> {
        if values.len() > self.len {
            return Err(device.error(op, format_args!("{} values do not fit {} elements", values.len(), self.len)));
        }
        if let Some(block) = &mut self.block
            && !values.is_empty()
        {
            let bytes = as_bytes(values);
            let mut view = block.slice_mut().slice_mut(0..bytes.len());
            device.stream.memcpy_htod(bytes, &mut view).map_err(|e| device.error(op, e))?;
        }
        Ok(())
    }

    /// Copies `range` of the elements to the host, waiting for queued work.
    pub(crate) fn read(&self, device: &CudaDevice, op: &'static str, range: std::ops::Range<usize>) -> Result<Vec<E>> {
        // A recycled host buffer: fresh pages cost a fault each on first touch.
        let mut out = crate::backend::cpu::output_buffer::<E>(op, range.len())?;
        if let Some(block) = &self.block
            && !range.is_empty()
        {
            let size = size_of::<E>();
            let view = block.slice().slice(range.start * size..range.end * size);
            device.stream.memcpy_dtoh(&view, as_bytes_mut(&mut out)).map_err(|e| device.error(op, e))?;
        }
        device.synchronize(op)?;
        Ok(out)
    }
}

/// The bytes of a slice of elements, for the driver's copies.
fn as_bytes<E: Element>(data: &[E]) -> &[u8] {
    // SAFETY: every element type (f32, f64, i64, u8) is a plain number with
    // no padding, so its memory is `size_of_val(data)` initialised bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), size_of_val(data)) }
}

/// The bytes of a mutable slice of elements, for copies from the device.
fn as_bytes_mut<E: Element>(data: &mut [E]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; moreover every bit pattern is a valid value
    // of these types, so any bytes the device writes leave valid elements.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), size_of_val(data)) }
}

/// A dense copy of the elements `layout` selects, as the kernel
/// `copy_strided_<T>` (or `copy_cast_<S>_to_<T>`) makes it.
pub(crate) fn copy_into<E: Element, T: Element>(
    device: &Arc<CudaDevice>,
    op: &'static str,
    src: &CudaStorage<E>,
    layout: &Layout,
) -> Result<CudaStorage<T>> {
    let n = layout.elem_count();
    let mut out = CudaStorage::<T>::alloc(device, op, n)?;
    if n == 0 {
        return Ok(out);
    }
    if let (true, Some(range), Some(src_block), Some(out_block)) =
        (E::DTYPE == T::DTYPE, layout.contiguous_range(), &src.block, &mut out.block)
    {
        // Already dense: a plain device-to-device copy, no kernel.
        let size = size_of::<E>();
        let from = src_block.slice().slice(range.start * size..range.end * size);
        let mut to = out_block.slice_mut().slice_mut(0..n * size);
        device.stream.memcpy_dtod(&from, &mut to).map_err(|e| device.error(op, e))?;
        return Ok(out);
    }
    let name = match E::DTYPE == T::DTYPE {
        true => format!("copy_strided_{}", E::DTYPE.name()),
        false => format!("copy_cast_{}_to_{}", E::DTYPE.name(), T::DTYPE.name()),
    };
    let geo = Strided::new(device, op, layout.dims(), [layout.strides()], [layout.offset()])?;
    launch_kernel!(device, op, "copy", name, elementwise(n);
        n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], src.ptr(), out.ptr())?;
    Ok(out)
}

/// The device address of a dense copy of the elements `layout` selects: the
/// storage itself when the layout is contiguous, else a new copy, which is
/// returned too so that it lives until the caller's kernels are queued.
pub(crate) fn dense_ptr<E: Element>(
    device: &Arc<CudaDevice>,
    op: &'static str,
    x: &CudaStorage<E>,
    layout: &Layout,
) -> Result<(Option<CudaStorage<E>>, u64)> {
    match layout.contiguous_range() {
        Some(range) => Ok((None, x.ptr_at(range.start))),
        None => {
            let copy = copy_into::<E, E>(device, op, x, layout)?;
            let ptr = copy.ptr();
            Ok((Some(copy), ptr))
        }
    }
}

impl Backend for AnyCuda {
    type Storage<E: Element> = CudaStorage<E>;

    fn name() -> String {
        current::try_ordinal().map_or_else(|| "Cuda<?>".into(), |n| format!("Cuda<{n}>"))
    }

    fn cuda_ordinal() -> Option<usize> {
        Some(current::ordinal())
    }

    fn ordinal_of<E: Element>(storage: &CudaStorage<E>) -> Option<usize> {
        Some(storage.ordinal)
    }

    fn storage_from_vec<E: Element>(data: Vec<E>) -> Result<CudaStorage<E>> {
        Self::storage_from_slice(&data)
    }

    fn storage_from_slice<E: Element>(data: &[E]) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let mut out = CudaStorage::alloc(&device, "to", data.len())?;
        out.write(&device, "to", data)?;
        Ok(out)
    }

    fn storage_full<E: Element>(op: &'static str, len: usize, value: E) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let out = CudaStorage::alloc(&device, op, len)?;
        if len > 0 {
            let name = format!("copy_fill_{}", E::DTYPE.name());
            launch_kernel!(device, op, "copy", name, elementwise(len); len, launch::kernel_scalar(value), out.ptr())?;
        }
        Ok(out)
    }

    fn storage_to_vec<E: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<Vec<E>> {
        let device = context::device(storage.ordinal)?;
        match layout.contiguous_range() {
            Some(range) => storage.read(&device, "to_vec", range),
            None => match copy_into::<E, E>(&device, "to_vec", storage, layout) {
                Ok(dense) => dense.read(&device, "to_vec", 0..dense.len()),
                // More dimensions than the kernels address: gather on the
                // host instead, so that any tensor can at least be moved.
                Err(Error::Shape { .. }) if layout.dims().len() > launch::MAX_RANK => {
                    let all = storage.read(&device, "to_vec", 0..storage.len())?;
                    crate::backend::Cpu::storage_to_vec(&crate::backend::cpu::CpuStorage::from_vec(all), layout)
                }
                Err(e) => Err(e),
            },
        }
    }

    fn storage_len<E: Element>(storage: &CudaStorage<E>) -> usize {
        storage.len
    }

    fn copy_strided<E: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<E>> {
        copy_into(&context::device(storage.ordinal)?, "contiguous", storage, layout)
    }

    fn cast<E: Element, T: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<T>> {
        copy_into(&context::device(storage.ordinal)?, "cast", storage, layout)
    }

    fn storage_from_device<S: Backend, E: Element>(
        storage: &S::Storage<E>,
        layout: &Layout,
    ) -> Result<Option<CudaStorage<E>>> {
        // Every `Cuda<M>` shares the storage type, so a downcast tells a
        // CUDA source from a CPU one.
        let any: &dyn std::any::Any = storage;
        let Some(src) = any.downcast_ref::<CudaStorage<E>>() else {
            return Ok(None);
        };
        peer_copy(&context::device(src.ordinal)?, src, layout, &Self::device()?).map(Some)
    }
}

impl<const N: usize> Backend for Cuda<N> {
    type Storage<E: Element> = CudaStorage<E>;

    fn name() -> String {
        format!("Cuda<{N}>")
    }

    fn cuda_ordinal() -> Option<usize> {
        Some(N)
    }

    fn storage_from_vec<E: Element>(data: Vec<E>) -> Result<CudaStorage<E>> {
        current::enter(N, || AnyCuda::storage_from_vec(data))
    }

    fn storage_from_slice<E: Element>(data: &[E]) -> Result<CudaStorage<E>> {
        current::enter(N, || AnyCuda::storage_from_slice(data))
    }

    fn storage_full<E: Element>(op: &'static str, len: usize, value: E) -> Result<CudaStorage<E>> {
        current::enter(N, || AnyCuda::storage_full(op, len, value))
    }

    fn storage_to_vec<E: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<Vec<E>> {
        current::enter(N, || AnyCuda::storage_to_vec(storage, layout))
    }

    fn storage_len<E: Element>(storage: &CudaStorage<E>) -> usize {
        storage.len
    }

    fn copy_strided<E: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<E>> {
        current::enter(N, || AnyCuda::copy_strided(storage, layout))
    }

    fn cast<E: Element, T: Element>(storage: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<T>> {
        current::enter(N, || AnyCuda::cast(storage, layout))
    }

    fn storage_from_device<S: Backend, E: Element>(
        storage: &S::Storage<E>,
        layout: &Layout,
    ) -> Result<Option<CudaStorage<E>>> {
        current::enter(N, || AnyCuda::storage_from_device::<S, E>(storage, layout))
    }
}

/// Copies the elements `layout` selects from one GPU to another with the
/// driver's peer copy, which goes over NVLink or PCIe directly when the two
/// GPUs can access each other, and is staged by the driver otherwise: the
/// asynchronous transfer, waited for. The caller holds `src` meanwhile.
fn peer_copy<E: Element>(
    from: &Arc<CudaDevice>,
    src: &CudaStorage<E>,
    layout: &Layout,
    to: &Arc<CudaDevice>,
) -> Result<CudaStorage<E>> {
    let (out, fence) = transfer::peer(from, "to", src, layout, Box::new(()), to)?;
    fence.wait("to")?;
    Ok(out)
}
