//! Kernel launches: launch shapes, the strided-operand arrays the kernels
//! read (see `kernels/common.cuh`), and the macro that passes arguments.

use super::CudaStorage;
use super::context::{Block, CudaDevice};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape};
use cudarc::driver::LaunchConfig;
use std::sync::Arc;

/// Threads per block. A multiple of 32, as the block reductions need.
pub(crate) const THREADS: u32 = 256;
/// Most blocks per launch: every kernel loops grid-stride, so more blocks
/// only add scheduling work once the GPU is full.
const MAX_BLOCKS: usize = 1024;
/// Most dimensions of a strided operand, after merging (`DT_MAX_RANK` in
/// `kernels/common.cuh`).
pub(crate) const MAX_RANK: usize = 8;

/// Launch shape of an element-wise kernel over `n` elements.
pub(crate) fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS);
    LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// Launch shape of a kernel that gives one block to each of `rows` rows
/// (grid-stride over rows), as the reductions and softmax do.
pub(crate) fn per_row(rows: usize) -> LaunchConfig {
    let blocks = rows.clamp(1, MAX_BLOCKS);
    LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// The dimensions and strides of `K` operands of one shape after merging
/// the axes that are contiguous in every operand and dropping axes of size
/// 1, so that dense operands take the kernels' rank-0 fast path and other
/// layouts the fewest divisions.
pub(crate) struct Merged<const K: usize> {
    pub(crate) dims: Vec<usize>,
    pub(crate) strides: [Vec<usize>; K],
}

impl<const K: usize> Merged<K> {
    pub(crate) fn new(dims: &[usize], strides: [&[usize]; K]) -> Self {
        let mut merged: Vec<(usize, [usize; K])> = Vec::with_capacity(dims.len());
        for (axis, &dim) in dims.iter().enumerate() {
            if dim == 1 {
                continue;
            }
            let s: [usize; K] = std::array::from_fn(|k| strides[k][axis]);
            // Checked: the axes of an empty tensor may multiply past usize.
            let mergeable = |prev: usize, prev_s: &[usize; K]| {
                prev.checked_mul(dim).is_some() && (0..K).all(|k| Some(prev_s[k]) == s[k].checked_mul(dim))
            };
            match merged.last_mut() {
                Some((prev, prev_s)) if mergeable(*prev, prev_s) => {
                    *prev *= dim;
                    *prev_s = s;
                }
                _ => merged.push((dim, s)),
            }
        }
        Merged {
            dims: merged.iter().map(|(d, _)| *d).collect(),
            strides: std::array::from_fn(|k| merged.iter().map(|(_, s)| s[k]).collect()),
        }
    }

    /// Whether every operand is dense: the kernels' rank-0 fast path.
    pub(crate) fn is_dense(&self) -> bool {
        match self.dims.len() {
            0 => true,
            1 => self.strides.iter().all(|s| s[0] == 1),
            _ => false,
        }
    }
}

/// The `(rank, dims, strides.., offsets..)` arguments of `K` strided
/// operands of one shape, with `dims` and the strides uploaded to the device
/// in one small buffer.
pub(crate) struct Strided<const K: usize> {
    /// Rank of the (merged) shape; 0 when every operand is dense.
    pub(crate) rank: usize,
    /// Each operand's offset of its first element.
    pub(crate) offsets: [usize; K],
    /// `dims`, then each operand's strides, `rank` entries each.
    block: Block,
}

impl<const K: usize> Strided<K> {
    /// The operands' layouts, merged (see [`Merged`]).
    pub(crate) fn new(
        device: &Arc<CudaDevice>,
        op: &'static str,
        dims: &[usize],
        strides: [&[usize]; K],
        offsets: [usize; K],
    ) -> Result<Self> {
        Self::merged(device, op, &Merged::new(dims, strides), offsets)
    }

    /// Like [`new`](Self::new), for axes the caller has merged already.
    pub(crate) fn merged(
        device: &Arc<CudaDevice>,
        op: &'static str,
        m: &Merged<K>,
        offsets: [usize; K],
    ) -> Result<Self> {
        if m.is_dense() {
            return Self::upload(device, op, &[], &std::array::from_fn(|_| Vec::new()), offsets);
        }
        Self::upload(device, op, &m.dims, &m.strides, offsets)
    }

    /// The layouts as they are, without merging: for kernels that address
    /// one axis by number (the index family), which need rank >= 1.
    pub(crate) fn exact(
        device: &Arc<CudaDevice>,
        op: &'static str,
        dims: &[usize],
        strides: [&[usize]; K],
        offsets: [usize; K],
    ) -> Result<Self> {
        Self::upload(device, op, dims, &strides.map(<[usize]>::to_vec), offsets)
    }

    fn upload(
        device: &Arc<CudaDevice>,
        op: &'static str,
        dims: &[usize],
        strides: &[Vec<usize>; K],
        offsets: [usize; K],
    ) -> Result<Self> {
        let rank = dims.len();
        if rank > MAX_RANK {
            return Err(Error::Shape {
                op,
                device: device.name.clone(),
                shapes: vec![Shape::from(dims)],
                reason: format!(
                    "the CUDA kernels address at most {MAX_RANK} dimensions, and this layout has {rank} \
                     that cannot be merged; move it to the CPU (`.to::<Cpu>()` takes any layout) and make it \
                     contiguous there, or permute fewer axes"
                ),
            });
        }
        let mut words: Vec<u64> = Vec::with_capacity(rank * (K + 1));
        words.extend(dims.iter().map(|&d| d as u64));
        for s in strides {
            words.extend(s.iter().map(|&s| s as u64));
        }
        // A block even for rank 0: the kernels take the arrays as pointer
        // arguments, and a pointer argument should be a live allocation.
        let mut block = device.alloc(op, size_of_val(words.as_slice()).max(1))?;
        if !words.is_empty() {
            // SAFETY: u64 is a plain number without padding.
            let bytes =
                unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), size_of_val(words.as_slice())) };
            let mut view = block.slice_mut().slice_mut(0..bytes.len());
            // The copy is stream-ordered before the launch that reads it,
            // and from pageable memory, so `words` may be dropped on return.
            device.stream.memcpy_htod(bytes, &mut view).map_err(|e| device.error(op, e))?;
        }
        Ok(Strided { rank, offsets, block })
    }

    /// Device address of `dims`.
    pub(crate) fn dims(&self) -> u64 {
        self.block.ptr
    }

    /// Device address of operand `k`'s strides.
    pub(crate) fn strides(&self, k: usize) -> u64 {
        self.block.ptr + ((1 + k) * self.rank * size_of::<u64>()) as u64
    }
}

