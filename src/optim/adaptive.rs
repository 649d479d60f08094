//! RMSprop, Adagrad and Adadelta: each parameter's step scaled by a running
//! measure of its own gradients' size.

use super::rule::{ParamState, RuleOptimizer, UpdateRule, l2_penalty};
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::{Device, Tensor};

/// The settings of [`RmsProp`]; `Default` gives PyTorch's defaults (`lr`
/// 0.01, `alpha` 0.99, `eps` 1e-8, no weight decay, no momentum, not
/// centered).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsPropConfig {
    /// The learning rate.
    pub lr: f64,
    /// The smoothing constant of the running average of squared gradients.
    pub alpha: f64,
    /// Added to the denominator for numerical stability.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// The momentum factor (0: none).
    pub momentum: f64,
    /// Whether the squared average is centered by the running mean of the
    /// gradients (an estimate of their variance).
    pub centered: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig { lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0.0, momentum: 0.0, centered: false }
    }
}

/// PyTorch's `torch.optim.RMSprop`: with `g` the gradient plus
/// `weight_decay · p`, `v = α v + (1 - α) g²`, the denominator
/// `sqrt(v) + eps` (`sqrt(v - ḡ²) + eps` when centered, `ḡ` the running
/// mean of `g`), and `p -= lr · g / denominator`, or with momentum
/// `b = momentum · b + g / denominator`, `p -= lr · b`. State: `square_avg`,
/// `momentum_buffer`, `grad_avg`, `step`.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Optimizer, RmsProp, RmsPropConfig};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = RmsProp::new(&model, RmsPropConfig { lr: 1e-3, momentum: 0.9, ..Default::default() });
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// ```
pub type RmsProp<D, E = f32> = RuleOptimizer<D, E, RmsPropConfig>;

const SQUARE_AVG: &str = "square_avg";
const MOMENTUM_BUFFER: &str = "momentum_buffer";
const GRAD_AVG: &str = "grad_avg";
const SUM: &str = "sum";
const ACC_DELTA: &str = "acc_delta";

impl UpdateRule for RmsPropConfig {
    const NAME: &'static str = "RMSprop";
    const STEP: &'static str = "RMSprop::step";
    const SLOTS: &'static [&'static str] = &[SQUARE_AVG, MOMENTUM_BUFFER, GRAD_AVG, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        state.next_step()?;
        let g = l2_penalty(g, p, self.weight_decay)?;
        let square_avg = state
            .get_or_zeros(SQUARE_AVG, p)?
            .try_mul_scalar(e(self.alpha))?
            .try_add(&g.try_square()?.try_mul_scalar(e(1.0 - self.alpha))?)?;
        let avg = match self.centered {
            true => {
                let grad_avg = state.get_or_zeros(GRAD_AVG, p)?.try_lerp(&g, e(1.0 - self.alpha))?;
                let avg = square_avg.try_sub(&grad_avg.try_square()?)?.try_sqrt()?;
                state.set(GRAD_AVG, grad_avg);
                avg
            }
            false => square_avg.try_sqrt()?,
        }
        .try_add_scalar(e(self.eps))?;
        state.set(SQUARE_AVG, square_avg);
        let direction = match self.momentum {
            0.0 => g.try_div(&avg)?,
            momentum => {
                let buf =
                    state.get_or_zeros(MOMENTUM_BUFFER, p)?.try_mul_scalar(e(momentum))?.try_add(&g.try_div(&avg)?)?;
                state.set(MOMENTUM_BUFFER, buf.clone());
                buf
            }
        };
        p.try_sub_assign(&direction.try_mul_scalar(e(self.lr))?)
    }
}

/// The settings of [`Adagrad`]; `Default` gives PyTorch's defaults (`lr`
/// 0.01, no decay of the rate, no weight decay, the accumulator starting
/// at 0, `eps` 1e-10).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdagradConfig {
    /// The learning rate.
    pub lr: f64,
    /// The rate's decay: step `t` uses `lr / (1 + (t - 1) · lr_decay)`.
    pub lr_decay: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// The sum of squared gradients before the first step.
    pub initial_accumulator_value: f64,
    /// Added to the denominator for numerical stability.
    pub eps: f64,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig { lr: 1e-2, lr_decay: 0.0, weight_decay: 0.0, initial_accumulator_value: 0.0, eps: 1e-10 }
    }
}

