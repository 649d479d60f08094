//! (in progress)

mod cpu;
mod cuda;

use crate::device::Backend;

/// Device kernels of this family. Implemented by every [`Device`](crate::Device).
pub trait MatmulKernel: Backend {}
