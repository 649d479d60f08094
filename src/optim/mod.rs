//! Optimizers and learning-rate schedules: PyTorch's `SGD`, `Adam`,
//! `AdamW` (with `amsgrad`), `RMSprop`, `Adagrad`, `Adadelta`, `Adamax`,
//! `NAdam` and `RAdam`; the schedules of `torch.optim.lr_scheduler`, as
//! functions of the epoch, and `ReduceLROnPlateau`, which follows a metric.
//!
//! An optimizer is made for a model (`Sgd::new(&model, ..)`) and takes its
//! device and element type from it; its state (momentum, Adam's moments)
//! lives on that device. Applied to a model on another device it does not
//! compile. There is no `zero_grad`: [`backward`](crate::Tensor::backward)
//! returns fresh [`Gradients`] each time, which [`Optimizer::step`] reads.
//!
//! ```
//! use devtensor::nn::{Linear, Module, mse_loss, Reduction};
//! use devtensor::optim::{Optimizer, Sgd, SgdConfig};
//! use devtensor::{Cpu, Tensor};
//! let mut model = Linear::<Cpu>::new(1, 1);
//! let mut opt = Sgd::new(&model, SgdConfig { lr: 0.1, ..Default::default() });
//! let x = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 3.0], [4, 1]);
//! let y = &x * 2.0 + 1.0;
//! for _ in 0..500 {
//!     let loss = mse_loss(&model.forward(&x), &y, Reduction::Mean);
//!     opt.step(&mut model, &loss.backward());
//! }
//! assert!((model.weight.item() - 2.0).abs() < 1e-3);
//! ```

mod adam;
mod adam_variants;
mod adaptive;
pub(crate) mod clip;
mod groups;
mod plateau;
mod rule;
pub(crate) mod scaler;
mod schedule;
mod sgd;

pub use adam::{Adam, AdamConfig, AdamW};
pub use adam_variants::{Adamax, AdamaxConfig, NAdam, NAdamConfig, RAdam, RAdamConfig};
pub use adaptive::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, RmsProp, RmsPropConfig};
pub use clip::{clip_grad_norm, clip_grad_value, try_clip_grad_norm, try_clip_grad_value};
pub use groups::{GroupConfig, ParamGroup};
pub use plateau::{PlateauConfig, PlateauMode, ReduceLrOnPlateau, ThresholdMode};
pub use rule::{ParamState, RuleOptimizer, UpdateRule};
pub use scaler::GradScaler;
pub use schedule::{
    ConstantLr, CosineAnnealingLr, CosineAnnealingWarmRestarts, ExponentialLr, LambdaLr, LinearLr, LrSchedule,
    MultiStepLr, MultiplicativeLr, OneCycleLr, PolynomialLr, SequentialLr, StepLr,
};
pub use sgd::{Sgd, SgdConfig};

use crate::autograd::{Gradients, LeafId, no_grad};
use crate::element::FloatElement;
use crate::error::{Error, Result, short_type_name};
use crate::nn::{Module, TensorKind};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device_owned};
use devtensor_macros::fallible;
use std::collections::{BTreeMap, HashMap};

/// The settings of an optimizer, from which one can be made for a model on
/// any device: what data-parallel training uses to give every replica its
/// own optimizer.
///
/// ```
/// use devtensor::nn::Linear;
/// use devtensor::optim::{Optimizer, OptimizerConfig, SgdConfig};
/// use devtensor::Cpu;
/// let model = Linear::<Cpu>::new(2, 1);
/// let opt = SgdConfig { lr: 0.1, ..Default::default() }.build(&model);
/// assert_eq!(opt.lr(), 0.1);
/// ```
pub trait OptimizerConfig: Clone + Send + Sync + 'static {
    /// The optimizer it makes for a model on `D`.
    type For<D: Device>: Optimizer<D> + Send + 'static;

    /// An optimizer for `model`, with its state on `model`'s device.
    fn build<D: Device, M: Module<D>>(&self, model: &M) -> Self::For<D>;
}

impl OptimizerConfig for SgdConfig {
    type For<D: Device> = Sgd<D>;

    fn build<D: Device, M: Module<D>>(&self, model: &M) -> Sgd<D> {
        Sgd::new(model, *self)
    }
}

impl OptimizerConfig for AdamConfig {
    type For<D: Device> = Adam<D>;

    fn build<D: Device, M: Module<D>>(&self, model: &M) -> Adam<D> {
        Adam::new(model, *self)
    }
}

/// Every [`UpdateRule`]'s settings ([`RmsPropConfig`], [`AdagradConfig`],
/// ...) make its [`RuleOptimizer`].
impl<C: UpdateRule> OptimizerConfig for C {
    type For<D: Device> = RuleOptimizer<D, f32, C>;

    fn build<D: Device, M: Module<D>>(&self, model: &M) -> RuleOptimizer<D, f32, C> {
        RuleOptimizer::new(model, *self)
    }
}

