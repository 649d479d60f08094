//! One replica: a model and its optimizer on one device, and its part of a
//! data-parallel step.

use super::batch::{ScatterBatch, Sharder};
use super::compress::Wire;
use super::reduce::{Exchange, Stop};
use crate::autograd::{Gradients, LeafId};
use crate::error::Result;
use crate::nn::Module;
use crate::optim::{Optimizer, OptimizerConfig, try_clip_grad_norm};
use crate::tensor::Device;
use crate::tensor::Tensor;
use std::any::Any;
use std::collections::HashMap;

/// The loss of a model on a batch: what each replica of data-parallel
/// training computes. Implement it once for every device:
///
/// ```
/// use devtensor::nn::{Linear, try_cross_entropy};
/// use devtensor::parallel::Loss;
/// use devtensor::{Device, Result, Tensor};
///
/// struct Classifier<D: Device> {
///     fc: Linear<D>,
/// }
/// devtensor::module!(Classifier { fc });
///
/// impl<D: Device> Loss<D> for Classifier<D> {
///     type Batch = (Tensor<D>, Tensor<D, i64>);
///
///     fn loss(&self, (images, labels): &Self::Batch) -> Result<Tensor<D>> {
///         try_cross_entropy(&self.fc.try_forward(images)?, labels)
///     }
/// }
/// ```
///
/// For the replicas' gradients to add up to the gradient of the whole
/// batch, the loss should be a mean over the batch (PyTorch's default
/// reduction): each replica's gradient is weighted by its share of the
/// batch before the sum.
pub trait Loss<D: Device>: Module<D> {
    /// The batch, on `D`: a tensor, or a tuple (inputs, targets).
    type Batch;

    /// The loss (one element) of this model on `batch`.
    fn loss(&self, batch: &Self::Batch) -> Result<Tensor<D>>;
}

/// The replicas of a run, the root first.
pub(crate) type Replicas<B, R> = Vec<Box<dyn Replica<B, R>>>;

/// Indices into the model's parameters, one list per bucket, in the order
/// buckets fill; shared by every replica.
pub(crate) type BucketPlan = std::sync::Arc<Vec<Vec<usize>>>;

/// A replica with its device erased, so that replicas on different devices
/// can sit in one list. `R` is the root device, where buckets are summed.
#[doc(hidden)]
pub trait Replica<B: ScatterBatch, R: Device>: Send {
    /// The device's name.
    fn device(&self) -> String;

    /// The ordinal `N` of a `Cuda<N>` replica.
    fn cuda_ordinal(&self) -> Option<usize>;

    /// Forward, backward with bucketed reduction, and the optimizer step on
    /// rows `rows` of `batch` (of `total` rows). Returns this replica's
    /// share of the mean loss and how many buckets it handed over while
    /// backward was still running.
    fn step(
        &mut self,
        batch: &B,
        rows: std::ops::Range<usize>,
        total: usize,
        exchange: &Exchange<'_, R>,
        rank: usize,
    ) -> std::result::Result<(f32, usize), Stop>;

    /// Replaces the bucket plan.
    fn set_buckets(&mut self, buckets: BucketPlan);

    /// The learning rate of the replica's optimizer.
    fn lr(&self) -> f64;

    /// Sets the learning rate of the replica's optimizer.
    fn set_lr(&mut self, lr: f64);

    /// Clips the summed gradient to this total 2-norm before each step.
    fn set_max_grad_norm(&mut self, max_norm: Option<f64>);

    /// The replica itself, to recover the typed model.
    fn as_any(&self) -> &dyn Any;
}

/// A replica on `D`: the model, its optimizer and the bucket plan (indices
/// into the model's parameters, in the order buckets fill).
pub(crate) struct OnDevice<D: Device, M, O: OptimizerConfig, B> {
    pub(crate) model: M,
    optimizer: O::For<D>,
    buckets: BucketPlan,
    max_grad_norm: Option<f64>,
    /// Cuts this replica's `M::Batch` from the global batch.
    shard: Sharder<B>,
}

impl<D: Device, M: Loss<D> + Send + 'static, O: OptimizerConfig, B> OnDevice<D, M, O, B> {
    pub(crate) fn new(model: M, config: &O, buckets: BucketPlan, shard: Sharder<B>) -> Self {
        let optimizer = config.build(&model);
        OnDevice { model, optimizer, buckets, max_grad_norm: None, shard }
    }

    fn parameters(&self) -> Vec<Tensor<D>> {
        self.model.parameters().into_iter().map(|(_, p)| p).collect()
    }
}

/// `grads` of `params` (zeros where a parameter got none) flattened into one
/// vector, scaled by `weight`.
fn flatten_bucket<D: Device>(params: &[&Tensor<D>], grads: &Gradients, weight: f32) -> Result<Tensor<D>> {
    let mut flat = Vec::with_capacity(params.len());
    for p in params {
        let g = match grads.get(p) {
            Some(g) => g.try_reshape([p.elem_count()])?,
            None => Tensor::<D>::try_zeros([p.elem_count()])?,
        };
        flat.push(g);
    }
    let refs: Vec<&Tensor<D>> = flat.iter().collect();
    let bucket = Tensor::try_cat(&refs, 0)?;
    // Times 1 is every value itself (NaN, infinities and -0 too): no pass
    // for it (a compressed DDP bucket is scaled on the device instead).
    if weight == 1.0 { Ok(bucket) } else { bucket.try_mul_scalar(weight) }
}

