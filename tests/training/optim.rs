//! Optimizers against PyTorch's update formulas written as plain `f64`
//! loops, their state as checkpoints, and the schedules, on every device.

use devtensor::nn::{Linear, Module, Reduction, mse_loss};
use devtensor::optim::{
    Adam, AdamConfig, AdamW, CosineAnnealingLr, LrSchedule, Optimizer, ParamGroup, Sgd, SgdConfig, StepLr,
    clip_grad_norm, clip_grad_value, try_clip_grad_norm, try_clip_grad_value,
};
use devtensor::{Device, Error, Generator, Gradients, Tensor};
use proptest::prelude::*;

const START: [f64; 3] = [0.5, -1.0, 2.0];
const TARGET: [f64; 3] = [1.0, 1.0, -1.0];
const SCALE: [f64; 3] = [1.0, 3.0, 0.5];

/// A one-row `Linear` whose weight is the parameter under test.
fn model<D: Device>() -> Linear<D, f64> {
    Linear::try_from_weights(Tensor::from_slice(&START, [1, 3]), None).unwrap()
}

/// The loss `sum(scale · (w - target)^2)`, whose gradient is
/// `2 · scale · (w - target)`.
fn grads<D: Device>(m: &Linear<D, f64>) -> Gradients {
    let target = Tensor::<D, f64>::from_slice(&TARGET, [1, 3]);
    let scale = Tensor::<D, f64>::from_slice(&SCALE, [1, 3]);
    ((&m.weight - &target).square() * &scale).sum().backward()
}

fn gradient(w: &[f64]) -> Vec<f64> {
    (0..3).map(|i| 2.0 * SCALE[i] * (w[i] - TARGET[i])).collect()
}

fn assert_near(got: &[f64], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "got {got:?}, want {want:?}");
    }
}

/// PyTorch's SGD step, in plain `f64`.
fn sgd_reference(c: SgdConfig, steps: usize) -> Vec<f64> {
    let mut w = START.to_vec();
    let mut buf: Option<Vec<f64>> = None;
    for _ in 0..steps {
        let mut g = gradient(&w);
        for i in 0..3 {
            g[i] += c.weight_decay * w[i];
        }
        if c.momentum != 0.0 {
            let b = match buf.take() {
                None => g.clone(),
                Some(b) => (0..3).map(|i| c.momentum * b[i] + (1.0 - c.dampening) * g[i]).collect(),
            };
            g = if c.nesterov { (0..3).map(|i| g[i] + c.momentum * b[i]).collect() } else { b.clone() };
            buf = Some(b);
        }
        for i in 0..3 {
            w[i] -= c.lr * g[i];
        }
    }
    w
}

/// PyTorch's Adam (or AdamW) step, in plain `f64`.
fn adam_reference(c: AdamConfig, decoupled: bool, steps: usize) -> Vec<f64> {
    let (mut w, mut m, mut v) = (START.to_vec(), vec![0.0; 3], vec![0.0; 3]);
    let (b1, b2) = c.betas;
    for t in 1..=steps {
        let mut g = gradient(&w);
        for i in 0..3 {
            if decoupled {
                w[i] *= 1.0 - c.lr * c.weight_decay;
            } else {
                g[i] += c.weight_decay * w[i];
            }
            m[i] = b1 * m[i] + (1.0 - b1) * g[i];
            v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
            let (c1, c2) = (1.0 - b1.powi(t as i32), 1.0 - b2.powi(t as i32));
            w[i] -= c.lr / c1 * m[i] / (v[i].sqrt() / c2.sqrt() + c.eps);
        }
    }
    w
}

fn run<D: Device, O: Optimizer<D, f64>>(opt: &mut O, steps: usize) -> Linear<D, f64> {
    let mut m = model::<D>();
    for _ in 0..steps {
        let g = grads(&m);
        opt.step(&mut m, &g);
    }
    m
}

fn sgd_follows_pytorch<D: Device>() {
    let configs = [
        SgdConfig { lr: 0.1, ..Default::default() },
        SgdConfig { lr: 0.05, momentum: 0.9, dampening: 0.1, ..Default::default() },
        SgdConfig { lr: 0.05, momentum: 0.8, nesterov: true, weight_decay: 0.01, ..Default::default() },
    ];
    for c in configs {
        let mut opt = Sgd::new(&model::<D>(), c);
        assert_near(&run(&mut opt, 5).weight.to_vec(), &sgd_reference(c, 5));
    }
}

