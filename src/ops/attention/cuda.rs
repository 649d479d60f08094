//! Fused attention on CUDA (`kernels/attention.cu`): tiles of 32 query
//! rows (16 for `f64`) walking the keys and values a tile at a time
//! through shared memory with an online softmax, for heads up to 64 wide;
//! one block per query row for wider ones. The backward runs one kernel
//! over query rows (their gradients and each row's softmax offset) and one
//! over key rows (the keys' and values' gradients, summed over the queries
//! without atomics; under grouped-query attention over the queries of
//! every head that shares the key, but on the tensor cores, whose keys'
//! pass gives each query head its own copy and sums them after). The half
//! types run on the tensor cores
//! (`attention_mma32_*` and `attention_mma64_*`, sm_80 and later, heads up
//! to 32 and 64 wide), with the same three passes; elsewhere they widen to
//! the f32 kernels.

use super::kernel::{AttentionDims, AttentionKernel, KernelMask};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::launch::{Strided, launch_kernel, per_row};
use crate::backend::cuda::{CudaStorage, converted, narrowed, narrowed_all, widened};
use crate::element::{DType, Element, FloatElement};
use crate::error::Result;
use crate::layout::{Layout, Shape, count_of};
use crate::ops::reduce::{ReduceKernel, Sum};
use cudarc::driver::LaunchConfig;
use std::sync::Arc;

/// Output columns each thread keeps in registers (`DT_ATTENTION_COLUMNS`).
const COLUMNS_PER_THREAD: usize = 4;

/// The mask as the kernels' `MASK` arguments: its kind, the two data
/// pointers (null where unused), and problem `b`'s placement.
struct MaskArgs {
    kind: i32,
    keep: u64,
    add: u64,
    batch_axes: Strided<1>,
    row: usize,
    col: usize,
}

impl MaskArgs {
    fn new<E: FloatElement>(
        device: &Arc<CudaDevice>,
        op: &'static str,
        mask: &KernelMask<'_, CudaStorage<u8>, CudaStorage<E>>,
    ) -> Result<Self> {
        let place = |layout: &Layout| -> Result<(Strided<1>, usize, usize)> {
            let rank = layout.dims().len();
            let batch = Strided::exact(
                device,
                op,
                &layout.dims()[..rank - 2],
                [&layout.strides()[..rank - 2]],
                [layout.offset()],
            )?;
            Ok((batch, layout.strides()[rank - 2], layout.strides()[rank - 1]))
        };
        let none = || Strided::exact(device, op, &[], [&[]], [0]);
        Ok(match *mask {
            KernelMask::None => MaskArgs { kind: 0, keep: 0, add: 0, batch_axes: none()?, row: 0, col: 0 },
            KernelMask::Causal => MaskArgs { kind: 1, keep: 0, add: 0, batch_axes: none()?, row: 0, col: 0 },
            KernelMask::Keep(s, l) => {
                let (batch_axes, row, col) = place(l)?;
                MaskArgs { kind: 2, keep: s.ptr(), add: 0, batch_axes, row, col }
            }
            KernelMask::Add(s, l) => {
                let (batch_axes, row, col) = place(l)?;
                MaskArgs { kind: 3, keep: 0, add: s.ptr(), batch_axes, row, col }
            }
        })
    }
}

/// Whether the kernels can keep a row of `dims`' widths in registers.
fn fits(dims: &AttentionDims) -> bool {
    dims.width.max(dims.value_width) <= COLUMNS_PER_THREAD * per_row(1).block_dim.0 as usize
}

/// Widest rows the tiled kernels take (`DT_TILE_WIDTH`).
const TILE_WIDTH: usize = 64;

