//! Reduction and softmax kernels on CUDA (`kernels/reduce.cu`,
//! `kernels/softmax.cu`).

use super::{AffineAxis, ExtremeOp, ReduceKernel, ReduceOp, around_axis};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::launch::{Strided, elementwise, launch_kernel, per_row};
use crate::backend::cuda::{CudaStorage, dense_ptr, narrowed, narrowed_all, widened};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::{Layout, Shape, count_of};
use cudarc::driver::LaunchConfig;
use std::sync::Arc;

/// How a reduction of one axis is launched: the kernel variant and the
/// arguments every variant shares.
struct Plan {
    n_out: usize,
    len: usize,
    step: usize,
    geo: Strided<1>,
    /// `"rows"` (a block per output), `"cols"` (a thread per output) or
    /// `"tiles"` (a block per 32 neighbouring outputs).
    variant: &'static str,
    cfg: LaunchConfig,
}

/// How to launch a reduction of `axis`; `tiles` says whether the value
/// reductions' `tiles` kernels may be used (the arg-reductions have none).
fn plan(device: &Arc<CudaDevice>, op: &'static str, layout: &Layout, axis: usize, tiles: bool) -> Result<Plan> {
    let (len, step) = (layout.dims()[axis], layout.strides()[axis]);
    let rest =
        |v: &[usize]| -> Vec<usize> { v.iter().enumerate().filter(|&(i, _)| i != axis).map(|(_, &x)| x).collect() };
    let (dims, strides) = (rest(layout.dims()), rest(layout.strides()));
    let n_out = count_of(&dims);
    let geo = Strided::new(device, op, &dims, [&strides], [layout.offset()])?;
    // A block per output pays off on long axes or when there are too few
    // outputs to fill the GPU with one thread each; short axes with many
    // outputs (summing axis 0 of [3, many]) fold one per thread.
    // A reduced axis that is not contiguous (summing axis 0 of [rows, cols])
    // would have a block read one element per row: tiles instead give a
    // warp 32 neighbouring outputs, whose elements lie side by side.
    let (variant, cfg) = match (step == 1, len >= 256 || n_out < 128) {
        (false, _) if tiles && n_out >= 32 => {
            let groups = len.clamp(1, 32) as u32;
            let blocks = n_out.div_ceil(32).min(65_535) as u32;
            ("tiles", LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (32 * groups, 1, 1), shared_mem_bytes: 0 })
        }
        (_, true) => ("rows", per_row(n_out)),
        (_, false) => ("cols", elementwise(n_out)),
    };
    Ok(Plan { n_out, len, step, geo, variant, cfg })
}

/// Elements of a row each thread of the cached softmax kernel keeps in
/// registers (`DT_SOFTMAX_PER_THREAD` in `kernels/softmax.cu`).
const SOFTMAX_PER_THREAD: usize = 8;

/// Below this many elements a whole-tensor reduction runs in one block of
/// the `rows` kernel; above it, the two-pass `all` kernels spread it over
/// the whole GPU.
const ALL_MIN_LEN: usize = 1 << 14;

/// Whether a reduction of `layout` along `axis` is a reduction of a whole
/// dense tensor, and where the tensor starts.
fn whole_dense(layout: &Layout, axis: usize) -> Option<usize> {
    let others_one = layout.dims().iter().enumerate().all(|(i, &d)| i == axis || d == 1);
    match (others_one, layout.contiguous_range()) {
        (true, Some(range)) if layout.dims()[axis] >= ALL_MIN_LEN => Some(range.start),
        _ => None,
    }
}

/// A whole dense reduction in two passes: every block folds a grid-stride
/// share into `partials`, then one block folds the partials.
fn reduce_all<E: Element>(device: &Arc<CudaDevice>, op: &'static str, src: u64, n: usize) -> Result<CudaStorage<E>> {
    let cfg = elementwise(n);
    let blocks = cfg.grid_dim.0 as usize;
    let partials = CudaStorage::<E>::alloc(device, op, blocks)?;
    let out = CudaStorage::<E>::alloc(device, op, 1)?;
    let kernel = format!("reduce_{op}_all_{}", E::DTYPE.name());
    launch_kernel!(device, op, "reduce", kernel, cfg; n, src, partials.ptr())?;
    launch_kernel!(device, op, "reduce", kernel, per_row(1); blocks, partials.ptr(), out.ptr())?;
    Ok(out)
}