/// The settings of an [`AdamW`] optimizer, as an [`OptimizerConfig`] (the
/// settings themselves are Adam's; `Default` gives PyTorch's `AdamW`
/// defaults, with `weight_decay = 0.01`).
///
/// ```
/// use devtensor::nn::Linear;
/// use devtensor::optim::{AdamConfig, AdamWConfig, Optimizer, OptimizerConfig};
/// use devtensor::Cpu;
/// let model = Linear::<Cpu>::new(2, 1);
/// let opt = AdamWConfig(AdamConfig { lr: 3e-4, ..AdamConfig::adamw() }).build(&model);
/// assert_eq!(opt.lr(), 3e-4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig(pub AdamConfig);

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig(AdamConfig::adamw())
    }
}

impl OptimizerConfig for AdamWConfig {
    type For<D: Device> = AdamW<D>;

    fn build<D: Device, M: Module<D>>(&self, model: &M) -> AdamW<D> {
        AdamW::new(model, self.0)
    }
}

/// A model an optimizer for `D` can step: any [`Module`] on `D`. This
/// trait only exists to say, when a model on another device is stepped,
/// what to do about it.
#[diagnostic::on_unimplemented(
    message = "this optimizer keeps its state on `{D}`, but `{Self}` is not a model on `{D}`",
    label = "the optimizer was made for a model on `{D}`",
    note = "an optimizer works on the device of the model it was made for: make it after moving the model \
            (`Sgd::new(&model, config)` once `model` is on its device), or move the optimizer with `opt.to::<..>()`"
)]
pub trait ModelOn<D: Device, E: FloatElement = f32>: Module<D, E> {}

#[diagnostic::do_not_recommend]
impl<D: Device, E: FloatElement, M: Module<D, E>> ModelOn<D, E> for M {}

/// An optimizer for models whose tensors live on `D` with elements `E`.
pub trait Optimizer<D: Device, E: FloatElement = f32> {
    /// Updates every parameter of `model` that has a gradient in `grads`,
    /// in place (parameters without one are left as they are, as in
    /// PyTorch); a tied parameter (one tensor under two names) is updated
    /// once. Fails when a device operation fails, when `model` is not the
    /// model whose state this optimizer holds (a parameter's name or shape
    /// differs), and when `grads` holds a gradient for none of the model's
    /// parameters: they came from another model or another copy of this
    /// one, and the step would silently change nothing.
    ///
    /// ```
    /// use devtensor::nn::{Linear, Module};
    /// use devtensor::optim::{Optimizer, Sgd, SgdConfig};
    /// use devtensor::{Cpu, Tensor};
    /// let mut model = Linear::<Cpu>::new(2, 1);
    /// let mut opt = Sgd::new(&model, SgdConfig::default());
    /// let stale = model.to::<Cpu>(); // a copy, with parameters of its own
    /// let grads = stale.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
    /// let err = opt.try_step(&mut model, &grads).unwrap_err();
    /// assert!(err.to_string().starts_with("Sgd::step on Cpu: none of the 2 parameters of `Linear<Cpu>` has a gradient here"));
    /// ```
    #[fallible]
    fn step<M: ModelOn<D, E>>(&mut self, model: &mut M, grads: &Gradients);

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Sets the learning rate (what a schedule does each epoch).
    fn set_lr(&mut self, lr: f64);

    /// Sets the momentum, in every parameter group: SGD's `momentum`, or
    /// Adam's first beta, as PyTorch's `OneCycleLR` cycles them (what
    /// [`OneCycleLr`] does each step).
    fn set_momentum(&mut self, momentum: f64);

    /// The state, as named tensors on `D` for a checkpoint: for each
    /// parameter `p`, entries such as `p.momentum_buffer` or `p.exp_avg`, and
    /// `p.step` where the optimizer counts steps.
    fn state(&self) -> Vec<(String, Tensor<D, E>)>;

    /// Replaces the state with `state`, as [`state`](Self::state) returned
    /// it (possibly saved on another device and loaded onto this one: load
    /// the checkpoint for this optimizer's device). Fails on a name this
    /// optimizer does not use. State on another device does not compile.
    #[fallible]
    fn load_state<DS: Device>(&mut self, state: Vec<(String, Tensor<DS, E>)>)
    where
        D: SameDevice<DS>;
}

