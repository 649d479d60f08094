//! Data-parallel training: N steps over two replicas give the parameters of
//! N steps on one device with the same global batches, on `(Cpu, Cpu)`, on
//! the two emulated GPUs, and across a CPU and a GPU; a failing replica
//! fails the step without leaving a thread behind.

use devtensor::nn::{Linear, Module, Relu, try_cross_entropy};
use devtensor::optim::{AdamConfig, AdamWConfig, Optimizer, OptimizerConfig, SgdConfig, clip_grad_norm};
use devtensor::parallel::{DataParallel, DeviceList, Loss, ReducePath, Replicate};
use devtensor::{Cpu, Cuda, DType, Device, Error, Generator, Result, Tensor, bf16, f16};

/// A small classifier: Linear(6, 16), ReLU, Linear(16, 4) (the
/// distributed tests widen the hidden layer).
#[derive(Clone)]
pub(crate) struct Mlp<D: Device> {
    hidden: Linear<D>,
    relu: Relu,
    out: Linear<D>,
}
devtensor::module!(Mlp { hidden, relu, out });

impl<D: Device> Mlp<D> {
    /// Linear(6, `hidden`), ReLU, Linear(`hidden`, 4), initialised from `seed`.
    pub(crate) fn new(hidden: usize, seed: u64) -> Self {
        devtensor::manual_seed(seed);
        Mlp { hidden: Linear::new(6, hidden), relu: Relu, out: Linear::new(hidden, 4) }
    }

    fn logits(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        self.out.try_forward(&self.relu.try_forward(&self.hidden.try_forward(x)?)?)
    }
}

/// A label of -1 marks a sample whose replica must fail (out of memory),
/// -2 one whose replica panics.
impl<D: Device> Loss<D> for Mlp<D> {
    type Batch = (Tensor<D>, Tensor<D, i64>);

    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
        if y.to_vec().contains(&-1) {
            if cfg!(miri) {
                // Miri stops at an allocation it cannot grant instead of
                // failing it: a count past `isize::MAX` bytes fails first.
                Tensor::<D, f64>::try_zeros([1usize << 61])?;
            }
            Tensor::<D>::try_zeros([1usize << 60])?;
        }
        if y.to_vec().contains(&-2) {
            panic!("a bug in the loss");
        }
        try_cross_entropy(&self.logits(x)?, y)
    }
}

/// Global batch `step` of `rows` samples, on the CPU.
fn batch(step: u64, rows: usize) -> (Tensor<Cpu>, Tensor<Cpu, i64>) {
    let mut g = Generator::new(100 + step);
    let x = Tensor::<Cpu>::randn_with([rows, 6], &mut g);
    let y = Tensor::<Cpu, i64>::from_vec((0..rows as i64).map(|i| (i * 7 + step as i64) % 4).collect(), [rows]);
    (x, y)
}

/// The parameters after `steps` steps on one device, `D`, with the whole
/// batches.
fn single_device<D: Device, O: OptimizerConfig>(model: &Mlp<Cpu>, config: O, steps: u64, rows: usize) -> Vec<Vec<f32>> {
    single_device_clipped::<D, O>(model, config, steps, rows, None)
}

/// The same, each gradient clipped to a 2-norm of `max_grad_norm` before
/// the step.
fn single_device_clipped<D: Device, O: OptimizerConfig>(
    model: &Mlp<Cpu>,
    config: O,
    steps: u64,
    rows: usize,
    max_grad_norm: Option<f64>,
) -> Vec<Vec<f32>> {
    let mut model = model.to::<D>();
    let mut opt = config.build(&model);
    for step in 0..steps {
        let (x, y) = batch(step, rows);
        let loss = model.loss(&(x.to::<D>(), y.to::<D>())).unwrap();
        let mut grads = loss.backward();
        if let Some(max_norm) = max_grad_norm {
            let norm = clip_grad_norm(&model, &mut grads, max_norm, 2.0).item();
            assert!(norm > 2.0 * max_norm as f32, "the bound clips: {norm}");
        }
        opt.step(&mut model, &grads);
    }
    model.parameters().into_iter().map(|(_, p)| p.to_vec()).collect()
}

