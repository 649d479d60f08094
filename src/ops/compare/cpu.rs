//! CPU kernels.

use super::CompareKernel;
use crate::device::Cpu;

impl CompareKernel for Cpu {}
