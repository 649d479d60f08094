//! [`ScatterBatch`]: a global batch that can be cut into one shard per
//! replica, each moved to its replica's device.

use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A batch whose first axis is the batch axis: a tensor on any device, or a
/// tuple of two or three (inputs, targets, ...). Data-parallel training
/// gives each replica the rows `start..start + len` of every tensor, moved
/// to the replica's device, as the same batch type on that device
/// ([`On<D>`](Self::On)).
pub trait ScatterBatch: Send + Sync {
    /// The batch on `D`.
    type On<D: Device>;

    /// The number of samples; every tensor must have this many rows.
    fn try_batch_len(&self) -> Result<usize>;

    /// Rows `start..start + len` of the batch, moved to `D`.
    fn shard<D: Device>(&self, start: usize, len: usize) -> Result<Self::On<D>>;
}

impl<DB: Device, E: Element> ScatterBatch for Tensor<DB, E> {
    type On<D: Device> = Tensor<D, E>;

    fn try_batch_len(&self) -> Result<usize> {
        self.dims().first().copied().ok_or_else(|| Error::Shape {
            op: "DataParallel::step",
            device: DB::name(),
            shapes: vec![self.shape().clone()],
            reason: "a batch tensor needs a batch axis; this one has rank 0".into(),
        })
    }

    fn shard<D: Device>(&self, start: usize, len: usize) -> Result<Tensor<D, E>> {
        self.try_narrow(0, start, len)?.try_to::<D>()
    }
}

/// Checks that every part of a tuple batch has the same number of rows.
fn same_len(lens: &[usize]) -> Result<usize> {
    if lens.windows(2).any(|w| w[0] != w[1]) {
        return Err(Error::Argument {
            op: "DataParallel::step",
            device: "host".into(),
            reason: format!("the tensors of a batch must have the same number of rows, not {lens:?}"),
        });
    }
    Ok(lens[0])
}

impl<A: ScatterBatch, B: ScatterBatch> ScatterBatch for (A, B) {
    type On<D: Device> = (A::On<D>, B::On<D>);

    fn try_batch_len(&self) -> Result<usize> {
        same_len(&[self.0.try_batch_len()?, self.1.try_batch_len()?])
    }

    fn shard<D: Device>(&self, start: usize, len: usize) -> Result<Self::On<D>> {
        Ok((self.0.shard(start, len)?, self.1.shard(start, len)?))
    }
}

impl<A: ScatterBatch, B: ScatterBatch, C: ScatterBatch> ScatterBatch for (A, B, C) {
    type On<D: Device> = (A::On<D>, B::On<D>, C::On<D>);

    fn try_batch_len(&self) -> Result<usize> {
        same_len(&[self.0.try_batch_len()?, self.1.try_batch_len()?, self.2.try_batch_len()?])
    }

    fn shard<D: Device>(&self, start: usize, len: usize) -> Result<Self::On<D>> {
        Ok((self.0.shard(start, len)?, self.1.shard(start, len)?, self.2.shard(start, len)?))
    }
}