fn adam_and_adamw_follow_pytorch<D: Device>() {
    let c = AdamConfig { lr: 0.05, weight_decay: 0.1, ..Default::default() };
    let mut adam = Adam::new(&model::<D>(), c);
    assert_near(&run(&mut adam, 6).weight.to_vec(), &adam_reference(c, false, 6));
    let mut adamw = AdamW::new(&model::<D>(), c);
    assert_near(&run(&mut adamw, 6).weight.to_vec(), &adam_reference(c, true, 6));
    assert_eq!(AdamConfig::adamw().weight_decay, 0.01);
}

fn optimizer_state_round_trips<D: Device>() {
    // Three steps in one go equal two steps, a saved and reloaded state (via
    // the CPU), and a third step with a fresh optimizer.
    let c = AdamConfig { lr: 0.05, ..Default::default() };
    let mut straight = Adam::new(&model::<D>(), c);
    let want = run(&mut straight, 3).weight.to_vec();
    let mut first = Adam::new(&model::<D>(), c);
    let mut m = run(&mut first, 2);
    let saved: Vec<(String, Tensor<devtensor::Cpu, f64>)> =
        first.state().into_iter().map(|(name, t)| (name, t.to::<devtensor::Cpu>())).collect();
    let names: Vec<&str> = saved.iter().map(|(n, _)| n.as_str()).collect();
    let want_names =
        ["weight.exp_avg", "weight.exp_avg_sq", "weight.step", "param_groups.lr", "param_groups.weight_decay"];
    assert_eq!(names, want_names);
    let mut second = Adam::new(&m, c);
    second.try_load_state(saved.into_iter().map(|(n, t)| (n, t.to::<D>())).collect()).unwrap();
    let g = grads(&m);
    second.step(&mut m, &g);
    assert_near(&m.weight.to_vec(), &want);
    // A state for another model is refused with the parameter's name.
    let mut other = Linear::<D, f64>::new(5, 2).without_bias();
    let g = (other.weight.sum()).backward();
    let err = second.try_step(&mut other, &g).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }) && err.to_string().contains("`weight`"), "{err}");
    let err = second.try_load_state(vec![("weight.velocity".into(), Tensor::<D, f64>::zeros([1]))]).unwrap_err();
    assert!(err.to_string().contains("unknown optimizer state `weight.velocity`"), "{err}");
}

