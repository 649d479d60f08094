//! Binary kernels on CUDA: `binary_<NAME>_<dtype>`, `binary_<NAME>_rows_<dtype>`
//! and `binary_<NAME>_scalar_<dtype>`, from `kernels/binary.cu` for the
//! built-in ops and from the op's own source for a custom one.

use super::{BinaryKernel, BinaryOp};
use crate::backend::cuda::AnyCuda;
use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::context::CudaDevice;
use crate::backend::cuda::launch::{Merged, Strided, elementwise, kernel_scalar, launch_kernel, per_row};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, count_of};
use crate::ops::KernelSource;
use cudarc::driver::CudaFunction;
use std::any::TypeId;
use std::sync::Arc;

/// What the launches need of a [`BinaryOp`]: its constants, so that they
/// are compiled once per element type rather than once per op.
#[derive(Clone, Copy)]
struct Info {
    name: &'static str,
    kernels: KernelSource,
    division: bool,
    op_type: TypeId,
}

impl Info {
    fn of<E: Element, Op: BinaryOp<E>>() -> Self {
        Info { name: Op::NAME, kernels: Op::KERNELS, division: Op::DIVISION, op_type: TypeId::of::<Op>() }
    }

    /// The op's kernel `binary_<NAME>_<form><dtype>` (`form` is `""`,
    /// `"rows_"` or `"scalar_"`).
    fn function<E: Element>(self, device: &CudaDevice, form: &str) -> Result<CudaFunction> {
        let name = format!("binary_{}_{form}{}", self.name, E::DTYPE.name());
        self.kernels.function(device, self.name, "binary", self.op_type, &name)
    }
}

/// Rejects an integer division whose divisors (the elements `layout`
/// selects) include a zero, with the CPU backend's error: the kernel counts
/// the zeros and the host reads the count back.
fn check_divisors<E: Element>(
    op: Info,
    device: &Arc<CudaDevice>,
    divisors: &CudaStorage<E>,
    layout: &Layout,
) -> Result<()> {
    let n = layout.elem_count();
    if !op.division || E::IS_FLOAT || n == 0 {
        return Ok(());
    }
    // The kernel counts into an unsigned 64-bit word, which i64 storage
    // holds bit for bit.
    let mut count = CudaStorage::<i64>::alloc(device, op.name, 1)?;
    count.write(device, op.name, &[0])?;
    let geo = Strided::new(device, op.name, layout.dims(), [layout.strides()], [layout.offset()])?;
    let name = format!("binary_count_zero_{}", E::DTYPE.name());
    launch_kernel!(device, op.name, "binary", name, elementwise(n);
        n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], divisors.ptr(), count.ptr())?;
    match count.read(device, op.name, 0..1)?[0] {
        0 => Ok(()),
        _ => Err(division_by_zero(device, op.name)),
    }
}

/// Rows from which a layout that merges to two axes gets the row kernel
/// (a block per row, no index division); shorter rows would leave most of
/// a block idle.
const ROW_KERNEL_MIN_COLS: usize = 128;

/// Launches the op over the broadcast shape `dims` into the dense `out`,
/// with each operand given as (strides, offset) and its address.
fn launch_zip<E: Element>(
    op: Info,
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
        let function = op.function::<E>(device, "rows_")?;
        return launch_kernel!(function function, device, op.name, per_row(rows);
            rows, cols, lhs_row, lhs_col, lhs_offset, rhs_row, rhs_col, rhs_offset, ptrs[0], ptrs[1], out);
    }
    let geo = Strided::merged(device, op.name, &merged, [lhs_offset, rhs_offset])?;
    let function = op.function::<E>(device, "")?;
    launch_kernel!(function function, device, op.name, elementwise(n);
        n, geo.rank, geo.dims(), geo.strides(0), geo.offsets[0], geo.strides(1), geo.offsets[1],
        ptrs[0], ptrs[1], out)
}

fn division_by_zero(device: &CudaDevice, op: &'static str) -> Error {
    Error::Argument { op, device: device.name.clone(), reason: "integer division by zero".into() }
}

impl BinaryKernel for AnyCuda {
    fn binary<E: Element, Op: BinaryOp<E>>(
        _: Op,
        lhs: &CudaStorage<E>,
        lhs_layout: &Layout,
        rhs: &CudaStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        let op = Info::of::<E, Op>();
        let device = Self::device()?;
        check_divisors(op, &device, rhs, rhs_layout)?;
        let n = lhs_layout.elem_count();
        let out = CudaStorage::alloc(&device, op.name, n)?;
        if n == 0 {
            return Ok(out);
        }
        let operands = [(lhs_layout.strides(), lhs_layout.offset()), (rhs_layout.strides(), rhs_layout.offset())];
        launch_zip::<E>(op, &device, lhs_layout.dims(), operands, [lhs.ptr(), rhs.ptr()], out.ptr())?;
        Ok(out)
    }

    fn binary_scalar<E: Element, Op: BinaryOp<E>>(
        _: Op,
        x: &CudaStorage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<CudaStorage<E>> {
        let op = Info::of::<E, Op>();
        let device = Self::device()?;
        if scalar_first {
            check_divisors(op, &device, x, layout)?;
        } else if op.division && !E::IS_FLOAT && scalar == E::ZERO {
            return Err(division_by_zero(&device, op.name));
        }
        let n = layout.elem_count();
        let out = CudaStorage::alloc(&device, op.name, n)?;
        if n == 0 {
            return Ok(out);
        }
        let geo = Strided::new(&device, op.name, layout.dims(), [layout.strides()], [layout.offset()])?;
        let function = op.function::<E>(&device, "scalar_")?;
        launch_kernel!(function function, device, op.name, elementwise(n);
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
        let op = Info::of::<E, Op>();
        let device = Self::device()?;
        check_divisors(op, &device, rhs, rhs_layout)?;
        let n = lhs_layout.elem_count();
        if n == 0 {
            return Ok(());
        }
        let Some(range) = lhs_layout.contiguous_range() else {
            return Err(Error::Argument {
                op: op.name,
                device: device.name.clone(),
                reason: "an in-place operation needs a contiguous destination".into(),
            });
        };
        // The kernel writes `out` in place of a dense `lhs` at offset 0, so
        // both point at the destination's first element.
        let dense = lhs_layout.shape().contiguous_strides();
        let dst = lhs.ptr_at(range.start);
        let operands = [(&dense[..], 0), (rhs_layout.strides(), rhs_layout.offset())];
        launch_zip::<E>(op, &device, lhs_layout.dims(), operands, [dst, rhs.ptr()], dst)
    }
}
