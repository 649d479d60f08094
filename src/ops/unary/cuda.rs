//! Unary kernels on CUDA: `unary_<NAME>_<dtype>`, from `kernels/unary.cu`
//! for the built-in ops and from the op's own source for a custom one.

use super::{UnaryKernel, UnaryOp};
use crate::backend::Cuda;
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::launch::{KernelScalar, elementwise, kernel_scalar, map_setup};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use cudarc::driver::PushKernelArg as _;
use std::any::TypeId;

impl<const N: usize> UnaryKernel for Cuda<N> {
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let name = format!("unary_{}_{}", Op::NAME, E::DTYPE.name());
        let function = Op::KERNELS.function(&device, Op::NAME, "unary", TypeId::of::<Op>(), &name)?;
        let (out, geo) = map_setup(&device, Op::NAME, layout)?;
        let Some(geo) = geo else { return Ok(out) };
        let n = layout.elem_count();
        let (dims, strides, offset, x, out_ptr) = (geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), out.ptr());
        let params: Vec<KernelScalar> = op.params().as_slice().iter().map(|&p| kernel_scalar(p)).collect();
        let mut builder = device.stream.launch_builder(&function);
        builder.arg(&n).arg(&geo.rank).arg(&dims).arg(&strides).arg(&offset).arg(&x);
        for param in &params {
            builder.arg(param);
        }
        builder.arg(&out_ptr);
        // SAFETY: the arguments follow the signature of every unary kernel
        // (`DT_UNARY_KERNEL` in kernels/common.cuh): sizes as size_t, the
        // geometry block and the two buffers as device addresses of live
        // allocations of the lengths the kernel reads (`geo` and `out` are
        // kept alive until the stream reaches the launch by the per-stream
        // buffer cache), then the op's scalar parameters in the element's
        // compute type (`kernel_scalar`), as many as its kernel line declares (`_1`, `_2`); the
        // kernel bounds its grid-stride loop by `n`.
        unsafe { builder.launch(elementwise(n)) }.map_err(|e| device.error(Op::NAME, e))?;
        Ok(out)
    }
}
