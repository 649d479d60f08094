//! CPU kernels.

use super::MatmulKernel;
use crate::device::Cpu;

impl MatmulKernel for Cpu {}
