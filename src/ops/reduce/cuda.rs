//! Reduction and softmax kernels on CUDA: unreachable until the CUDA backend
//! can create tensors (see [`crate::device::cuda`]).

use super::{ArgReduceOp, ReduceKernel, ReduceOp};
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> ReduceKernel for Cuda<N> {
    fn reduce<E: Element>(_op: ReduceOp, x: &CudaStorage<E>, _layout: &Layout, _axis: usize) -> Result<CudaStorage<E>> {
        x.unreachable()
    }

    fn arg_reduce<E: Element>(
        _op: ArgReduceOp,
        x: &CudaStorage<E>,
        _layout: &Layout,
        _axis: usize,
    ) -> Result<CudaStorage<i64>> {
        x.unreachable()
    }

    fn softmax<E: FloatElement>(x: &CudaStorage<E>, _layout: &Layout, _axis: usize, _log: bool) -> Result<CudaStorage<E>> {
        x.unreachable()
    }
}
