//! Data-parallel training on several devices in one process.
//!
//! [`DataParallel`] keeps one replica of a model, with its own optimizer,
//! on each device of a list fixed in its type (`(Cuda<0>, Cuda<1>)`, or
//! [`AllGpus`] for every GPU present). A step splits the batch between
//! them, runs them in parallel, sums their gradients in buckets while
//! backward is still running, and steps every optimizer with the sum. The
//! model implements [`Loss`] once, for every device.
//!
//! How this extends past one machine is described in
//! `docs/distributed.md`; its first piece is [`Job`], a process's place in
//! a multi-process job, read from the environment.

mod batch;
mod collective;
mod data_parallel;
mod devices;
mod job;
mod reduce;
mod replica;

pub use batch::{ReplicaBatches, ScatterBatch, ShardOf};
pub use data_parallel::DataParallel;
pub use devices::{AllGpus, DeviceList, Replicate};
pub use job::Job;
pub use reduce::{DEFAULT_BUCKET_BYTES, ReducePath};
pub use replica::Loss;
