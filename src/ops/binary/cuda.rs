//! Binary kernels on CUDA: unreachable until the CUDA backend can create
//! tensors (see [`crate::device::cuda`]).

use super::{BinaryKernel, BinaryOp};
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::element::Element;
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> BinaryKernel for Cuda<N> {
    fn binary<E: Element>(
        _op: BinaryOp,
        lhs: &CudaStorage<E>,
        _lhs_layout: &Layout,
        _rhs: &CudaStorage<E>,
        _rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        lhs.unreachable()
    }

    fn binary_scalar<E: Element>(
        _op: BinaryOp,
        x: &CudaStorage<E>,
        _layout: &Layout,
        _scalar: E,
        _scalar_first: bool,
    ) -> Result<CudaStorage<E>> {
        x.unreachable()
    }

    fn binary_assign<E: Element>(
        _op: BinaryOp,
        lhs: &mut CudaStorage<E>,
        _lhs_layout: &Layout,
        _rhs: &CudaStorage<E>,
        _rhs_layout: &Layout,
    ) -> Result<()> {
        lhs.unreachable()
    }
}