/// The same with data parallelism over `L`, `bucket_bytes` per bucket.
fn data_parallel<L: DeviceList, O: OptimizerConfig>(
    model: &Mlp<Cpu>,
    config: O,
    steps: u64,
    rows: usize,
    bucket_bytes: usize,
    path: ReducePath,
) -> (Vec<Vec<f32>>, usize)
where
    Mlp<Cpu>: Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), O>,
    <Mlp<Cpu> as Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), O>>::Root: Module<L::Root>,
{
    let mut dp = DataParallel::<L, _, _, O>::try_new(model, config)
        .and_then(|dp| dp.try_reduce_with(path))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .bucket_bytes(bucket_bytes);
    assert_eq!(dp.reduction(), path);
    for step in 0..steps {
        dp.try_step(&batch(step, rows)).unwrap();
        // Every bucket's sum started while backward was still running.
        assert_eq!(dp.buckets_sent_during_backward(), dp.bucket_count());
    }
    let params = dp.model().parameters().into_iter().map(|(_, p)| p.to_vec()).collect();
    (params, dp.bucket_count())
}

fn assert_params_close(got: &[Vec<f32>], expected: &[Vec<f32>], tolerance: f32, what: &str) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        for (a, b) in g.iter().zip(e) {
            assert!((a - b).abs() <= tolerance * (1.0 + b.abs()), "{what}: {a} vs {b}");
        }
    }
}

/// SGD with momentum and Adam, one bucket and one bucket per parameter,
/// an even and an uneven split: the tolerance covers f32 rounding of the
/// weighted sum of the replicas' gradients (a different order of additions
/// than one device's), over 5 steps.
fn equivalence<L: DeviceList>(path: ReducePath)
where
    Mlp<Cpu>: Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>
        + Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), AdamConfig>,
    <Mlp<Cpu> as Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>>::Root: Module<L::Root>,
    <Mlp<Cpu> as Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), AdamConfig>>::Root: Module<L::Root>,
{
    devtensor::manual_seed(31);
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let sgd = SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() };
    let adam = AdamConfig { lr: 1e-2, ..Default::default() };
    for rows in [8, 11] {
        let expected = single_device::<Cpu, _>(&model, sgd, 5, rows);
        let (one_bucket, count) = data_parallel::<L, _>(&model, sgd, 5, rows, 1 << 20, path);
        assert_eq!(count, 1);
        assert_params_close(&one_bucket, &expected, 1e-5, "SGD, one bucket");
        let (per_parameter, count) = data_parallel::<L, _>(&model, sgd, 5, rows, 4, path);
        assert_eq!(count, 4);
        assert_params_close(&per_parameter, &expected, 1e-5, "SGD, a bucket per parameter");

        let expected = single_device::<Cpu, _>(&model, adam, 5, rows);
        let (got, _) = data_parallel::<L, _>(&model, adam, 5, rows, 200, path);
        assert_params_close(&got, &expected, 1e-4, "Adam");
    }
    // Clipping the summed gradient is clipping the whole batch's gradient.
    let expected = single_device_clipped::<Cpu, _>(&model, sgd, 5, 11, Some(0.05));
    let mut dp = DataParallel::<L, _, _, _>::try_new(&model, sgd)
        .and_then(|dp| dp.try_reduce_with(path))
        .and_then(|dp| dp.try_clip_grad_norm(0.05))
        .unwrap();
    for step in 0..5 {
        dp.step(&batch(step, 11));
    }
    let got: Vec<Vec<f32>> = dp.model().parameters().into_iter().map(|(_, p)| p.to_vec()).collect();
    assert_params_close(&got, &expected, 1e-5, "SGD, clipped");
}

#[test]
fn two_cpu_replicas_match_one_device() {
    equivalence::<(Cpu, Cpu)>(ReducePath::PeerCopies);
    equivalence::<(Cpu, Cpu, Cpu)>(ReducePath::PeerCopies);
    // AdamW's decoupled weight decay, on an uneven split.
    devtensor::manual_seed(32);
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let adamw = AdamWConfig(AdamConfig { lr: 1e-2, ..AdamConfig::adamw() });
    let expected = single_device::<Cpu, _>(&model, adamw, 5, 11);
    let (got, _) = data_parallel::<(Cpu, Cpu), _>(&model, adamw, 5, 11, 1 << 20, ReducePath::PeerCopies);
    assert_params_close(&got, &expected, 1e-4, "AdamW");
    let err = DataParallel::<(Cpu, Cpu), _, (Tensor<Cpu>, Tensor<Cpu, i64>), _>::try_new(&model, adamw)
        .unwrap()
        .try_clip_grad_norm(-1.0)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "DataParallel::clip_grad_norm on Cpu, Cpu: max_norm must be a non-negative number, got -1"
    );
}

