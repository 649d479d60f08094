//! Mixed precision: `autocast` runs the products of `f32` tensors in a half
//! type (checked against the same products written out with explicit
//! casts, bit for bit, forward and backward, on every device), and
//! `GradScaler` follows PyTorch's `GradScaler` through injected overflows,
//! growth, unscaling before clipping, and a checkpoint round trip. Then
//! seed 002's CNN trained with `bf16` and `f16` products reaches the `f32`
//! run's accuracy.

use crate::common::{as_f64, assert_close};
use devtensor::nn::{
    BatchNorm2d, Conv2d, Conv2dConfig, Dropout, Embedding, Gelu, LayerNorm, Linear, MhaInput, Module,
    MultiheadAttention, Reduction, Sequential, TensorKind, ToDtype, try_mse_loss,
};
use devtensor::ops::attention::AttentionMask;
use devtensor::ops::conv::Window2d;
use devtensor::optim::{GradScaler, Optimizer, Sgd, SgdConfig, clip_grad_norm};
use devtensor::parallel::{DataParallel, Loss};
use devtensor::{Checkpoint, Cpu, DType, Device, FloatElement, Generator, Tensor, autocast, autocast_dtype, bf16, f16};
use proptest::prelude::*;

fn random<D: Device>(dims: &[usize], seed: u64) -> Tensor<D> {
    Tensor::<Cpu>::randn_with(dims, &mut Generator::new(seed)).to::<D>()
}

/// Asserts the two tensors equal element for element.
#[track_caller]
fn assert_same<D: Device>(what: &str, got: &Tensor<D>, want: &Tensor<D>) {
    assert_eq!(got.dims(), want.dims(), "{what}");
    assert_eq!(got.to_vec(), want.to_vec(), "{what}");
}

/// Under `autocast::<H>`, each product equals the same product written with
/// explicit casts to `H` and back, forward and in every gradient; and it
/// differs from the `f32` product, so the cast really happened.
fn products_follow_explicit_casts<D: Device, H: devtensor::ops::autocast::LowerPrecision>() {
    let x = random::<D>(&[3, 2, 6, 6], 1).requires_grad();
    let config = Conv2dConfig { padding: [1, 1], ..Default::default() };
    let conv = Conv2d::<D>::from_weights(random(&[4, 2, 3, 3], 2), Some(random(&[4], 3)), config);
    let linear = Linear::<D>::from_weights(random(&[5, 24], 4), None);
    let q = random::<D>(&[2, 7, 8], 6).requires_grad();
    let kv = random::<D>(&[2, 9, 8], 7).requires_grad();

    let auto = autocast::<H, _>(|| {
        let y = conv.forward(&x).relu();
        let z = linear.forward(&y.reshape([3, 2, 72]).narrow(2, 0, 24));
        let a = q.scaled_dot_product_attention(&kv, &kv, AttentionMask::None, None);
        (z, a)
    });
    let cast = |t: &Tensor<D>| t.to_dtype::<H>();
    let explicit = {
        let y = cast(&x).conv2d(&cast(&conv.weight), Some(&cast(conv.bias.as_ref().unwrap())), conv_window(), 1);
        let y = y.to_dtype::<f32>().relu();
        let flat = cast(&y.reshape([3, 2, 72]).narrow(2, 0, 24));
        // `Linear` multiplies by its weight's transpose, which autocast
        // casts as a dense copy: the same layout here.
        let z = flat.matmul(&cast(&linear.weight.t()));
        let a = cast(&q).scaled_dot_product_attention(&cast(&kv), &cast(&kv), AttentionMask::None, None);
        (z.to_dtype::<f32>(), a.to_dtype::<f32>())
    };
    assert_same("Linear of a convolution", &auto.0, &explicit.0);
    assert_same("attention", &auto.1, &explicit.1);
    let full = linear.forward(&conv.forward(&x).relu().reshape([3, 2, 72]).narrow(2, 0, 24));
    assert_ne!(auto.0.to_vec(), full.to_vec(), "autocast must change the products");

    // With a bias, `Linear` adds it to the product's f32 sums and rounds once.
    let biased = Linear::<D>::from_weights(linear.weight.clone(), Some(random(&[5], 5)));
    let input = random::<D>(&[3, 24], 14);
    let half_layer = Linear::from_weights(cast(&biased.weight.t()).t(), Some(cast(biased.bias.as_ref().unwrap())));
    let want = half_layer.forward(&cast(&input)).to_dtype::<f32>();
    assert_same("Linear with a bias", &autocast::<H, _>(|| biased.forward(&input)), &want);

    // The gradients reach the f32 parameters in f32, as the explicit casts' do.
    let loss = |(z, a): &(Tensor<D>, Tensor<D>)| z.square().sum() + a.square().sum();
    let (auto_grads, explicit_grads) = (loss(&auto).backward(), loss(&explicit).backward());
    for (name, leaf) in
        [("x", &x), ("conv.weight", &conv.weight), ("linear.weight", &linear.weight), ("q", &q), ("kv", &kv)]
    {
        let got = auto_grads.get(leaf).unwrap_or_else(|| panic!("{name} has a gradient"));
        assert_same(name, got, explicit_grads.get(leaf).unwrap());
    }
}

