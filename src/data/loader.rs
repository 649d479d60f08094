//! [`DataLoader`]: batches of a dataset, prepared by worker threads.

use super::{Collate, Dataset, DeviceBatches, SampleOrder, Sampler, Stack, ToDevice};
use crate::error::{Error, Result};
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Batches of a [`Dataset`], PyTorch's `DataLoader`: a batch size, a
/// [`Sampler`] (sequential by default, seeded shuffle with
/// [`shuffle`](Self::shuffle)), `drop_last`, a [`Collate`] step ([`Stack`]
/// by default), and worker threads that prepare upcoming batches while the
/// current one is used.
///
/// Each call to [`iter`](Self::iter) is one epoch; the epoch number feeds
/// the sampler, so a shuffled loader visits a new order each epoch and the
/// same orders on every run. Batches come out on the CPU, in sampler order
/// whatever the number of workers; [`to_device`](Self::to_device) yields
/// them on a device instead, each copied while the previous one is in use.
///
/// ```
/// use devtensor::data::{DataLoader, TensorDataset};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec((0..20).map(|v| v as f32).collect(), [10, 2]);
/// let y = Tensor::<Cpu, i64>::arange(0, 10);
/// let mut loader = DataLoader::try_new(TensorDataset::try_new(x, y)?, 4)?.shuffle(7).workers(2);
/// let mut seen = Vec::new();
/// for batch in loader.iter() {
///     let (inputs, labels) = batch?;
///     assert_eq!(inputs.dims()[1], 2);
///     seen.extend(labels.to_vec());
/// }
/// seen.sort();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>()); // batches of 4, 4 and 2
/// # Ok::<(), devtensor::Error>(())
/// ```
pub struct DataLoader<S: Dataset, C: Collate<S::Item> = Stack> {
    dataset: Arc<S>,
    collate: Arc<C>,
    batch_size: usize,
    drop_last: bool,
    sampler: Arc<dyn SampleOrder>,
    workers: usize,
    prefetch: usize,
    epoch: usize,
}

impl<S: Dataset + 'static> DataLoader<S, Stack>
where
    Stack: Collate<S::Item>,
{
    /// Batches of `batch_size` samples of `dataset`, in order, prepared on
    /// the calling thread. Fails when `batch_size` is 0.
    #[fallible]
    pub fn new(dataset: S, batch_size: usize) -> Self {
        if batch_size == 0 {
            return Err(Error::Argument {
                op: "DataLoader",
                device: "Cpu".into(),
                reason: "batch_size must be at least 1".into(),
            });
        }
        Ok(DataLoader {
            dataset: Arc::new(dataset),
            collate: Arc::new(Stack),
            batch_size,
            drop_last: false,
            sampler: Arc::new(Sampler::Sequential),
            workers: 0,
            prefetch: 2,
            epoch: 0,
        })
    }
}

impl<S: Dataset + 'static, C: Collate<S::Item> + 'static> DataLoader<S, C> {
    /// Shuffles every epoch, reproducibly from `seed` ([`Sampler::Random`]).
    pub fn shuffle(self, seed: u64) -> Self {
        self.sampler(Sampler::Random { seed })
    }

    /// Visits the samples as `sampler` says: a [`Sampler`], a
    /// [`WeightedRandomSampler`](super::WeightedRandomSampler), or an order
    /// of your own ([`SampleOrder`]).
    pub fn sampler(mut self, sampler: impl SampleOrder + 'static) -> Self {
        self.sampler = Arc::new(sampler);
        self
    }

    /// Drops the last batch when it would be smaller than the batch size.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Prepares batches on `workers` background threads (0: on the calling
    /// thread, when the batch is asked for).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// How many batches each worker may have ready or in preparation
    /// (PyTorch's `prefetch_factor`, 2 by default; at least 1). With the
    /// worker count it bounds the memory the loader holds.
    pub fn prefetch(mut self, batches_per_worker: usize) -> Self {
        self.prefetch = batches_per_worker.max(1);
        self
    }

    /// Combines samples with `collate` instead of [`Stack`].
    pub fn collate<C2: Collate<S::Item> + 'static>(self, collate: C2) -> DataLoader<S, C2> {
        DataLoader {
            dataset: self.dataset,
            collate: Arc::new(collate),
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            sampler: self.sampler,
            workers: self.workers,
            prefetch: self.prefetch,
            epoch: self.epoch,
        }
    }

    /// Sets the number of the next epoch (PyTorch's `sampler.set_epoch`).
    pub fn set_epoch(&mut self, epoch: usize) {
        self.epoch = epoch;
    }

    /// The dataset.
    pub fn dataset(&self) -> &S {
        &self.dataset
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        let samples = self.sampler.indices(self.epoch, self.dataset.len()).len();
        if self.drop_last { samples / self.batch_size } else { samples.div_ceil(self.batch_size) }
    }

    /// Whether an epoch has no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One epoch's batches, on the CPU. Starts the worker threads, which
    /// stop when the iterator is dropped.
    pub fn iter(&mut self) -> Batches<S, C> {
        let indices = self.sampler.indices(self.epoch, self.dataset.len());
        self.epoch += 1;
        let mut plan: Vec<Vec<usize>> = indices.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && plan.last().is_some_and(|b| b.len() < self.batch_size) {
            plan.pop();
        }
        Batches::start(plan, Arc::clone(&self.dataset), Arc::clone(&self.collate), self.workers, self.prefetch)
    }

    /// One epoch's batches on `D`: each batch's copy starts (from
    /// page-locked memory, on the copy stream, for a GPU) before the
    /// previous batch is handed out, so copying overlaps computing.
    pub fn to_device<D: Device>(&mut self) -> DeviceBatches<D, Batches<S, C>>
    where
        C::Batch: ToDevice,
    {
        DeviceBatches::new(self.iter())
    }
}

