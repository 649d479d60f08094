//! Adamax, NAdam and RAdam: Adam's moment estimates with another norm, a
//! Nesterov look-ahead, or a rectified variance.

use super::rule::{ParamState, RuleOptimizer, UpdateRule, decay_weight, l2_penalty};
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::{Device, Tensor};

const EXP_AVG: &str = "exp_avg";
const EXP_AVG_SQ: &str = "exp_avg_sq";
const EXP_INF: &str = "exp_inf";
const MU_PRODUCT: &str = "mu_product";

/// The running means Adam keeps, updated from `g` as PyTorch does:
/// `m = lerp(m, g, 1 - β1)` and `v = β2 v + (1 - β2) g²`.
fn moments<D: Device, E: FloatElement>(
    state: &mut ParamState<'_, D, E>,
    p: &Tensor<D, E>,
    g: &Tensor<D, E>,
    (b1, b2): (f64, f64),
) -> Result<(Tensor<D, E>, Tensor<D, E>)> {
    let e = E::from_f64;
    let m = state.get_or_zeros(EXP_AVG, p)?.try_lerp(g, e(1.0 - b1))?;
    let v = state
        .get_or_zeros(EXP_AVG_SQ, p)?
        .try_mul_scalar(e(b2))?
        .try_add(&g.try_square()?.try_mul_scalar(e(1.0 - b2))?)?;
    state.set(EXP_AVG, m.clone());
    state.set(EXP_AVG_SQ, v.clone());
    Ok((m, v))
}

/// NAdam's and RAdam's weight decay: AdamW's on the parameter when
/// `decoupled`, else the L2 penalty on the gradient, which it returns.
fn either_weight_decay<D: Device, E: FloatElement>(
    p: &mut Tensor<D, E>,
    g: Tensor<D, E>,
    lr: f64,
    weight_decay: f64,
    decoupled: bool,
) -> Result<Tensor<D, E>> {
    match decoupled {
        true => decay_weight(p, lr, weight_decay).map(|()| g),
        false => l2_penalty(g, p, weight_decay),
    }
}

/// The settings of [`Adamax`]; `Default` gives PyTorch's defaults (`lr`
/// 2e-3, betas (0.9, 0.999), `eps` 1e-8, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamaxConfig {
    /// The learning rate.
    pub lr: f64,
    /// Decay rates of the first moment and of the infinity norm.
    pub betas: (f64, f64),
    /// Added to the infinity norm for numerical stability.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
}

impl Default for AdamaxConfig {
    fn default() -> Self {
        AdamaxConfig { lr: 2e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0 }
    }
}

/// PyTorch's `torch.optim.Adamax`, Adam with the infinity norm: with `g`
/// the gradient plus `weight_decay · p`, `m = lerp(m, g, 1 - β1)`,
/// `u = max(β2 u, |g| + eps)` and `p -= lr / (1 - β1^t) · m / u`. State:
/// `exp_avg`, `exp_inf`, `step`.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Adamax, AdamaxConfig, Optimizer};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = Adamax::new(&model, AdamaxConfig::default());
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// ```
pub type Adamax<D, E = f32> = RuleOptimizer<D, E, AdamaxConfig>;

impl UpdateRule for AdamaxConfig {
    const NAME: &'static str = "Adamax";
    const STEP: &'static str = "Adamax::step";
    const SLOTS: &'static [&'static str] = &[EXP_AVG, EXP_INF, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        let (b1, b2) = self.betas;
        let step = state.next_step()?;
        let g = l2_penalty(g, p, self.weight_decay)?;
        let m = state.get_or_zeros(EXP_AVG, p)?.try_lerp(&g, e(1.0 - b1))?;
        let u = state
            .get_or_zeros(EXP_INF, p)?
            .try_mul_scalar(e(b2))?
            .try_maximum(&g.try_abs()?.try_add_scalar(e(self.eps))?)?;
        let lr = self.lr / (1.0 - b1.powf(step));
        p.try_sub_assign(&m.try_div(&u)?.try_mul_scalar(e(lr))?)?;
        state.set(EXP_AVG, m);
        state.set(EXP_INF, u);
        Ok(())
    }
}

/// The settings of [`NAdam`]; `Default` gives PyTorch's defaults (`lr`
/// 2e-3, betas (0.9, 0.999), `eps` 1e-8, no weight decay,
/// `momentum_decay` 4e-3, the L2 form of weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NAdamConfig {
    /// The learning rate.
    pub lr: f64,
    /// Decay rates of the first and second moment estimates.
    pub betas: (f64, f64),
    /// Added to the denominator for numerical stability.
    pub eps: f64,
    /// L2 penalty, or with `decoupled_weight_decay` AdamW's decay.
    pub weight_decay: f64,
    /// How fast the momentum schedule `μ_t` approaches `β1`.
    pub momentum_decay: f64,
    /// Whether `weight_decay` is decoupled (`p *= 1 - lr · weight_decay`,
    /// PyTorch's NAdamW) instead of added to the gradient.
    pub decoupled_weight_decay: bool,
}

impl Default for NAdamConfig {
    fn default() -> Self {
        NAdamConfig {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            momentum_decay: 4e-3,
            decoupled_weight_decay: false,
        }
    }
}