/// The kernel of `pass` for `dims` and `E`, and its launch over `rows`
/// rows of each of `problems` problems: the tiled kernels
/// (`attention_tiled_*`) for rows up to [`TILE_WIDTH`] wide, one block of
/// four threads per row of a tile (32 rows a tile for `f32`, 16 for
/// `f64`, as `ATTENTION_TILED_KERNELS` declares them); else the row
/// kernels, a block per row.
fn kernel_for<E: FloatElement>(
    pass: &str,
    dims: &AttentionDims,
    problems: usize,
    rows: usize,
) -> (String, LaunchConfig) {
    let dtype = E::DTYPE.name();
    if dims.width.max(dims.value_width) > TILE_WIDTH {
        return (format!("attention_{pass}_{dtype}"), per_row(problems * rows));
    }
    let tile = match E::DTYPE {
        DType::F32 => 32,
        DType::F64 => 16,
        // The half types run the f32 kernels (see `backend/cuda/widen.rs`).
        DType::BF16 | DType::F16 | DType::I64 | DType::U8 => unreachable!("no {} attention kernels", E::DTYPE.name()),
    };
    // The kernels loop over tiles, so the grid only sets how many run at once.
    let blocks = (problems * rows.div_ceil(tile)).clamp(1, 1 << 16) as u32;
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (4 * tile as u32, 1, 1), shared_mem_bytes: 0 };
    (format!("attention_tiled_{pass}_{dtype}"), launch)
}

/// Widest rows the tensor-core kernels take.
const MMA_WIDTH: usize = 64;

/// The tensor-core kernels' name for `pass` and `dims`: each comes for
/// rows up to 32 and up to 64 wide (`attention_mma32_*`,
/// `attention_mma64_*`), the narrower doing half the products.
fn mma_kernel<E: FloatElement>(pass: &str, dims: &AttentionDims) -> String {
    let width = if dims.width.max(dims.value_width) <= 32 { 32 } else { MMA_WIDTH };
    format!("attention_mma{width}_{pass}_{}", E::DTYPE.name())
}

/// Query rows per block of the tensor-core kernels (`DT_MMA_ROWS`), 16 for
/// each of its four warps.
const MMA_ROWS: usize = 64;

/// Whether the tensor-core kernels (`attention_mma32_*`, `attention_mma64_*`) serve `E` and
/// `dims` on `device`: the half types, rows up to [`MMA_WIDTH`] wide, on
/// compute capability 8.0 or later.
fn on_tensor_cores<E: FloatElement>(device: &CudaDevice, dims: &AttentionDims) -> bool {
    E::DTYPE.is_half() && dims.width.max(dims.value_width) <= MMA_WIDTH && device.tensor_cores()
}

/// The forward pass of `attention_mma<W>_forward_<E>`: products on the tensor
/// cores in f32, the softmax in f32, the result rounded once. Its scale is
/// an f32 parameter, as PyTorch's, not rounded to the half type.
fn forward_on_tensor_cores<E: FloatElement>(
    device: &Arc<CudaDevice>,
    q: (&CudaStorage<E>, &Layout),
    k: (&CudaStorage<E>, &Layout),
    v: (&CudaStorage<E>, &Layout),
    dims: AttentionDims,
    mask: &KernelMask<'_, CudaStorage<u8>, CudaStorage<E>>,
    scale: f64,
) -> Result<(CudaStorage<E>, CudaStorage<E::Accumulator>)> {
    const OP: &str = "scaled_dot_product_attention";
    let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
    let out = CudaStorage::<E>::alloc(device, OP, count_of(&[batch, queries, value_width]))?;
    // f32, which the kernel writes.
    let lse = CudaStorage::<E::Accumulator>::alloc(device, OP, batch * queries)?;
    let m = MaskArgs::new(device, OP, mask)?;
    // The kernel loops over tiles, so the grid only sets how many run at once.
    let blocks = (batch * queries.div_ceil(MMA_ROWS)).clamp(1, 1 << 16) as u32;
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let kernel = mma_kernel::<E>("forward", &dims);
    launch_kernel!(device, OP, "attention", kernel, launch;
        batch, group, queries, keys, width, value_width, scale as f32, start(q), start(k), start(v),
        m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
        m.batch_axes.offsets[0], m.row, m.col, out.ptr(), lse.ptr())?;
    Ok((out, lse))
}

