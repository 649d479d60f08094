//! CUDA kernels: unreachable until the CUDA backend can create tensors
//! (see [`crate::device::cuda`]).

use super::UnaryKernel;
use crate::device::Cuda;

impl<const N: usize> UnaryKernel for Cuda<N> {}
