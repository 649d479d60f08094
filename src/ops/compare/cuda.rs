//! CUDA kernels: unreachable until the CUDA backend can create tensors
//! (see [`crate::device::cuda`]).

use super::CompareKernel;
use crate::device::Cuda;

impl<const N: usize> CompareKernel for Cuda<N> {}
