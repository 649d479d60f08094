//! CUDA kernels: unreachable until the CUDA backend can create tensors
//! (see [`crate::device::cuda`]).

use super::IndexKernel;
use crate::device::Cuda;

impl<const N: usize> IndexKernel for Cuda<N> {}
