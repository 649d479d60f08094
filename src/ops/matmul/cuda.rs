//! Matrix products on CUDA: unreachable until the CUDA backend can create
//! tensors (see [`crate::device::cuda`]).

use super::MatmulKernel;
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::element::FloatElement;
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> MatmulKernel for Cuda<N> {
    fn matmul<E: FloatElement>(
        lhs: &CudaStorage<E>,
        _lhs_layout: &Layout,
        _rhs: &CudaStorage<E>,
        _rhs_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        lhs.unreachable()
    }
}