/// AdamW with a parameter group (no decay and half the rate for the bias)
/// against per-parameter `f64` loops, through a learning-rate change
/// (the group keeps its ratio) and a checkpoint of the settings.
fn parameter_groups_have_settings_of_their_own<D: Device>() {
    let base = AdamConfig { lr: 0.05, weight_decay: 0.2, ..Default::default() };
    let bias_config = AdamConfig { lr: 0.025, weight_decay: 0.0, ..base };
    let rates = [0.05, 0.05, 0.02, 0.02];
    // Reference: each element its own AdamW with the rate of each step.
    let reference = |w0: f64, grad: &dyn Fn(f64) -> f64, c: AdamConfig, scale: f64| {
        let (mut w, mut m, mut v) = (w0, 0.0, 0.0);
        for (t, &lr) in rates.iter().enumerate() {
            let lr = lr * scale;
            let t = t as i32 + 1;
            let g = grad(w);
            w *= 1.0 - lr * c.weight_decay;
            m = c.betas.0 * m + (1.0 - c.betas.0) * g;
            v = c.betas.1 * v + (1.0 - c.betas.1) * g * g;
            let (c1, c2) = (1.0 - c.betas.0.powi(t), 1.0 - c.betas.1.powi(t));
            w -= lr / c1 * m / (v.sqrt() / c2.sqrt() + c.eps);
        }
        w
    };
    let mut layer =
        Linear::<D, f64>::try_from_weights(Tensor::from_slice(&START, [1, 3]), Some(Tensor::from_slice(&[0.3], [1])))
            .unwrap();
    let no_decay = ParamGroup::new("no_decay", bias_config, |_, dims| dims.len() < 2);
    let mut opt = AdamW::new(&layer, base).with_group(no_decay);
    let step = |layer: &mut Linear<D, f64>, opt: &mut AdamW<D, f64>| {
        let target = Tensor::<D, f64>::from_slice(&TARGET, [1, 3]);
        let scale = Tensor::<D, f64>::from_slice(&SCALE, [1, 3]);
        let bias = layer.bias.as_ref().unwrap();
        let loss = ((&layer.weight - &target).square() * &scale).sum() + (bias - 2.0).square().sum();
        opt.step(layer, &loss.backward());
    };
    for (i, &lr) in rates.iter().enumerate() {
        opt.set_lr(lr);
        step(&mut layer, &mut opt);
        if i == 1 {
            // Half-way: save the settings, reload them into a fresh optimizer.
            let state = opt.state();
            let mut fresh = AdamW::new(&layer, AdamConfig { lr: 1.0, ..base }).with_group(ParamGroup::new(
                "no_decay",
                base,
                |_, _| false,
            ));
            fresh.try_load_state(state).unwrap();
            assert_eq!(fresh.lr(), 0.05);
            let group = fresh.param_groups().next().unwrap().config();
            assert_eq!((group.lr, group.weight_decay), (0.025, 0.0));
        }
    }
    assert_eq!(opt.param_groups().next().unwrap().config().lr, 0.02 * 0.5);
    let want: Vec<f64> =
        (0..3).map(|i| reference(START[i], &|w| 2.0 * SCALE[i] * (w - TARGET[i]), base, 1.0)).collect();
    assert_near(&layer.weight.to_vec(), &want);
    assert_near(&layer.bias.as_ref().unwrap().to_vec(), &[reference(0.3, &|b| 2.0 * (b - 2.0), bias_config, 0.5)]);
    // A parameter two groups select, and a checkpoint's unknown group.
    let everything = |label| ParamGroup::new(label, base, |_, _| true);
    let mut twice = AdamW::new(&layer, base).with_group(everything("a")).with_group(everything("b"));
    let grads = layer.weight.sum().backward();
    let err = twice.try_step(&mut layer, &grads).unwrap_err().to_string();
    assert!(err.contains("parameter `weight` is in two parameter groups, `a` and `b`"), "{err}");
    let err = opt.try_load_state(vec![("param_groups.decay.lr".into(), Tensor::<D, f64>::scalar(0.1))]).unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown optimizer state `param_groups.decay.lr` (this optimizer's groups: [`no_decay`])"),
        "{err}"
    );
    // Groups by name, for SGD.
    let head = ParamGroup::named("frozen", SgdConfig { lr: 0.0, ..Default::default() }, ["bias"]);
    let mut sgd = Sgd::new(&layer, SgdConfig { lr: 0.1, ..Default::default() }).with_group(head);
    let (w, b) = (layer.weight.to_vec(), layer.bias.as_ref().unwrap().to_vec());
    let grads = (layer.weight.sum() + layer.bias.as_ref().unwrap().sum()).backward();
    sgd.step(&mut layer, &grads);
    assert_near(&layer.weight.to_vec(), &w.iter().map(|w| w - 0.1).collect::<Vec<_>>());
    assert_eq!(layer.bias.as_ref().unwrap().to_vec(), b);
}

fn training_fits_a_line_and_schedules_set_the_rate<D: Device>() {
    let x = Tensor::<D>::from_vec((0..8).map(|i| i as f32 / 4.0).collect(), [8, 1]);
    let y = &x * 3.0 - 1.0;
    devtensor::manual_seed(0);
    let mut layer = Linear::<D>::new(1, 1);
    let mut opt = Adam::new(&layer, AdamConfig { lr: 0.1, ..Default::default() });
    let schedule = StepLr { base_lr: 0.1, step_size: 150, gamma: 0.3 };
    for epoch in 0..400 {
        schedule.apply(&mut opt, epoch);
        let loss = mse_loss(&layer.forward(&x), &y, Reduction::Mean);
        opt.step(&mut layer, &loss.backward());
    }
    assert!((layer.weight.item() - 3.0).abs() < 1e-2, "{}", layer.weight.item());
    assert!((opt.lr() - 0.1 * 0.3 * 0.3).abs() < 1e-12);
    let cosine = CosineAnnealingLr { base_lr: 0.1, t_max: 10, eta_min: 0.001 };
    assert!((cosine.lr(10) - 0.001).abs() < 1e-15 && cosine.lr(20) == cosine.lr(10));
    assert_eq!(layer.parameters().len(), 2);
}

