//! [`DistributedDataParallel`]: one process per GPU, gradients summed over
//! NCCL across processes in buckets while backward runs.

use super::ScatterBatch;
use super::compress::{Wire, WireType};
use super::group_collectives::dense_copy;
use super::process_group::ProcessGroup;
use super::reduce::{DEFAULT_BUCKET_BYTES, plan_buckets};
use super::replica::{Loss, backward_in_buckets, unflatten};
use crate::backend::cuda::nccl::NcclBuffer;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::nn::{Module, TensorKind};
use crate::ops::autocast::LowerPrecision;
use crate::optim::{Optimizer, OptimizerConfig, try_clip_grad_norm};
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;
use std::path::Path;

/// Data-parallel training with one process per GPU (PyTorch's
/// `DistributedDataParallel`): every process holds the whole model and its
/// optimizer on its own GPU `D`, trains on its own shard of the data
/// ([`Job::sampler`](super::Job::sampler)), and takes the same optimizer
/// step, because the gradients are summed across processes over NCCL, in
/// buckets that start while backward is still running.
///
/// Inside the process everything is typed on `D` (`Cuda<LOCAL_RANK>`, from
/// [`on_local_gpu!`](crate::on_local_gpu)): the model is an `M` on `D`, its
/// batches are `M::Batch` on `D`. What the types cannot see is checked at
/// run time, each error naming the rank:
///
/// - **the same model on every rank**: at construction every rank publishes
///   its parameters' names, shapes and element types; the first difference
///   from rank 0 is an [`Error::Distributed`] on every rank, naming the rank
///   and the parameter, before any step. Rank 0's parameters and buffers
///   are then copied to every rank, so all start equal whatever their seeds;
/// - **uneven batches**: each rank's gradient is weighted by its share of
///   the true global batch (the row counts are summed with the first
///   bucket), so a step equals one step on one device over every rank's
///   rows together, even when the last batches differ in size;
/// - **failures**: when a rank fails (an error in its step, a panic, or its
///   process killed), every other rank's current or next step returns an
///   [`Error::Distributed`] naming it, within the time the watchdog takes to
///   notice (milliseconds; see [`ProcessGroup`]). After a failure the job is
///   over: restart it from the last checkpoint
///   ([`try_save_checkpoint`](Self::try_save_checkpoint)).
///
/// ```no_run
/// use devtensor::nn::{Linear, try_mse_loss, Reduction, Module};
/// use devtensor::optim::SgdConfig;
/// use devtensor::parallel::{DistributedDataParallel, Job, Loss, ProcessGroup};
/// use devtensor::{Device, Result, Tensor};
///
/// struct Regression<D: Device> {
///     fc: Linear<D>,
/// }
/// devtensor::module!(Regression { fc });
///
/// impl<D: Device> Loss<D> for Regression<D> {
///     type Batch = (Tensor<D>, Tensor<D>);
///     fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
///         try_mse_loss(&self.fc.try_forward(x)?, y, Reduction::Mean)
///     }
/// }
///
/// fn train<D: Device>(job: &Job) -> Result<()> {
///     let group = ProcessGroup::<D>::try_new(job)?;
///     let model = Regression { fc: Linear::<D>::new(4, 1) };
///     let mut ddp = DistributedDataParallel::try_new(group, model, SgdConfig { lr: 0.1, ..Default::default() })?;
///     let x = Tensor::<D>::ones([8, 4]);
///     let y = Tensor::<D>::zeros([8, 1]);
///     let loss = ddp.try_step(&(x, y))?;
///     println!("rank {}: loss {loss}", job.rank);
///     Ok(())
/// }
///
/// fn main() -> Result<()> {
///     let job = Job::from_env()?; // set by devtensor-run
///     devtensor::on_local_gpu!(job, D => train::<D>(&job))?
/// }
/// ```
pub struct DistributedDataParallel<D: Device, M, O: OptimizerConfig> {
    group: ProcessGroup<D>,
    model: M,
    optimizer: O::For<D>,
    /// Indices into the model's parameters, one list per bucket.
    buckets: Vec<Vec<usize>>,
    max_grad_norm: Option<f64>,
    /// The type buckets travel in.
    wire: WireType,
    /// Steps taken (or started, after a failure).
    steps: u64,
    /// How many buckets the last step handed to NCCL during backward.
    overlapped: usize,
    /// The gradients of the micro-batches accumulated since the last step.
    accumulated: Option<Accumulated<D>>,
}

