//! What a PyTorch user meets when porting a training script: gradients
//! applied to the wrong copy of a model, tied weights, PyTorch's own
//! `state_dict` files, errors in the words of the layer or loss, and
//! `reshape` with `-1`. The PyTorch numbers come from files PyTorch wrote
//! (`tests/fixtures/pytorch/`, with the script that made them).

use devtensor::io::Checkpoint;
use devtensor::nn::{BatchNorm2d, Conv2d, Embedding, Forward, Linear, MaxPool2d, Module, cross_entropy};
use devtensor::optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig, try_clip_grad_norm, try_clip_grad_value};
use devtensor::{Backend, Cpu, Device, Error, Gradients, Result, Tensor};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/pytorch/{name}", crate::common::REPO)
}

fn float<D: Device>(ckpt: &Checkpoint<D>, name: &str) -> Tensor<D> {
    ckpt.tensors().iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no `{name}` in the fixture")).1.clone()
}

fn int<D: Device>(ckpt: &Checkpoint<D>, name: &str) -> Tensor<D, i64> {
    ckpt.int_tensors().iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no `{name}` in the fixture")).1.clone()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{got:?} vs {want:?}");
    }
}

struct TwoLayers<D: Device> {
    first: Linear<D>,
    second: Linear<D>,
}
devtensor::module!(TwoLayers { first, second });

/// Every way of stepping or clipping with gradients that hold none of the
/// model's parameters is an error naming the model, never a silent no-op.
fn gradients_of_another_copy_are_an_error<D: Device>() {
    let mut model = TwoLayers { first: Linear::<D>::new(3, 2), second: Linear::new(2, 1) };
    let before: Vec<Vec<f32>> = model.parameters().iter().map(|(_, p)| p.to_vec()).collect();
    let x = Tensor::<Cpu>::ones([4, 3]);
    let loss_of = |m: &TwoLayers<D>| m.second.forward(&m.first.forward(&x.to::<D>())).sum();

    // The loss of a CPU copy (PyTorch: the loss computed before
    // `model.to(device)`), of a stale copy on the same device, and no
    // gradients at all.
    let on_cpu = model.to::<Cpu>();
    let stale = model.to::<D>();
    let cases: [(&dyn Fn() -> Gradients, &str); 3] = [
        (
            &|| on_cpu.second.forward(&on_cpu.first.forward(&x)).sum().backward(),
            "the `Gradients` given hold 4, for tensors on Cpu",
        ),
        (&|| loss_of(&stale).backward(), "the `Gradients` given hold 4, for tensors on"),
        (&Gradients::new, "the `Gradients` given are empty"),
    ];
    for (grads, held) in cases {
        let mut sgd = Sgd::new(&model, SgdConfig::default());
        let mut adam = Adam::new(&model, AdamConfig::default());
        let mut adamw = AdamW::new(&model, AdamConfig::adamw());
        let errors = [
            sgd.try_step(&mut model, &grads()).unwrap_err(),
            adam.try_step(&mut model, &grads()).unwrap_err(),
            adamw.try_step(&mut model, &grads()).unwrap_err(),
            try_clip_grad_norm(&model, &mut grads(), 1.0, 2.0).unwrap_err(),
            try_clip_grad_value(&model, &mut grads(), 1.0).unwrap_err(),
        ];
        for (err, op) in
            errors.iter().zip(["Sgd::step", "Adam::step", "AdamW::step", "clip_grad_norm", "clip_grad_value"])
        {
            let text = err.to_string();
            assert!(matches!(err, Error::Argument { .. }), "{text}");
            let head = format!(
                "{op} on {}: none of the 4 parameters of `TwoLayers<{}>` has a gradient here",
                D::name(),
                D::name()
            );
            assert!(text.starts_with(&head), "{text}");
            assert!(text.contains(held), "{text}");
        }
    }
    let after: Vec<Vec<f32>> = model.parameters().iter().map(|(_, p)| p.to_vec()).collect();
    assert_eq!(after, before, "a refused step changed the model");

    // Unused parameters stay legal, as in PyTorch: only `first` is stepped.
    let grads = model.first.forward(&x.to::<D>()).sum().backward();
    let mut sgd = Sgd::new(&model, SgdConfig { lr: 0.5, ..Default::default() });
    sgd.step(&mut model, &grads);
    assert_ne!(model.first.weight.to_vec(), before[0]);
    assert_eq!(model.second.weight.to_vec(), before[2]);
}

