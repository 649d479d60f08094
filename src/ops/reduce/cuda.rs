//! Reduction and softmax kernels on CUDA (`kernels/reduce.cu`,
//! `kernels/softmax.cu`).

use super::{ArgReduceOp, ReduceKernel, ReduceOp};
use crate::device::Cuda;
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::launch::{Strided, elementwise, launch_kernel, per_row};
use crate::device::cuda::{CudaStorage, dense_ptr};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::shape::Layout;
use cudarc::driver::LaunchConfig;
use std::sync::Arc;

/// How a reduction of one axis is launched: the kernel variant and the
/// arguments every variant shares.
struct Plan {
    n_out: usize,
    len: usize,
    step: usize,
    geo: Strided<1>,
    /// `"rows"` (a block per output) or `"cols"` (a thread per output).
    variant: &'static str,
    cfg: LaunchConfig,
}

fn plan(device: &Arc<CudaDevice>, op: &'static str, layout: &Layout, axis: usize) -> Result<Plan> {
    let (len, step) = (layout.dims()[axis], layout.strides()[axis]);
    let rest = |v: &[usize]| -> Vec<usize> {
        v.iter().enumerate().filter(|&(i, _)| i != axis).map(|(_, &x)| x).collect()
    };
    let (dims, strides) = (rest(layout.dims()), rest(layout.strides()));
    let n_out: usize = dims.iter().product();
    let geo = Strided::new(device, op, &dims, [&strides], [layout.offset()])?;
    // A block per output pays off on long axes or when there are too few
    // outputs to fill the GPU with one thread each; short axes with many
    // outputs (summing axis 0 of [3, many]) fold one per thread.
    let (variant, cfg) = match len >= 256 || n_out < 128 {
        true => ("rows", per_row(n_out)),
        false => ("cols", elementwise(n_out)),
    };
    Ok(Plan { n_out, len, step, geo, variant, cfg })
}

impl<const N: usize> ReduceKernel for Cuda<N> {
    fn reduce<E: Element>(op: ReduceOp, x: &CudaStorage<E>, layout: &Layout, axis: usize) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let name = match op {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        };
        let p = plan(&device, name, layout, axis)?;
        let out = CudaStorage::alloc(&device, name, p.n_out)?;
        if p.n_out == 0 {
            return Ok(out);
        }
        let kernel = format!("reduce_{name}_{}_{}", p.variant, E::DTYPE.name());
        launch_kernel!(device, name, "reduce", kernel, p.cfg;
            p.n_out, p.len, p.step, p.geo.rank, p.geo.dims(), p.geo.strides(0), p.geo.offsets[0], x.ptr(), out.ptr())?;
        Ok(out)
    }

    fn arg_reduce<E: Element>(
        op: ArgReduceOp,
        x: &CudaStorage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<CudaStorage<i64>> {
        let device = Self::device()?;
        let name = match op {
            ArgReduceOp::ArgMax => "argmax",
            ArgReduceOp::ArgMin => "argmin",
        };
        let p = plan(&device, name, layout, axis)?;
        let out = CudaStorage::alloc(&device, name, p.n_out)?;
        if p.n_out == 0 || p.len == 0 {
            return Ok(out);
        }
        let kernel = format!("reduce_{name}_{}_{}", p.variant, E::DTYPE.name());
        launch_kernel!(device, name, "reduce", kernel, p.cfg;
            p.n_out, p.len, p.step, p.geo.rank, p.geo.dims(), p.geo.strides(0), p.geo.offsets[0], x.ptr(), out.ptr())?;
        Ok(out)
    }

    fn softmax<E: FloatElement>(x: &CudaStorage<E>, layout: &Layout, axis: usize, log: bool) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let op = if log { "log_softmax" } else { "softmax" };
        let n = layout.elem_count();
        let out = CudaStorage::alloc(&device, op, n)?;
        if n == 0 {
            return Ok(out);
        }
        // The kernels read a dense input, as the CPU backend does.
        let (_dense, src) = dense_ptr(&device, op, x, layout)?;
        let dims = layout.dims();
        let (outer, len, inner): (usize, usize, usize) =
            (dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product());
        let rows = outer * inner;
        let kernel = format!("softmax_{}_{}", if log { "log" } else { "plain" }, E::DTYPE.name());
        launch_kernel!(device, op, "softmax", kernel, per_row(rows); rows, len, inner, src, out.ptr())?;
        Ok(out)
    }
}
