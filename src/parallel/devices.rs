//! The devices of a data-parallel run, fixed in a type, and the trait that
//! builds one replica of a model on each.

use super::batch::{ReplicaBatches, ScatterBatch, Sharder};
use super::replica::{BucketPlan, Loss, OnDevice, Replica, Replicas};
use crate::backend::{Backend, Cuda};
use crate::error::{Error, Result};
use crate::nn::Module;
use crate::optim::OptimizerConfig;
use crate::tensor::Device;

/// The devices replicas live on: a tuple such as `(Cuda<0>, Cuda<1>)`, or
/// [`AllGpus`], every GPU present at run time. The first device is the
/// root, where buckets of gradients are summed and whose model
/// [`DataParallel::model`](super::DataParallel::model) returns.
pub trait DeviceList: Send + Sync + 'static {
    /// The first device.
    type Root: Device;
}

/// Every GPU present when the replicas are made (`Cuda<0>` to `Cuda<7>`),
/// PyTorch's `DataParallel(model)` without a device list. Each replica is
/// still typed inside: the model on `Cuda<1>` is a `Net<Cuda<1>>`. Making
/// the replicas fails when `Cuda<0>` is unavailable.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllGpus;

impl DeviceList for AllGpus {
    type Root = Cuda<0>;
}

/// A model (on device `DS`) that can be replicated on every device of `L`,
/// trained on batches `B` with optimizers made by `O`: true when the model
/// on each of those devices implements [`Loss`] for the batch moved there.
/// Implemented by devtensor for every model and list; you never implement
/// it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be trained in data parallel on `{L}` with batches `{B}`",
    note = "implement `devtensor::parallel::Loss<D>` for the model on every device `D`, with `Batch` \
            the batch type moved to `D` (a `(Tensor<Cpu>, Tensor<Cpu, i64>)` batch becomes `(Tensor<D>, Tensor<D, i64>)`)"
)]
pub trait Replicate<DS: Device, L: DeviceList, B: ScatterBatch, O: OptimizerConfig>: Module<DS> {
    /// The model's type on the root device.
    type Root: Loss<L::Root> + Send + 'static;

    /// One replica per device of `L`, the root first.
    #[doc(hidden)]
    fn replicas(&self, optimizer: &O, buckets: &BucketPlan) -> Result<Replicas<B, L::Root>>;
}

/// One replica of `model` on `D`, cutting its batches with `shard`.
fn replica<DS, D, R, M, B, O>(
    model: &M,
    optimizer: &O,
    buckets: &BucketPlan,
    shard: Sharder<B>,
) -> Result<Box<dyn Replica<B, R>>>
where
    DS: Device,
    D: Device,
    R: Device,
    M: Module<DS>,
    M::On<D>: Loss<D> + Send + 'static,
    B: ScatterBatch,
    O: OptimizerConfig,
{
    Ok(Box::new(OnDevice::<D, M::On<D>, O, B>::new(model.try_to::<D>()?, optimizer, buckets.clone(), shard)))
}

/// `Replicate` for a tuple of devices.
macro_rules! replicate_tuple {
    ($($root:ident $(, $d:ident)*;)*) => {$(
        impl<$root: Device, $($d: Device),*> DeviceList for ($root, $($d,)*) {
            type Root = $root;
        }

        impl<DS, M, B, O, $root: Device, $($d: Device),*> Replicate<DS, ($root, $($d,)*), B, O> for M
        where
            DS: Device,
            M: Module<DS>,
            B: ScatterBatch,
            O: OptimizerConfig,
            M::On<$root>: Loss<$root> + Send + 'static,
            $(M::On<$d>: Loss<$d> + Send + 'static,)*
            // Every replica's batch checked in one bound: one error when a
            // replica declares its batch on another device.
            (<M::On<$root> as Loss<$root>>::Batch, $(<M::On<$d> as Loss<$d>>::Batch,)*): ReplicaBatches<B, ($root, $($d,)*)>,
        {
            type Root = M::On<$root>;

            fn replicas(&self, optimizer: &O, buckets: &BucketPlan) -> Result<Replicas<B, $root>> {
                let batches = <(<M::On<$root> as Loss<$root>>::Batch, $(<M::On<$d> as Loss<$d>>::Batch,)*) as ReplicaBatches<B, ($root, $($d,)*)>>::sharders();
                let mut shard = batches.into_iter();
                Ok(vec![
                    replica::<DS, $root, $root, M, B, O>(self, optimizer, buckets, shard.next().expect("one sharder per device"))?,
                    $(replica::<DS, $d, $root, M, B, O>(self, optimizer, buckets, shard.next().expect("one sharder per device"))?,)*
                ])
            }
        }
    )*};
}

replicate_tuple! {
    A;
    A, B1;
    A, B1, C;
    A, B1, C, F;
    A, B1, C, F, G, H, I, J;
}

/// `Replicate` for [`AllGpus`]: every ordinal is instantiated, the ones
/// present are used.
macro_rules! replicate_all_gpus {
    ($($n:literal),*) => {
        impl<DS, M, B, O> Replicate<DS, AllGpus, B, O> for M
        where
            DS: Device,
            M: Module<DS>,
            B: ScatterBatch,
            O: OptimizerConfig,
            $(M::On<Cuda<$n>>: Loss<Cuda<$n>> + Send + 'static,)*
            ($(<M::On<Cuda<$n>> as Loss<Cuda<$n>>>::Batch,)*): ReplicaBatches<B, ($(Cuda<$n>,)*)>,
        {
            type Root = M::On<Cuda<0>>;

            fn replicas(&self, optimizer: &O, buckets: &BucketPlan) -> Result<Replicas<B, Cuda<0>>> {
                if !Cuda::<0>::is_available() {
                    return Err(Error::DeviceUnavailable {
                        device: Cuda::<0>::name(),
                        reason: "data parallel over every GPU present found none".into(),
                    });
                }
                let shards = <($(<M::On<Cuda<$n>> as Loss<Cuda<$n>>>::Batch,)*) as ReplicaBatches<B, ($(Cuda<$n>,)*)>>::sharders();
                let mut replicas = Vec::new();
                $(if Cuda::<$n>::is_available() {
                    replicas.push(replica::<DS, Cuda<$n>, Cuda<0>, M, B, O>(self, optimizer, buckets, shards[$n])?);
                })*
                Ok(replicas)
            }
        }
    };
}

replicate_all_gpus!(0, 1, 2, 3, 4, 5, 6, 7);