/// Both reduction paths on two GPUs. Where GPUs are present NCCL must be
/// too (the emulator brings a stand-in), so that this cannot pass by
/// falling back to peer copies.
#[test]
fn two_gpu_replicas_match_one_device() {
    if crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>() {
        equivalence::<(Cuda<0>, Cuda<1>)>(ReducePath::PeerCopies);
        equivalence::<(Cuda<0>, Cuda<1>)>(ReducePath::Nccl);
        equivalence::<(Cuda<1>, Cuda<0>)>(ReducePath::Nccl);
    }
}

/// Each parameter's gradient of the mean loss over rows `rows` of `batch`,
/// on `D`, times the rows' share of the batch: what a replica (or a rank)
/// with those rows sends, in `f32`.
pub(crate) fn weighted_gradient<D: Device>(
    model: &Mlp<Cpu>,
    (x, y): &(Tensor<Cpu>, Tensor<Cpu, i64>),
    rows: std::ops::Range<usize>,
) -> Vec<Vec<f32>> {
    let model = model.to::<D>();
    let (start, len) = (rows.start, rows.len());
    let shard = (x.narrow(0, start, len).to::<D>(), y.narrow(0, start, len).to::<D>());
    let grads = model.loss(&shard).unwrap().backward();
    let share = len as f32 / x.dims()[0] as f32;
    model
        .parameters()
        .into_iter()
        .map(|(_, p)| grads.get(&p).unwrap().to_vec().iter().map(|g| g * share).collect())
        .collect()
}

pub(crate) fn to_bf16(v: f32) -> f32 {
    bf16::from_f32(v).to_f32()
}