/// `LinearLr` against PyTorch's own update, which is a recurrence
/// (`get_lr` multiplies the last rate by a ratio each step), and
/// `SequentialLr` switching at its milestone with the second schedule
/// restarted at 0, as PyTorch's `SequentialLR` does.
#[test]
fn warmup_schedules_match_pytorchs_recurrences() {
    use devtensor::optim::{LinearLr, SequentialLr};
    for (start, end, total) in [(1.0 / 3.0, 1.0, 5), (0.01, 1.0, 100), (1.0, 0.1, 7)] {
        let schedule = LinearLr { base_lr: 0.3, start_factor: start, end_factor: end, total_iters: total };
        let mut lr = 0.3 * start;
        for step in 0..total + 5 {
            if step > 0 && step <= total {
                let t = step as f64;
                lr *= 1.0 + (end - start) / (total as f64 * start + (t - 1.0) * (end - start));
            }
            assert!((schedule.lr(step) - lr).abs() < 1e-12, "step {step}: {} vs {lr}", schedule.lr(step));
        }
    }
    let warmup = LinearLr { base_lr: 1e-3, start_factor: 0.1, end_factor: 1.0, total_iters: 10 };
    let decay = CosineAnnealingLr { base_lr: 1e-3, t_max: 90, eta_min: 1e-5 };
    let both = SequentialLr { first: warmup, second: decay, milestone: 10 };
    for step in 0..120 {
        let expected = if step < 10 { warmup.lr(step) } else { decay.lr(step - 10) };
        assert_eq!(both.lr(step), expected);
    }
    assert_eq!(both.lr(10), 1e-3);
}

/// OneCycleLR's rates and momenta against PyTorch 2.15's (`OneCycleLR(opt,
/// max_lr=0.1, total_steps=10, pct_start=0.25)` on AdamW, read from
/// `param_groups[0]` before each step), and `apply` setting SGD's momentum.
fn one_cycle_follows_pytorch<D: Device>() {
    use devtensor::optim::OneCycleLr;
    let torch_lr = [
        0.0040000000000000036,
        0.076,
        0.09890738440717015,
        0.0904508879153485,
        0.0750001,
        0.05522660225769002,
        0.03454941208465151,
        0.01654380350817838,
        0.0043231098269614805,
        4e-07,
    ];
    let torch_momentum = [
        0.95,
        0.875,
        0.8510926199633096,
        0.8595491502812526,
        0.875,
        0.8947735768366173,
        0.9154508497187474,
        0.9334565303179428,
        0.94567727288213,
        0.95,
    ];
    let s = OneCycleLr { max_lr: 0.1, total_steps: 10, pct_start: 0.25, ..Default::default() };
    for step in 0..10 {
        assert!((s.lr(step) - torch_lr[step]).abs() < 1e-12, "step {step}: {} vs {}", s.lr(step), torch_lr[step]);
        assert!((s.momentum(step) - torch_momentum[step]).abs() < 1e-12, "step {step}");
    }
    // Two SGD steps on a constant gradient g: the first moves by lr0 · g,
    // the second by lr1 · (m1 · g + g), the momentum the schedule set.
    let mut m = model::<D>();
    let mut opt = Sgd::new(&m, SgdConfig::default());
    let g = gradient(&START);
    let constant = |m: &Linear<D, f64>| (&m.weight * &Tensor::<D, f64>::from_slice(&g, [1, 3])).sum().backward();
    for step in 0..2 {
        s.apply(&mut opt, step);
        let grads = constant(&m);
        opt.step(&mut m, &grads);
    }
    let want: Vec<f64> =
        (0..3).map(|i| START[i] - torch_lr[0] * g[i] - torch_lr[1] * (torch_momentum[1] + 1.0) * g[i]).collect();
    assert_near(&m.weight.to_vec(), &want);
}

/// `optim.safetensors` (`tests/fixtures/pytorch/make_fixtures.py optim`):
/// PyTorch's weights after each step of the optimizers below, on the loss
/// of [`grads`], and the rates of its schedules.
fn optim_fixture<D: Device>() -> devtensor::io::Checkpoint<D, f64> {
    devtensor::io::Checkpoint::load(format!("{}/tests/fixtures/pytorch/optim.safetensors", crate::common::REPO))
}

fn fixture_values<D: Device>(ckpt: &devtensor::io::Checkpoint<D, f64>, name: &str) -> Vec<f64> {
    let found = ckpt.tensors().iter().find(|(n, _)| n == name);
    found.unwrap_or_else(|| panic!("no `{name}` in optim.safetensors")).1.to_vec()
}

/// The weight after each of `steps` steps of `opt`, one row per step.
fn trajectory<D: Device, O: Optimizer<D, f64>>(mut opt: O, steps: usize) -> Vec<f64> {
    let mut m = model::<D>();
    let mut out = Vec::new();
    for _ in 0..steps {
        let g = grads(&m);
        opt.step(&mut m, &g);
        out.extend(m.weight.to_vec());
    }
    out
}

/// RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and Adam's AMSGrad, in
/// PyTorch's defaults and with every option, against PyTorch's weights
/// after each of 8 steps.
fn optimizers_follow_pytorchs_trajectories<D: Device>() {
    use devtensor::optim::{
        Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adamax, AdamaxConfig, NAdam, NAdamConfig, RAdam, RAdamConfig,
        RmsProp, RmsPropConfig,
    };
    const STEPS: usize = 8;
    let m = model::<D>();
    let cases: Vec<(&str, Vec<f64>)> = vec![
        ("rmsprop", trajectory(RmsProp::new(&m, RmsPropConfig { lr: 0.01, ..Default::default() }), STEPS)),
        (
            "rmsprop_centered_momentum",
            trajectory(
                RmsProp::new(
                    &m,
                    RmsPropConfig { lr: 0.01, alpha: 0.9, eps: 1e-6, weight_decay: 0.1, momentum: 0.5, centered: true },
                ),
                STEPS,
            ),
        ),
        ("adagrad", trajectory(Adagrad::new(&m, AdagradConfig { lr: 0.1, ..Default::default() }), STEPS)),
        (
            "adagrad_decay",
            trajectory(
                Adagrad::new(
                    &m,
                    AdagradConfig {
                        lr: 0.1,
                        lr_decay: 0.05,
                        weight_decay: 0.1,
                        initial_accumulator_value: 0.5,
                        eps: 1e-6,
                    },
                ),
                STEPS,
            ),
        ),
        ("adadelta", trajectory(Adadelta::new(&m, AdadeltaConfig::default()), STEPS)),
        (
            "adadelta_options",
            trajectory(Adadelta::new(&m, AdadeltaConfig { lr: 0.5, rho: 0.8, eps: 1e-4, weight_decay: 0.1 }), STEPS),
        ),
        ("adamax", trajectory(Adamax::new(&m, AdamaxConfig { lr: 0.05, ..Default::default() }), STEPS)),
        (
            "adamax_decay",
            trajectory(
                Adamax::new(&m, AdamaxConfig { lr: 0.05, betas: (0.8, 0.9), eps: 1e-4, weight_decay: 0.1 }),
                STEPS,
            ),
        ),
        ("nadam", trajectory(NAdam::new(&m, NAdamConfig { lr: 0.05, ..Default::default() }), STEPS)),
        (
            "nadam_decay",
            trajectory(
                NAdam::new(
                    &m,
                    NAdamConfig {
                        lr: 0.05,
                        betas: (0.8, 0.9),
                        weight_decay: 0.1,
                        momentum_decay: 0.01,
                        ..Default::default()
                    },
                ),
                STEPS,
            ),
        ),
        (
            "nadam_decoupled",
            trajectory(
                NAdam::new(
                    &m,
                    NAdamConfig { lr: 0.05, weight_decay: 0.1, decoupled_weight_decay: true, ..Default::default() },
                ),
                STEPS,
            ),
        ),
        ("radam", trajectory(RAdam::new(&m, RAdamConfig { lr: 0.05, ..Default::default() }), STEPS)),
        (
            "radam_rectified",
            trajectory(
                RAdam::new(&m, RAdamConfig { lr: 0.05, betas: (0.9, 0.5), weight_decay: 0.1, ..Default::default() }),
                STEPS,
            ),
        ),
        (
            "radam_decoupled",
            trajectory(
                RAdam::new(
                    &m,
                    RAdamConfig {
                        lr: 0.05,
                        betas: (0.9, 0.5),
                        weight_decay: 0.1,
                        decoupled_weight_decay: true,
                        ..Default::default()
                    },
                ),
                STEPS,
            ),
        ),
        (
            "adam_amsgrad",
            trajectory(
                Adam::new(&m, AdamConfig { lr: 0.05, weight_decay: 0.1, amsgrad: true, ..Default::default() }),
                STEPS,
            ),
        ),
        (
            "adamw_amsgrad",
            trajectory(AdamW::new(&m, AdamConfig { lr: 0.05, amsgrad: true, ..AdamConfig::adamw() }), STEPS),
        ),
    ];
    let torch = optim_fixture::<D>();
    for (name, got) in cases {
        let want = fixture_values(&torch, &format!("{name}.trajectory"));
        assert_eq!(got.len(), want.len(), "{name}");
        for (step, (g, w)) in got.chunks(3).zip(want.chunks(3)).enumerate() {
            let off = g.iter().zip(w).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(0.0, f64::max);
            assert!(off <= 1e-12, "{name}, step {}: {g:?}, PyTorch {w:?}", step + 1);
        }
    }
}

