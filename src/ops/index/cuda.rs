//! Indexing and joining kernels on CUDA: unreachable until the CUDA backend
//! can create tensors (see [`crate::device::cuda`]).

use super::IndexKernel;
use crate::device::cuda::CudaStorage;
use crate::device::{Backend, Cuda};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::shape::{Layout, Shape};

impl<const N: usize> IndexKernel for Cuda<N> {
    fn first_out_of_range(indices: &CudaStorage<i64>, _layout: &Layout, _size: usize) -> Result<Option<i64>> {
        indices.unreachable()
    }

    fn index_select<E: Element>(
        src: &CudaStorage<E>,
        _src_layout: &Layout,
        _axis: usize,
        _indices: &CudaStorage<i64>,
        _indices_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        src.unreachable()
    }

    fn gather<E: Element>(
        src: &CudaStorage<E>,
        _src_layout: &Layout,
        _axis: usize,
        _index: &CudaStorage<i64>,
        _index_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        src.unreachable()
    }

    fn scatter_add<E: Element>(
        dst: &CudaStorage<E>,
        _dst_layout: &Layout,
        _axis: usize,
        _index: &CudaStorage<i64>,
        _index_layout: &Layout,
        _src: &CudaStorage<E>,
        _src_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        dst.unreachable()
    }

    fn index_add<E: Element>(
        dst: &CudaStorage<E>,
        _dst_layout: &Layout,
        _axis: usize,
        _indices: &CudaStorage<i64>,
        _indices_layout: &Layout,
        _src: &CudaStorage<E>,
        _src_layout: &Layout,
    ) -> Result<CudaStorage<E>> {
        dst.unreachable()
    }

    fn cat<E: Element>(
        inputs: &[(&CudaStorage<E>, &Layout)],
        _axis: usize,
        _out_shape: &Shape,
    ) -> Result<CudaStorage<E>> {
        match inputs.first() {
            Some((storage, _)) => storage.unreachable(),
            // Callers never pass an empty list; answer one without panicking.
            None => Err(Error::Shape {
                op: "cat",
                device: Self::name(),
                shapes: vec![],
                reason: "expected at least one tensor, got an empty list".into(),
            }),
        }
    }
}
