//! Binary kernels on CUDA: `binary_<NAME>_<dtype>`, `binary_<NAME>_rows_<dtype>`
//! and `binary_<NAME>_scalar_<dtype>`, from `kernels/binary.cu` for the
//! built-in ops and from the op's own source for a custom one.

use super::{BinaryKernel, BinaryOp};
use crate::backend::Cuda;
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::launch::{Merged, Strided, elementwise, kernel_scalar, launch_kernel, per_row};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, count_of};
use cudarc::driver::CudaFunction;
use std::any::TypeId;
use std::sync::Arc;

/// The op's kernel `binary_<NAME>_<form><dtype>` (`form` is `""`, `"rows_"`
/// or `"scalar_"`).
fn function<E: Element, Op: BinaryOp<E>>(device: &CudaDevice, form: &str) -> Result<CudaFunction> {
    let name = format!("binary_{}_{form}{}", Op::NAME, E::DTYPE.name());
    Op::KERNELS.function(device, Op::NAME, "binary", TypeId::of::<Op>(), &name)
}

/// Rejects an integer division whose divisors (the elements `layout`
/// selects) include a zero, with the CPU backend's error: the kernel counts
/// the zeros and the host reads the count back.
fn check_divisors<E: Element, Op: BinaryOp<E>>(
    device: &Arc<CudaDevice>,
    divisors: &CudaStorage<E>,
    layout: &Layout,
) -> Result<()> {
    let n = layout.elem_count();
    if !Op::DIVISION || E::IS_FLOAT || n == 0 {
        return Ok(());
    }
    // The kernel counts into an unsigned 64-bit word, which i64 storage
    // holds bit for bit.
    let mut count = CudaStorage::<i64>::alloc(device, Op::NAME, 1)?;
    count.write(device, Op::NAME, &[0])?;
    let geo = Strided::new(device, Op::NAME, layout.dims(), [layout.strides()], [layout.offset()])?;
    let name = format!("binary_count_zero_{}", E::DTYPE.name());
    launch_kernel!(device, Op::NAME, "binary", name, elementwise(n);
        n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], divisors.ptr(), count.ptr())?;
    match count.read(device, Op::NAME, 0..1)?[0] {
        0 => Ok(()),
        _ => Err(division_by_zero(device, Op::NAME)),
    }
}

/// Rows from which a layout that merges to two axes gets the row kernel
/// (a block per row, no index division); shorter rows would leave most of
/// a block idle.
const ROW_KERNEL_MIN_COLS: usize = 128;

/// Launches the op over the broadcast shape `dims` into the dense `out`,
/// with each operand given as (strides, offset) and its address.
fn launch_zip<E: Element, Op: BinaryOp<E>>(
    device: &Arc<CudaDevice>,
    dims: &[usize],
    operands: [(&[usize], usize); 2],
    ptrs: [u64; 2],
    out: u64,
) -> Result<()> {
    let n = count_of(dims);
    let [(lhs_strides, lhs_offset), (rhs_strides, rhs_offset)] = operands;
    let merged = Merged::new(dims, [lhs_strides, rhs_strides]);
    if let (&[rows, cols], &[lhs_row, lhs_col], &[rhs_row, rhs_col]) =
        (&merged.dims[..], &merged.strides[0][..], &merged.strides[1][..])
        && cols >= ROW_KERNEL_MIN_COLS
    {
        let function = function::<E, Op>(device, "rows_")?;
        return launch_kernel!(function function, device, Op::NAME, per_row(rows);
            rows, cols, lhs_row, lhs_col, lhs_offset, rhs_row, rhs_col, rhs_offset, ptrs[0], ptrs[1], out);
    }
    let geo = Strided::merged(device, Op::NAME, &merged, [lhs_offset, rhs_offset])?;
    let function = function::<E, Op>(device, "")?;
    launch_kernel!(function function, device, Op::NAME, elementwise(n);
        n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1],
        ptrs[0], ptrs[1], out)
}

fn division_by_zero(device: &CudaDevice, op: &'static str) -> Error {
    Error::Argument { op, device: device.name.clone(), reason: "integer division by zero".into() }
}

impl<const N: usize> BinaryKernel for Cuda<N> {
    fn binary<E: Element, Op: BinaryOp<E>>(
        _: Op,
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        check_divisors::<E, Op>(&device, rhs, rhs_layout)?;
        let n = lhs_layout.elem_count();
        let out = CudaStorage::alloc(&device, Op::NAME, n)?;
        if n == 0 {
            return Ok(out);
        }
        let operands = [(lhs_layout.strides(), lhs_layout.offset()), (rhs_layout.strides(), rhs_layout.offset())];
        launch_zip::<E, Op>(&device, lhs_layout.dims(), operands, [lhs.ptr(), rhs.ptr()], out.ptr())?;
        Ok(out)
    }

    fn binary_scalar<E: Element, Op: BinaryOp<E>>(
        _: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<CudaStorage<E>> {
        let device = Self::device()?;
        if scalar_first {
            check_divisors::<E, Op>(&device, x, layout)?;
        } else if Op::DIVISION && !E::IS_FLOAT && scalar == E::ZERO {
            return Err(division_by_zero(&device, Op::NAME));
        }
        let n = layout.elem_count();
        let out = CudaStorage::alloc(&device, Op::NAME, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::new(&device, Op::NAME, layout.dims(), [layout.strides()], [layout.offset()])?;
        let function = function::<E, Op>(&device, "scalar_")?;
        launch_kernel!(function function, device, Op::NAME, elementwise(n);
            n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], x.ptr(), kernel_scalar(scalar),
            i32::from(scalar_first), out.ptr())?;
        Ok(out)
    }

    fn binary_assign<E: Element, Op: BinaryOp<E>>(
        _: Op,
        lhs: &mut CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<()> {
        let device = Self::device()?;
        check_divisors::<E, Op>(&device, rhs, rhs_layout)?;
        let n = lhs_layout.elem_count();
        if n == 0 {
            return Ok(());
        }
        let Some(range) = lhs_layout.contiguous_range() else {
            return Err(Error::Argument {
                op: Op::NAME,
                device: device.name.clone(),
                reason: "an in-place operation needs a contiguous destination".into(),
            });
        };
        // The kernel writes `out` in place of a dense `lhs` at offset 0, so
        // both point at the destination's first element.
        let dense = lhs_layout.shape().contiguous_strides();
        let dst = lhs.ptr_at(range.start);
        let operands = [(&dense[..], 0), (rhs_layout.strides(), rhs_layout.offset())];
        launch_zip::<E, Op>(&device, lhs_layout.dims(), operands, [dst, rhs.ptr()], dst)
    }
}