/// A new optimizer's state (RMSprop's three slots and its step count) saved
/// after two steps and loaded into a fresh optimizer gives the third step
/// the uninterrupted run takes; a state of another shape is refused.
fn rule_optimizer_state_round_trips<D: Device>() {
    use devtensor::optim::{RmsProp, RmsPropConfig};
    let c = RmsPropConfig { lr: 0.01, momentum: 0.5, centered: true, ..Default::default() };
    let want = trajectory(RmsProp::new(&model::<D>(), c), 3)[6..].to_vec();
    let mut first = RmsProp::new(&model::<D>(), c);
    let mut m = run(&mut first, 2);
    let state = first.state();
    let names: Vec<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
    let want_names = [
        "weight.grad_avg",
        "weight.momentum_buffer",
        "weight.square_avg",
        "weight.step",
        "param_groups.lr",
        "param_groups.weight_decay",
    ];
    assert_eq!(names, want_names);
    let mut second = RmsProp::new(&m, c);
    second.try_load_state(state).unwrap();
    let g = grads(&m);
    second.step(&mut m, &g);
    assert_near(&m.weight.to_vec(), &want);
    let mut other = Linear::<D, f64>::new(5, 2).without_bias();
    let g = other.weight.sum().backward();
    let err = second.try_step(&mut other, &g).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }) && err.to_string().contains("RMSprop"), "{err}");
    let err = second.try_load_state(vec![("weight.exp_avg".into(), Tensor::<D, f64>::zeros([1]))]).unwrap_err();
    assert!(err.to_string().contains("unknown optimizer state `weight.exp_avg`"), "{err}");
}

/// The schedules of `torch.optim.lr_scheduler` against PyTorch's rates for
/// 40 epochs, read from the optimizer before each `scheduler.step()`.
#[test]
fn schedules_follow_pytorch() {
    use devtensor::optim::{
        ConstantLr, CosineAnnealingWarmRestarts, ExponentialLr, LambdaLr, MultiStepLr, MultiplicativeLr, PolynomialLr,
    };
    let torch = optim_fixture::<devtensor::Cpu>();
    let check = |name: &str, schedule: &dyn Fn(usize) -> f64| {
        let want = fixture_values(&torch, &format!("schedule.{name}"));
        for (epoch, w) in want.iter().enumerate() {
            let got = schedule(epoch);
            assert!((got - w).abs() <= 1e-14 * w.abs().max(1e-3), "{name}, epoch {epoch}: {got}, PyTorch {w}");
        }
    };
    check("exponential", &|e| ExponentialLr { base_lr: 0.1, gamma: 0.9 }.lr(e));
    let multistep = MultiStepLr { base_lr: 0.1, milestones: vec![3, 10, 10, 25], gamma: 0.5 };
    check("multistep", &|e| multistep.lr(e));
    check("constant", &|e| ConstantLr { base_lr: 0.1, factor: 0.25, total_iters: 4 }.lr(e));
    check("polynomial", &|e| PolynomialLr { base_lr: 0.1, total_iters: 30, power: 2.0 }.lr(e));
    check("warm_restarts", &|e| CosineAnnealingWarmRestarts { base_lr: 0.1, t_0: 3, t_mult: 2, eta_min: 0.001 }.lr(e));
    check("warm_restarts_same", &|e| {
        CosineAnnealingWarmRestarts { base_lr: 0.1, t_0: 7, t_mult: 1, eta_min: 0.0 }.lr(e)
    });
    check("lambda", &|e| LambdaLr { base_lr: 0.1, lr_lambda: |e: usize| 1.0 / (1.0 + e as f64) }.lr(e));
    let multiplicative = MultiplicativeLr { base_lr: 0.1, lr_lambda: |e: usize| if e % 2 == 1 { 0.95 } else { 1.0 } };
    check("multiplicative", &|e| multiplicative.lr(e));
}

/// `ReduceLROnPlateau` in three settings (relative and absolute thresholds,
/// cooldown, a smallest rate, `max` mode) against PyTorch's rates on one
/// validation curve, stepping a real optimizer.
#[test]
fn reduce_on_plateau_follows_pytorch() {
    use devtensor::optim::{PlateauConfig, PlateauMode, ReduceLrOnPlateau, ThresholdMode};
    let torch = optim_fixture::<devtensor::Cpu>();
    let metrics = fixture_values(&torch, "schedule.plateau_metrics");
    let configs = [
        ("plateau", PlateauConfig { patience: 2, ..Default::default() }),
        (
            "plateau_abs_cooldown",
            PlateauConfig {
                factor: 0.5,
                patience: 1,
                threshold: 0.01,
                threshold_mode: ThresholdMode::Abs,
                cooldown: 2,
                min_lr: 0.02,
                ..Default::default()
            },
        ),
        ("plateau_max", PlateauConfig { mode: PlateauMode::Max, patience: 0, factor: 0.9, ..Default::default() }),
    ];
    for (name, config) in configs {
        let want = fixture_values(&torch, &format!("schedule.{name}"));
        let mut opt = Sgd::new(&model::<devtensor::Cpu>(), SgdConfig { lr: 0.1, ..Default::default() });
        let mut plateau = ReduceLrOnPlateau::new(config);
        for (epoch, (&metric, &w)) in metrics.iter().zip(&want).enumerate() {
            assert!((opt.lr() - w).abs() <= 1e-15, "{name}, epoch {epoch}: {}, PyTorch {w}", opt.lr());
            plateau.step(metric, &mut opt);
        }
    }
}

