//! Streaming datasets, PyTorch's `IterableDataset`, and the loader that
//! batches them: [`IterableDataset`], [`WorkerInfo`], [`StreamLoader`].

use super::collate::{Collate, Stack};
use super::device::DeviceBatches;
use super::loader::panic_message;
use crate::error::{Error, Result};
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};

/// Which of the loader's workers is reading, PyTorch's
/// `torch.utils.data.get_worker_info()`: a stream read by several workers
/// must give each its own share, or every sample arrives once per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// This worker, `0..num_workers`.
    pub id: usize,
    /// How many workers read the stream (1 without worker threads).
    pub num_workers: usize,
    /// The epoch, as [`StreamLoader::set_epoch`] last set it (0 before).
    pub epoch: usize,
}

impl WorkerInfo {
    /// Whether the `n`-th sample of the stream is this worker's in the
    /// usual round-robin sharding (`n % num_workers == id`).
    pub fn owns(&self, n: usize) -> bool {
        n % self.num_workers == self.id
    }
}

/// Samples read in order from a stream (the lines of a file too large to
/// index, records arriving over a socket, samples generated on the fly)
/// rather than looked up by index: PyTorch's `IterableDataset`.
///
/// [`iter`](Self::iter) starts one pass over the stream for one worker.
/// It takes the dataset as an `Arc`, so that the iterator may own what it
/// reads from (clone a path, a connection or a table out of it).
///
/// ```
/// use devtensor::data::{IterableDataset, StreamLoader, WorkerInfo};
/// use devtensor::{Cpu, Result, Tensor};
/// use std::sync::Arc;
///
/// /// The squares of 0..n, each worker reading every `num_workers`-th.
/// struct Squares(usize);
///
/// impl IterableDataset for Squares {
///     type Item = Tensor<Cpu>;
///
///     fn iter(self: Arc<Self>, worker: WorkerInfo) -> Box<dyn Iterator<Item = Result<Tensor<Cpu>>> + Send> {
///         let n = self.0;
///         Box::new((0..n).filter(move |&i| worker.owns(i)).map(|i| Ok(Tensor::from_vec(vec![(i * i) as f32], [1]))))
///     }
/// }
///
/// let mut loader = StreamLoader::new(Squares(7), 3);
/// let batches: Vec<Vec<f32>> = loader.iter().map(|b| b.map(|t| t.to_vec())).collect::<Result<_>>()?;
/// assert_eq!(batches, [vec![0.0, 1.0, 4.0], vec![9.0, 16.0, 25.0], vec![36.0]]);
/// // Two workers: their batches in turn, as PyTorch's loader yields them.
/// let mut loader = StreamLoader::new(Squares(7), 2).workers(2);
/// let batches: Vec<Vec<f32>> = loader.iter().map(|b| b.map(|t| t.to_vec())).collect::<Result<_>>()?;
/// assert_eq!(batches, [vec![0.0, 4.0], vec![1.0, 9.0], vec![16.0, 36.0], vec![25.0]]);
/// # Ok::<(), devtensor::Error>(())
/// ```
pub trait IterableDataset: Send + Sync {
    /// One sample, e.g. an `(input, target)` pair of CPU tensors.
    type Item: Send;

    /// One pass over the samples `worker` reads. An `Err` item is that
    /// batch's error; the pass goes on after it.
    fn iter(self: Arc<Self>, worker: WorkerInfo) -> Box<dyn Iterator<Item = Result<Self::Item>> + Send>;
}

/// Batches of an [`IterableDataset`], PyTorch's `DataLoader` over an
/// iterable dataset: `batch_size` consecutive samples of one worker's
/// stream make a batch (the last one of each worker may be shorter, unless
/// [`drop_last`](Self::drop_last)), and with worker threads their batches
/// come in turn, worker 0's first. Each worker keeps at most
/// [`prefetch`](Self::prefetch) batches ready and one more waiting to be
/// handed over, so a fast stream never grows memory without bound.
pub struct StreamLoader<S: IterableDataset, C: Collate<S::Item> = Stack> {
    dataset: Arc<S>,
    collate: Arc<C>,
    batch_size: usize,
    drop_last: bool,
    workers: usize,
    prefetch: usize,
    epoch: usize,
}

