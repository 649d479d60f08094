//! Collectives: how the replicas of a data-parallel step sum a bucket in
//! place. The bucket exchange and the replicas see only the [`Collective`]
//! trait; NCCL over the GPUs of one process is its one implementation today,
//! and a process group across processes is the next (`docs/distributed.md`).

use crate::backend::cuda::CudaStorage;
use crate::backend::cuda::nccl::NcclClique;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use std::any::Any;

/// A group of ranks that sum buffers together, each rank calling from its own
/// thread, every rank making the same calls in the same order.
pub(crate) trait Collective: Send + Sync {
    /// Sums rank `rank`'s buffer with the other ranks' in place. `storage`
    /// is the storage of a dense `f32` tensor on `device`.
    fn all_reduce_sum(&self, rank: usize, storage: &dyn Any, device: &str) -> Result<()>;

    /// Makes every rank waiting inside a collective return, so that one
    /// rank's failure never leaves the others blocked.
    fn abort(&self);
}

/// Sums `tensor` (dense, on rank `rank`'s device) with the other ranks'.
pub(crate) fn all_reduce_sum<D: Device>(group: &dyn Collective, rank: usize, tensor: &Tensor<D>) -> Result<()> {
    group.all_reduce_sum(rank, tensor.storage(), &D::name())
}

impl Collective for NcclClique {
    fn all_reduce_sum(&self, rank: usize, storage: &dyn Any, device: &str) -> Result<()> {
        // Every `Cuda<N>` stores a `CudaStorage`; any other device's storage
        // cannot take part in NCCL.
        let Some(storage) = storage.downcast_ref::<CudaStorage<f32>>() else {
            return Err(Error::Argument {
                op: "all_reduce",
                device: device.to_string(),
                reason: "NCCL reduces GPU memory only".into(),
            });
        };
        NcclClique::all_reduce_sum(self, rank, storage)
    }

    fn abort(&self) {
        NcclClique::abort(self)
    }
}