device_tests! {
    optimizers_follow_pytorchs_trajectories => optimizers_follow_pytorchs_trajectories,
    rule_optimizer_state_round_trips => rule_optimizer_state_round_trips,
    one_cycle_follows_pytorch => one_cycle_follows_pytorch,
    sgd_follows_pytorch => sgd_follows_pytorch,
    adam_and_adamw_follow_pytorch => adam_and_adamw_follow_pytorch,
    optimizer_state_round_trips => optimizer_state_round_trips,
    parameter_groups_have_settings_of_their_own => parameter_groups_have_settings_of_their_own,
    training_fits_a_line_and_schedules_set_the_rate => training_fits_a_line_and_schedules_set_the_rate,
}

// ---- Gradient clipping and accumulation

/// A `Linear` of random size and weights, and the gradients of a loss that
/// weighs its outputs at random: gradients of every sign and size. The
/// bias's gradient is dropped when `bias_without_grad`, as for a parameter
/// the loss does not use.
fn random_gradients<D: Device>(
    sizes: (usize, usize, usize),
    seed: u64,
    bias_without_grad: bool,
) -> (Linear<D, f64>, Gradients) {
    let (rows, inputs, outputs) = sizes;
    let mut g = Generator::new(seed);
    let weight = Tensor::<D, f64>::randn_with([outputs, inputs], &mut g);
    let bias = Tensor::<D, f64>::randn_with([outputs], &mut g);
    let model = Linear::try_from_weights(weight, Some(bias)).unwrap();
    let x = Tensor::<D, f64>::randn_with([rows, inputs], &mut g) * 3.0;
    let weights = Tensor::<D, f64>::randn_with([rows, outputs], &mut g);
    let mut grads = (model.forward(&x) * &weights).sum().backward();
    if bias_without_grad {
        grads.remove(model.bias.as_ref().unwrap()).unwrap();
    }
    (model, grads)
}

/// `model`'s gradients in `grads`, weight then bias (empty when absent).
fn gradient_values<D: Device>(model: &Linear<D, f64>, grads: &Gradients) -> [Vec<f64>; 2] {
    [&model.weight, model.bias.as_ref().unwrap()].map(|p| grads.get(p).map(|g| g.to_vec()).unwrap_or_default())
}