pub(crate) fn to_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// Checks `got`, the parameters after one SGD step of rate 1 from `model`
/// with buckets compressed by `round` (to `bf16` or `f16`), against the
/// two contributions `parts` (from [`weighted_gradient`]): each rounded,
/// summed in `f32`, and the sum rounded (NCCL's sum of two ranks in the
/// half type; the root's `f32` sum of peer copies, rounded for the way
/// back). Also checks that the `f32` sum would have missed, so that the
/// check sees the compression.
pub(crate) fn assert_compressed_step(
    got: &[Vec<f32>],
    model: &Mlp<Cpu>,
    parts: &[Vec<Vec<f32>>; 2],
    round: fn(f32) -> f32,
    what: &str,
) {
    let before: Vec<Vec<f32>> = model.parameters().into_iter().map(|(_, p)| p.to_vec()).collect();
    assert_eq!(got.len(), before.len(), "{what}");
    let mut uncompressed_gap = 0f32;
    for (p, (got, before)) in got.iter().zip(&before).enumerate() {
        for (e, (&got, &w)) in got.iter().zip(before).enumerate() {
            let [a, b] = [parts[0][p][e], parts[1][p][e]];
            let want = w - round(round(a) + round(b));
            assert!(
                (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "{what}: parameter {p}, element {e}: {got} vs {want}"
            );
            uncompressed_gap = uncompressed_gap.max((w - (a + b) - want).abs());
        }
    }
    assert!(uncompressed_gap > 4e-6, "{what}: the f32 sum is within {uncompressed_gap} of the compressed one");
}

/// `compress_gradients` on two replicas of `L` summing over `path`:
/// `parts` are the replicas' own weighted gradients of batch 0 (11 rows,
/// split 5 and 6), on their own devices.
fn compressed_steps<L: DeviceList>(model: &Mlp<Cpu>, path: ReducePath, parts: &[Vec<Vec<f32>>; 2])
where
    Mlp<Cpu>: Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>,
    <Mlp<Cpu> as Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>>::Root: Module<L::Root>,
{
    let sgd = SgdConfig { lr: 1.0, ..Default::default() };
    for (dtype, round) in [(DType::BF16, to_bf16 as fn(f32) -> f32), (DType::F16, to_f16)] {
        let dp = DataParallel::<L, _, _, _>::try_new(model, sgd).and_then(|dp| dp.try_reduce_with(path)).unwrap();
        let mut dp =
            if dtype == DType::BF16 { dp.compress_gradients::<bf16>() } else { dp.compress_gradients::<f16>() };
        assert_eq!(dp.gradient_compression(), Some(dtype));
        assert_eq!(dp.reduction(), path);
        dp.step(&batch(0, 11));
        let got: Vec<Vec<f32>> = dp.model().parameters().into_iter().map(|(_, p)| p.to_vec()).collect();
        assert_compressed_step(&got, model, parts, round, &format!("{:?} over {path:?} in {dtype:?}", dp.devices()));
    }
}

/// Gradients summed in `bf16` and `f16` (PyTorch's compress hooks), over
/// peer copies between two CPU replicas and two GPUs, and over NCCL.
#[test]
fn compressed_gradients_are_sums_rounded_to_the_half_type() {
    let (model, batch) = (Mlp::<Cpu>::new(16, 5), batch(0, 11));
    let cpu = [weighted_gradient::<Cpu>(&model, &batch, 0..5), weighted_gradient::<Cpu>(&model, &batch, 5..11)];
    compressed_steps::<(Cpu, Cpu)>(&model, ReducePath::PeerCopies, &cpu);
    if crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>() {
        let gpu =
            [weighted_gradient::<Cuda<0>>(&model, &batch, 0..5), weighted_gradient::<Cuda<1>>(&model, &batch, 5..11)];
        compressed_steps::<(Cuda<0>, Cuda<1>)>(&model, ReducePath::Nccl, &gpu);
        compressed_steps::<(Cuda<0>, Cuda<1>)>(&model, ReducePath::PeerCopies, &gpu);
    }
}

/// Two models training at once on both GPUs over NCCL, one with its
/// replicas in the other order, each in its own thread. Their all-reduces
/// must not reach the GPUs' streams in opposite orders, where each would
/// wait for ever for a peer queued behind the other's: steps over NCCL run
/// one at a time. Two tests doing this at once hung a CI run on the
/// emulated GPUs. The deadline only catches a hang.
#[test]
fn two_models_stepping_at_once_on_both_gpus_do_not_hang() {
    if !(crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>()) {
        return;
    }
    fn train<L: DeviceList>(model: &Mlp<Cpu>) -> f32
    where
        Mlp<Cpu>: Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>,
    {
        let mut dp = DataParallel::<L, _, _, _>::try_new(model, SgdConfig { lr: 0.1, ..Default::default() })
            .and_then(|dp| dp.try_reduce_with(ReducePath::Nccl))
            .unwrap()
            .bucket_bytes(4);
        (0..12).map(|step| dp.try_step(&batch(step, 8)).unwrap()).sum()
    }
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let (done, finished) = std::sync::mpsc::channel();
    for reversed in [false, true] {
        let (model, done) = (model.clone(), done.clone());
        std::thread::spawn(move || {
            let loss = if reversed { train::<(Cuda<1>, Cuda<0>)>(&model) } else { train::<(Cuda<0>, Cuda<1>)>(&model) };
            done.send(loss).unwrap();
        });
    }
    for _ in 0..2 {
        let loss = finished.recv_timeout(std::time::Duration::from_secs(600)).expect("both trainings finish");
        assert!(loss.is_finite());
    }
}

#[test]
fn a_cpu_and_a_gpu_replica_match_one_device() {
    if crate::common::cuda_ready::<0>() {
        equivalence::<(Cuda<0>, Cpu)>(ReducePath::PeerCopies);
    }
}

#[test]
fn nccl_is_refused_where_it_cannot_work() {
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let dp = DataParallel::<(Cpu, Cpu), _, (Tensor<Cpu>, Tensor<Cpu, i64>), _>::try_new(&model, SgdConfig::default())
        .unwrap();
    assert_eq!(dp.reduction(), ReducePath::PeerCopies);
    let err = dp.try_reduce_with(ReducePath::Nccl).unwrap_err();
    assert_eq!(err.to_string(), "DataParallel::reduce_with on Cpu, Cpu: NCCL needs every replica on a GPU of its own");
}

/// Replicas fed from a batch on the root GPU (PyTorch's scatter from
/// `cuda:0`): the rows for `Cuda<1>` are copied GPU to GPU.
#[test]
fn a_batch_on_one_gpu_is_scattered() {
    if !(crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>()) {
        return;
    }
    devtensor::manual_seed(5);
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let sgd = SgdConfig { lr: 0.1, ..Default::default() };
    let expected = single_device::<Cpu, _>(&model, sgd, 3, 9);
    let mut dp = DataParallel::<(Cuda<0>, Cuda<1>), _, _, _>::try_new(&model, sgd).unwrap();
    for step in 0..3 {
        let (x, y) = batch(step, 9);
        dp.try_step(&(x.to::<Cuda<0>>(), y.to::<Cuda<0>>())).unwrap();
    }
    let got: Vec<Vec<f32>> = dp.model().parameters().into_iter().map(|(_, p)| p.to_vec()).collect();
    assert_params_close(&got, &expected, 1e-5, "scattered from Cuda<0>");
}

/// A replica that runs out of memory, or panics, fails the step with its
/// error while the other replica waits for its gradients; the step returns
/// and no thread is left waiting. A batch too small to split is an error.
fn failures<L: DeviceList>(path: ReducePath)
where
    Mlp<Cpu>: Replicate<Cpu, L, (Tensor<Cpu>, Tensor<Cpu, i64>), SgdConfig>,
{
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let mut dp =
        DataParallel::<L, _, _, _>::try_new(&model, SgdConfig::default()).unwrap().try_reduce_with(path).unwrap();
    let (x, y) = batch(0, 8);
    // The last row is the second replica's.
    let mut labels = y.to_vec();
    labels[7] = -1;
    let err = dp.try_step(&(x.clone(), Tensor::from_vec(labels.clone(), [8]))).unwrap_err();
    let expected =
        if cfg!(miri) { matches!(err, Error::Shape { .. }) } else { matches!(err, Error::OutOfMemory { .. }) };
    assert!(expected, "{err}");
    labels[7] = -2;
    let err = dp.try_step(&(x.clone(), Tensor::from_vec(labels, [8]))).unwrap_err();
    assert!(err.to_string().contains("the replica panicked: a bug in the loss"), "{err}");
    let err = dp.try_step(&(x.narrow(0, 0, 1), y.narrow(0, 0, 1))).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("DataParallel::step on {}: a batch of 1 rows cannot be split between 2 replicas", dp.devices()[0])
    );
    let err = dp.try_step(&(x.clone(), y.narrow(0, 0, 7))).unwrap_err();
    assert!(err.to_string().contains("the same number of rows, not [8, 7]"), "{err}");
    // The replicas are still usable.
    assert!(dp.try_step(&(x, y)).unwrap().is_finite());
}