struct TiedLm<D: Device> {
    wte: Embedding<D>,
    lm_head: Linear<D>,
}
devtensor::module!(TiedLm { wte, lm_head });

impl<D: Device> TiedLm<D> {
    /// nanoGPT's tying, `lm_head.weight = wte.weight`: one tensor, two names.
    fn tied(weight: Tensor<D>) -> Self {
        let wte = Embedding::from_weights(weight, None);
        let lm_head = Linear::from_weights(wte.weight.clone(), None);
        TiedLm { wte, lm_head }
    }

    fn loss(&self, idx: &Tensor<D, i64>, targets: &Tensor<D, i64>) -> Tensor<D> {
        cross_entropy(&self.lm_head.forward(&self.wte.forward(idx)), targets)
    }
}

/// A tied weight is listed, clipped and stepped once, and stays tied across
/// steps, moves and checkpoints: PyTorch's norm and update to f32 rounding.
fn tied_parameters_match_pytorch<D: Device>() {
    let torch = Checkpoint::<D>::load(fixture("tied_lm.safetensors"));
    let mut model = TiedLm::tied(float(&torch, "wte.weight"));
    assert_eq!(model.parameters().len(), 1);
    assert_eq!(model.num_parameters(), 15);
    assert_eq!(model.named_tensors().len(), 2, "the state dict keeps both names");

    let (idx, targets) = (int(&torch, "idx"), int(&torch, "targets"));
    let loss = model.loss(&idx, &targets);
    assert_close(&loss.to_vec(), &float(&torch, "loss").to_vec(), 1e-6);
    let mut grads = loss.backward();
    assert_close(&grads.get(&model.wte.weight).unwrap().to_vec(), &float(&torch, "grad").to_vec(), 1e-5);
    // PyTorch counts the shared tensor once: 1.9139, not sqrt(2) times that.
    let norm = devtensor::optim::clip_grad_norm(&model, &mut grads, 0.1, 2.0);
    assert_close(&norm.to_vec(), &float(&torch, "norm").to_vec(), 1e-6);
    let mut sgd = Sgd::new(&model, SgdConfig { lr: 0.5, ..Default::default() });
    sgd.step(&mut model, &grads);
    let after = float(&torch, "weight_after").to_vec();
    assert_close(&model.wte.weight.to_vec(), &after, 1e-6);
    assert_eq!(model.lm_head.weight.to_vec(), model.wte.weight.to_vec());
    assert_eq!(model.lm_head.weight.leaf_id(), model.wte.weight.leaf_id(), "still one tensor after the step");

    // Moved, or saved and loaded, it is still one tensor.
    let moved = model.to::<Cpu>();
    assert_eq!(moved.parameters().len(), 1);
    assert_eq!(moved.lm_head.weight.leaf_id(), moved.wte.weight.leaf_id());
    let path =
        std::env::temp_dir().join(format!("devtensor-test-{}-tied-{}.safetensors", std::process::id(), D::name()));
    Checkpoint::try_from_model(&model).unwrap().save(&path);
    let mut fresh = TiedLm::tied(Tensor::<D>::zeros([5, 3]));
    Checkpoint::<D>::load(&path).load_into(&mut fresh);
    std::fs::remove_file(&path).ok();
    assert_eq!(fresh.wte.weight.to_vec(), model.wte.weight.to_vec());
    assert_eq!(fresh.lm_head.weight.leaf_id(), fresh.wte.weight.leaf_id());
    // A second step keeps them tied and moves both.
    let grads = fresh.loss(&idx, &targets).backward();
    Adam::new(&fresh, AdamConfig::default()).step(&mut fresh, &grads);
    assert_eq!(fresh.lm_head.weight.to_vec(), fresh.wte.weight.to_vec());
    assert_ne!(fresh.wte.weight.to_vec(), after);
}