type Task = (usize, Vec<usize>);

/// One epoch of a [`DataLoader`]: an iterator of batches, each a `Result`
/// (a failing sample or collate is that batch's error, naming it).
pub struct Batches<S: Dataset, C: Collate<S::Item>> {
    plan: std::vec::IntoIter<Vec<usize>>,
    total: usize,
    yielded: usize,
    dispatched: usize,
    source: Source<S, C>,
}

enum Source<S: Dataset, C: Collate<S::Item>> {
    /// No workers: each batch is made when asked for.
    Inline { dataset: Arc<S>, collate: Arc<C> },
    Workers {
        /// `None` once the iterator is done, so that the workers stop.
        tasks: Option<Sender<Task>>,
        results: Receiver<(usize, Result<C::Batch>)>,
        /// Batches that arrived before their turn.
        ready: BTreeMap<usize, Result<C::Batch>>,
        in_flight: usize,
        handles: Vec<JoinHandle<()>>,
    },
}

/// A batch: its samples, collated. A panic inside the dataset or the
/// collate becomes this batch's error, so no worker dies silently.
fn make_batch<S: Dataset, C: Collate<S::Item>>(dataset: &S, collate: &C, indices: Vec<usize>) -> Result<C::Batch> {
    match catch_unwind(AssertUnwindSafe(|| {
        let items = indices.iter().map(|&i| dataset.get(i)).collect::<Result<Vec<_>>>()?;
        collate.collate(items)
    })) {
        Ok(batch) => batch,
        Err(panic) => Err(Error::Argument {
            op: "DataLoader",
            device: "Cpu".into(),
            reason: format!("preparing a batch panicked: {}", panic_message(&*panic)),
        }),
    }
}

/// The text a panic was raised with, or "a panic".
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<String>().cloned();
    text.or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "a panic".into())
}

impl<S: Dataset + 'static, C: Collate<S::Item> + 'static> Batches<S, C> {
    fn start(plan: Vec<Vec<usize>>, dataset: Arc<S>, collate: Arc<C>, workers: usize, prefetch: usize) -> Self {
        let total = plan.len();
        let source = if workers == 0 {
            Source::Inline { dataset, collate }
        } else {
            let (task_tx, task_rx) = channel::<Task>();
            let (result_tx, results) = channel();
            let task_rx = Arc::new(Mutex::new(task_rx));
            let handles = (0..workers.min(total.max(1)))
                .map(|_| {
                    let (dataset, collate, tasks, results) =
                        (Arc::clone(&dataset), Arc::clone(&collate), Arc::clone(&task_rx), result_tx.clone());
                    std::thread::spawn(move || {
                        loop {
                            // The lock is held only to take a task.
                            let task = tasks.lock().unwrap_or_else(|e| e.into_inner()).recv();
                            let Ok((id, indices)) = task else { return };
                            if results.send((id, make_batch(&*dataset, &*collate, indices))).is_err() {
                                return;
                            }
                        }
                    })
                })
                .collect();
            Source::Workers {
                tasks: Some(task_tx),
                results,
                ready: BTreeMap::new(),
                in_flight: workers.saturating_mul(prefetch),
                handles,
            }
        };
        Batches { plan: plan.into_iter(), total, yielded: 0, dispatched: 0, source }
    }
}

impl<S: Dataset, C: Collate<S::Item>> Iterator for Batches<S, C> {
    type Item = Result<C::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.yielded == self.total {
            return None;
        }
        let batch = match &mut self.source {
            Source::Inline { dataset, collate } => make_batch(&**dataset, &**collate, self.plan.next()?),
            Source::Workers { tasks, results, ready, in_flight, .. } => {
                // Keep up to `in_flight` batches ordered ahead of the one due.
                while self.dispatched < self.total && self.dispatched < self.yielded + *in_flight {
                    let indices = self.plan.next().expect("the plan has `total` batches");
                    if let Some(tasks) = tasks {
                        // A send fails only when every worker is gone, which
                        // `recv` below reports.
                        let _ = tasks.send((self.dispatched, indices));
                    }
                    self.dispatched += 1;
                }
                loop {
                    if let Some(batch) = ready.remove(&self.yielded) {
                        break batch;
                    }
                    match results.recv() {
                        Ok((id, batch)) => {
                            ready.insert(id, batch);
                        }
                        Err(_) => {
                            self.yielded = self.total;
                            return Some(Err(Error::Argument {
                                op: "DataLoader",
                                device: "Cpu".into(),
                                reason: "every worker thread stopped before the epoch ended".into(),
                            }));
                        }
                    }
                }
            }
        };
        self.yielded += 1;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.total - self.yielded;
        (left, Some(left))
    }
}

impl<S: Dataset, C: Collate<S::Item>> Drop for Batches<S, C> {
    fn drop(&mut self) {
        if let Source::Workers { tasks, handles, .. } = &mut self.source {
            // Closing the task queue ends each worker after its current batch.
            tasks.take();
            for handle in handles.drain(..) {
                let _ = handle.join();
            }
        }
    }
}
