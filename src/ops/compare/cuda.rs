//! Comparison, mask and selection kernels on CUDA (`kernels/compare.cu`).

use super::{CompareKernel, CompareOp};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::launch::{Strided, elementwise, kernel_scalar, launch_kernel, map_setup};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use cudarc::driver::CudaFunction;
use std::any::TypeId;

/// The op's kernel `compare_<NAME>_<form><dtype>` (`form` is `""` or
/// `"scalar_"`).
fn function<E: Element, Op: CompareOp<E>>(device: &CudaDevice, form: &str) -> Result<CudaFunction> {
    let name = format!("compare_{}_{form}{}", Op::NAME, E::DTYPE.name());
    Op::KERNELS.function(device, Op::NAME, "compare", TypeId::of::<Op>(), &name)
}

impl CompareKernel for AnyCuda {
    fn compare<E: Element, Op: CompareOp<E>>(
        _: Op,
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CudaStorage<u8>> {
        let device = Self::device()?;
        let n = lhs_layout.elem_count();
        let out = CudaStorage::alloc(&device, Op::NAME, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::new(
            &device,
            Op::NAME,
            lhs_layout.dims(),
            [lhs_layout.strides(), rhs_layout.strides()],
            [lhs_layout.offset(), rhs_layout.offset()],
        )?;
        let function = function::<E, Op>(&device, "")?;
        launch_kernel!(function function, device, Op::NAME, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1],
            lhs.ptr(), rhs.ptr(), out.ptr())?;
        Ok(out)
    }

    fn compare_scalar<E: Element, Op: CompareOp<E>>(
        _: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        scalar: E,
    ) -> Result<CudaStorage<u8>> {
        let device = Self::device()?;
        let (out, geo) = map_setup(&device, Op::NAME, layout)?;
        let Some(geo) = geo else { return Ok(out) };
        let n = layout.elem_count();
        let function = function::<E, Op>(&device, "scalar_")?;
        launch_kernel!(function function, device, Op::NAME, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), kernel_scalar(scalar), out.ptr())?;
        Ok(out)
    }

    fn logical_not(x: &CudaStorage<u8>, layout: &Layout) -> Result<CudaStorage<u8>> {
        let device = Self::device()?;
        let (out, geo) = map_setup(&device, "logical_not", layout)?;
        let Some(geo) = geo else { return Ok(out) };
        let n = layout.elem_count();
        launch_kernel!(device, "logical_not", "compare", "compare_not_u8", elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), out.ptr())?;
        Ok(out)
    }

    fn where_cond<E: Element>(
        cond: &CudaStorage<u8>,
        cond_layout: &Layout,
        on_true: &CudaStorage<E>,
        on_true_layout: &Layout,
        on_false: &CudaStorage<E>,
        on_false_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        let op = "where_cond";
        let n = cond_layout.elem_count();
        let out = CudaStorage::alloc(&device, op, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::new(
            &device,
            op,
            cond_layout.dims(),
            [cond_layout.strides(), on_true_layout.strides(), on_false_layout.strides()],
            [cond_layout.offset(), on_true_layout.offset(), on_false_layout.offset()],
        )?;
        let name = format!("compare_where_{}", E::DTYPE.name());
        launch_kernel!(device, op, "compare", name, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1],
            geo.strides(2), geo.offsets[2], cond.ptr(), on_true.ptr(), on_false.ptr(), out.ptr())?;
        Ok(out)
    }
}
