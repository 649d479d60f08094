//! Adam and AdamW.

use super::groups::Settings;
use super::{
    ModelOn, Optimizer, ParamGroup, Slots, check_slot, flatten_state, for_each_parameter, move_slots, unflatten_state,
};
use crate::autograd::Gradients;
use crate::element::FloatElement;
use crate::error::Result;
use crate::nn::Module;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice};
use devtensor_macros::fallible;
use std::marker::PhantomData;

/// The settings of [`Adam`] and [`AdamW`]; `Default` gives PyTorch's
/// defaults for `Adam` (`lr` 1e-3, betas (0.9, 0.999), eps 1e-8, no weight
/// decay, no AMSGrad). PyTorch's `AdamW` defaults to `weight_decay = 0.01`:
/// [`AdamConfig::adamw`] gives that.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    /// The learning rate.
    pub lr: f64,
    /// Decay rates of the first and second moment estimates.
    pub betas: (f64, f64),
    /// Added to the denominator for numerical stability.
    pub eps: f64,
    /// L2 penalty (Adam) or decoupled weight decay (AdamW).
    pub weight_decay: f64,
    /// AMSGrad: divide by the largest second moment so far
    /// (`max_exp_avg_sq` in the state) instead of the current one.
    pub amsgrad: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, amsgrad: false }
    }
}

impl AdamConfig {
    /// PyTorch's `AdamW` defaults: Adam's, with `weight_decay = 0.01`.
    pub fn adamw() -> Self {
        AdamConfig { weight_decay: 0.01, ..Default::default() }
    }
}

/// PyTorch's `torch.optim.Adam`: `m = β1 m + (1 - β1) g`,
/// `v = β2 v + (1 - β2) g²`, and
/// `p -= lr / (1 - β1^t) · m / (sqrt(v) / sqrt(1 - β2^t) + eps)`, with `g`
/// the gradient plus `weight_decay · p`. The moments live on the model's
/// device.
pub type Adam<D, E = f32> = AdamOptimizer<D, E, false>;

/// PyTorch's `torch.optim.AdamW`: Adam with decoupled weight decay,
/// `p *= 1 - lr · weight_decay` before the Adam step (which then sees the
/// plain gradient).
pub type AdamW<D, E = f32> = AdamOptimizer<D, E, true>;

/// [`Adam`] (`DECOUPLED = false`) or [`AdamW`] (`true`).
#[derive(Clone, Debug)]
pub struct AdamOptimizer<D: Device, E: FloatElement, const DECOUPLED: bool> {
    settings: Settings<AdamConfig>,
    slots: Slots<D, E>,
    model: PhantomData<fn(&Tensor<D, E>)>,
}

impl<D: Device, E: FloatElement, const DECOUPLED: bool> AdamOptimizer<D, E, DECOUPLED> {
    /// An optimizer for `model`'s parameters.
    pub fn new<M: Module<D, E>>(model: &M, config: AdamConfig) -> Self {
        let _ = model;
        AdamOptimizer { settings: Settings::new(config), slots: Slots::new(), model: PhantomData }
    }

    /// This optimizer with `group`'s settings for the parameters it selects
    /// (PyTorch's parameter groups; see [`ParamGroup`]). Groups are checked
    /// against each other when a step meets a parameter.
    pub fn with_group(mut self, group: ParamGroup<AdamConfig>) -> Self {
        self.settings = self.settings.with_group(group);
        self
    }

    /// The parameter groups, in the order they were added.
    pub fn param_groups(&self) -> impl Iterator<Item = &ParamGroup<AdamConfig>> {
        self.settings.groups()
    }

    /// This optimizer with its state (the moments and step counts) copied
    /// to `D2`, for the model moved there; see [`Sgd::to`](super::Sgd::to).
    /// Fails when `D2` is unavailable or out of memory.
    #[fallible]
    pub fn to<D2: Device>(&self) -> AdamOptimizer<D2, E, DECOUPLED> {
        Ok(AdamOptimizer { settings: self.settings.clone(), slots: move_slots(&self.slots)?, model: PhantomData })
    }
}

