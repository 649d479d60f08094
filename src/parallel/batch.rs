//! [`ScatterBatch`]: a global batch that can be cut into one shard per
//! replica, each moved to its replica's device; [`ShardOf`]: the batch a
//! replica declares, as such a shard; [`ReplicaBatches`]: every replica's
//! batch checked at once.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::Device;
use crate::tensor::Tensor;
use std::any::Any;

/// A batch whose first axis is the batch axis: a tensor on any device, or a
/// tuple of two or three (inputs, targets, ...). Data-parallel training
/// gives each replica the rows `start..start + len` of every tensor, moved
/// to the replica's device, as the batch the replica declares
/// ([`ShardOf`]).
pub trait ScatterBatch: Send + Sync + 'static {
    /// The number of samples; every tensor must have this many rows.
    fn try_batch_len(&self) -> Result<usize>;
}

impl<DB: Device, E: Element> ScatterBatch for Tensor<DB, E> {
    fn try_batch_len(&self) -> Result<usize> {
        self.dims().first().copied().ok_or_else(|| Error::Shape {
            op: "DataParallel::step",
            device: DB::name(),
            shapes: vec![self.shape().clone()],
            reason: "a batch tensor needs a batch axis; this one has rank 0".into(),
        })
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
    fn try_batch_len(&self) -> Result<usize> {
        same_len(&[self.0.try_batch_len()?, self.1.try_batch_len()?])
    }
}

impl<A: ScatterBatch, B: ScatterBatch, C: ScatterBatch> ScatterBatch for (A, B, C) {
    fn try_batch_len(&self) -> Result<usize> {
        same_len(&[self.0.try_batch_len()?, self.1.try_batch_len()?, self.2.try_batch_len()?])
    }
}

/// The batch a replica on `D` declares (its [`Loss::Batch`](super::Loss::Batch))
/// as a shard of the global batch `B`: `B`'s tensors, each on `D`.
/// Implemented for tensors and 2- and 3-tuples of them; you never implement
/// it.
pub trait ShardOf<B, D: Device>: Sized + Send + 'static {
    /// Rows `start..start + len` of `batch`, moved to `D`.
    fn shard(batch: &B, start: usize, len: usize) -> Result<Self>;
}

impl<DB: Device, D: Device, E: Element> ShardOf<Tensor<DB, E>, D> for Tensor<D, E> {
    fn shard(batch: &Tensor<DB, E>, start: usize, len: usize) -> Result<Self> {
        batch.try_narrow(0, start, len)?.try_to::<D>()
    }
}

impl<A, B, SA: ShardOf<A, D>, SB: ShardOf<B, D>, D: Device> ShardOf<(A, B), D> for (SA, SB) {
    fn shard((a, b): &(A, B), start: usize, len: usize) -> Result<Self> {
        Ok((SA::shard(a, start, len)?, SB::shard(b, start, len)?))
    }
}

impl<A, B, C, SA: ShardOf<A, D>, SB: ShardOf<B, D>, SC: ShardOf<C, D>, D: Device> ShardOf<(A, B, C), D>
    for (SA, SB, SC)
{
    fn shard((a, b, c): &(A, B, C), start: usize, len: usize) -> Result<Self> {
        Ok((SA::shard(a, start, len)?, SB::shard(b, start, len)?, SC::shard(c, start, len)?))
    }
}

/// How a replica cuts its shard from the global batch `B`, with the
/// shard's type erased so that replicas on different devices sit in one
/// list (each replica downcasts to its own `Loss::Batch`).
pub(crate) type Sharder<B> = fn(&B, usize, usize) -> Result<Box<dyn Any + Send>>;

fn sharder<B, D: Device, S: ShardOf<B, D>>() -> Sharder<B> {
    |batch, start, len| Ok(Box::new(S::shard(batch, start, len)?))
}

/// The batches `Self` (a tuple, one per replica) that the replicas on the
/// devices `L` declare, each a shard of the global batch `B` on its own
/// device. Checked once for all replicas, so that a replica that declares
/// its batch on another device is one error, not one per replica.
#[diagnostic::on_unimplemented(
    message = "every replica must take its batch on its own device, but the replicas on `{L}` declare the batches `{Self}`",
    label = "a replica's `Loss::Batch` is not on the replica's device",
    note = "write the batch on the replica's own device, `type Batch = (Tensor<D>, Tensor<D, i64>)` in \
            `impl<D: Device> Loss<D> for ..`: data parallelism moves each replica its rows of the global \
            batch, which may live on any device"
)]
pub trait ReplicaBatches<B, L> {
    /// One sharder per device of `L`, in order.
    #[doc(hidden)]
    #[allow(private_interfaces)]
    fn sharders() -> Vec<Sharder<B>>;
}

macro_rules! replica_batches {
    ($(($($s:ident $d:ident),+))*) => {$(
        #[diagnostic::do_not_recommend]
        impl<B, $($s: ShardOf<B, $d>, $d: Device),+> ReplicaBatches<B, ($($d,)+)> for ($($s,)+) {
            #[allow(private_interfaces)]
            fn sharders() -> Vec<Sharder<B>> {
                vec![$(sharder::<B, $d, $s>()),+]
            }
        }
    )*};
}

replica_batches! {
    (S0 D0)
    (S0 D0, S1 D1)
    (S0 D0, S1 D1, S2 D2)
    (S0 D0, S1 D1, S2 D2, S3 D3)
    (S0 D0, S1 D1, S2 D2, S3 D3, S4 D4, S5 D5, S6 D6, S7 D7)
}