fn conv_window() -> Window2d {
    Window2d { padding: [1, 1], ..Window2d::new([3, 3]) }
}

fn products_follow_explicit_casts_in_both_half_types<D: Device>() {
    products_follow_explicit_casts::<D, bf16>();
    products_follow_explicit_casts::<D, f16>();
}

/// The scope is per thread and nests; `f64` products and other ops are
/// left as they are.
fn scopes_nest_and_leave_other_ops_alone<D: Device>() {
    assert_eq!(autocast_dtype(), None);
    autocast::<bf16, _>(|| {
        assert_eq!(autocast_dtype(), Some(DType::BF16));
        autocast::<f16, _>(|| assert_eq!(autocast_dtype(), Some(DType::F16)));
        assert_eq!(autocast_dtype(), Some(DType::BF16));
        let other_thread = std::thread::spawn(autocast_dtype).join().unwrap();
        assert_eq!(other_thread, None, "a new thread starts without a scope");
        let a = random::<D>(&[4, 5], 8).to_dtype::<f64>();
        let b = random::<D>(&[5, 3], 9).to_dtype::<f64>();
        let outside = no_autocast(|| a.matmul(&b));
        assert_eq!(a.matmul(&b).to_vec(), outside.to_vec(), "f64 products stay f64");
        let x = random::<D>(&[6], 10);
        assert_eq!(x.softmax(0).to_vec(), no_autocast(|| x.softmax(0)).to_vec(), "softmax stays f32");
    });
    assert_eq!(autocast_dtype(), None);
    // A panic inside the scope does not leave it set.
    let caught = std::panic::catch_unwind(|| autocast::<bf16, _>(|| panic!("inside")));
    assert!(caught.is_err());
    assert_eq!(autocast_dtype(), None);
}

/// `f` on a fresh thread, outside any scope.
fn no_autocast<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

/// A data-parallel step inside a scope runs its replicas inside it: its
/// loss is the whole batch's loss with the products in `bf16`, not in
/// `f32`. (Two CPU replicas: the GPU pairs are `tests/training/parallel.rs`'s.)
#[test]
fn data_parallel_steps_carry_the_autocast_scope() {
    type D = Cpu;
    struct Regression<R: Device> {
        fc: Linear<R>,
    }
    devtensor::module!(Regression { fc });
    impl<R: Device> Loss<R> for Regression<R> {
        type Batch = (Tensor<R>, Tensor<R>);
        fn loss(&self, (x, y): &Self::Batch) -> devtensor::Result<Tensor<R>> {
            try_mse_loss(&self.fc.try_forward(x)?, y, Reduction::Mean)
        }
    }
    let model = Regression { fc: Linear::<D>::from_weights(random(&[1, 16], 20), None) };
    let (x, y) = (random::<D>(&[8, 16], 21), random::<D>(&[8, 1], 22));
    let batch = (x, y);
    let whole_f32 = model.loss(&batch).unwrap().item();
    let whole_bf16 = autocast::<bf16, _>(|| model.loss(&batch)).unwrap().item();
    assert!((whole_f32 - whole_bf16).abs() > 1e-5, "bf16 products change the loss");
    let mut dp = DataParallel::<(D, D), _, _, _>::try_new(&model, SgdConfig::default()).unwrap();
    let stepped = autocast::<bf16, _>(|| dp.step(&batch));
    // Two halves' mean losses, averaged: the whole batch's, to f32 rounding.
    assert!((stepped - whole_bf16).abs() < 1e-6 * whole_bf16.abs().max(1.0), "{stepped} against {whole_bf16}");
}

