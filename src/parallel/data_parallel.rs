//! [`DataParallel`]: one replica per device, a thread per replica, and the
//! gradients summed in buckets while backward runs.

use super::batch::ScatterBatch;
use super::collective::Collective;
use super::compress::WireType;
use super::devices::{DeviceList, Replicate};
use super::reduce::{DEFAULT_BUCKET_BYTES, Exchange, ReducePath, Stop, plan_buckets};
use super::replica::{BucketPlan, OnDevice, Replicas};
use crate::backend::cuda::nccl::NcclClique;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::nn::TensorKind;
use crate::ops::autocast::{LowerPrecision, autocast_as, autocast_dtype};
use crate::optim::OptimizerConfig;
use crate::optim::clip::check_max_norm;
use crate::tensor::Device;
use devtensor_macros::fallible;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

/// Held by every step that all-reduces with NCCL, so that in one process
/// such steps run one at a time. Each GPU's stream runs its collectives in
/// the order they were queued, and NCCL needs the collectives of different
/// communicators in the same order on every GPU. Two models stepping at once
/// on the same GPUs could queue theirs in opposite orders on two GPUs. Then
/// each GPU's running all-reduce would wait for ever for its peer, which is
/// queued behind the other model's. The emulated GPUs hung this way in CI
/// when two tests overlapped.
static NCCL_STEPS: Mutex<()> = Mutex::new(());

/// Data-parallel training over the devices `L` (PyTorch's
/// `DistributedDataParallel` within one process): one replica of the model
/// and its optimizer per device, each step splitting the global batch
/// between them.
///
/// A step ([`step`](Self::step)) copies each replica its rows of the
/// batch (from the CPU or from any one device), runs forward and backward
/// on every replica at once (a thread per device), sums the gradients
/// across replicas in buckets (25 MiB by default, [`bucket_bytes`]) that
/// start as soon as backward has finished every gradient in them (over
/// NCCL when every replica has a GPU of its own and NCCL is installed, over
/// peer copies otherwise; see [`try_reduce_with`](Self::try_reduce_with)), and takes
/// the optimizer step on every replica with the summed gradients, so the
/// replicas stay identical. Each replica's gradient is weighted by its
/// share of the batch: with a mean loss, a step gives the same parameters
/// as one step on one device with the whole batch.
///
/// Buffers that change in training (`BatchNorm2d`'s running statistics)
/// are each replica's own, from its share of each batch; training itself
/// uses batch statistics, so they do not make the replicas drift, and
/// [`model`](Self::model) returns the root's (PyTorch DDP keeps rank 0's
/// too).
///
/// A step taken inside an [`autocast`](crate::autocast) scope runs every
/// replica inside it (the scope is per thread), so mixed precision needs
/// nothing more; the gradients are summed in `f32`, or in `bf16` or `f16`
/// with [`compress_gradients`](Self::compress_gradients).
///
/// Replicas are typed: the model on `Cuda<1>` is an `M::On<Cuda<1>>`, and
/// its rows arrive as the batch type on `Cuda<1>`, so no replica can be
/// handed data on another device.
///
/// ```
/// use devtensor::nn::{Linear, Module, try_mse_loss, Reduction};
/// use devtensor::optim::SgdConfig;
/// use devtensor::parallel::{DataParallel, Loss};
/// use devtensor::{Cpu, Device, Result, Tensor};
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
/// let model = Regression { fc: Linear::<Cpu>::new(3, 1) };
/// // Two replicas; on GPUs this would be `(Cuda<0>, Cuda<1>)` or `AllGpus`.
/// let mut dp = DataParallel::<(Cpu, Cpu), _, _, _>::try_new(&model, SgdConfig { lr: 0.1, ..Default::default() })?;
/// let x = Tensor::<Cpu>::randn([8, 3]);
/// let y = x.sum_axis(1).unsqueeze(1);
/// let first = dp.try_step(&(x.clone(), y.clone()))?;
/// for _ in 0..50 {
///     dp.try_step(&(x.clone(), y.clone()))?;
/// }
/// assert!(dp.try_step(&(x, y))? < first);
/// assert_eq!(dp.devices(), ["Cpu", "Cpu"]);
/// # Ok::<(), devtensor::Error>(())
/// ```
///
/// [`bucket_bytes`]: Self::bucket_bytes
pub struct DataParallel<L: DeviceList, M, B: ScatterBatch, O: OptimizerConfig> {
    replicas: Replicas<B, L::Root>,
    buckets: BucketPlan,
    sizes: Vec<usize>,
    /// The communicators when buckets are summed over NCCL.
    clique: Option<NcclClique>,
    /// The type buckets travel in.
    wire: WireType,
    /// Buckets every replica handed over during backward, in the last step.
    overlapped: usize,
    _types: PhantomData<fn() -> (M, O)>,
}

