//! CPU kernels.

use super::IndexKernel;
use crate::device::Cpu;

impl IndexKernel for Cpu {}