#[test]
fn a_failing_replica_fails_the_step() {
    failures::<(Cpu, Cpu)>(ReducePath::PeerCopies);
    if crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>() {
        failures::<(Cuda<0>, Cuda<1>)>(ReducePath::PeerCopies);
        failures::<(Cuda<0>, Cuda<1>)>(ReducePath::Nccl);
    }
}

/// Backward reports the last layer's parameters as final while the first
/// layer's gradients do not exist yet: a bucket of the last layer can be
/// summed while backward is still running.
#[test]
fn gradients_of_late_layers_are_final_before_backward_ends() {
    let model = Mlp { hidden: Linear::<Cpu>::new(6, 16), relu: Relu, out: Linear::new(16, 4) };
    let (x, y) = batch(0, 8);
    let loss = model.loss(&(x, y)).unwrap();
    let first_layer = model.hidden.weight.leaf_id().unwrap();
    let mut seen = Vec::new();
    loss.try_backward_with_hook(&mut |leaf, grads| {
        seen.push((leaf, grads.get_by_id(first_layer).is_some()));
        Ok(())
    })
    .unwrap();
    let out_weight = model.out.weight.leaf_id().unwrap();
    let when_out_was_ready = seen.iter().find(|(leaf, _)| *leaf == out_weight).unwrap();
    assert!(!when_out_was_ready.1, "the first layer's gradient must not exist yet");
    assert_eq!(seen.len(), 4);
    // The first layer's weight, the oldest leaf, is final last.
    assert_eq!(seen.last().unwrap().0, first_layer);
}

