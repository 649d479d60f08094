//! Unary kernels on CUDA (`kernels/unary.cu`).

use super::{FloatUnaryOp, UnaryKernel, UnaryOp};
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::device::cuda::launch::{elementwise, launch_kernel, map_setup};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> UnaryKernel for Cuda<N> {
    fn unary<E: Element>(op: UnaryOp<E>, x: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let (out, geo) = map_setup(&device, op.name(), layout)?;
        let Some(geo) = geo else { return Ok(out) };
        let n = layout.elem_count();
        let name = format!("unary_{}_{}", op.name(), E::DTYPE.name());
        let cfg = elementwise(n);
        match op {
            UnaryOp::Clamp { min, max } => launch_kernel!(device, op.name(), "unary", name, cfg;
                n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), min, max, out.ptr())?,
            _ => launch_kernel!(device, op.name(), "unary", name, cfg;
                n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), out.ptr())?,
        }
        Ok(out)
    }

    fn unary_float<E: FloatElement>(
        op: FloatUnaryOp<E>,
        x: &CudaStorage<E>,
        layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let (out, geo) = map_setup(&device, op.name(), layout)?;
        let Some(geo) = geo else { return Ok(out) };
        let n = layout.elem_count();
        let name = format!("unary_{}_{}", op.name(), E::DTYPE.name());
        let cfg = elementwise(n);
        match op {
            FloatUnaryOp::Powf(p) => launch_kernel!(device, op.name(), "unary", name, cfg;
                n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), p, out.ptr())?,
            _ => launch_kernel!(device, op.name(), "unary", name, cfg;
                n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), out.ptr())?,
        }
        Ok(out)
    }
}