device_tests! {
    autocast_products_follow_explicit_casts => products_follow_explicit_casts_in_both_half_types,
    autocast_scopes_nest_and_leave_other_ops_alone => scopes_nest_and_leave_other_ops_alone,
    grad_scaler_follows_pytorch_through_overflows => grad_scaler_follows_pytorch,
}

/// A linear model, a batch and its scaled gradients.
fn scaled_step<D: Device>(scaler: &GradScaler) -> (Linear<D>, devtensor::Gradients) {
    let model = Linear::<D>::from_weights(random(&[2, 3], 11), Some(random(&[2], 12)));
    let x = random::<D>(&[4, 3], 13);
    let grads = scaler.scale_loss(&model.forward(&x).square().mean()).backward();
    (model, grads)
}

fn grad_scaler_follows_pytorch<D: Device>() {
    let sgd = SgdConfig { lr: 0.5, ..Default::default() };
    let mut scaler = GradScaler::new().with_init_scale(1024.0).with_growth_interval(3);

    // Unscaled gradients are the true ones (scales are powers of two: exact).
    let (model, mut grads) = scaled_step::<D>(&scaler);
    let truth = model.forward(&random::<D>(&[4, 3], 13)).square().mean().backward();
    assert_eq!(grads.get(&model.weight).unwrap().to_vec(), (truth.get(&model.weight).unwrap() * 1024.0).to_vec());
    scaler.unscale(&model, &mut grads);
    assert_same("unscaled", grads.get(&model.weight).unwrap(), truth.get(&model.weight).unwrap());
    // Clipping after unscaling clips the true gradients.
    let mut clipped_truth = truth;
    let norm = clip_grad_norm(&model, &mut grads, 0.1, 2.0);
    assert_eq!(norm.to_vec(), clip_grad_norm(&model, &mut clipped_truth, 0.1, 2.0).to_vec());
    let err = scaler.try_unscale(&model, &mut grads).unwrap_err().to_string();
    assert!(err.contains("already unscaled"), "{err}");

    // A good step: taken; the scale grows after 3 good steps in a row.
    let mut model = model;
    let mut opt = Sgd::new(&model, sgd);
    assert!(scaler.step(&mut opt, &mut model, &mut grads));
    scaler.update();
    for _ in 0..2 {
        let (mut m, mut g) = scaled_step::<D>(&scaler);
        let mut o = Sgd::new(&m, sgd);
        assert!(scaler.step(&mut o, &mut m, &mut g));
        scaler.update();
    }
    assert_eq!(scaler.scale(), 2048.0, "doubled after 3 good steps");

    // Injected overflows: an inf, then a NaN. Each step is skipped (the
    // parameters stay as they were) and halves the scale; the good-step
    // count starts again.
    for bad in [f32::INFINITY, f32::NAN] {
        let (mut model, mut grads) = scaled_step::<D>(&scaler);
        let before = model.weight.to_vec();
        let mut poisoned = grads.get(&model.bias.clone().unwrap()).unwrap().to_vec();
        poisoned[1] = bad;
        grads.insert(model.bias.as_ref().unwrap(), Tensor::<D>::from_vec(poisoned, [2])).unwrap();
        let mut opt = Sgd::new(&model, sgd);
        assert!(!scaler.step(&mut opt, &mut model, &mut grads), "an overflow skips the step");
        assert_eq!(model.weight.to_vec(), before, "a skipped step changes nothing");
        scaler.update();
    }
    assert_eq!(scaler.scale(), 512.0, "halved on each overflow");
    for expected in [512.0, 512.0, 1024.0] {
        let (mut m, mut g) = scaled_step::<D>(&scaler);
        let mut o = Sgd::new(&m, sgd);
        assert!(scaler.step(&mut o, &mut m, &mut g));
        scaler.update();
        assert_eq!(scaler.scale(), expected);
    }
    let err = scaler.try_update().unwrap_err().to_string();
    assert!(err.contains("no inf checks"), "{err}");

    // The state survives a checkpoint file, exactly, beside the model's.
    let (model, mut grads) = scaled_step::<D>(&scaler);
    scaler.unscale(&model, &mut grads);
    let mut opt = Sgd::new(&model, sgd);
    let mut model = model;
    scaler.step(&mut opt, &mut model, &mut grads);
    scaler.update();
    let path = std::env::temp_dir().join(format!("devtensor-scaler-{}-{}.safetensors", std::process::id(), D::name()));
    Checkpoint::from_model(&model).with_scaler(&scaler).save(&path);
    let loaded = Checkpoint::<D>::load(&path);
    std::fs::remove_file(&path).ok();
    assert_eq!(loaded.scaler(), scaler);
    let mut fresh = Linear::<D>::new(3, 2);
    loaded.load_into(&mut fresh); // the scaler's entries are not the model's
    assert_eq!(fresh.weight.to_vec(), model.weight.to_vec());
    let err = Checkpoint::from_model(&model).try_scaler().unwrap_err().to_string();
    assert!(err.contains("without with_scaler"), "{err}");
}