#[allow(dead_code)] // its `main`
#[path = "../../examples/data_parallel.rs"]
mod data_parallel_example;

/// The example: two replicas reach the accuracy of one device trained on
/// the same batches (within one test image of 360), on the CPU for all 12
/// epochs, and for one epoch on the two emulated GPUs (NCCL where present).
#[test]
fn the_data_parallel_example_matches_one_device() {
    let (pixels, labels) = data_parallel_example::digits::load_digits();
    let (parallel, reference) = data_parallel_example::run::<(Cpu, Cpu)>(&pixels, &labels, 12).unwrap();
    assert!(parallel >= 0.97, "test accuracy {parallel}");
    assert!((parallel - reference).abs() <= 1.0 / 360.0, "data parallel {parallel} vs one device {reference}");
    if crate::common::cuda_ready::<0>() && crate::common::cuda_ready::<1>() {
        let (parallel, reference) = data_parallel_example::run::<(Cuda<0>, Cuda<1>)>(&pixels, &labels, 1).unwrap();
        assert!(parallel >= 0.7, "test accuracy after one epoch {parallel}");
        assert!((parallel - reference).abs() <= 1.0 / 360.0, "data parallel {parallel} vs one device {reference}");
    }
}

/// A model with a layer its loss does not use (PyTorch DDP's
/// `find_unused_parameters` case): that layer's buckets carry zeros, sent
/// after backward, and its parameters do not move.
struct WithUnused<D: Device> {
    used: Linear<D>,
    unused: Linear<D>,
}
devtensor::module!(WithUnused { used, unused });

impl<D: Device> Loss<D> for WithUnused<D> {
    type Batch = (Tensor<D>, Tensor<D, i64>);

    fn loss(&self, (x, y): &Self::Batch) -> Result<Tensor<D>> {
        try_cross_entropy(&self.used.try_forward(x)?, y)
    }
}

#[test]
fn parameters_the_loss_does_not_use_get_zero_gradients() {
    let model = WithUnused { used: Linear::<Cpu>::new(6, 4), unused: Linear::new(3, 3) };
    let before = model.unused.weight.to_vec();
    let mut dp = DataParallel::<(Cpu, Cpu), _, _, _>::try_new(&model, SgdConfig { lr: 0.5, ..Default::default() })
        .unwrap()
        .bucket_bytes(4);
    assert_eq!(dp.bucket_count(), 4);
    dp.try_step(&batch(0, 8)).unwrap();
    assert_eq!(dp.buckets_sent_during_backward(), 2);
    assert_eq!(dp.model().unused.weight.to_vec(), before);
    assert_ne!(dp.model().used.weight.to_vec(), model.used.weight.to_vec());
}

// ---- A process's place in a multi-process job, from the environment

mod job {
    use devtensor::Error;
    use devtensor::parallel::Job;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn read(vars: &HashMap<&str, String>) -> Result<Job, Error> {
        Job::from_vars(|name| vars.get(name).cloned())
    }

    const TOKEN: &str = "0123456789abcdef0123";