/// The backward pass on the tensor cores: `attention_mma<W>_backward_queries_<E>`
/// (the queries' gradient and each row's softmax offset, kept in f32) then
/// `attention_mma<W>_backward_keys_<E>` (the keys' and values' gradients).
fn backward_on_tensor_cores<E: FloatElement>(
    device: &Arc<CudaDevice>,
    [q, k, v, out, g]: [(&CudaStorage<E>, &Layout); 5],
    lse: &CudaStorage<E::Accumulator>,
    dims: AttentionDims,
    mask: &KernelMask<'_, CudaStorage<u8>, CudaStorage<E>>,
    scale: f64,
) -> Result<[CudaStorage<E>; 3]> {
    const OP: &str = "scaled_dot_product_attention_backward";
    let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
    let dq = CudaStorage::<E>::alloc(device, OP, count_of(&[batch, queries, width]))?;
    // Per query problem: a key problem's copy for each head of its group.
    let dk = CudaStorage::<E>::alloc(device, OP, count_of(&[batch, keys, width]))?;
    let dv = CudaStorage::<E>::alloc(device, OP, count_of(&[batch, keys, value_width]))?;
    let offsets = CudaStorage::<f32>::alloc(device, OP, batch * queries)?;
    let m = MaskArgs::new(device, OP, mask)?;
    let scale = scale as f32;
    let launch = |rows: usize| {
        let blocks = (batch * rows.div_ceil(MMA_ROWS)).clamp(1, 1 << 16) as u32;
        LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 }
    };
    launch_kernel!(device, OP, "attention", mma_kernel::<E>("backward_queries", &dims), launch(queries);
        batch, group, queries, keys, width, value_width, scale, start(q), start(k), start(v),
        m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
        m.batch_axes.offsets[0], m.row, m.col, start(out), lse.ptr(), start(g), dq.ptr(), offsets.ptr())?;
    launch_kernel!(device, OP, "attention", mma_kernel::<E>("backward_keys", &dims), launch(keys);
        batch, group, queries, keys, width, value_width, scale, start(q), start(k), start(v),
        m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
        m.batch_axes.offsets[0], m.row, m.col, lse.ptr(), start(g), offsets.ptr(), dk.ptr(), dv.ptr())?;
    if group == 1 {
        return Ok([dq, dk, dv]);
    }
    // Each group's copies summed in f32 and rounded once, as FlashAttention
    // sums its expanded heads' gradients.
    let sum_group = |copies: &CudaStorage<E>, row: usize| {
        let layout = Layout::contiguous(Shape::from([batch / group, group, keys * row]));
        AnyCuda::reduce(Sum, copies, &layout, 1)
    };
    Ok([dq, sum_group(&dk, width)?, sum_group(&dv, value_width)?])
}

/// The dense start of a contiguous tensor.
fn start<E: FloatElement>((storage, layout): (&CudaStorage<E>, &Layout)) -> u64 {
    let range = layout.contiguous_range().expect("the attention kernels are given contiguous tensors");
    storage.ptr_at(range.start)
}

impl AttentionKernel for AnyCuda {
    fn attention_forward<E: FloatElement>(
        q: (&CudaStorage<E>, &Layout),
        k: (&CudaStorage<E>, &Layout),
        v: (&CudaStorage<E>, &Layout),
        contiguous_out: &Layout,
        dims: AttentionDims,
        mask: KernelMask<'_, CudaStorage<u8>, CudaStorage<E>>,
        scale: f64,
    ) -> Result<Option<(CudaStorage<E>, CudaStorage<E::Accumulator>)>> {
        const OP: &str = "scaled_dot_product_attention";
        if !fits(&dims) {
            return Ok(None);
        }
        let device = Self::device()?;
        if on_tensor_cores::<E>(&device, &dims) {
            return forward_on_tensor_cores(&device, q, k, v, dims, &mask, scale).map(Some);
        }
        if E::DTYPE.is_half() {
            let [q32, k32, v32] = [widened(OP, q.0)?, widened(OP, k.0)?, widened(OP, v.0)?];
            let additive = mask.additive().map(|values| widened(OP, values)).transpose()?;
            let (q, k, v) = ((&q32, q.1), (&k32, k.1), (&v32, v.1));
            let mask = mask.with_additive(additive.as_ref());
            let Some((out, lse)) = Self::attention_forward(q, k, v, contiguous_out, dims, mask, scale)? else {
                return Ok(None);
            };
            return Ok(Some((narrowed(OP, &out)?, converted(OP, &lse)?)));
        }
        let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
        let out = CudaStorage::<E>::alloc(&device, OP, count_of(&[batch, queries, value_width]))?;
        // `E` itself for the types that get here, which the kernel writes.
        debug_assert_eq!(E::DTYPE, <E::Accumulator as Element>::DTYPE);
        let lse = CudaStorage::<E::Accumulator>::alloc(&device, OP, batch * queries)?;
        let m = MaskArgs::new(&device, OP, &mask)?;
        let (kernel, launch) = kernel_for::<E>("forward", &dims, batch, queries);
        launch_kernel!(device, OP, "attention", kernel, launch;
            batch, group, queries, keys, width, value_width, E::from_f64(scale), start(q), start(k), start(v),
            m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
            m.batch_axes.offsets[0], m.row, m.col, out.ptr(), lse.ptr())?;
        Ok(Some((out, lse)))
    }