/// Runs backward from `loss` and hands each bucket of `buckets` (indices
/// into `params`), flattened and scaled by `weight`, to `send` the moment
/// its last gradient is final, so that summing it overlaps the rest of
/// backward; buckets the loss left without gradients follow as zeros, so
/// every rank sends every bucket, in the same order. Returns how many
/// buckets went out while backward was still running.
pub(crate) fn backward_in_buckets<D: Device, S: From<crate::Error>>(
    loss: &Tensor<D>,
    params: &[Tensor<D>],
    buckets: &[Vec<usize>],
    weight: f32,
    mut send: impl FnMut(usize, Tensor<D>) -> std::result::Result<(), S>,
) -> std::result::Result<usize, S> {
    let bucket_of: HashMap<LeafId, usize> = buckets
        .iter()
        .enumerate()
        .flat_map(|(b, members)| members.iter().filter_map(move |&i| Some((params[i].leaf_id()?, b))))
        .collect();
    let mut missing: Vec<usize> = buckets.iter().map(Vec::len).collect();
    let mut sent = vec![false; buckets.len()];
    let mut flatten_and_send = |b: usize, grads: &Gradients| -> std::result::Result<(), S> {
        let members: Vec<&Tensor<D>> = buckets[b].iter().map(|&i| &params[i]).collect();
        send(b, flatten_bucket(&members, grads, weight)?)
    };
    let mut stop = None;
    let grads = loss.try_backward_with_hook(&mut |leaf, grads| {
        let Some(&b) = bucket_of.get(&leaf) else { return Ok(()) };
        missing[b] -= 1;
        if missing[b] == 0 {
            sent[b] = true;
            if let Err(s) = flatten_and_send(b, grads) {
                stop = Some(s);
                // Any error ends the walk; `stop` says which.
                return Err(crate::Error::Argument { op: "backward", device: D::name(), reason: "stopped".into() });
            }
        }
        Ok(())
    });
    if let Some(stop) = stop {
        return Err(stop);
    }
    let grads = grads?;
    let during_backward = sent.iter().filter(|&&s| s).count();
    for b in (0..buckets.len()).filter(|&b| !sent[b]) {
        flatten_and_send(b, &grads)?;
    }
    Ok(during_backward)
}

/// The gradients of `params` cut back out of the summed buckets `sums`.
pub(crate) fn unflatten<D: Device>(
    params: &[Tensor<D>],
    buckets: &[Vec<usize>],
    sums: &[Tensor<D>],
) -> Result<Gradients> {
    let mut reduced = Gradients::new();
    for (members, sum) in buckets.iter().zip(sums) {
        let mut offset = 0;
        for &i in members {
            let p = &params[i];
            reduced.insert(p, sum.try_narrow(0, offset, p.elem_count())?.try_reshape(p.shape().clone())?)?;
            offset += p.elem_count();
        }
    }
    Ok(reduced)
}

impl<B, R, D, M, O> Replica<B, R> for OnDevice<D, M, O, B>
where
    B: ScatterBatch,
    R: Device,
    D: Device,
    M: Loss<D> + Send + 'static,
    O: OptimizerConfig,
{
    fn device(&self) -> String {
        D::name()
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        D::cuda_ordinal()
    }

    fn step(
        &mut self,
        batch: &B,
        rows: std::ops::Range<usize>,
        total: usize,
        exchange: &Exchange<'_, R>,
        rank: usize,
    ) -> std::result::Result<(f32, usize), Stop> {
        let shard: M::Batch = *(self.shard)(batch, rows.start, rows.len())?
            .downcast()
            .expect("a replica's sharder makes its own `Loss::Batch`");
        let weight = rows.len() as f32 / total as f32;
        let params = self.parameters();
        let loss = self.model.loss(&shard)?;
        // Over NCCL each bucket is summed in place on this device; over peer
        // copies the sums come back from the root device after backward.
        let mut summed: Vec<Option<Tensor<D>>> = vec![None; self.buckets.len()];
        let during_backward = backward_in_buckets(&loss, &params, &self.buckets, weight, |b, flat| {
            let wire = Wire::new(flat, exchange.wire())?;
            match exchange.group() {
                Some(group) => {
                    exchange.meet(b)?;
                    if let Err(e) = group.all_reduce_sum(rank, wire.storage(), &D::name()) {
                        // The other replicas are inside the collective now.
                        group.abort();
                        return Err(Stop::Failed(e));
                    }
                    // Queued on this device's stream after the sum.
                    summed[b] = Some(wire.into_f32()?);
                }
                None => exchange.contribute(b, rank, wire.try_to::<R>()?.into_f32()?)?,
            }
            Ok(())
        })?;
        let mut sums = Vec::with_capacity(self.buckets.len());
        for (b, sum) in summed.into_iter().enumerate() {
            sums.push(match sum {
                Some(sum) => sum,
                None => Wire::new(exchange.sum(b)?, exchange.wire())?.try_to::<D>()?.into_f32()?,
            });
        }
        let mut reduced = unflatten(&params, &self.buckets, &sums)?;
        if let Some(max_norm) = self.max_grad_norm {
            // Every replica holds the same sum, so clips it the same way.
            try_clip_grad_norm(&self.model, &mut reduced, max_norm, 2.0)?;
        }
        self.optimizer.try_step(&mut self.model, &reduced)?;
        Ok((loss.try_item()? * weight, during_backward))
    }

    fn set_buckets(&mut self, buckets: BucketPlan) {
        self.buckets = buckets;
    }

    fn lr(&self) -> f64 {
        self.optimizer.lr()
    }

    fn set_lr(&mut self, lr: f64) {
        self.optimizer.set_lr(lr);
    }

    fn set_max_grad_norm(&mut self, max_norm: Option<f64>) {
        self.max_grad_norm = max_norm;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
