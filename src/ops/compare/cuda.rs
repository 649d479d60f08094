//! Comparison kernels on CUDA: unreachable until the CUDA backend can create
//! tensors (see [`crate::device::cuda`]).

use super::{CompareKernel, CompareOp, LogicalOp};
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::element::Element;
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> CompareKernel for Cuda<N> {
    fn compare<E: Element>(
        _op: CompareOp,
        lhs: &CudaStorage<E>,
        _lhs_layout: &Layout,
        _rhs: &CudaStorage<E>,
        _rhs_layout: &Layout,
    ) -> Result<CudaStorage<u8>> {
        lhs.unreachable()
    }

    fn compare_scalar<E: Element>(
        _op: CompareOp,
        x: &CudaStorage<E>,
        _layout: &Layout,
        _scalar: E,
    ) -> Result<CudaStorage<u8>> {
        x.unreachable()
    }

    fn logical_not(x: &CudaStorage<u8>, _layout: &Layout) -> Result<CudaStorage<u8>> {
        x.unreachable()
    }

    fn logical(
        _op: LogicalOp,
        lhs: &CudaStorage<u8>,
        _lhs_layout: &Layout,
        _rhs: &CudaStorage<u8>,
        _rhs_layout: &Layout,
    ) -> Result<CudaStorage<u8>> {
        lhs.unreachable()
    }

    fn where_cond<E: Element>(
        cond: &CudaStorage<u8>,
        _cond_layout: &Layout,
        _on_true: &CudaStorage<E>,
        _on_true_layout: &Layout,
        _on_false: &CudaStorage<E>,
        _on_false_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        cond.unreachable()
    }
}