    fn attention_backward<E: FloatElement>(
        q: (&CudaStorage<E>, &Layout),
        k: (&CudaStorage<E>, &Layout),
        v: (&CudaStorage<E>, &Layout),
        out: (&CudaStorage<E>, &Layout),
        lse: &CudaStorage<E::Accumulator>,
        g: (&CudaStorage<E>, &Layout),
        contiguous_grads: [&Layout; 3],
        dims: AttentionDims,
        mask: KernelMask<'_, CudaStorage<u8>, CudaStorage<E>>,
        scale: f64,
    ) -> Result<Option<[CudaStorage<E>; 3]>> {
        const OP: &str = "scaled_dot_product_attention_backward";
        if !fits(&dims) {
            return Ok(None);
        }
        let device = Self::device()?;
        if on_tensor_cores::<E>(&device, &dims) {
            return backward_on_tensor_cores(&device, [q, k, v, out, g], lse, dims, &mask, scale).map(Some);
        }
        if E::DTYPE.is_half() {
            let [q32, k32, v32] = [widened(OP, q.0)?, widened(OP, k.0)?, widened(OP, v.0)?];
            let [out32, lse32, g32] = [widened(OP, out.0)?, converted(OP, lse)?, widened(OP, g.0)?];
            let additive = mask.additive().map(|values| widened(OP, values)).transpose()?;
            let (q, k, v) = ((&q32, q.1), (&k32, k.1), (&v32, v.1));
            let (out, g) = ((&out32, out.1), (&g32, g.1));
            let mask = mask.with_additive(additive.as_ref());
            let grads = Self::attention_backward(q, k, v, out, &lse32, g, contiguous_grads, dims, mask, scale)?;
            return grads.map(|grads| narrowed_all(OP, grads)).transpose();
        }
        let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
        let dq = CudaStorage::<E>::alloc(&device, OP, count_of(&[batch, queries, width]))?;
        let dk = CudaStorage::<E>::alloc(&device, OP, count_of(&[batch / group, keys, width]))?;
        let dv = CudaStorage::<E>::alloc(&device, OP, count_of(&[batch / group, keys, value_width]))?;
        let offsets = CudaStorage::<E>::alloc(&device, OP, batch * queries)?;
        let m = MaskArgs::new(&device, OP, &mask)?;
        let scale = E::from_f64(scale);
        // The kernels read the log-sum-exps as `E`, which they are here.
        debug_assert_eq!(E::DTYPE, <E::Accumulator as Element>::DTYPE);
        let (kernel, launch) = kernel_for::<E>("backward_queries", &dims, batch, queries);
        launch_kernel!(device, OP, "attention", kernel, launch;
            batch, group, queries, keys, width, value_width, scale, start(q), start(k), start(v),
            m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
            m.batch_axes.offsets[0], m.row, m.col, start(out), lse.ptr(), start(g), dq.ptr(), offsets.ptr())?;
        let (kernel, launch) = kernel_for::<E>("backward_keys", &dims, batch / group, keys);
        launch_kernel!(device, OP, "attention", kernel, launch;
            batch, group, queries, keys, width, value_width, scale, start(q), start(k), start(v),
            m.kind, m.keep, m.add, m.batch_axes.rank, m.batch_axes.dims(), m.batch_axes.strides(0),
            m.batch_axes.offsets[0], m.row, m.col, lse.ptr(), start(g), offsets.ptr(), dk.ptr(), dv.ptr())?;
        Ok(Some([dq, dk, dv]))
    }
}