/// The sizes of one case of the property below.
#[derive(Debug, Clone, Copy)]
struct ConvCase {
    n: usize,
    c: usize,
    o: usize,
    h: usize,
    w: usize,
    k: usize,
    pad: usize,
    with_bias: bool,
    seed: u64,
}

/// One case of `autocast_convolutions_on_the_cpu_are_the_half_convolutions`
/// in `H`, whose rounding step near 1 is `epsilon`.
fn autocast_conv_is_the_half_conv<H: devtensor::ops::autocast::LowerPrecision>(
    case: ConvCase,
    epsilon: f32,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let ConvCase { n, c, o, h, w, k, pad, with_bias, seed } = case;
    let x = random::<Cpu>(&[n, c, h, w], seed).requires_grad();
    let conv = Conv2d::<Cpu>::from_weights(
        random(&[o, c, k, k], seed + 1) * 0.5,
        with_bias.then(|| random(&[o], seed + 2)),
        Conv2dConfig { padding: [pad, pad], ..Default::default() },
    );
    let upstream = random::<Cpu>(&[n, o, h + 2 * pad + 1 - k, w + 2 * pad + 1 - k], seed + 3);
    let auto = autocast::<H, _>(|| conv.forward(&x));
    let window = Window2d { padding: [pad, pad], ..Window2d::new([k, k]) };
    let cast = |t: &Tensor<Cpu>| t.to_dtype::<H>();
    let bias = conv.bias.as_ref().map(cast);
    let explicit = cast(&x).conv2d(&cast(&conv.weight), bias.as_ref(), window, 1).to_dtype::<f32>();
    assert_same("conv2d", &auto, &explicit);
    let full = conv.forward(&x);
    proptest::prop_assert_ne!(auto.to_vec(), full.to_vec(), "autocast must round");

    let (got, want) = ((&auto * &upstream).sum().backward(), (&explicit * &upstream).sum().backward());
    let mut leaves = vec![("weight", &conv.weight)];
    leaves.extend(conv.bias.as_ref().map(|b| ("bias", b)));
    for (name, leaf) in leaves {
        assert_same(name, got.get(leaf).unwrap(), want.get(leaf).unwrap());
    }
    let (got, want) = (got.get(&x).unwrap().to_vec(), want.get(&x).unwrap().to_vec());
    if pad < k && w >= 8 {
        proptest::prop_assert_eq!(got, want, "the image gradient");
    } else {
        let scale = upstream.abs().max().item() * conv.weight.abs().sum().item();
        for (g, e) in got.iter().zip(&want) {
            proptest::prop_assert!((g - e).abs() <= scale * epsilon, "image gradient {} against {}", g, e);
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(crate::common::cpu_cases(24)))]

    /// On the CPU, `autocast::<bf16>` and `autocast::<f16>` compute a
    /// convolution its direct kernels take by rounding inside them, in
    /// `f32`, instead of casting around the half convolution: the output
    /// and all three gradients must still be the explicit casts' bit for
    /// bit, on random shapes wide enough for the kernels (rows of 8 and
    /// more) and ones too narrow (which cast), with and without a bias.
    /// Where the image gradient's own direct kernel does not run (the image
    /// padded by more than `kernel - 1`, or narrower than 8) it is a
    /// product and a fold instead, rounded once where the casts round
    /// twice: within one rounding of the scale.
    #[test]
    fn autocast_convolutions_on_the_cpu_are_the_half_convolutions(
        n in 1usize..3, c in 1usize..5, o in 1usize..20, rows in 0usize..8, w in 4usize..40,
        k in 1usize..4, extra_pad in 0usize..3, with_bias in proptest::prelude::any::<bool>(), seed in 0u64..1000,
    ) {
        let pad = (k - 1).min(extra_pad) + usize::from(extra_pad == 2);
        let case = ConvCase { n, c, o, h: k + rows, w, k, pad, with_bias, seed };
        autocast_conv_is_the_half_conv::<bf16>(case, bf16::EPSILON.to_f32())?;
        autocast_conv_is_the_half_conv::<f16>(case, f16::EPSILON.to_f32())?;
    }
}