/// The two-pass whole-tensor arg-reduction: (value, index) pairs per block,
/// then one block over the pairs.
fn arg_reduce_all<E: Element>(
    device: &Arc<CudaDevice>,
    op: &'static str,
    src: u64,
    n: usize,
) -> Result<CudaStorage<i64>> {
    let cfg = elementwise(n);
    let blocks = cfg.grid_dim.0 as usize;
    let vals = CudaStorage::<E>::alloc(device, op, blocks)?;
    let idxs = CudaStorage::<i64>::alloc(device, op, blocks)?;
    let val = CudaStorage::<E>::alloc(device, op, 1)?;
    let idx = CudaStorage::<i64>::alloc(device, op, 1)?;
    let kernel = format!("reduce_{op}_all_{}", E::DTYPE.name());
    // A null `src_idx` tells pass 1 that the index of src[i] is i.
    launch_kernel!(device, op, "reduce", kernel, cfg; n, src, 0u64, vals.ptr(), idxs.ptr())?;
    launch_kernel!(device, op, "reduce", kernel, per_row(1);
        blocks, vals.ptr(), idxs.ptr(), val.ptr(), idx.ptr())?;
    Ok(idx)
}

impl ReduceKernel for AnyCuda {
    fn reduce<E: Element, Op: ReduceOp>(
        op: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<CudaStorage<E>> {
        let name = Op::NAME;
        if E::DTYPE.is_half() {
            return narrowed(name, &Self::reduce(op, &widened(name, x)?, layout, axis)?);
        }
        let device = Self::device()?;
        if let Some(start) = whole_dense(layout, axis) {
            return reduce_all::<E>(&device, name, x.ptr_at(start), layout.elem_count());
        }
        let p = plan(&device, name, layout, axis, true)?;
        let out = CudaStorage::alloc(&device, name, p.n_out)?;
        if p.n_out == 0 {
            return Ok(out);
        }
        let kernel = format!("reduce_{name}_{}_{}", p.variant, E::DTYPE.name());
        launch_kernel!(device, name, "reduce", kernel, p.cfg;
            p.n_out, p.len, p.step, p.geo.rank, p.geo.dims(), p.geo.strides(0), p.geo.offsets[0], x.ptr(), out.ptr())?;
        Ok(out)
    }

    fn arg_reduce<E: Element, Op: ExtremeOp>(
        op: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<CudaStorage<i64>> {
        let name = Op::ARG_NAME;
        if E::DTYPE.is_half() {
            // Exact: widening keeps every value and its order.
            return Self::arg_reduce(op, &widened(name, x)?, layout, axis);
        }
        let device = Self::device()?;
        if let Some(start) = whole_dense(layout, axis) {
            return arg_reduce_all::<E>(&device, name, x.ptr_at(start), layout.elem_count());
        }
        let p = plan(&device, name, layout, axis, false)?;
        let out = CudaStorage::alloc(&device, name, p.n_out)?;
        if p.n_out == 0 || p.len == 0 {
            return Ok(out);
        }
        let kernel = format!("reduce_{name}_{}_{}", p.variant, E::DTYPE.name());
        launch_kernel!(device, name, "reduce", kernel, p.cfg;
            p.n_out, p.len, p.step, p.geo.rank, p.geo.dims(), p.geo.strides(0), p.geo.offsets[0], x.ptr(), out.ptr())?;
        Ok(out)
    }

    fn scan<E: Element, Op: ReduceOp>(
        op: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        axis: usize,
        reverse: bool,
    ) -> Result<CudaStorage<E>> {
        let name = Op::NAME;
        if E::DTYPE.is_half() {
            return narrowed(name, &Self::scan(op, &widened(name, x)?, layout, axis, reverse)?);
        }
        let device = Self::device()?;
        let n = layout.elem_count();
        let out = CudaStorage::alloc(&device, name, n)?;
        if n == 0 {
            return Ok(out);
        }
        let (_dense, src) = dense_ptr(&device, name, x, layout)?;
        let [outer, len, inner] = around_axis(layout.dims(), axis);
        let lines = outer * inner;
        let kernel = format!("reduce_{name}_scan_{}", E::DTYPE.name());
        launch_kernel!(device, name, "reduce", kernel, elementwise(lines);
            lines, len, inner, u32::from(reverse), src, out.ptr())?;
        Ok(out)
    }

    fn softmax<E: FloatElement>(x: &CudaStorage<E>, layout: &Layout, axis: usize, log: bool) -> Result<CudaStorage<E>> {
        let op = if log { "log_softmax" } else { "softmax" };
        if E::DTYPE.is_half() {
            return narrowed(op, &Self::softmax(&widened(op, x)?, layout, axis, log)?);
        }
        let device = Self::device()?;
        let n = layout.elem_count();
        let out = CudaStorage::alloc(&device, op, n)?;
        if n == 0 {
            return Ok(out);
        }
        // The kernels read a dense input, as the CPU backend does.
        let (_dense, src) = dense_ptr(&device, op, x, layout)?;
        let [outer, len, inner] = around_axis(layout.dims(), axis);
        let rows = outer * inner;
        let kind = if log { "log" } else { "plain" };
        if len <= SOFTMAX_PER_THREAD * 1024 {
            // The row fits in the block's registers: read once. Threads: a
            // multiple of 32 holding up to SOFTMAX_PER_THREAD elements each.
            let threads = len.div_ceil(SOFTMAX_PER_THREAD).next_multiple_of(32).clamp(32, 1024) as u32;
            let cfg = LaunchConfig { block_dim: (threads, 1, 1), ..per_row(rows) };
            let kernel = format!("softmax_{kind}_cached_{}", E::DTYPE.name());
            launch_kernel!(device, op, "softmax", kernel, cfg; rows, len, inner, src, out.ptr())?;
        } else {
            let kernel = format!("softmax_{kind}_{}", E::DTYPE.name());
            launch_kernel!(device, op, "softmax", kernel, per_row(rows); rows, len, inner, src, out.ptr())?;
        }
        Ok(out)
    }

    fn softmax_backward<E: FloatElement>(
        (y, y_layout): (&CudaStorage<E>, &Layout),
        (g, g_layout): (&CudaStorage<E>, &Layout),
        axis: usize,
        log: bool,
    ) -> Result<CudaStorage<E>> {
        let op = if log { "log_softmax_backward" } else { "softmax_backward" };
        if E::DTYPE.is_half() {
            let (y, g) = (widened(op, y)?, widened(op, g)?);
            return narrowed(op, &Self::softmax_backward((&y, y_layout), (&g, g_layout), axis, log)?);
        }
        let device = Self::device()?;
        let n = y_layout.elem_count();
        let out = CudaStorage::alloc(&device, op, n)?;
        if n == 0 {
            return Ok(out);
        }
        let (_dense_y, y) = dense_ptr(&device, op, y, y_layout)?;
        let (_dense_g, g) = dense_ptr(&device, op, g, g_layout)?;
        let [outer, len, inner] = around_axis(y_layout.dims(), axis);
        let rows = outer * inner;
        let kernel = format!("softmax_backward_{}_{}", if log { "log" } else { "plain" }, E::DTYPE.name());
        launch_kernel!(device, op, "softmax", kernel, per_row(rows); rows, len, inner, y, g, out.ptr())?;
        Ok(out)
    }

    fn standardize<E: FloatElement>(
        (x, layout): (&CudaStorage<E>, &Layout),
        [outer, groups, inner]: [usize; 3],
        eps: f64,
        affine: Option<(&CudaStorage<E>, &CudaStorage<E>, AffineAxis)>,
    ) -> Result<[CudaStorage<E>; 3]> {
        const OP: &str = "standardize";
        if E::DTYPE.is_half() {
            let affine = match affine {
                Some((w, b, axis)) => Some((widened(OP, w)?, widened(OP, b)?, axis)),
                None => None,
            };
            let affine = affine.as_ref().map(|(w, b, axis)| (w, b, *axis));
            let dims = [outer, groups, inner];
            return narrowed_all(OP, Self::standardize((&widened(OP, x)?, layout), dims, eps, affine)?);
        }
        let device = Self::device()?;
        let n = layout.elem_count();
        let (out, mean, var) = (
            CudaStorage::alloc(&device, OP, n)?,
            CudaStorage::alloc(&device, OP, groups)?,
            CudaStorage::alloc(&device, OP, groups)?,
        );
        if groups == 0 {
            return Ok([out, mean, var]);
        }
        // Empty groups too get their (NaN) statistics written.
        let (_dense, x) = dense_ptr(&device, OP, x, layout)?;
        let stats = format!("reduce_standardize_stats_{}", E::DTYPE.name());
        launch_kernel!(device, OP, "reduce", stats, per_row(groups); outer, groups, inner, x, mean.ptr(), var.ptr())?;
        if n > 0 {
            // Null pointers: no affine step.
            let (weight, bias, per_inner) = affine
                .map_or((0, 0, 0usize), |(w, b, axis)| (w.ptr(), b.ptr(), usize::from(axis == AffineAxis::Inner)));
            let apply = format!("reduce_standardize_apply_{}", E::DTYPE.name());
            launch_kernel!(device, OP, "reduce", apply, elementwise(n);
                n, groups, inner, x, mean.ptr(), var.ptr(), E::from_f64(eps), weight, bias, per_inner, out.ptr())?;
        }
        Ok([out, mean, var])
    }

    fn standardize_backward<E: FloatElement>(
        x: &CudaStorage<E>,
        [mean, var]: [&CudaStorage<E>; 2],
        weight: Option<(&CudaStorage<E>, AffineAxis)>,
        (g, g_layout): (&CudaStorage<E>, &Layout),
        [outer, groups, inner]: [usize; 3],
        eps: f64,
    ) -> Result<[CudaStorage<E>; 3]> {
        const OP: &str = "standardize_backward";
        if E::DTYPE.is_half() {
            let weight = match weight {
                Some((w, axis)) => Some((widened(OP, w)?, axis)),
                None => None,
            };
            // The statistics again, in f32, as on the CPU: the forward pass
            // returned them rounded to the half type.
            let (x, g) = (widened(OP, x)?, widened(OP, g)?);
            let dims = [outer, groups, inner];
            let dense = Layout::contiguous(Shape::from(dims));
            let [_, mean, var] = Self::standardize((&x, &dense), dims, eps, None)?;
            let weight = weight.as_ref().map(|(w, axis)| (w, *axis));
            let grads = Self::standardize_backward(&x, [&mean, &var], weight, (&g, g_layout), dims, eps)?;
            return narrowed_all(OP, grads);
        }
        let device = Self::device()?;
        let n = g_layout.elem_count();
        let per_inner = weight.is_some_and(|(_, axis)| axis == AffineAxis::Inner);
        // The group sums; along inner, the weight's gradients are column sums besides.
        let (out, sum_g, sum_gx) = (
            CudaStorage::alloc(&device, OP, n)?,
            CudaStorage::<E>::alloc(&device, OP, groups)?,
            CudaStorage::<E>::alloc(&device, OP, groups)?,
        );
        let columns = match per_inner {
            true => Some((CudaStorage::<E>::alloc(&device, OP, inner)?, CudaStorage::<E>::alloc(&device, OP, inner)?)),
            false => None,
        };
        let (weight, inner_weight) = match weight {
            Some((w, AffineAxis::Inner)) => (w.ptr(), w.ptr()),
            Some((w, AffineAxis::Group)) => (w.ptr(), 0),
            None => (0, 0),
        };
        if groups > 0 {
            let (_dense, g) = dense_ptr(&device, OP, g, g_layout)?;
            let eps = E::from_f64(eps);
            let kernel = format!("reduce_standardize_backward_sums_{}", E::DTYPE.name());
            launch_kernel!(device, OP, "reduce", kernel, per_row(groups);
                outer, groups, inner, x.ptr(), mean.ptr(), var.ptr(), eps, inner_weight, g, sum_g.ptr(), sum_gx.ptr())?;
            if let Some((column_g, column_gx)) = &columns
                && inner > 0
            {
                let kernel = format!("reduce_standardize_backward_columns_{}", E::DTYPE.name());
                launch_kernel!(device, OP, "reduce", kernel, per_row(inner);
                    groups, inner, x.ptr(), mean.ptr(), var.ptr(), eps, g, column_g.ptr(), column_gx.ptr())?;
            }
            if n > 0 {
                let kernel = format!("reduce_standardize_backward_apply_{}", E::DTYPE.name());
                launch_kernel!(device, OP, "reduce", kernel, elementwise(n);
                    n, groups, inner, x.ptr(), mean.ptr(), var.ptr(), eps, weight, usize::from(per_inner), g,
                    sum_g.ptr(), sum_gx.ptr(), out.ptr())?;
            }
        }
        Ok(match columns {
            Some((column_g, column_gx)) => [out, column_g, column_gx],
            None => [out, sum_g, sum_gx],
        })
    }
}