/// PyTorch's `torch.optim.NAdam`, Adam with Nesterov momentum: the momentum
/// schedule `μ_t = β1 (1 - 0.96^(t · momentum_decay) / 2)`, Adam's moments
/// `m` and `v`, and
/// `p -= lr (1 - μ_t) / (1 - Πμ) · g / d + lr μ_{t+1} / (1 - Πμ · μ_{t+1}) · m / d`
/// with `d = sqrt(v / (1 - β2^t)) + eps` and `Πμ` the product of the
/// `μ`s so far. State: `exp_avg`, `exp_avg_sq`, `mu_product`, `step`.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{NAdam, NAdamConfig, Optimizer};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = NAdam::new(&model, NAdamConfig { weight_decay: 0.01, decoupled_weight_decay: true, ..Default::default() });
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// ```
pub type NAdam<D, E = f32> = RuleOptimizer<D, E, NAdamConfig>;

impl UpdateRule for NAdamConfig {
    const NAME: &'static str = "NAdam";
    const STEP: &'static str = "NAdam::step";
    const SLOTS: &'static [&'static str] = &[EXP_AVG, EXP_AVG_SQ, MU_PRODUCT, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        let (b1, b2) = self.betas;
        let step = state.next_step()?;
        let g = either_weight_decay(p, g, self.lr, self.weight_decay, self.decoupled_weight_decay)?;
        let mu = b1 * (1.0 - 0.5 * 0.96f64.powf(step * self.momentum_decay));
        let mu_next = b1 * (1.0 - 0.5 * 0.96f64.powf((step + 1.0) * self.momentum_decay));
        // Kept in the parameter's type, as PyTorch keeps it in its default
        // float type.
        let mu_product = E::from_f64(state.scalar(MU_PRODUCT, 1.0)? * mu).to_f64();
        state.set_scalar(MU_PRODUCT, mu_product)?;
        let (m, v) = moments(state, p, &g, self.betas)?;
        let denom = v.try_div_scalar(e(1.0 - b2.powf(step)))?.try_sqrt()?.try_add_scalar(e(self.eps))?;
        let from_grad = g.try_div(&denom)?.try_mul_scalar(e(self.lr * (1.0 - mu) / (1.0 - mu_product)))?;
        let from_momentum = m.try_div(&denom)?.try_mul_scalar(e(self.lr * mu_next / (1.0 - mu_product * mu_next)))?;
        p.try_sub_assign(&from_grad)?;
        p.try_sub_assign(&from_momentum)
    }
}

/// The settings of [`RAdam`]; `Default` gives PyTorch's defaults (`lr`
/// 1e-3, betas (0.9, 0.999), `eps` 1e-8, no weight decay, the L2 form of
/// weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RAdamConfig {
    /// The learning rate.
    pub lr: f64,
    /// Decay rates of the first and second moment estimates.
    pub betas: (f64, f64),
    /// Added to the denominator for numerical stability.
    pub eps: f64,
    /// L2 penalty, or with `decoupled_weight_decay` AdamW's decay.
    pub weight_decay: f64,
    /// Whether `weight_decay` is decoupled (`p *= 1 - lr · weight_decay`)
    /// instead of added to the gradient.
    pub decoupled_weight_decay: bool,
}

impl Default for RAdamConfig {
    fn default() -> Self {
        RAdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, decoupled_weight_decay: false }
    }
}

/// PyTorch's `torch.optim.RAdam`, Adam with a rectified variance: with
/// `ρ∞ = 2 / (1 - β2) - 1` and `ρ_t = ρ∞ - 2t β2^t / (1 - β2^t)`, a step
/// while `ρ_t ≤ 5` is momentum alone, `p -= lr · m / (1 - β1^t)`; after
/// it, Adam's step scaled by
/// `r_t = sqrt((ρ_t - 4)(ρ_t - 2) ρ∞ / ((ρ∞ - 4)(ρ∞ - 2) ρ_t))`. State:
/// `exp_avg`, `exp_avg_sq`, `step`.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{Optimizer, RAdam, RAdamConfig};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = RAdam::new(&model, RAdamConfig::default());
/// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
/// opt.step(&mut model, &grads);
/// ```
pub type RAdam<D, E = f32> = RuleOptimizer<D, E, RAdamConfig>;

impl UpdateRule for RAdamConfig {
    const NAME: &'static str = "RAdam";
    const STEP: &'static str = "RAdam::step";
    const SLOTS: &'static [&'static str] = &[EXP_AVG, EXP_AVG_SQ, super::rule::STEP];

    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()> {
        let e = E::from_f64;
        let (b1, b2) = self.betas;
        let step = state.next_step()?;
        let g = either_weight_decay(p, g, self.lr, self.weight_decay, self.decoupled_weight_decay)?;
        let (m, v) = moments(state, p, &g, self.betas)?;
        let (correction1, correction2) = (1.0 - b1.powf(step), 1.0 - b2.powf(step));
        let m = m.try_div_scalar(e(correction1))?;
        let rho_inf = 2.0 / (1.0 - b2) - 1.0;
        let rho = rho_inf - 2.0 * step * b2.powf(step) / correction2;
        let update = match rho > 5.0 {
            true => {
                let rect = ((rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)).sqrt();
                let adaptive = v.try_sqrt()?.try_add_scalar(e(self.eps))?.try_rdiv_scalar(e(correction2.sqrt()))?;
                m.try_mul_scalar(e(self.lr))?.try_mul(&adaptive)?.try_mul_scalar(e(rect))?
            }
            false => m.try_mul_scalar(e(self.lr))?,
        };
        p.try_sub_assign(&update)
    }
}
