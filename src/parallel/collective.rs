//! Collectives: how the replicas of a data-parallel step sum a bucket in
//! place. The bucket exchange and the replicas see only the [`Collective`]
//! trait; NCCL over the GPUs of one process is its one implementation today,
//! and a process group across processes is the next (`docs/distributed.md`).

use crate::backend::cuda::nccl::{NcclBuffer, NcclClique};
use crate::error::Result;
use std::any::Any;

/// A group of ranks that sum buffers together, each rank calling from its own
/// thread, every rank making the same calls in the same order.
pub(crate) trait Collective: Send + Sync {
    /// Sums rank `rank`'s buffer with the other ranks' in place. `storage`
    /// is the storage of a dense `f32`, `bf16` or `f16` tensor on `device`.
    fn all_reduce_sum(&self, rank: usize, storage: &dyn Any, device: &str) -> Result<()>;

    /// Makes every rank waiting inside a collective return, so that one
    /// rank's failure never leaves the others blocked.
    fn abort(&self);
}

impl Collective for NcclClique {
    fn all_reduce_sum(&self, rank: usize, storage: &dyn Any, device: &str) -> Result<()> {
        // Every `Cuda<N>` stores a `CudaStorage`; any other device's storage
        // cannot take part in NCCL.
        NcclClique::all_reduce_sum(self, rank, &NcclBuffer::of(storage, "all_reduce", device)?)
    }

    fn abort(&self) {
        NcclClique::abort(self)
    }
}
