//! The optimizers whose step is one formula per parameter with state of
//! its own (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam): each is an
//! [`UpdateRule`], its settings type, and [`RuleOptimizer`] does the rest
//! (parameter groups, state in checkpoints, moving between devices) once
//! for all of them.

use super::groups::{GroupConfig, Settings};
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
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// The settings of an optimizer whose step updates each parameter from its
/// gradient and state of its own: the formula, and the names of its state
/// (PyTorch's, such as `square_avg`, so that a reader of a checkpoint finds
/// what PyTorch's `state_dict` holds). [`RuleOptimizer`] runs it.
pub trait UpdateRule: GroupConfig + std::fmt::Debug + Send + Sync + 'static {
    /// PyTorch's class name (`RMSprop`), in errors.
    const NAME: &'static str;
    /// The op name of a step in errors (`RMSprop::step`).
    const STEP: &'static str;
    /// The names of the per-parameter state, `step` among them.
    const SLOTS: &'static [&'static str];

    /// Updates `p` in place from its gradient `g` (PyTorch's step for one
    /// parameter), reading and writing its state in `state`.
    fn update<D: Device, E: FloatElement>(
        &self,
        state: &mut ParamState<'_, D, E>,
        p: &mut Tensor<D, E>,
        g: Tensor<D, E>,
    ) -> Result<()>;
}

/// The state of one parameter during an [`UpdateRule`]'s step: its slots
/// by name, created on the first step.
pub struct ParamState<'a, D: Device, E: FloatElement> {
    op: &'static str,
    name: &'a str,
    slots: &'a mut BTreeMap<&'static str, Tensor<D, E>>,
}

/// The state slot that counts steps, as PyTorch's optimizers name it.
pub(crate) const STEP: &str = "step";

impl<D: Device, E: FloatElement> ParamState<'_, D, E> {
    /// The slot `slot`, or `init()` on the first step. Fails when a loaded
    /// state does not have the parameter's shape.
    pub fn get_or(
        &self,
        slot: &str,
        p: &Tensor<D, E>,
        init: impl FnOnce() -> Result<Tensor<D, E>>,
    ) -> Result<Tensor<D, E>> {
        match self.slots.get(slot) {
            Some(t) => {
                check_slot(self.op, self.name, t, p)?;
                Ok(t.clone())
            }
            None => init(),
        }
    }

    /// The slot `slot`, zeros of `p`'s shape on the first step.
    pub fn get_or_zeros(&self, slot: &str, p: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.get_or(slot, p, || p.try_zeros_like())
    }

    /// Stores `value` as the slot `slot`, for the next step and checkpoints.
    pub fn set(&mut self, slot: &'static str, value: Tensor<D, E>) {
        self.slots.insert(slot, value.detach());
    }

    /// The scalar slot `slot` (a count or a product PyTorch keeps as a
    /// rank-0 tensor), `init` on the first step.
    pub fn scalar(&self, slot: &str, init: f64) -> Result<f64> {
        match self.slots.get(slot) {
            Some(t) => Ok(t.try_item()?.to_f64()),
            None => Ok(init),
        }
    }

    /// Stores `value` as the scalar slot `slot`, in the parameter's type.
    pub fn set_scalar(&mut self, slot: &'static str, value: f64) -> Result<()> {
        self.set(slot, Tensor::try_scalar(E::from_f64(value))?);
        Ok(())
    }

    /// The number of this step, counting from 1, kept as the `step` slot
    /// (a scalar, as in PyTorch's state).
    pub fn next_step(&mut self) -> Result<f64> {
        let step = self.scalar(STEP, 0.0)? + 1.0;
        self.set_scalar(STEP, step)?;
        Ok(step)
    }
}

/// The gradient with an L2 penalty, `g + weight_decay · p`: the weight decay
/// of PyTorch's optimizers (all but the `decoupled_weight_decay` forms).
pub(crate) fn l2_penalty<D: Device, E: FloatElement>(
    g: Tensor<D, E>,
    p: &Tensor<D, E>,
    weight_decay: f64,
) -> Result<Tensor<D, E>> {
    match weight_decay {
        0.0 => Ok(g),
        _ => g.try_add(&p.try_mul_scalar(E::from_f64(weight_decay))?),
    }
}

/// Decoupled weight decay, `p *= 1 - lr · weight_decay` (AdamW's).
pub(crate) fn decay_weight<D: Device, E: FloatElement>(p: &mut Tensor<D, E>, lr: f64, weight_decay: f64) -> Result<()> {
    match weight_decay {
        0.0 => Ok(()),
        _ => p.try_mul_assign(&Tensor::<D, E>::try_scalar(E::from_f64(1.0 - lr * weight_decay))?),
    }
}

/// An optimizer that runs the [`UpdateRule`] `C` on every parameter:
/// [`RmsProp`](super::RmsProp), [`Adagrad`](super::Adagrad) and the others
/// are this type with their settings. Made for one model, whose device it
/// takes; its state lives there.
#[derive(Clone, Debug)]
pub struct RuleOptimizer<D: Device, E: FloatElement, C: UpdateRule> {
    settings: Settings<C>,
    slots: Slots<D, E>,
    model: PhantomData<fn(&Tensor<D, E>)>,
}

impl<D: Device, E: FloatElement, C: UpdateRule> RuleOptimizer<D, E, C> {
    /// An optimizer for `model`'s parameters.
    pub fn new<M: Module<D, E>>(model: &M, config: C) -> Self {
        let _ = model;
        RuleOptimizer { settings: Settings::new(config), slots: Slots::new(), model: PhantomData }
    }

    /// This optimizer with `group`'s settings for the parameters it selects
    /// (PyTorch's parameter groups; see [`ParamGroup`]).
    pub fn with_group(mut self, group: ParamGroup<C>) -> Self {
        self.settings = self.settings.with_group(group);
        self
    }

    /// The parameter groups, in the order they were added.
    pub fn param_groups(&self) -> impl Iterator<Item = &ParamGroup<C>> {
        self.settings.groups()
    }

    /// This optimizer with its state copied to `D2`, for the model moved
    /// there; see [`Sgd::to`](super::Sgd::to). Fails when `D2` is
    /// unavailable or out of memory.
    #[fallible]
    pub fn to<D2: Device>(&self) -> RuleOptimizer<D2, E, C> {
        Ok(RuleOptimizer { settings: self.settings.clone(), slots: move_slots(&self.slots)?, model: PhantomData })
    }
}

impl<D: Device, E: FloatElement, C: UpdateRule> Optimizer<D, E> for RuleOptimizer<D, E, C> {
    fn try_step<M: ModelOn<D, E>>(&mut self, model: &mut M, grads: &Gradients) -> Result<()> {
        let (settings, slots) = (&self.settings, &mut self.slots);
        for_each_parameter(C::STEP, model, grads, |name, p, g| {
            let config = settings.for_parameter::<D>(C::STEP, name, p.dims())?;
            let slots = slots.entry(name.to_string()).or_default();
            // The rule writes its new state into a copy, so that a step
            // that fails halfway leaves the parameter's state as it was.
            let mut updated = slots.clone();
            config.update(&mut ParamState { op: C::NAME, name, slots: &mut updated }, p, g.clone())?;
            *slots = updated;
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
        let state = self.settings.load_state(C::NAME, state)?;
        self.slots = unflatten_state(C::NAME, state, C::SLOTS)?;
        Ok(())
    }
}