device_proptests! {
    cases = 48;

    /// `clip_grad_norm` against PyTorch's formula as a plain loop: the
    /// p-norm of all gradients as one vector, and every gradient scaled by
    /// min(1, max_norm / (norm + 1e-6)); parameters without a gradient
    /// neither count nor get one.
    fn clip_grad_norm_matches_a_plain_loop<D>(
        sizes in (1..6usize, 1..5usize, 1..4usize),
        seed in any::<u64>(),
        norm_type in prop_oneof![Just(1.0), Just(2.0), Just(3.0), Just(f64::INFINITY)],
        bound in 0.0..2.0f64,
        bias_without_grad in any::<bool>(),
    ) {
        let (model, mut grads) = random_gradients::<D>(sizes, seed, bias_without_grad);
        let before = gradient_values(&model, &grads);
        let values: Vec<f64> = before.iter().flatten().copied().collect();
        let norm = if norm_type == f64::INFINITY {
            values.iter().fold(0.0f64, |m, v| m.max(v.abs()))
        } else {
            values.iter().map(|v| v.abs().powf(norm_type)).sum::<f64>().powf(1.0 / norm_type)
        };
        // Half the cases inside the bound, half clipped.
        let max_norm = bound * norm;
        let got = clip_grad_norm(&model, &mut grads, max_norm, norm_type);
        prop_assert!((got.item() - norm).abs() <= 1e-12 * norm, "norm {} vs {}", got.item(), norm);
        let scale = (max_norm / (norm + 1e-6)).min(1.0);
        let after = gradient_values(&model, &grads);
        for (b, a) in before.iter().zip(&after) {
            prop_assert_eq!(b.len(), a.len());
            for (x, y) in b.iter().zip(a) {
                prop_assert!((x * scale - y).abs() <= 1e-12 * (1.0 + x.abs()), "{} * {} vs {}", x, scale, y);
            }
        }
    }

    /// Gradients accumulated over micro-batches are the gradients of the
    /// whole batch's summed loss.
    fn accumulated_micro_batches_give_the_batch_gradient<D>(
        rows in 1..12usize,
        cut in 0.0..1.0f64,
        seed in any::<u64>(),
    ) {
        let mut g = Generator::new(seed);
        let model = Linear::<D, f64>::try_from_weights(
            Tensor::randn_with([2, 3], &mut g),
            Some(Tensor::randn_with([2], &mut g)),
        ).unwrap();
        let x = Tensor::<D, f64>::randn_with([rows, 3], &mut g);
        let y = Tensor::<D, f64>::randn_with([rows, 2], &mut g);
        let loss = |x: &Tensor<D, f64>, y: &Tensor<D, f64>| mse_loss(&model.forward(x), y, Reduction::Sum);
        let whole = loss(&x, &y).backward();
        let first = (cut * rows as f64) as usize;
        let mut grads = Gradients::new();
        for (start, len) in [(0, first), (first, rows - first)] {
            grads.accumulate(loss(&x.narrow(0, start, len), &y.narrow(0, start, len)).backward());
        }
        for (a, b) in gradient_values(&model, &grads).iter().zip(gradient_values(&model, &whole).iter()) {
            prop_assert_eq!(a.len(), b.len());
            for (p, q) in a.iter().zip(b) {
                prop_assert!((p - q).abs() <= 1e-12 * (1.0 + q.abs()), "{:?} vs {:?}", a, b);
            }
        }
    }
}

fn clipping_edge_cases_and_bad_arguments<D: Device>() {
    let (model, mut grads) = random_gradients::<D>((3, 2, 2), 7, false);
    let before = gradient_values(&model, &grads);
    // Bad arguments name the operation and the device, and change nothing.
    for (max_norm, norm_type, what) in
        [(-1.0, 2.0, "max_norm"), (f64::NAN, 2.0, "max_norm"), (1.0, 0.0, "norm_type"), (1.0, -2.0, "norm_type")]
    {
        let err = try_clip_grad_norm(&model, &mut grads, max_norm, norm_type).unwrap_err();
        assert!(matches!(err, Error::Argument { op: "clip_grad_norm", .. }), "{err}");
        assert!(err.to_string().starts_with(&format!("clip_grad_norm on {}: {what} must be", D::name())), "{err}");
    }
    let err = try_clip_grad_value(&model, &mut grads, -0.5).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("clip_grad_value on {}: clip_value must be a non-negative number, got -0.5", D::name())
    );
    assert_eq!(gradient_values(&model, &grads), before);
    // clip_grad_value clamps each element, as torch.clamp.
    clip_grad_value(&model, &mut grads, 0.5);
    for (b, a) in before.iter().zip(gradient_values(&model, &grads)) {
        assert_eq!(a, b.iter().map(|v| v.clamp(-0.5, 0.5)).collect::<Vec<_>>());
    }
    // No gradients is an error (PyTorch returns 0 and clips nothing, which
    // hides gradients taken from another copy of the model: see
    // `porting.rs`). All-zero gradients stay zero.
    let err = try_clip_grad_norm(&model, &mut Gradients::new(), 1.0, 2.0).unwrap_err();
    assert!(err.to_string().contains("the `Gradients` given are empty"), "{err}");
    let mut zeros = (model.forward(&Tensor::<D, f64>::zeros([1, 2])) * 0.0).sum().backward();
    assert_eq!(clip_grad_norm(&model, &mut zeros, 1.0, 2.0).item(), 0.0);
    assert_eq!(gradient_values(&model, &zeros)[0], vec![0.0; 4]);
    // A NaN gradient makes the norm and every gradient NaN, as in PyTorch
    // (error_if_nonfinite=False): the caller sees it in the returned norm.
    let nan = Tensor::<D, f64>::from_vec(vec![f64::NAN, 0.0], [1, 2]);
    let mut grads = model.forward(&nan).sum().backward();
    assert!(clip_grad_norm(&model, &mut grads, 1.0, 2.0).item().is_nan());
    assert!(gradient_values(&model, &grads).iter().flatten().all(|v| v.is_nan()));
}

device_tests! {
    clipping_edge_cases_and_bad_arguments => clipping_edge_cases_and_bad_arguments,
}
