//! Unary kernels on CUDA: `unary_<NAME>_<dtype>`, from `kernels/unary.cu`
//! for the built-in ops and from the op's own source for a custom one.

use super::{KernelSource, UnaryKernel, UnaryOp};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::launch::{KernelScalar, elementwise, kernel_scalar, map_setup};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use cudarc::driver::PushKernelArg as _;
use std::any::TypeId;

impl UnaryKernel for AnyCuda {
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &CudaStorage<E>, layout: &Layout) -> Result<CudaStorage<E>> {
        let params: Vec<KernelScalar> = op.params().as_slice().iter().map(|&p| kernel_scalar(p)).collect();
        launch(Op::NAME, Op::KERNELS, TypeId::of::<Op>(), &params, x, layout)
    }
}

/// The launch of op `name`'s kernel, apart from the op's type so that it
/// is compiled once per element type.
fn launch<E: Element>(
    name: &'static str,
    kernels: KernelSource,
    op_type: TypeId,
    params: &[KernelScalar],
    x: &CudaStorage<E>,
    layout: &Layout,
) -> Result<CudaStorage<E>> {
    let device = AnyCuda::device()?;
    let kernel = format!("unary_{}_{}", name, E::DTYPE.name());
    let function = kernels.function(&device, name, "unary", op_type, &kernel)?;
    let (out, geo) = map_setup(&device, name, layout)?;
    let Some(geo) = geo else { return Ok(out) };
    let n = layout.elem_count();
    let (dims, strides, offset, x, out_ptr) = (geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), out.ptr());
    let mut builder = device.stream.launch_builder(&function);
    builder.arg(&n).arg(&geo.rank).arg(&dims).arg(&strides).arg(&offset).arg(&x);
    for param in params {
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
    unsafe { builder.launch(elementwise(n)) }.map_err(|e| device.error(name, e))?;
    Ok(out)
}