/// PyTorch's CNN with a BatchNorm2d, as `safetensors.torch.save_file` wrote
/// its `state_dict` after three training steps (`bn.num_batches_tracked`
/// is an int64 tensor): it loads unchanged and computes PyTorch's output.
struct TorchCnn<D: Device> {
    conv: Conv2d<D>,
    bn: BatchNorm2d<D>,
    fc: Linear<D>,
}
devtensor::module!(TorchCnn { conv, bn, fc });

impl<D: Device> Forward<D> for TorchCnn<D> {
    fn forward_on(&self, x: &Tensor<D>) -> Result<Tensor<D>> {
        let h = self.bn.try_forward(&self.conv.try_forward(x)?)?.try_relu()?;
        self.fc.try_forward(&MaxPool2d::new(2).try_forward(&h)?.try_flatten(1, -1)?)
    }
}

fn pytorch_batchnorm_state_dict_loads_unchanged<D: Device>() {
    let mut model =
        TorchCnn { conv: Conv2d::<D>::new(1, 4, 3).padding(1), bn: BatchNorm2d::new(4), fc: Linear::new(64, 3) };
    Checkpoint::<D>::load(fixture("batchnorm_cnn.safetensors")).load_into(&mut model);
    let mut counts = Vec::new();
    model.visit_int_buffers("", &mut |name, t| counts.push((name.to_string(), t.item())));
    assert_eq!(counts, [("bn.num_batches_tracked".to_string(), 3)]);
    model.eval();
    let io = Checkpoint::<D>::load(fixture("batchnorm_cnn_io.safetensors"));
    let out = model.forward(&float(&io, "input"));
    assert_close(&out.to_vec(), &float(&io, "output_eval").to_vec(), 1e-5);

    // Training counts batches as PyTorch does, and the count is saved as int64.
    model.train();
    model.forward(&float(&io, "input"));
    let path = std::env::temp_dir().join(format!("devtensor-test-{}-bn-{}.safetensors", std::process::id(), D::name()));
    Checkpoint::try_from_model(&model).unwrap().save(&path);
    let saved = Checkpoint::<Cpu>::load(&path);
    std::fs::remove_file(&path).ok();
    assert_eq!(saved.int_tensors().len(), 1);
    assert_eq!(saved.int_tensors()[0].1.item(), 4);
}

/// The CNN's `state_dict` without `bn.num_batches_tracked` (PyTorch before
/// 0.4.1, converters that drop integer buffers): PyTorch's strict
/// `load_state_dict` accepts it and keeps the module's count, which
/// `make_fixtures.py` checked for 0 and 2; so does `load_into`, and the
/// model computes PyTorch's output. Any other missing tensor is still an error.
fn pytorch_batchnorm_without_its_count_loads<D: Device>() {
    let io = Checkpoint::<D>::load(fixture("batchnorm_cnn_io.safetensors"));
    let legacy = Checkpoint::<D>::load(fixture("batchnorm_cnn_legacy.safetensors"));
    assert!(legacy.int_tensors().is_empty());
    for trained_batches in [0, 2] {
        let mut model =
            TorchCnn { conv: Conv2d::<D>::new(1, 4, 3).padding(1), bn: BatchNorm2d::new(4), fc: Linear::new(64, 3) };
        for _ in 0..trained_batches {
            model.forward(&float(&io, "input"));
        }
        legacy.load_into(&mut model);
        let mut counts = Vec::new();
        model.visit_int_buffers("", &mut |name, t| counts.push((name.to_string(), t.item())));
        assert_eq!(counts, [("bn.num_batches_tracked".to_string(), trained_batches)]);
        model.eval();
        assert_close(&model.forward(&float(&io, "input")).to_vec(), &float(&io, "output_eval").to_vec(), 1e-5);
    }
    struct WithoutNorm<D: Device> {
        conv: Conv2d<D>,
        fc: Linear<D>,
    }
    devtensor::module!(WithoutNorm { conv, fc });
    let without_norm = WithoutNorm { conv: Conv2d::<D>::new(1, 4, 3), fc: Linear::new(64, 3) };
    let mut model =
        TorchCnn { conv: Conv2d::<D>::new(1, 4, 3).padding(1), bn: BatchNorm2d::new(4), fc: Linear::new(64, 3) };
    let err = Checkpoint::from_model(&without_norm).try_load_into(&mut model).unwrap_err().to_string();
    assert!(err.contains("the model's tensor `bn.weight` is missing from the checkpoint"), "{err}");
}