impl<L: DeviceList, M, B: ScatterBatch, O: OptimizerConfig> DataParallel<L, M, B, O>
where
    M: Send + 'static,
{
    /// Replicates `model` (on any device `DS`) on every device of `L`, each
    /// replica with an optimizer made from `optimizer`. Fails when a device
    /// is unavailable or out of memory.
    pub fn try_new<DS: Device, Src>(model: &Src, optimizer: O) -> Result<Self>
    where
        Src: Replicate<DS, L, B, O, Root = M>,
    {
        let mut sizes = Vec::new();
        model.visit("", &mut |_, kind, t| {
            if kind == TensorKind::Parameter {
                sizes.push(t.elem_count() * std::mem::size_of::<f32>());
            }
        });
        let buckets = Arc::new(plan_buckets(&sizes, DEFAULT_BUCKET_BYTES));
        let replicas = model.replicas(&optimizer, &buckets)?;
        let dp = DataParallel {
            replicas,
            buckets,
            sizes,
            clique: None,
            wire: WireType::F32,
            overlapped: 0,
            _types: PhantomData,
        };
        dp.try_reduce_with(ReducePath::Auto)
    }

    /// Chooses how gradients are summed. [`ReducePath::Nccl`] fails when a
    /// replica is not on a GPU, two are on the same GPU, or NCCL is not
    /// installed; [`ReducePath::Auto`] (the default) then falls back to
    /// peer copies.
    pub fn try_reduce_with(mut self, path: ReducePath) -> Result<Self> {
        self.clique = None;
        match path {
            ReducePath::PeerCopies => {}
            ReducePath::Nccl => self.clique = Some(self.nccl_clique()?),
            ReducePath::Auto => self.clique = self.nccl_clique().ok(),
        }
        Ok(self)
    }

    /// NCCL communicators over the replicas' GPUs.
    fn nccl_clique(&self) -> Result<NcclClique> {
        let ordinals: Option<Vec<usize>> = self.replicas.iter().map(|r| r.cuda_ordinal()).collect();
        let distinct = |o: &Vec<usize>| o.iter().collect::<std::collections::HashSet<_>>().len() == o.len();
        match ordinals {
            Some(ordinals) if distinct(&ordinals) => NcclClique::try_new(&ordinals),
            _ => Err(Error::Argument {
                op: "DataParallel::reduce_with",
                device: self.devices().join(", "),
                reason: "NCCL needs every replica on a GPU of its own".into(),
            }),
        }
    }

    /// Sets the bucket size in bytes (PyTorch's `bucket_cap_mb`); a
    /// parameter larger than it gets a bucket of its own.
    pub fn bucket_bytes(mut self, bytes: usize) -> Self {
        self.buckets = Arc::new(plan_buckets(&self.sizes, bytes.max(1)));
        let buckets = self.buckets.clone();
        for replica in &mut self.replicas {
            replica.set_buckets(buckets.clone());
        }
        self
    }

    /// Sends the gradient buckets between replicas in the half type `H`
    /// (`bf16` or `f16`) instead of `f32`, as PyTorch DDP's
    /// `bf16_compress_hook` and `fp16_compress_hook`: each replica's
    /// weighted bucket is rounded to `H`, summed (over NCCL in `H`; over
    /// peer copies in `f32` on the root, rounded to `H` for the way back),
    /// and widened back to `f32` before the optimizer step. Half the bytes
    /// cross between devices; each summed gradient is off by a rounding or
    /// two of `H`. Parameters and optimizer state stay `f32`. With `f16`,
    /// gradients past 65504 (a loss scale too large) become infinite, which
    /// a [`GradScaler`](crate::optim::GradScaler) sees and backs off from.
    ///
    /// ```
    /// use devtensor::nn::{Linear, Module, try_mse_loss, Reduction};
    /// use devtensor::optim::SgdConfig;
    /// use devtensor::parallel::{DataParallel, Loss};
    /// use devtensor::{Cpu, Device, Result, Tensor, bf16};
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
    /// let model = Regression { fc: Linear::<Cpu>::new(4, 1) };
    /// let mut dp = DataParallel::<(Cpu, Cpu), _, _, _>::try_new(&model, SgdConfig::default())?
    ///     .compress_gradients::<bf16>();
    /// assert_eq!(dp.gradient_compression(), Some(devtensor::DType::BF16));
    /// dp.step(&(Tensor::<Cpu>::randn([8, 4]), Tensor::<Cpu>::randn([8, 1])));
    /// # Ok::<(), devtensor::Error>(())
    /// ```
    pub fn compress_gradients<H: LowerPrecision>(mut self) -> Self {
        self.wire = WireType::of::<H>();
        self
    }

    /// The half type gradients travel in between replicas
    /// ([`compress_gradients`](Self::compress_gradients)), `None` for `f32`.
    pub fn gradient_compression(&self) -> Option<DType> {
        self.wire.compression()
    }

    /// Clips the summed gradient to a total 2-norm of `max_norm` before
    /// every optimizer step, as `torch.nn.utils.clip_grad_norm_` after
    /// DDP's backward. Every replica clips the same sum, so they stay
    /// identical, and a step is that of clipping on one device with the
    /// whole batch. Fails when `max_norm` is negative or NaN.
    pub fn try_clip_grad_norm(mut self, max_norm: f64) -> Result<Self> {
        check_max_norm("DataParallel::clip_grad_norm", || self.devices().join(", "), max_norm)?;
        for replica in &mut self.replicas {
            replica.set_max_grad_norm(Some(max_norm));
        }
        Ok(self)
    }

    /// The number of buckets the gradients are summed in.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// How many buckets of the last step every replica handed over for
    /// summing while its backward was still running: all of them, except
    /// buckets of parameters the loss did not use (their zeros are sent
    /// after backward). With one bucket, the sum starts with the last
    /// gradient; smaller buckets start it earlier.
    pub fn buckets_sent_during_backward(&self) -> usize {
        self.overlapped
    }

    /// The replicas' devices, the root first.
    pub fn devices(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.device()).collect()
    }

    /// How gradients are summed: [`ReducePath::Nccl`] or
    /// [`ReducePath::PeerCopies`] (see [`try_reduce_with`](Self::try_reduce_with)).
    pub fn reduction(&self) -> ReducePath {
        if self.clique.is_some() { ReducePath::Nccl } else { ReducePath::PeerCopies }
    }

    /// The learning rate of the replicas' optimizers.
    pub fn lr(&self) -> f64 {
        self.replicas[0].lr()
    }

    /// Sets the learning rate of every replica's optimizer (for a schedule).
    pub fn set_lr(&mut self, lr: f64) {
        for replica in &mut self.replicas {
            replica.set_lr(lr);
        }
    }

    /// One data-parallel training step on `batch`, whose rows are split as
    /// evenly as possible between the replicas, in order. Returns the mean
    /// loss over the whole batch. Fails when the batch has fewer rows than
    /// there are replicas, or with the error of the first replica that
    /// failed (out of memory, a device error, an error of its loss); every
    /// replica's thread has ended by then. After an error the replicas may
    /// differ (one may have stepped before another failed): reload them from
    /// a checkpoint, or make a new `DataParallel` from [`model`](Self::model).
    ///
    /// Steps that sum over NCCL run one at a time in a process: two models
    /// stepping at once on the same GPUs take turns, where their
    /// collectives could otherwise wait on each other for ever.
    #[fallible]
    pub fn step(&mut self, batch: &B) -> f32 {
        let total = batch.try_batch_len()?;
        let n = self.replicas.len();
        if total < n {
            return Err(Error::Argument {
                op: "DataParallel::step",
                device: self.replicas[0].device(),
                reason: format!("a batch of {total} rows cannot be split between {n} replicas"),
            });
        }
        let _one_at_a_time = self.clique.as_ref().map(|_| NCCL_STEPS.lock().unwrap_or_else(PoisonError::into_inner));
        let group = self.clique.as_ref().map(|c| c as &dyn Collective);
        let reducer = Exchange::<L::Root>::new(self.buckets.len(), n, group, self.wire);
        // The caller's autocast scope, for the replicas' threads.
        let precision = autocast_dtype();
        let results: Vec<std::result::Result<(f32, usize), Stop>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .replicas
                .iter_mut()
                .enumerate()
                .map(|(rank, replica)| {
                    let (start, end) = (total * rank / n, total * (rank + 1) / n);
                    let reducer = &reducer;
                    scope.spawn(move || {
                        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            autocast_as(precision, || replica.step(batch, start..end, total, reducer, rank))
                        }));
                        let result = outcome.unwrap_or_else(|panic| {
                            let message = panic
                                .downcast_ref::<String>()
                                .map(String::as_str)
                                .or_else(|| panic.downcast_ref::<&str>().copied())
                                .unwrap_or("a panic");
                            Err(Stop::Failed(Error::Argument {
                                op: "DataParallel::step",
                                device: replica.device(),
                                reason: format!("the replica panicked: {message}"),
                            }))
                        });
                        if matches!(result, Err(Stop::Failed(_))) {
                            reducer.fail();
                        }
                        result
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("replica panics are caught")).collect()
        });
        let mut loss = 0.0;
        let mut first_error = None;
        self.overlapped = self.buckets.len();
        for result in results {
            match result {
                Ok((share, overlapped)) => {
                    loss += share;
                    self.overlapped = self.overlapped.min(overlapped);
                }
                Err(Stop::Failed(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(Stop::Aborted) => {}
            }
        }
        if let Some(error) = first_error {
            if self.clique.is_some() {
                // A replica may have aborted the communicators: make new ones.
                self.clique = None;
                self.clique = Some(self.nccl_clique()?);
            }
            return Err(error);
        }
        Ok(loss)
    }

    /// The model on the root device (the first of `L`): what to evaluate,
    /// save or keep training after data-parallel training.
    pub fn model(&self) -> &M {
        self.root().map(|r| &r.model).expect("the first replica is on the root device")
    }

    fn root(&self) -> Option<&OnDevice<L::Root, M, O, B>> {
        self.replicas[0].as_any().downcast_ref()
    }
}

impl<L: DeviceList, M, B: ScatterBatch, O: OptimizerConfig> std::fmt::Debug for DataParallel<L, M, B, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataParallel")
            .field("devices", &self.replicas.iter().map(|r| r.device()).collect::<Vec<_>>())
            .field("buckets", &self.buckets.len())
            .finish()
    }
}