    fn valid(world: usize, rank: usize, local: usize, port: u16) -> HashMap<&'static str, String> {
        HashMap::from([
            ("WORLD_SIZE", world.to_string()),
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", local.to_string()),
            ("MASTER_ADDR", "node-0".to_string()),
            ("MASTER_PORT", port.to_string()),
            ("DEVTENSOR_JOB_TOKEN", TOKEN.to_string()),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::common::cpu_cases(256)))]
        /// Every consistent environment reads back as written.
        #[test]
        fn consistent_environments_read_back((world, rank, local) in (1..64usize).prop_flat_map(|w| (Just(w), 0..w))
            .prop_flat_map(|(w, r)| (Just(w), Just(r), 0..=r)), port in 1..=u16::MAX) {
            let job = read(&valid(world, rank, local, port)).unwrap();
            prop_assert_eq!(
                (job.world_size, job.rank, job.local_rank, job.master_addr.as_str(), job.master_port),
                (world, rank, local, "node-0", port)
            );
            prop_assert_eq!(job.token.as_ref().map(|t| t.secret()), Some(TOKEN));
            prop_assert_eq!(job.store_bind, None);
        }
    }

    /// Each wrong or missing variable is an error naming it, and the rank
    /// once the rank is known.
    #[test]
    fn wrong_environments_name_the_variable_and_the_rank() {
        let cases: [(&str, Option<&str>, &str); 13] = [
            (
                "RANK",
                None,
                "distributed job: RANK is not set: start the processes with devtensor's launcher or torchrun",
            ),
            ("RANK", Some("-1"), "distributed job: RANK=\"-1\" is not a whole number"),
            ("WORLD_SIZE", None, "distributed job, rank 1: WORLD_SIZE is not set"),
            ("WORLD_SIZE", Some("0"), "distributed job, rank 1: WORLD_SIZE=0: a job has at least one process"),
            ("WORLD_SIZE", Some("1"), "distributed job, rank 1: RANK=1 is not below WORLD_SIZE=1"),
            ("LOCAL_RANK", Some("2"), "distributed job, rank 1: LOCAL_RANK=2 is above RANK=1"),
            ("MASTER_ADDR", Some(" "), "distributed job, rank 1: MASTER_ADDR is empty"),
            ("MASTER_PORT", Some("0"), "distributed job, rank 1: MASTER_PORT=0 is not a TCP port (1 to 65535)"),
            ("MASTER_PORT", Some("70000"), "distributed job, rank 1: MASTER_PORT=70000 is not a TCP port"),
            (
                "DEVTENSOR_JOB_TOKEN",
                None,
                "distributed job, rank 1: DEVTENSOR_JOB_TOKEN is not set, and MASTER_ADDR=node-0 is not a loopback \
                 address: without a job token, anyone who can reach node-0:29500 could join this job.",
            ),
            (
                "DEVTENSOR_JOB_TOKEN",
                Some("short"),
                "distributed job, rank 1: DEVTENSOR_JOB_TOKEN has 5 characters; a job token needs at least 16",
            ),
            (
                "DEVTENSOR_JOB_TOKEN",
                Some("0123456789 abcdef"),
                "distributed job, rank 1: DEVTENSOR_JOB_TOKEN may hold printable ASCII characters only",
            ),
            (
                "DEVTENSOR_STORE_BIND",
                Some("eth0"),
                "distributed job, rank 1: DEVTENSOR_STORE_BIND=\"eth0\" is not an IP",
            ),
        ];
        for (name, value, expected) in cases {
            let mut vars = valid(2, 1, 0, 29500);
            match value {
                Some(v) => vars.insert(name, v.to_string()),
                None => vars.remove(name),
            };
            let err = read(&vars).unwrap_err();
            assert!(matches!(err, Error::Distributed { .. }), "{err:?}");
            assert!(err.to_string().starts_with(expected), "{name}={value:?}: {err}");
        }
    }

    /// A job on one machine needs no token; a loopback address is one that
    /// no other machine can reach, whatever its spelling.
    #[test]
    fn loopback_jobs_need_no_token() {
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "LocalHost", "::1", "[::1]"] {
            let mut vars = valid(2, 1, 0, 29500);
            vars.remove("DEVTENSOR_JOB_TOKEN");
            vars.insert("MASTER_ADDR", host.to_string());
            let job = read(&vars).unwrap_or_else(|e| panic!("{host}: {e}"));
            assert!(job.token.is_none(), "{host}");
        }
        let mut vars = valid(2, 1, 0, 29500);
        vars.insert("DEVTENSOR_STORE_BIND", "0.0.0.0".into());
        assert_eq!(read(&vars).unwrap().store_bind, Some([0, 0, 0, 0].into()));
        // The token's text never shows in the job's Debug form.
        assert!(!format!("{:?}", read(&valid(2, 1, 0, 29500)).unwrap()).contains(TOKEN));
    }
}