/// A scaled `f16` product: its gradients underflow without the scale and
/// survive with it.
#[test]
fn loss_scaling_keeps_small_f16_gradients() {
    let w = Tensor::<Cpu>::from_vec(vec![1e-3; 16], [4, 4]).requires_grad();
    let x = Tensor::<Cpu>::from_vec(vec![1e-4; 8], [2, 4]);
    let gradient = |scale: f32| {
        let y = autocast::<f16, _>(|| x.matmul(&w));
        let grads = (y * (scale * 1e-5)).sum().backward();
        (grads.get(&w).unwrap() / scale).to_vec()
    };
    // Each weight's gradient is two terms of 1e-4 · 1e-5 = 2e-9, below
    // half of f16's smallest subnormal (2^-24, about 6e-8): the f16
    // product of the backward pass rounds it to zero.
    assert!(gradient(1.0).iter().all(|&g| g == 0.0));
    // Scaled by 2^16 it is a normal f16 number, and unscaled in f32 it is
    // 2e-9 to f16's rounding of the inputs.
    let scaled = gradient(65536.0);
    assert!(scaled.iter().all(|&g| (g - 2e-9).abs() < 2e-11), "{scaled:?}");
}

/// Seed 002's CNN with `bf16` and with `f16` products (and loss scaling)
/// reaches the accuracy of its `f32` run within half a point, as the
/// example's `--bf16` and `--f16` flags run it.
#[test]
fn the_cnn_trains_to_the_f32_accuracy_with_half_products() {
    use crate::nn::train_cnn::{self, Precision, run_in};
    let (pixels, labels) = train_cnn::digits::load_digits();
    let full = run_in::<Cpu>(&pixels, &labels, Precision::F32);
    for precision in [Precision::Bf16, Precision::F16] {
        let mixed = run_in::<Cpu>(&pixels, &labels, precision);
        assert!((mixed - full).abs() <= 0.005, "{precision:?}: {mixed} against f32's {full}");
    }
}

/// A model of every kind of part a model holds, generic over its device
/// and dtype: layers, a `Sequential`, a list, an optional layer, a tied
/// and a frozen table, a bare parameter tensor, an integer buffer, a mask
/// and a plain setting.
struct Every<D: Device, E: FloatElement> {
    conv: Conv2d<D, E>,
    bn: BatchNorm2d<D, E>,
    stack: Sequential<(Linear<D, E>, Gelu, Dropout)>,
    norms: Vec<LayerNorm<D, E>>,
    attn: MultiheadAttention<D, E>,
    table: Embedding<D, E>,
    head: Linear<D, E>,
    extra: Option<Linear<D, E>>,
    frozen: Embedding<D, E>,
    gain: Tensor<D, E>,
    steps: Tensor<D, i64>,
    padding: Tensor<D, u8>,
    vocab: usize,
}
devtensor::module!(Every<E> { conv, bn, stack, norms, attn, table, head, extra, frozen, gain, steps, padding; vocab });

impl<D: Device, E: FloatElement> Every<D, E> {
    /// Logits `[n, s, vocab]` for images `[n, 2, 4, 4]` and tokens `[n, s]`.
    fn run(&self, images: &Tensor<D, E>, tokens: &Tensor<D, i64>) -> Tensor<D, E> {
        let [n, s] = [tokens.dims()[0], tokens.dims()[1]];
        let features = self.bn.forward(&self.conv.forward(images)).flatten(2, 3).mean_axis(2);
        let x = &(&self.table.forward(tokens) + &self.frozen.forward(tokens))
            + &features.reshape([n, 1, features.dims()[1]]);
        let (x, _) = self.attn.forward(MhaInput::self_attention(&x).key_padding_mask(&self.padding));
        let x = self.norms.iter().fold(x, |x, norm| norm.forward(&x));
        let x = self.stack.forward(&x);
        let x = self.extra.as_ref().map_or(x.clone(), |extra| extra.forward(&x));
        let logits = &self.head.forward(&x) * &self.gain;
        assert_eq!(logits.dims(), &[n, s, self.vocab]);
        logits
    }
}

