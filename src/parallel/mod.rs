//! Data-parallel training on several devices in one process.
//!
//! [`DataParallel`] keeps one replica of a model, with its own optimizer,
//! on each device of a list fixed in its type (`(Cuda<0>, Cuda<1>)`, or
//! [`AllGpus`] for every GPU present). A step splits the batch between
//! them, runs them in parallel, sums their gradients in buckets while
//! backward is still running, and steps every optimizer with the sum. The
//! model implements [`Loss`] once, for every device.
//!
//! Across processes (one per GPU, on one machine or several), a process
//! reads its place in the job ([`Job`]) from the environment that the
//! `devtensor-run` launcher (or `torchrun`) sets, joins the job
//! ([`ProcessGroup`]: a [`TcpStore`] rendezvous and an NCCL communicator,
//! watched so that a failed rank never leaves the others waiting), and
//! trains with [`DistributedDataParallel`]. `docs/distributed.md` is the
//! manual.

mod batch;
mod collective;
mod compress;
mod data_parallel;
mod devices;
mod distributed;
mod group_collectives;
mod job;
mod process_group;
mod reduce;
mod replica;
mod store;
mod token;

pub use batch::{ReplicaBatches, ScatterBatch, ShardOf};
pub use data_parallel::DataParallel;
pub use devices::{AllGpus, DeviceList, Replicate};
pub use distributed::DistributedDataParallel;
pub use group_collectives::ReduceOp;
pub use job::{Job, STORE_BIND_VAR};
pub use process_group::{DEFAULT_TIMEOUT, ProcessGroup};
pub use reduce::{DEFAULT_BUCKET_BYTES, ReducePath};
pub use replica::Loss;
pub use store::{Failure, TcpStore};
pub use token::{JOB_TOKEN_VAR, JobToken, MIN_TOKEN_LEN};