/// PyTorch's DCGAN tutorial, line by line: its `Generator` and
/// `Discriminator` as `nn.Sequential`s of 14 and 13 layers (so their
/// `state_dict`s, `main.0.weight` ... `main.12.weight`, load unchanged), and
/// one iteration of its training loop (D on a real and a fake batch, then G;
/// `BCELoss`; two Adams at 2e-4 with betas (0.5, 0.999)). Its three losses,
/// the fake batch and both networks' `state_dict`s after the step (running
/// statistics and counts included) are PyTorch's, in float64
/// (`dcgan.safetensors`, from `make_fixtures.py dcgan`).
fn dcgan_tutorial_trains_like_pytorch<D: Device>() {
    use devtensor::FloatElement;
    use devtensor::nn::{
        BatchNorm2d as Bn, Conv2d as Conv, Conv2dConfig, ConvTranspose2d as ConvT, ConvTranspose2dConfig, LeakyRelu,
        Reduction, Relu, Sequential, Sigmoid, Tanh, binary_cross_entropy,
    };
    type Lrelu = LeakyRelu;
    #[allow(clippy::type_complexity)]
    struct Generator<D: Device, E: FloatElement> {
        main: Sequential<(
            ConvT<D, E>,
            Bn<D, E>,
            Relu,
            ConvT<D, E>,
            Bn<D, E>,
            Relu,
            ConvT<D, E>,
            Bn<D, E>,
            Relu,
            ConvT<D, E>,
            Bn<D, E>,
            Relu,
            ConvT<D, E>,
            Tanh,
        )>,
    }
    devtensor::module!(Generator<E> { main });
    #[allow(clippy::type_complexity)]
    struct Discriminator<D: Device, E: FloatElement> {
        main: Sequential<(
            Conv<D, E>,
            Lrelu,
            Conv<D, E>,
            Bn<D, E>,
            Lrelu,
            Conv<D, E>,
            Bn<D, E>,
            Lrelu,
            Conv<D, E>,
            Bn<D, E>,
            Lrelu,
            Conv<D, E>,
            Sigmoid,
        )>,
    }
    devtensor::module!(Discriminator<E> { main });
    #[allow(non_snake_case)]
    struct Gan<D: Device, E: FloatElement> {
        netG: Generator<D, E>,
        netD: Discriminator<D, E>,
    }
    devtensor::module!(Gan<E> { netG, netD });

    type E = f64;
    let (nz, ngf, ndf, nc) = (8, 4, 4, 3);
    // nn.ConvTranspose2d(in, out, 4, stride, padding, bias=False), nn.Conv2d(in, out, 4, stride, padding, bias=False)
    let up = |i: usize, o: usize, s: usize, p: usize| {
        let config = ConvTranspose2dConfig { stride: [s, s], padding: [p, p], ..Default::default() };
        ConvT::<D, E>::with_config(i, o, [4, 4], config).without_bias()
    };
    let down = |i: usize, o: usize, s: usize, p: usize| {
        let config = Conv2dConfig { stride: [s, s], padding: [p, p], ..Default::default() };
        Conv::<D, E>::with_config(i, o, [4, 4], config).without_bias()
    };
    let (bn, lrelu) = (|c: usize| Bn::<D, E>::new(c), || LeakyRelu::new(0.2));
    #[rustfmt::skip]
    let net_g = Generator { main: Sequential::new((
        up(nz, ngf * 8, 1, 0), bn(ngf * 8), Relu,
        up(ngf * 8, ngf * 4, 2, 1), bn(ngf * 4), Relu,
        up(ngf * 4, ngf * 2, 2, 1), bn(ngf * 2), Relu,
        up(ngf * 2, ngf, 2, 1), bn(ngf), Relu,
        up(ngf, nc, 2, 1), Tanh,
    )) };
    #[rustfmt::skip]
    let net_d = Discriminator { main: Sequential::new((
        down(nc, ndf, 2, 1), lrelu(),
        down(ndf, ndf * 2, 2, 1), bn(ndf * 2), lrelu(),
        down(ndf * 2, ndf * 4, 2, 1), bn(ndf * 4), lrelu(),
        down(ndf * 4, ndf * 8, 2, 1), bn(ndf * 8), lrelu(),
        down(ndf * 8, 1, 1, 0), Sigmoid,
    )) };
    let mut gan = Gan { netG: net_g, netD: net_d };
    let file = Checkpoint::<D, E>::load(fixture("dcgan.safetensors"));
    let report = file.load_into_non_strict(&mut gan);
    assert!(report.missing_keys.is_empty(), "{:?}", report.missing_keys);
    let extra = ["after.", "real", "noise", "err", "fake"];
    assert!(
        report.unexpected_keys.iter().all(|k| extra.iter().any(|e| k.starts_with(e))),
        "{:?}",
        report.unexpected_keys
    );
    let get = |name: &str| file.tensors().iter().find(|(n, _)| n == name).expect(name).1.clone();
    let (real, noise) = (get("real"), get("noise"));

    let criterion = |p: &Tensor<D, E>, label: f64| {
        binary_cross_entropy(&p.reshape([-1]), &Tensor::<D, E>::full([p.dims()[0]], label), None, Reduction::Mean)
    };
    let config = AdamConfig { lr: 2e-4, betas: (0.5, 0.999), ..Default::default() };
    let mut optimizer_d = Adam::new(&gan.netD, config);
    let mut optimizer_g = Adam::new(&gan.netG, config);
    // (1) Update D: maximize log(D(x)) + log(1 - D(G(z))).
    let err_d_real = criterion(&gan.netD.main.forward(&real), 1.0);
    let fake = gan.netG.main.forward(&noise);
    let err_d_fake = criterion(&gan.netD.main.forward(&fake.detach()), 0.0);
    // PyTorch accumulates the two backward passes into .grad: one sum.
    let grads = (&err_d_real + &err_d_fake).backward();
    optimizer_d.step(&mut gan.netD, &grads);
    // (2) Update G: maximize log(D(G(z))).
    let err_g = criterion(&gan.netD.main.forward(&fake), 1.0);
    optimizer_g.step(&mut gan.netG, &err_g.backward());

    for (name, got) in [("errD_real", &err_d_real), ("errD_fake", &err_d_fake), ("errG", &err_g), ("fake", &fake)] {
        let want = get(name).to_vec();
        let got = got.to_vec();
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * (1.0 + w.abs())), "{name}");
    }
    let after = Checkpoint::from_model(&gan);
    for (name, t) in after.tensors() {
        let (got, want) = (t.to_vec(), get(&format!("after.{name}")).to_vec());
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * (1.0 + w.abs())), "{name} after the step");
    }
    for (name, t) in after.int_tensors() {
        let want = file.int_tensors().iter().find(|(n, _)| *n == format!("after.{name}")).expect(name).1.to_vec();
        assert_eq!(t.to_vec(), want, "{name} after the step");
    }
}