/// `model.to_dtype::<T>()` against the plain conversion of every tensor:
/// the same names and kinds, each value rounded to `T` (half's own
/// conversion of the `f64` value), parameters fresh leaves that track
/// gradients unless frozen, buffers that do not, the tie kept, and the
/// integer buffer, mask and setting as they were.
fn converted_checked<D: Device, T: FloatElement>(model: &Every<D, f32>) -> Every<D, T> {
    let converted = model.to_dtype::<T>();
    let (before, after) = (model.named_tensors(), converted.named_tensors());
    assert_eq!(before.len(), after.len());
    for ((name, kind, t), (name2, kind2, t2)) in before.iter().zip(&after) {
        assert_eq!((name, kind), (name2, kind2), "{:?}", T::DTYPE);
        let want: Vec<T> = t.to_vec().iter().map(|&v| T::from_f64(v as f64)).collect();
        assert_eq!(t2.to_vec(), want, "{name} in {:?}", T::DTYPE);
        assert_eq!(t2.dims(), t.dims(), "{name}");
        assert!(t2.is_leaf(), "{name}");
        assert_eq!(t2.tracks_grad(), t.tracks_grad(), "{name} in {:?}", T::DTYPE);
        assert_ne!(t2.tracks_grad(), *kind == TensorKind::Buffer || name.starts_with("frozen"), "{name}");
    }
    assert_eq!(converted.parameters().len(), model.parameters().len(), "the tie is kept");
    assert_eq!(converted.head.weight.leaf_id(), converted.table.weight.leaf_id());
    assert_eq!(converted.steps.to_vec(), model.steps.to_vec());
    assert_eq!(converted.padding.to_vec(), model.padding.to_vec());
    assert_eq!(converted.vocab, model.vocab);
    converted
}

/// How far each logit of the `f32` model moves when every float tensor
/// and pixel is nudged by up to one `bf16` rounding (`x·(1 + u/256)`, `u`
/// uniform in `[-1, 1]`), the most of three nudges.
///
/// bf16 keeps about three significant digits and this random model
/// cancels: logits are small differences of large terms, and a LayerNorm
/// divides by a spread that can itself be small. Where the model is that
/// ill-conditioned, rounding moves it far and so may the bf16 model; where
/// it is not, this is small, and a statistic or a mode lost in the
/// conversion shows.
fn moved_by_bf16_nudges<D: Device>(
    model: &Every<D, f32>,
    images: &Tensor<D>,
    tokens: &Tensor<D, i64>,
    seed: u64,
) -> Vec<f64> {
    let reference = as_f64(&model.run(images, tokens).to_vec());
    let mut generator = Generator::new(seed ^ 0xb_f16);
    let mut nudge = |t: &Tensor<D>| {
        let u = &Tensor::<Cpu>::rand_with(t.dims(), &mut generator).to::<D>() * 2.0 - 1.0;
        t * &(&u * (1.0 / 256.0) + 1.0)
    };
    let mut moved = vec![0.0f64; reference.len()];
    for _ in 0..3 {
        let mut nudged = model.to_dtype::<f32>();
        nudged.visit_mut("", &mut |_, _, t| *t = nudge(t).detach());
        let logits = as_f64(&nudged.run(&nudge(images), tokens).to_vec());
        for ((m, l), r) in moved.iter_mut().zip(&logits).zip(&reference) {
            *m = m.max((l - r).abs());
        }
    }
    moved
}