/// What [`DistributedDataParallel::accumulate`] keeps on this rank until
/// the step that sends it: per bucket, the flattened sum of each
/// micro-batch's gradient times its rows, and the rows.
struct Accumulated<D: Device> {
    buckets: Vec<Tensor<D>>,
    rows: usize,
}

/// The sums of `accumulated`, one slot per bucket (empty slots when
/// nothing was accumulated), and their rows.
fn take_sums<D: Device>(accumulated: Option<Accumulated<D>>, buckets: usize) -> (Vec<Option<Tensor<D>>>, usize) {
    match accumulated {
        Some(a) => (a.buckets.into_iter().map(Some).collect(), a.rows),
        None => (vec![None; buckets], 0),
    }
}

impl<D: Device, M: std::fmt::Debug, O: OptimizerConfig> std::fmt::Debug for DistributedDataParallel<D, M, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedDataParallel")
            .field("group", &self.group)
            .field("buckets", &self.buckets.len())
            .field("steps", &self.steps)
            .finish()
    }
}

/// The parameters' names, shapes and element types, one line each: what
/// every rank must agree on.
fn fingerprint<D: Device, M: Module<D>>(model: &M) -> Vec<String> {
    let mut lines = Vec::new();
    model.visit("", &mut |name, kind, t| {
        if kind == TensorKind::Parameter {
            lines.push(format!("{name} {} f32", t.shape()));
        }
    });
    lines
}

/// Each parameter's size in bytes, in the model's order: what buckets are planned from.
fn parameter_bytes<D: Device, M: Module<D>>(model: &M) -> Vec<usize> {
    model.parameters().iter().map(|(_, p)| p.elem_count() * std::mem::size_of::<f32>()).collect()
}

/// What NCCL sums of the storage of a dense tensor on a GPU.
fn nccl_buffer<D: Device>(storage: &dyn std::any::Any) -> Result<NcclBuffer> {
    NcclBuffer::of(storage, "DistributedDataParallel", &D::name())
}