/// Runs `update(name, parameter, gradient)` under `no_grad` for every
/// parameter of `model` that has a gradient, stopping at the first error.
///
/// A parameter held under two names (tied weights) is updated once, under
/// its first name; its other names then get the updated tensor, so that
/// they stay one tensor as in PyTorch. Fails, having updated nothing, when
/// `grads` holds none of the model's gradients ([`no_gradient_reaches`]).
fn for_each_parameter<D: Device, E: FloatElement, M: Module<D, E>>(
    op: &'static str,
    model: &mut M,
    grads: &Gradients,
    mut update: impl FnMut(&str, &mut Tensor<D, E>, &Tensor<D, E>) -> Result<()>,
) -> Result<()> {
    let mut outcome = Ok(());
    let mut seen: HashMap<LeafId, Option<Tensor<D, E>>> = HashMap::new();
    no_grad(|| {
        model.visit_mut("", &mut |name, kind, p| {
            if kind != TensorKind::Parameter || outcome.is_err() {
                return;
            }
            let Some(id) = p.leaf_id() else { return };
            match seen.get(&id) {
                Some(Some(first)) => *p = first.clone(),
                Some(None) => {}
                None => {
                    let updated = grads.get(p).map(|g| update(name, p, g).map(|()| p.clone()));
                    match updated.transpose() {
                        Ok(updated) => {
                            seen.insert(id, updated);
                        }
                        Err(e) => outcome = Err(e),
                    }
                }
            }
        })
    });
    outcome?;
    // Nothing was updated when no parameter had a gradient.
    if !seen.is_empty() && seen.values().all(Option::is_none) {
        return Err(no_gradient_reaches::<D, M>(op, seen.len(), grads));
    }
    Ok(())
}

/// The error for a step or a clip whose `grads` hold a gradient for none of
/// the `parameters` parameters of a model `M`: the gradients were computed
/// from another model, or from another copy of this one (made by `.to()`,
/// a clone of its tensors, or a checkpoint loaded since), and the step or
/// clip would silently do nothing. Parameters without a gradient are fine
/// as long as one has one (unused parameters, as in PyTorch).
pub(crate) fn no_gradient_reaches<D: Device, M>(op: &'static str, parameters: usize, grads: &Gradients) -> Error {
    let held = match grads.len() {
        0 => "the `Gradients` given are empty".to_string(),
        n => format!("the `Gradients` given hold {n}, for tensors on {}", grads.devices().join(" and ")),
    };
    Error::Argument {
        op,
        device: D::name(),
        reason: format!(
            "none of the {parameters} parameters of `{}` has a gradient here ({held}): they were computed from \
             another model or another copy of this one (a loss computed before `model.to::<{}>()`, say); compute \
             the loss with this model, then call `backward`",
            short_type_name::<M>(),
            D::name(),
        ),
    }
}

/// Per-parameter state tensors, by parameter name and then by slot name.
type Slots<D, E> = BTreeMap<String, BTreeMap<&'static str, Tensor<D, E>>>;

/// The state entries `param.slot` of `slots`, sorted by name.
fn flatten_state<D: Device, E: FloatElement>(slots: &Slots<D, E>) -> Vec<(String, Tensor<D, E>)> {
    let mut out = Vec::new();
    for (param, entries) in slots {
        for (slot, t) in entries {
            out.push((format!("{param}.{slot}"), t.clone()));
        }
    }
    out
}

/// The inverse of [`flatten_state`], accepting only the slot names in `known`.
fn unflatten_state<D: Device, DS: Device, E: FloatElement>(
    op: &'static str,
    state: Vec<(String, Tensor<DS, E>)>,
    known: &[&'static str],
) -> Result<Slots<D, E>>
where
    D: SameDevice<DS>,
{
    let mut slots: Slots<D, E> = BTreeMap::new();
    for (name, t) in state {
        let t: Tensor<D, E> = same_device_owned(t);
        let slot = known.iter().find(|&&slot| name.strip_suffix(slot).is_some_and(|p| p.ends_with('.')));
        let Some(&slot) = slot else {
            return Err(Error::Argument {
                op,
                device: D::name(),
                reason: format!("unknown optimizer state `{name}` (expected `<parameter>.<{}>`)", known.join("|")),
            });
        };
        let param = &name[..name.len() - slot.len() - 1];
        slots.entry(param.to_string()).or_default().insert(slot, t.detach());
    }
    Ok(slots)
}

/// The state of an optimizer moved to `D2`: what `to` on an optimizer does.
fn move_slots<D: Device, D2: Device, E: FloatElement>(slots: &Slots<D, E>) -> Result<Slots<D2, E>> {
    let mut moved = BTreeMap::new();
    for (param, entries) in slots {
        let mut on = BTreeMap::new();
        for (&slot, t) in entries {
            on.insert(slot, t.try_to::<D2>()?);
        }
        moved.insert(param.clone(), on);
    }
    Ok(moved)
}

/// Checks that a state tensor fits its parameter.
fn check_slot<D: Device, E: FloatElement>(
    op: &'static str,
    name: &str,
    slot: &Tensor<D, E>,
    p: &Tensor<D, E>,
) -> Result<()> {
    if slot.shape() != p.shape() {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![p.shape().clone(), slot.shape().clone()],
            reason: format!("the state of parameter `{name}` does not have its shape: is this the optimizer's model?"),
        });
    }
    Ok(())
}
