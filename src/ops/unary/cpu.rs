//! CPU kernels.

use super::UnaryKernel;
use crate::device::Cpu;

impl UnaryKernel for Cpu {}