/// The dense output of an element-wise kernel over one strided operand,
/// and the operand's geometry; `None` for an empty output, where there is
/// nothing to launch.
pub(crate) fn map_setup<T: Element>(
    device: &Arc<CudaDevice>,
    op: &'static str,
    layout: &Layout,
) -> Result<(CudaStorage<T>, Option<Strided<1>>)> {
    let out = CudaStorage::alloc(device, op, layout.elem_count())?;
    if layout.elem_count() == 0 {
        return Ok((out, None));
    }
    let geo = Strided::new(device, op, layout.dims(), [layout.strides()], [layout.offset()])?;
    Ok((out, Some(geo)))
}

/// A scalar kernel argument of element type `E`, as the kernels declare
/// it: the element itself, or for the half types the `float` they compute
/// in (`dt_compute` in `kernels/common.cuh`). Eight bytes, of which the
/// driver reads as many as the kernel's parameter has.
#[repr(C, align(8))]
pub(crate) struct KernelScalar([u8; 8]);

// SAFETY: plain bytes, with no padding or pointers.
unsafe impl cudarc::driver::DeviceRepr for KernelScalar {}

/// `x` as its kernels' scalar parameter (see [`KernelScalar`]).
pub(crate) fn kernel_scalar<E: Element>(x: E) -> KernelScalar {
    let mut bytes = [0u8; 8];
    match E::DTYPE {
        DType::F64 => bytes.copy_from_slice(&x.cast::<f64>().to_ne_bytes()),
        DType::I64 => bytes.copy_from_slice(&x.cast::<i64>().to_ne_bytes()),
        DType::U8 => bytes[0] = x.cast::<u8>(),
        // f32, and the half types widened exactly.
        DType::F32 | DType::BF16 | DType::F16 => bytes[..4].copy_from_slice(&x.cast::<f32>().to_ne_bytes()),
    }
    KernelScalar(bytes)
}

/// `launch_kernel!(device, op, family, name, config; args..)` launches kernel
/// `name` of `kernels/<family>.cu` on the device's stream with the given
/// arguments, each passed by value as the kernel's parameter (device
/// pointers as `u64`, sizes as `usize`, element scalars through
/// [`kernel_scalar`]),
/// and maps a failure to an error naming `op` and the device.
///
/// Each argument is bound to its own local first, because the driver reads
/// the arguments through pointers at launch time.
macro_rules! launch_kernel {
    ($device:expr, $op:expr, $family:expr, $name:expr, $cfg:expr; $($arg:expr),+ $(,)?) => {{
        let device: &$crate::backend::cuda::context::CudaDevice = &$device;
        let function = device.function($op, $family, &$name)?;
        $crate::backend::cuda::launch::launch_kernel!(@bind [] device, $op, function, $cfg; $($arg),+)
    }};
    // A function already looked up (an op type's own kernel source).
    (function $function:expr, $device:expr, $op:expr, $cfg:expr; $($arg:expr),+ $(,)?) => {{
        let device: &$crate::backend::cuda::context::CudaDevice = &$device;
        let function = $function;
        $crate::backend::cuda::launch::launch_kernel!(@bind [] device, $op, function, $cfg; $($arg),+)
    }};
    (@bind [$($bound:ident)*] $device:ident, $op:expr, $function:ident, $cfg:expr; $head:expr $(, $tail:expr)*) => {{
        let arg = $head;
        $crate::backend::cuda::launch::launch_kernel!(@bind [$($bound)* arg] $device, $op, $function, $cfg; $($tail),*)
    }};
    (@bind [$($bound:ident)*] $device:ident, $op:expr, $function:ident, $cfg:expr;) => {{
        use cudarc::driver::PushKernelArg as _;
        let mut builder = $device.stream.launch_builder(&$function);
        $(builder.arg(&$bound);)*
        // SAFETY: the arguments match the kernel's parameter list as its
        // file documents it (sizes as size_t, device pointers as u64 into
        // live buffers of the documented lengths, scalars of the kernel's
        // element type), the buffers stay alive until the stream reaches
        // the launch (they return to the per-stream cache, not the driver),
        // and every kernel bounds its grid-stride loops by the sizes passed.
        unsafe { builder.launch($cfg) }.map(drop).map_err(|e| $device.error($op, e))
    }};
}
pub(crate) use launch_kernel;
