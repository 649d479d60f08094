//! Data loading: datasets (and subsets, concatenations and random splits
//! of them), streaming datasets, samplers, collating, and loaders whose
//! worker threads prepare batches ahead, on the CPU or already on a device.
//!
//! Batches come out as `Tensor<Cpu>`: feeding one to a model on a GPU does
//! not compile until it is moved, with `.to::<D>()` or, overlapping the
//! copy with computation, by iterating [`DataLoader::to_device`].

mod collate;
mod compose;
mod dataset;
mod device;
mod loader;
mod sampler;
mod stream;

pub use collate::{Collate, Stack};
pub use compose::{ConcatDataset, SplitLengths, Subset, random_split};
pub use dataset::{Dataset, TensorDataset, TensorTuple, TupleDataset};
pub use device::{BatchIterator, DeviceBatches, ToDevice};
pub use loader::{Batches, DataLoader};
pub use sampler::{SampleOrder, Sampler, WeightedRandomSampler};
pub use stream::{IterableDataset, StreamBatches, StreamLoader, WorkerInfo};