impl<D: Device, M: Loss<D>, O: OptimizerConfig> DistributedDataParallel<D, M, O>
where
    M::Batch: ScatterBatch,
{
    /// Wraps `model` (on this process's GPU `D`) for training in `group`,
    /// with an optimizer made from `optimizer`. Checks that every rank has
    /// the same model, then gives every rank rank 0's parameters and
    /// buffers. Fails with [`Error::Distributed`] naming the first rank and
    /// parameter that differ, or another rank's failure.
    pub fn try_new(group: ProcessGroup<D>, mut model: M, optimizer: O) -> Result<Self> {
        let rank = group.rank();
        let fail = |reason: String| Error::Distributed { rank: Some(rank), reason };
        // Each rank shows a digest of its parameters' names and shapes; only
        // where digests differ do the ranks concerned show the whole list,
        // so that the store holds a few bytes per rank, whatever the model.
        let store = group.store();
        let mine = fingerprint(&model);
        let digest_key = |r: usize| format!("devtensor/ddp/digest/{r}");
        let list_key = |r: usize| format!("devtensor/ddp/fingerprint/{r}");
        store.try_set(&digest_key(rank), &digest(&mine).to_le_bytes())?;
        let digests = (0..group.world_size()).map(|r| store.try_get(&digest_key(r))).collect::<Result<Vec<_>>>()?;
        let differs = |r: usize| digests[r] != digests[0];
        if differs(rank) || (rank == 0 && (1..digests.len()).any(differs)) {
            store.try_set(&list_key(rank), mine.join("\n").as_bytes())?;
        }
        let list_of =
            |r: usize| if r == rank { Ok(mine.clone()) } else { store.try_get(&list_key(r)).map(|b| lines(&b)) };
        for other in (1..group.world_size()).filter(|&r| differs(r)) {
            if let Some(difference) = first_difference(&list_of(0)?, &list_of(other)?) {
                return Err(fail(format!("rank {other}'s model differs from rank 0's: {difference}")));
            }
        }

        // Rank 0's values everywhere, as PyTorch's DDP does at construction.
        let comm = group.comm()?;
        let mut state = Checkpoint::try_from_model(&model)?;
        for (_, t) in state.tensors_mut() {
            let copy = dense_copy(t)?;
            comm.broadcast(&nccl_buffer::<D>(copy.storage())?, 0).map_err(|e| group.fail(e))?;
            *t = copy;
        }
        comm.finish().map_err(|e| group.fail(e))?;
        state.try_load_into(&mut model)?;
        let optimizer = optimizer.build(&model);
        let buckets = plan_buckets(&parameter_bytes(&model), DEFAULT_BUCKET_BYTES);
        Ok(DistributedDataParallel {
            group,
            model,
            optimizer,
            buckets,
            max_grad_norm: None,
            wire: WireType::F32,
            steps: 0,
            overlapped: 0,
            accumulated: None,
        })
    }

    /// Sets the bucket size in bytes (25 MiB by default, as PyTorch's
    /// `bucket_cap_mb`): smaller buckets start reducing earlier during
    /// backward, at the cost of more NCCL calls. Every rank must use the
    /// same size (checked at the first step, as
    /// [`compress_gradients`](Self::compress_gradients)).
    pub fn bucket_bytes(mut self, bytes: usize) -> Self {
        self.buckets = plan_buckets(&parameter_bytes(&self.model), bytes.max(1));
        self
    }

    /// Sends the gradient buckets in the half type `H` (`bf16` or `f16`)
    /// instead of `f32`, as PyTorch's `bf16_compress_hook` and
    /// `fp16_compress_hook` (`ddp.register_comm_hook`): NCCL sums each
    /// bucket in `H`, and it is widened back to `f32` before the optimizer
    /// step. Half the bytes cross between GPUs; each summed gradient is off
    /// by a rounding or two of `H`. Parameters and optimizer state stay
    /// `f32`. Each rank sends its gradient already divided by the global
    /// batch's size (learnt at the start of each step, from one small
    /// `f32` all-reduce), so what travels in `H` is no larger than the
    /// mean gradient, as PyTorch divides by the world size before sending.
    /// Every rank must compress the same way: the first step checks, and
    /// fails on every rank naming the first that differs (where PyTorch's
    /// NCCL calls would wait for each other until the timeout).
    pub fn compress_gradients<H: LowerPrecision>(mut self) -> Self {
        self.wire = WireType::of::<H>();
        self
    }

    /// The half type gradients travel in
    /// ([`compress_gradients`](Self::compress_gradients)), `None` for `f32`.
    pub fn gradient_compression(&self) -> Option<DType> {
        self.wire.compression()
    }

    /// Clips the summed gradient to this total 2-norm before each step
    /// (every rank clips the same sum the same way; every rank must set the
    /// same norm, checked at the first step).
    pub fn clip_grad_norm(mut self, max_norm: f64) -> Self {
        self.max_grad_norm = Some(max_norm);
        self
    }

    /// The number of buckets.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// How many buckets the last step handed to NCCL while backward was
    /// still running.
    pub fn buckets_sent_during_backward(&self) -> usize {
        self.overlapped
    }

    /// The process group.
    pub fn group(&self) -> &ProcessGroup<D> {
        &self.group
    }

    /// The model: identical on every rank after each step.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The optimizer's learning rate.
    pub fn lr(&self) -> f64 {
        self.optimizer.lr()
    }

    /// Sets the learning rate (every rank must set the same).
    pub fn set_lr(&mut self, lr: f64) {
        self.optimizer.set_lr(lr);
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// One training step on this rank's `batch`: forward, backward with the
    /// gradients summed across every rank in buckets, and the optimizer
    /// step. Returns this rank's loss on `batch` (the mean over its own
    /// rows, as PyTorch's DDP returns it). The micro-batches
    /// [`accumulate`](Self::accumulate)d since the last step count as part
    /// of this one's batch (the loss returned is still `batch`'s alone). Fails with this rank's own error (which every
    /// other rank then sees), or with an [`Error::Distributed`] naming
    /// another rank that failed.
    #[fallible]
    pub fn step(&mut self, batch: &M::Batch) -> f32 {
        self.steps += 1;
        self.group.begin_operation()?;
        let stepped = self.step_on(batch);
        stepped.map_err(|e| self.group.stopping(e))
    }

    /// Forward and backward on a micro-batch without synchronising
    /// (PyTorch's `with ddp.no_sync(): loss.backward()`, or nanoGPT's
    /// `model.require_backward_grad_sync = False`): its gradient stays on
    /// this rank, added to those accumulated so far, and the next
    /// [`step`](Self::step) sums them across the ranks with its own, in the
    /// same buckets, sent while that step's backward runs. No collective
    /// runs here, so the ranks may accumulate different numbers of
    /// micro-batches.
    ///
    /// Each micro-batch's gradient counts by its rows, as the step's does:
    /// the step moves the parameters as one step on one device over every
    /// row that every rank accumulated and stepped on (nanoGPT divides
    /// each micro-batch's loss by the number of micro-batches to the same
    /// end, for micro-batches of equal size; here the loss must not be
    /// divided). Returns this rank's loss on the micro-batch. Fails as
    /// [`step`](Self::step).
    ///
    /// ```no_run
    /// # use devtensor::parallel::{DistributedDataParallel, Loss, ScatterBatch};
    /// # use devtensor::optim::OptimizerConfig;
    /// # use devtensor::{Device, Result};
    /// fn train_step<D: Device, M: Loss<D>, O: OptimizerConfig>(
    ///     ddp: &mut DistributedDataParallel<D, M, O>,
    ///     micro_batches: &[M::Batch],
    /// ) -> Result<f32>
    /// where
    ///     M::Batch: ScatterBatch,
    /// {
    ///     let (last, earlier) = micro_batches.split_last().expect("at least one micro-batch");
    ///     for batch in earlier {
    ///         ddp.try_accumulate(batch)?; // no synchronisation
    ///     }
    ///     ddp.try_step(last) // sums every micro-batch's gradient over the ranks, then steps
    /// }
    /// ```
    #[fallible]
    pub fn accumulate(&mut self, batch: &M::Batch) -> f32 {
        self.group.check()?;
        let accumulated = self.accumulate_on(batch);
        accumulated.map_err(|e| self.group.stopping(e))
    }

    /// The rows of a batch, which must have some.
    fn rows_of(batch: &M::Batch, op: &'static str) -> Result<usize> {
        match batch.try_batch_len()? {
            0 => Err(Error::Argument {
                op,
                device: D::name(),
                reason: "an empty batch: every rank needs at least one row each step".into(),
            }),
            rows => Ok(rows),
        }
    }

    fn accumulate_on(&mut self, batch: &M::Batch) -> Result<f32> {
        let rows = Self::rows_of(batch, "DistributedDataParallel::accumulate")?;
        let params: Vec<Tensor<D>> = self.model.parameters().into_iter().map(|(_, p)| p).collect();
        let loss = self.model.loss(batch)?;
        let (mut sums, earlier_rows) = take_sums(self.accumulated.take(), self.buckets.len());
        backward_in_buckets(&loss, &params, &self.buckets, rows as f32, |b, flat| {
            sums[b] = Some(match sums[b].take() {
                Some(sum) => sum.try_add(&flat)?,
                None => flat,
            });
            Ok::<(), Error>(())
        })?;
        let buckets = sums.into_iter().map(|s| s.expect("every bucket is sent")).collect();
        self.accumulated = Some(Accumulated { buckets, rows: earlier_rows + rows });
        loss.try_item()
    }

    /// What every rank must set alike, each a `(setting, value)`: a
    /// mismatch would make the ranks' NCCL calls differ (a hang until the
    /// job's timeout, in PyTorch too) or their steps differ (replicas that
    /// drift apart unnoticed).
    fn settings(&self) -> [(&'static str, String); 3] {
        let wire = self.gradient_compression().unwrap_or(DType::F32);
        let buckets = self.buckets.iter().map(Vec::len).collect::<Vec<_>>();
        [
            ("compress_gradients", format!("gradients sent in {}", wire.name())),
            ("bucket_bytes", format!("buckets of {buckets:?} parameters")),
            ("clip_grad_norm", format!("clip_grad_norm({:?})", self.max_grad_norm)),
        ]
    }

    /// Before the first step's collectives: every rank shows its
    /// [`settings`](Self::settings) in the store and reads every other
    /// rank's, so that all fail alike, naming the first rank and setting
    /// that differ from rank 0's.
    fn check_settings_agree(&self) -> Result<()> {
        let (store, rank) = (self.group.store(), self.group.rank());
        let mine = self.settings().map(|(_, value)| value).join("\n");
        let key = |r: usize| format!("devtensor/ddp/settings/{r}");
        store.try_set(&key(rank), mine.as_bytes())?;
        let all = (0..self.group.world_size()).map(|r| store.try_get(&key(r))).collect::<Result<Vec<_>>>()?;
        let on_0 = lines(&all[0]);
        for (other, theirs) in all.iter().enumerate().skip(1) {
            for ((setting, _), (expected, there)) in self.settings().iter().zip(on_0.iter().zip(lines(theirs))) {
                if *expected != there {
                    return Err(Error::Distributed {
                        rank: Some(rank),
                        reason: format!(
                            "rank {other}'s settings differ from rank 0's: {there} there, but {expected} on rank 0; \
                             every rank must call `{setting}` alike"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn step_on(&mut self, batch: &M::Batch) -> Result<f32> {
        if self.steps == 1 {
            self.check_settings_agree()?;
        }
        let rows = Self::rows_of(batch, "DistributedDataParallel::step")?;
        let DistributedDataParallel {
            group,
            model,
            optimizer,
            buckets,
            max_grad_norm,
            wire,
            overlapped,
            accumulated,
            ..
        } = self;
        let comm = group.comm()?;
        let accumulating = accumulated.is_some();
        let (mut earlier, earlier_rows) = take_sums(accumulated.take(), buckets.len());
        let rows_on_rank = rows + earlier_rows;
        let params: Vec<Tensor<D>> = model.parameters().into_iter().map(|(_, p)| p).collect();
        let loss = model.loss(batch)?;
        let rows_here = Tensor::<D>::try_from_slice(&[rows_on_rank as f32], [1])?;
        // In f32 each rank sends the gradient of its summed loss (mean x
        // rows, plus the micro-batches accumulated before, each counted the
        // same way), and its row count after the first bucket: the sums
        // over ranks give the global batch's gradient times its size, and
        // that size. Compressed, a bucket in a half type must stay near the
        // mean gradient's size (f16 overflows at 65504) and cannot carry a
        // row count exactly: the ranks sum their row counts first, in f32,
        // and each sends its gradient's share of the global mean.
        let share = match wire {
            WireType::F32 => None,
            WireType::Bf16 | WireType::F16 => {
                let total = dense_copy(&rows_here)?;
                comm.all_reduce_sum(&nccl_buffer::<D>(total.storage())?)?;
                comm.finish()?;
                // Of the mean over this rank's rows, or of the sum over
                // them when micro-batches were accumulated.
                let part = if accumulating { Tensor::<D>::try_ones([1])? } else { rows_here.clone() };
                Some(part.try_div(&total)?)
            }
        };
        // Gradients times rows wherever they are summed before they travel.
        let weight = if share.is_none() || accumulating { rows as f32 } else { 1.0 };
        // Buckets become ready in the order backward finishes them; NCCL needs
        // every rank to call in one order, so each goes out in index order,
        // as soon as the buckets before it have.
        let mut ready: Vec<Option<Wire<D>>> = (0..buckets.len()).map(|_| None).collect();
        let mut sent = 0;
        *overlapped = backward_in_buckets(&loss, &params, buckets, weight, |b, flat| {
            let flat = match earlier[b].take() {
                Some(sum) => flat.try_add(&sum)?,
                None => flat,
            };
            let flat = match &share {
                Some(share) => flat.try_mul(share)?,
                None if b == 0 => Tensor::try_cat(&[&flat, &rows_here], 0)?,
                None => flat,
            };
            ready[b] = Some(Wire::new(flat, *wire)?);
            while let Some(bucket) = ready.get(sent).and_then(Option::as_ref) {
                comm.all_reduce_sum(&nccl_buffer::<D>(bucket.storage())?)?;
                sent += 1;
            }
            Ok::<(), Error>(())
        })?;
        comm.finish()?;
        let mut sums: Vec<Tensor<D>> =
            ready.into_iter().map(|s| s.expect("every bucket is sent").into_f32()).collect::<Result<_>>()?;
        if let (None, Some(first)) = (&share, sums.first_mut()) {
            let n = first.elem_count() - 1;
            let total_rows = first.try_narrow(0, n, 1)?;
            *first = first.try_narrow(0, 0, n)?;
            for sum in &mut sums {
                *sum = sum.try_div(&total_rows)?;
            }
        }
        let mut reduced = unflatten(&params, buckets, &sums)?;
        if let Some(max_norm) = *max_grad_norm {
            try_clip_grad_norm(&*model, &mut reduced, max_norm, 2.0)?;
        }
        optimizer.try_step(model, &reduced)?;
        // Reading the loss synchronises the stream, so the collectives have
        // run (or been aborted) when NCCL's own error is read.
        let loss = loss.try_item()?;
        group.check()?;
        comm.check()?;
        Ok(loss)
    }

    /// Saves the model and the optimizer state to `path`, written by rank 0
    /// after every rank has reached this call, and readable by every rank
    /// when it returns (PyTorch's `if rank == 0: torch.save(...)` between
    /// two barriers).
    pub fn try_save_checkpoint(&self, path: impl AsRef<Path>) -> Result<()> {
        self.group.barrier_named("devtensor/checkpoint")?;
        if self.group.job().is_main() {
            Checkpoint::try_from_model(&self.model)?.with_optimizer(&self.optimizer).try_save(path)?;
        }
        self.group.barrier_named("devtensor/checkpoint")
    }

    /// Loads the model and the optimizer state from a checkpoint that
    /// [`try_save_checkpoint`](Self::try_save_checkpoint) wrote, on every
    /// rank, to resume training where it stopped. Gradients
    /// [`accumulate`](Self::accumulate)d before are dropped: they belong to
    /// the parameters the checkpoint replaces.
    pub fn try_load_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.accumulated = None;
        let checkpoint = Checkpoint::<D>::try_load(path)?;
        checkpoint.try_load_into(&mut self.model)?;
        self.optimizer.try_load_state(checkpoint.optimizer_state())
    }
}

/// A 64-bit digest (FNV-1a) of a model's fingerprint: the same on every
/// machine and build, unlike `std`'s hasher, whose algorithm may change.
fn digest(fingerprint: &[String]) -> u64 {
    fingerprint
        .iter()
        .flat_map(|line| line.bytes().chain([b'\n']))
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes).lines().map(str::to_string).collect()
}

/// The first parameter where `theirs` differs from `reference`, in words.
fn first_difference(reference: &[String], theirs: &[String]) -> Option<String> {
    let name = |line: &str| line.split(' ').next().unwrap_or("").to_string();
    for (ours, other) in reference.iter().zip(theirs) {
        if ours != other {
            return Some(if name(ours) == name(other) {
                format!("parameter `{}` is {} there, but {} on rank 0", name(ours), rest(other), rest(ours))
            } else {
                format!("its parameter `{}` is `{}` on rank 0", name(other), name(ours))
            });
        }
    }
    match theirs.len().cmp(&reference.len()) {
        std::cmp::Ordering::Less => Some(format!("it lacks rank 0's parameter `{}`", name(&reference[theirs.len()]))),
        std::cmp::Ordering::Greater => {
            Some(format!("it has parameter `{}`, which rank 0 lacks", name(&theirs[reference.len()])))
        }
        std::cmp::Ordering::Equal => None,
    }
}

fn rest(line: &str) -> &str {
    line.split_once(' ').map_or("", |(_, r)| r)
}
