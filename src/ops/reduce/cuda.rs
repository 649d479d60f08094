//! CUDA kernels: unreachable until the CUDA backend can create tensors
//! (see [`crate::device::cuda`]).

use super::ReduceKernel;
use crate::device::Cuda;

impl<const N: usize> ReduceKernel for Cuda<N> {}