device_tests! {
    dcgan_tutorial => dcgan_tutorial_trains_like_pytorch,
    pytorch_batchnorm_without_its_count => pytorch_batchnorm_without_its_count_loads,
    gradients_of_another_copy => gradients_of_another_copy_are_an_error,
    tied_parameters => tied_parameters_match_pytorch,
    pytorch_batchnorm_state_dict => pytorch_batchnorm_state_dict_loads_unchanged,
}

device_proptests! {
    cases = 32;

    /// `reshape` with one `-1` gives the shape with that axis's true size
    /// (the element count over the product of the others), and the same
    /// elements; a second `-1`, another negative size or a count that does
    /// not split is an error naming `reshape`.
    fn reshape_infers_one_axis<D>(dims in proptest::collection::vec(1..5usize, 1..5), pick in 0..8usize) {
        let count: usize = dims.iter().product();
        let x = Tensor::<D, i64>::arange(0, count as i64).reshape(dims.clone());
        let axis = pick % dims.len();
        let mut signed: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        signed[axis] = -1;
        let y = x.reshape(signed.clone());
        prop_assert_eq!(y.dims(), dims.as_slice());
        prop_assert_eq!(y.to_vec(), (0..count as i64).collect::<Vec<_>>());
        prop_assert_eq!(x.reshape([-1]).dims().to_vec(), vec![count]);
        let mut two = signed.clone();
        two.push(-1);
        let err = x.try_reshape(two).unwrap_err();
        prop_assert!(err.to_string().starts_with(&format!("reshape on {}: shape", D::name())), "{}", err);
        prop_assert!(err.to_string().ends_with("only one axis can be -1"), "{}", err);
        signed[axis] = -2;
        prop_assert!(x.try_reshape(signed).unwrap_err().to_string().contains("-2 is not a size"));
        if count > 1 {
            let err = x.try_reshape([count as i64 + 1, -1]).unwrap_err();
            prop_assert!(err.to_string().contains("do not split into rows of"), "{}", err);
        }
    }
}

