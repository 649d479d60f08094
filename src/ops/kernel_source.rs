//! Where an op type's CUDA kernels come from, for the op families declared
//! as types ([`UnaryOp`](super::unary::UnaryOp),
//! [`BinaryOp`](super::binary::BinaryOp),
//! [`CompareOp`](super::compare::CompareOp)).

use crate::backend::cuda::context::CudaDevice;
use crate::error::{Error, Result};
use cudarc::driver::CudaFunction;
use std::any::TypeId;

/// Where an op's CUDA kernels come from: [`NONE`](Self::NONE), or CUDA
/// source given with [`cuda`](Self::cuda).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSource(Kernels);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernels {
    None,
    Cuda(&'static str),
    /// devtensor's own file of the op's family, `kernels/<family>.cu`.
    BuiltIn,
}

impl KernelSource {
    /// No CUDA kernel: the op runs on the CPU, and on a GPU returns an
    /// error naming the op and the device.
    pub const NONE: KernelSource = KernelSource(Kernels::None);

    /// devtensor's own kernels, in the family's `kernels/<family>.cu`.
    pub(crate) const BUILT_IN: KernelSource = KernelSource(Kernels::BuiltIn);

    /// CUDA C++ compiled by NVRTC the first time the op runs on each GPU.
    /// The source sees `kernels/common.cuh`, so one line per op usually
    /// does:
    ///
    /// - `DT_UNARY_FLOAT(cube, x * x * x)` defines `unary_cube_f32`,
    ///   `unary_cube_f64`, `unary_cube_bf16` and `unary_cube_f16`;
    ///   `DT_UNARY_ALL` adds `i64` and `u8`, and the `_1` and `_2` forms
    ///   take the scalar parameters `a` and `b`;
    /// - `DT_BINARY_FLOAT(hypot, sqrt(a * a + b * b))` defines the three
    ///   kernels of a binary op (broadcast, rows and scalar) for the four
    ///   float types; `DT_BINARY_ALL` adds `i64` and `u8`;
    /// - `DT_COMPARE_FLOAT(near, fabs(a - b) < 0.1)` defines the two kernels
    ///   of a comparison (broadcast and scalar), giving masks, for the four
    ///   float types; `DT_COMPARE_ALL` adds `i64` and `u8`.
    ///
    /// For `bf16` and `f16` the expression computes in `float` (the
    /// operands and `T` are `float`) and its result is rounded once.
    ///
    /// # Safety
    ///
    /// The GPU runs this code unchecked. It must define the kernels the
    /// op's family names (`unary_<NAME>_<dtype>`, the three
    /// `binary_<NAME>_..._<dtype>` or the two `compare_<NAME>_..._<dtype>`)
    /// for each element type the op is implemented for, with the signatures
    /// the `DT_UNARY_*`, `DT_BINARY_*` and `DT_COMPARE_*` macros give (for a unary op, as many scalar parameters
    /// as its `params` returns), and read and write only the elements
    /// those signatures describe.
    pub const unsafe fn cuda(source: &'static str) -> KernelSource {
        KernelSource(Kernels::Cuda(source))
    }

    /// The kernel `name` of the op `op` (type `op_type`) of `family`,
    /// compiled on its first use on `device`.
    pub(crate) fn function(
        self,
        device: &CudaDevice,
        op: &'static str,
        family: &'static str,
        op_type: TypeId,
        name: &str,
    ) -> Result<CudaFunction> {
        match self.0 {
            Kernels::BuiltIn => device.function(op, family, name),
            Kernels::Cuda(source) => device.custom_function(op, op_type, source, name),
            Kernels::None => Err(Error::Argument {
                op,
                device: device.name.clone(),
                reason: "this op has no CUDA kernel (its `KERNELS` is `KernelSource::NONE`); \
                         give it one, or run it on the CPU"
                    .into(),
            }),
        }
    }
}