/// PyTorch's `torch.optim.Adagrad`: with `g` the gradient plus
/// `weight_decay · p`, the sum of squares `s += g²` and
/// `p -= lr / (1 + (t - 1) · lr_decay) · g / (sqrt(s) + eps)` at step `t`.
/// State: `sum`, `step`. It has no momentum: [`OneCycleLr`](super::OneCycleLr)'s
/// `cycle_momentum` changes nothing here (PyTorch refuses the combination).
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Adagrad, AdagradConfig, Optimizer};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = Adagrad::new(&model, AdagradConfig { lr: 0.1, ..Default::default() });
/// let before = model.weight.to_vec();
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// // The first step moves every weight by lr (the gradient over its own size).
/// for (b, a) in before.iter().zip(model.weight.to_vec()) {
///     assert!((b - a - 0.1).abs() < 1e-6);
/// }
/// ```
pub type Adagrad<D, E = f32> = RuleOptimizer<D, E, AdagradConfig>;

impl UpdateRule for AdagradConfig {
    const NAME: &'static str = "Adagrad";
    const STEP: &'static str = "Adagrad::step";
    const SLOTS: &'static [&'static str] = &[SUM, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        let step = state.next_step()?;
        let g = l2_penalty(g, p, self.weight_decay)?;
        let lr = self.lr / (1.0 + (step - 1.0) * self.lr_decay);
        let sum =
            state.get_or(SUM, p, || p.try_full_like(e(self.initial_accumulator_value)))?.try_add(&g.try_square()?)?;
        let std = sum.try_sqrt()?.try_add_scalar(e(self.eps))?;
        state.set(SUM, sum);
        p.try_sub_assign(&g.try_div(&std)?.try_mul_scalar(e(lr))?)
    }
}

/// The settings of [`Adadelta`]; `Default` gives PyTorch's defaults (`lr`
/// 1, `rho` 0.9, `eps` 1e-6, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdadeltaConfig {
    /// The factor applied to each step (PyTorch's `lr`, 1 in the paper).
    pub lr: f64,
    /// The decay of both running averages.
    pub rho: f64,
    /// Added inside both square roots for numerical stability.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0 }
    }
}

/// PyTorch's `torch.optim.Adadelta`: with `g` the gradient plus
/// `weight_decay · p`, `v = ρ v + (1 - ρ) g²`,
/// `δ = sqrt(u + eps) / sqrt(v + eps) · g`, `u = ρ u + (1 - ρ) δ²` and
/// `p -= lr · δ`. State: `square_avg`, `acc_delta`, `step`. It has no
/// momentum for a schedule to cycle.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Adadelta, AdadeltaConfig, Optimizer};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = Adadelta::new(&model, AdadeltaConfig::default());
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// assert_eq!(opt.state().len(), 2 * 3 + 2); // three slots per parameter, lr and weight decay
/// ```
pub type Adadelta<D, E = f32> = RuleOptimizer<D, E, AdadeltaConfig>;

impl UpdateRule for AdadeltaConfig {
    const NAME: &'static str = "Adadelta";
    const STEP: &'static str = "Adadelta::step";
    const SLOTS: &'static [&'static str] = &[SQUARE_AVG, ACC_DELTA, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        state.next_step()?;
        let g = l2_penalty(g, p, self.weight_decay)?;
        let square_avg = state
            .get_or_zeros(SQUARE_AVG, p)?
            .try_mul_scalar(e(self.rho))?
            .try_add(&g.try_square()?.try_mul_scalar(e(1.0 - self.rho))?)?;
        let std = square_avg.try_add_scalar(e(self.eps))?.try_sqrt()?;
        let acc_delta = state.get_or_zeros(ACC_DELTA, p)?;
        let delta = acc_delta.try_add_scalar(e(self.eps))?.try_sqrt()?.try_div(&std)?.try_mul(&g)?;
        let acc_delta =
            acc_delta.try_mul_scalar(e(self.rho))?.try_add(&delta.try_square()?.try_mul_scalar(e(1.0 - self.rho))?)?;
        state.set(SQUARE_AVG, square_avg);
        state.set(ACC_DELTA, acc_delta);
        p.try_sub_assign(&delta.try_mul_scalar(e(self.lr))?)
    }
}