/// `tensor(..)` writes a CPU tensor from literals as `torch.tensor` does:
/// float literals are f32, integer literals i64, booleans a u8 mask.
#[test]
fn tensor_literals_take_pytorch_dtypes() {
    use devtensor::{TensorData, tensor, try_tensor};
    let logits: Tensor<Cpu, f32> = tensor([[1.0, 2.0, 0.5, 0.1], [0.3, 0.2, 0.1, 0.0], [1.0, 1.0, 1.0, 1.0]]);
    let labels: Tensor<Cpu, i64> = tensor([0, 3, 1]);
    assert_eq!(logits.dims(), &[3, 4]);
    assert_eq!(logits.to_vec2()[1], vec![0.3, 0.2, 0.1, 0.0]);
    // The loss against a plain loop over -log softmax.
    let rows = logits.to_vec2();
    let want: f32 =
        rows.iter().zip([0, 3, 1]).map(|(r, t)| r.iter().map(|v| v.exp()).sum::<f32>().ln() - r[t]).sum::<f32>() / 3.0;
    assert!((cross_entropy(&logits, &labels).item() - want).abs() < 1e-6);
    assert_eq!(tensor(2.5).dims(), &[] as &[usize]);
    assert_eq!(tensor([true, false, true]).to_vec(), vec![1u8, 0, 1]);
    assert_eq!(tensor([7u8]).to_vec(), vec![7u8]);
    assert_eq!(tensor([[1i64], [i64::MAX]]).to_vec(), vec![1, i64::MAX]);
    let nested: Vec<Vec<f32>> = vec![vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, 6.0]];
    assert_eq!(tensor(&nested).dims(), &[3, 2]);
    assert_eq!(tensor(nested[0].as_slice()).to_vec(), vec![1.0, 2.0]);
    assert_eq!(tensor(Vec::<f32>::new()).dims(), &[0]);
    assert_eq!(tensor([[0.0f32; 0]; 2]).dims(), &[2, 0]);
    let err = try_tensor(vec![vec![1.0f32, 2.0], vec![3.0]]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor on Cpu: shape [2, 2]: the rows are ragged: one has 1 elements where the first has 2"
    );
    fn elem<T: TensorData>(_: &T) -> &'static str {
        std::any::type_name::<T::Elem>()
    }
    assert_eq!(elem(&[1.5]), "f32");
    assert_eq!(elem(&[[1, 2]]), "i64");
}