impl<S: IterableDataset + 'static> StreamLoader<S, Stack>
where
    Stack: Collate<S::Item>,
{
    /// A loader of `batch_size` samples per batch, stacked; no worker
    /// threads. Fails when `batch_size` is 0.
    #[fallible]
    pub fn new(dataset: S, batch_size: usize) -> Self {
        if batch_size == 0 {
            return Err(Error::Argument {
                op: "StreamLoader",
                device: "Cpu".into(),
                reason: "batch_size must be at least 1".into(),
            });
        }
        let (collate, drop_last, workers, prefetch, epoch) = (Arc::new(Stack), false, 0, 2, 0);
        Ok(StreamLoader { dataset: Arc::new(dataset), collate, batch_size, drop_last, workers, prefetch, epoch })
    }
}

impl<S: IterableDataset + 'static, C: Collate<S::Item> + 'static> StreamLoader<S, C> {
    /// Drops each worker's last, short batch (PyTorch's `drop_last`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Reads the stream on `workers` threads (PyTorch's `num_workers`),
    /// each given its [`WorkerInfo`]; 0 reads it in the caller's thread.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// The batches each worker prepares ahead (PyTorch's `prefetch_factor`,
    /// 2; at least 1).
    pub fn prefetch(mut self, batches_per_worker: usize) -> Self {
        self.prefetch = batches_per_worker.max(1);
        self
    }

    /// The loader with another collate function.
    pub fn collate<C2: Collate<S::Item> + 'static>(self, collate: C2) -> StreamLoader<S, C2> {
        let StreamLoader { dataset, batch_size, drop_last, workers, prefetch, epoch, .. } = self;
        StreamLoader { dataset, collate: Arc::new(collate), batch_size, drop_last, workers, prefetch, epoch }
    }

    /// The epoch the next passes' [`WorkerInfo`] carries, for a stream
    /// that shuffles per epoch.
    pub fn set_epoch(&mut self, epoch: usize) {
        self.epoch = epoch;
    }

    /// The dataset.
    pub fn dataset(&self) -> &S {
        &self.dataset
    }

    /// One pass over the stream: an iterator of batches, each a `Result`.
    pub fn iter(&mut self) -> StreamBatches<S, C> {
        let (batch_size, drop_last) = (self.batch_size, self.drop_last);
        let info = |id, num_workers| WorkerInfo { id, num_workers, epoch: self.epoch };
        if self.workers == 0 {
            let stream = BatchStream::new(Arc::clone(&self.dataset), info(0, 1), batch_size, drop_last);
            return StreamBatches { source: StreamSource::Inline { stream, collate: Arc::clone(&self.collate) } };
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (mut receivers, mut failed) = (Vec::new(), None);
        for id in 0..self.workers {
            let (sender, receiver) = sync_channel(self.prefetch);
            let mut stream = BatchStream::new(Arc::clone(&self.dataset), info(id, self.workers), batch_size, drop_last);
            stream.stop = Some(Arc::clone(&stop));
            let collate = Arc::clone(&self.collate);
            let spawned = std::thread::Builder::new().name(format!("devtensor-stream-{id}")).spawn(move || {
                while let Some(batch) = stream.next_batch(&*collate) {
                    // The receiver is gone once the pass is dropped.
                    if sender.send(batch).is_err() {
                        return;
                    }
                }
            });
            match spawned {
                Ok(_) => receivers.push(receiver),
                Err(e) => {
                    failed = Some(Error::Argument {
                        op: "StreamLoader",
                        device: "Cpu".into(),
                        reason: format!("cannot start worker thread {id}: {e}"),
                    });
                    break;
                }
            }
        }
        StreamBatches { source: StreamSource::Workers { receivers, stop, failed, turn: 0 } }
    }

    /// [`iter`](Self::iter) with each batch already on `D`, its copy issued
    /// while the caller works on the batch before, as
    /// [`DataLoader::to_device`](super::DataLoader::to_device).
    pub fn to_device<D: Device>(&mut self) -> DeviceBatches<D, StreamBatches<S, C>>
    where
        C::Batch: super::ToDevice,
    {
        DeviceBatches::new(self.iter())
    }
}

