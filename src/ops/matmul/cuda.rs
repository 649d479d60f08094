//! CUDA kernels: unreachable until the CUDA backend can create tensors
//! (see [`crate::device::cuda`]).

use super::MatmulKernel;
use crate::device::Cuda;

impl<const N: usize> MatmulKernel for Cuda<N> {}
