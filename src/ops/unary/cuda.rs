//! Unary kernels on CUDA: unreachable until the CUDA backend can create
//! tensors (see [`crate::device::cuda`]).

use super::{FloatUnaryOp, UnaryKernel, UnaryOp};
use crate::device::Cuda;
use crate::device::cuda::CudaStorage;
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::shape::Layout;

impl<const N: usize> UnaryKernel for Cuda<N> {
    fn unary<E: Element>(_op: UnaryOp<E>, x: &CudaStorage<E>, _layout: &Layout) -> Result<CudaStorage<E>> {
        x.unreachable()
    }

    fn unary_float<E: FloatElement>(
        _op: FloatUnaryOp<E>,
        x: &CudaStorage<E>,
        _layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        x.unreachable()
    }
}