device_proptests! {
    cases = 6;

    /// PyTorch's `model.to(dtype)`: the conversions checked tensor by
    /// tensor; the `f64` model computes what the `f32` one does (in `eval`
    /// mode, so running statistics and dropout take part: a mode or a
    /// statistic lost on the way shows), the `bf16` one within its
    /// precision (`moved_by_bf16_nudges`); the converted model trains apart from the original; and
    /// `f32` to `f64` and back is exact.
    fn models_convert_to_every_float_dtype<D>(n in 1..3usize, s in 1..4usize, heads in 1..3usize, vocab in 2..6usize, seed in 0..1000u64) {
        // The attention's weights come from this thread's generator: seeded
        // here, the model is a function of the drawn values alone. Widths
        // of 4 and 6: a LayerNorm over 2 features is a sign function, a
        // jump no precision test can straddle.
        devtensor::manual_seed(seed);
        let w = 2 * heads + 2;
        let table = Embedding::from_weights(random::<D>(&[vocab, w], seed), None);
        let mut model = Every {
            conv: Conv2d::from_weights(random(&[w, 2, 3, 3], seed + 1), Some(random(&[w], seed + 2)), Conv2dConfig { padding: [1, 1], ..Default::default() }),
            bn: BatchNorm2d::<D>::new(w),
            stack: Sequential::new((Linear::from_weights(random(&[w, w], seed + 3), Some(random(&[w], seed + 4))), Gelu::default(), Dropout::new(0.5))),
            norms: vec![LayerNorm::<D>::new(&[w]); 2],
            attn: MultiheadAttention::<D>::new(w, heads).batch_first(true),
            head: Linear::from_weights(table.weight.clone(), None),
            table,
            extra: Some(Linear::from_weights(random(&[w, w], seed + 5), None)),
            frozen: Embedding::from_pretrained(random(&[vocab, w], seed + 6), None),
            gain: random::<D>(&[1], seed + 7).requires_grad(),
            steps: Tensor::from_vec(vec![seed as i64, 3], [2]),
            padding: Tensor::<Cpu, u8>::from_vec((0..n * s).map(|i| u8::from(i % s == 1)).collect(), [n, s]).to::<D>(),
            vocab,
        };
        let images = random::<D>(&[n + 1, 2, 4, 4], seed + 8);
        let tokens = Tensor::<Cpu, i64>::from_vec((0..n * s).map(|i| ((i as u64 + seed) % vocab as u64) as i64).collect(), [n, s]).to::<D>();
        // One step in training mode gives the running statistics values of their own.
        model.bn.forward(&model.conv.forward(&images));
        model.eval();
        let images = images.narrow(0, 0, n);
        let reference = model.run(&images, &tokens);

        let double = converted_checked::<D, f64>(&model);
        let got = double.run(&images.to_dtype::<f64>(), &tokens);
        assert_close(&as_f64(&got.to_vec()), &as_f64(&reference.to_vec()), 1e-4, 1e-4);
        let back = double.to_dtype::<f32>();
        for ((name, _, t), (_, _, t2)) in model.named_tensors().iter().zip(&back.named_tensors()) {
            prop_assert_eq!(t.to_vec(), t2.to_vec(), "{} back in f32", name);
        }

        let half = converted_checked::<D, bf16>(&model);
        let got = as_f64(&half.run(&images.to_dtype::<bf16>(), &tokens).to_dtype::<f32>().to_vec());
        let want = as_f64(&reference.to_vec());
        let scale = want.iter().fold(0.0, |m: f64, v| m.max(v.abs()));
        let moved = moved_by_bf16_nudges(&model, &images, &tokens, seed);
        for (i, ((g, r), m)) in got.iter().zip(&want).zip(&moved).enumerate() {
            let tolerance = 0.05 + 0.02 * scale + 0.1 * r.abs() + 4.0 * m;
            prop_assert!((g - r).abs() <= tolerance, "bf16 logit {}: {} against f32's {} (tolerance {})", i, g, r, tolerance);
        }
        converted_checked::<D, f16>(&model);

        // The converted model trains on its own: gradients of its dtype for
        // every parameter that tracks them, a step that moves them, and the
        // original left as it was.
        let mut double = double;
        let loss = double.run(&images.to_dtype::<f64>(), &tokens).square().mean();
        let grads = loss.backward();
        for (name, p) in double.parameters() {
            prop_assert_eq!(grads.get(&p).is_some(), name != "frozen.weight", "{}'s gradient", name);
        }
        let before = double.head.weight.to_vec();
        Sgd::new(&double, SgdConfig { lr: 0.1, ..Default::default() }).step(&mut double, &grads);
        prop_assert_ne!(double.head.weight.to_vec(), before);
        prop_assert_eq!(double.head.weight.to_vec(), double.table.weight.to_vec(), "tied after the step");
        prop_assert_eq!(model.run(&images, &tokens).to_vec(), reference.to_vec());
    }
}