/// One worker's pass: its samples, cut into batches.
struct BatchStream<S: IterableDataset> {
    /// `None` before the pass starts (the stream is opened on the worker's
    /// own thread) and once it has ended.
    samples: Option<Box<dyn Iterator<Item = Result<S::Item>> + Send>>,
    dataset: Option<Arc<S>>,
    worker: WorkerInfo,
    batch_size: usize,
    drop_last: bool,
    /// Set when the pass is dropped: a worker stops between samples.
    stop: Option<Arc<AtomicBool>>,
}

impl<S: IterableDataset> BatchStream<S> {
    fn new(dataset: Arc<S>, worker: WorkerInfo, batch_size: usize, drop_last: bool) -> Self {
        BatchStream { samples: None, dataset: Some(dataset), worker, batch_size, drop_last, stop: None }
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|stop| stop.load(Ordering::Relaxed))
    }

    /// The next batch, `None` at the end of the stream (or once the pass is
    /// dropped). A failing or panicking sample is that batch's error (the
    /// samples read before it in the batch are dropped, as PyTorch's loader
    /// loses them when it raises); a panic also ends the pass.
    fn next_batch<C: Collate<S::Item>>(&mut self, collate: &C) -> Option<Result<C::Batch>> {
        let worker = self.worker.id;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if self.stopped() {
                return None;
            }
            if let Some(dataset) = self.dataset.take() {
                self.samples = Some(dataset.iter(self.worker));
            }
            let stop = self.stop.clone();
            let samples = self.samples.as_mut()?;
            // Capped: a huge batch_size must not reserve its memory up front.
            let mut items = Vec::with_capacity(self.batch_size.min(1024));
            for sample in samples.by_ref() {
                if stop.as_ref().is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                    return None;
                }
                match sample {
                    Ok(item) => items.push(item),
                    Err(e) => return Some(Err(e)),
                }
                if items.len() == self.batch_size {
                    return Some(collate.collate(items));
                }
            }
            self.samples = None;
            (!items.is_empty() && !self.drop_last).then(|| collate.collate(items))
        }));
        outcome.unwrap_or_else(|panic| {
            self.samples = None;
            Some(Err(Error::Argument {
                op: "StreamLoader",
                device: "Cpu".into(),
                reason: format!("worker {worker}'s stream panicked: {}", panic_message(&*panic)),
            }))
        })
    }
}

/// One pass of a [`StreamLoader`]: an iterator of batches, each a `Result`.
pub struct StreamBatches<S: IterableDataset, C: Collate<S::Item>> {
    source: StreamSource<S, C>,
}

enum StreamSource<S: IterableDataset, C: Collate<S::Item>> {
    /// No workers: each batch is read when asked for.
    Inline { stream: BatchStream<S>, collate: Arc<C> },
    /// A channel per worker, read in turn; a finished worker's is removed.
    /// `failed`: a worker thread that could not start, reported first.
    Workers { receivers: Vec<Receiver<Result<C::Batch>>>, stop: Arc<AtomicBool>, failed: Option<Error>, turn: usize },
}

impl<S: IterableDataset, C: Collate<S::Item>> Iterator for StreamBatches<S, C> {
    type Item = Result<C::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.source {
            StreamSource::Inline { stream, collate } => stream.next_batch(&**collate),
            StreamSource::Workers { receivers, failed, turn, .. } => loop {
                if let Some(e) = failed.take() {
                    return Some(Err(e));
                }
                if receivers.is_empty() {
                    return None;
                }
                let at = *turn % receivers.len();
                match receivers[at].recv() {
                    Ok(batch) => {
                        *turn = at + 1;
                        return Some(batch);
                    }
                    // This worker's stream has ended: the next one's turn.
                    Err(_) => {
                        receivers.remove(at);
                        *turn = at;
                    }
                }
            },
        }
    }
}

impl<S: IterableDataset, C: Collate<S::Item>> Drop for StreamBatches<S, C> {
    fn drop(&mut self) {
        if let StreamSource::Workers { receivers, stop, .. } = &mut self.source {
            // Each worker stops before its next sample, or at its next
            // batch without a receiver; none is waited for, so a stream
            // blocked in a read cannot block the caller.
            stop.store(true, Ordering::Relaxed);
            receivers.clear();
        }
    }
}
