//! CPU kernels.

use super::ReduceKernel;
use crate::device::Cpu;

impl ReduceKernel for Cpu {}