const EXP_AVG: &str = "exp_avg";
const EXP_AVG_SQ: &str = "exp_avg_sq";
const MAX_EXP_AVG_SQ: &str = "max_exp_avg_sq";
const STEP: &str = "step";

impl<D: Device, E: FloatElement, const DECOUPLED: bool> Optimizer<D, E> for AdamOptimizer<D, E, DECOUPLED> {
    fn try_step<M: ModelOn<D, E>>(&mut self, model: &mut M, grads: &Gradients) -> Result<()> {
        let op = if DECOUPLED { "AdamW::step" } else { "Adam::step" };
        let (settings, slots) = (&self.settings, &mut self.slots);
        let e = E::from_f64;
        for_each_parameter(op, model, grads, |name, p, g| {
            let c = settings.for_parameter::<D>(op, name, p.dims())?;
            let (b1, b2) = c.betas;
            let mut g = g.clone();
            if c.weight_decay != 0.0 {
                if DECOUPLED {
                    p.try_mul_assign(&Tensor::<D, E>::try_scalar(e(1.0 - c.lr * c.weight_decay))?)?;
                } else {
                    g = g.try_add(&p.try_mul_scalar(e(c.weight_decay))?)?;
                }
            }
            let state = slots.entry(name.to_string()).or_default();
            let (m, v, step) = match (state.remove(EXP_AVG), state.remove(EXP_AVG_SQ), state.remove(STEP)) {
                (Some(m), Some(v), Some(step)) => {
                    check_slot("Adam", name, &m, p)?;
                    check_slot("Adam", name, &v, p)?;
                    (m, v, step.try_item()?.to_f64())
                }
                _ => (p.try_zeros_like()?, p.try_zeros_like()?, 0.0),
            };
            let step = step + 1.0;
            let m = m.try_mul_scalar(e(b1))?.try_add(&g.try_mul_scalar(e(1.0 - b1))?)?;
            let v = v.try_mul_scalar(e(b2))?.try_add(&g.try_square()?.try_mul_scalar(e(1.0 - b2))?)?;
            let (correction1, correction2) = (1.0 - b1.powf(step), 1.0 - b2.powf(step));
            let v_max = match (c.amsgrad, state.remove(MAX_EXP_AVG_SQ)) {
                (false, _) => None,
                (true, None) => Some(v.clone()),
                (true, Some(v_max)) => {
                    check_slot("Adam", name, &v_max, p)?;
                    Some(v_max.try_maximum(&v)?)
                }
            };
            let denom = v_max
                .as_ref()
                .unwrap_or(&v)
                .try_sqrt()?
                .try_mul_scalar(e(1.0 / correction2.sqrt()))?
                .try_add_scalar(e(c.eps))?;
            p.try_sub_assign(&m.try_div(&denom)?.try_mul_scalar(e(c.lr / correction1))?)?;
            state.insert(EXP_AVG, m);
            state.insert(EXP_AVG_SQ, v);
            if let Some(v_max) = v_max {
                state.insert(MAX_EXP_AVG_SQ, v_max);
            }
            state.insert(STEP, Tensor::try_scalar(e(step))?);
            Ok(())
        })
    }

    fn lr(&self) -> f64 {
        self.settings.lr()
    }

    fn set_lr(&mut self, lr: f64) {
        self.settings.set_lr(lr);
    }

    fn set_momentum(&mut self, momentum: f64) {
        self.settings.set_momentum(momentum);
    }

    fn state(&self) -> Vec<(String, Tensor<D, E>)> {
        let mut state = flatten_state(&self.slots);
        state.extend(self.settings.state());
        state
    }

    fn try_load_state<DS: Device>(&mut self, state: Vec<(String, Tensor<DS, E>)>) -> Result<()>
    where
        D: SameDevice<DS>,
    {
        let state = self.settings.load_state("Adam", state)?;
        self.slots = unflatten_state("Adam", state, &[EXP_AVG, EXP_AVG_SQ, MAX_EXP_AVG_SQ, STEP])?;
        Ok(())
    }
}
