//! Parameter groups: PyTorch's `param_groups`, settings of their own for
//! the parameters a group selects by name and shape (no weight decay on
//! biases and norms, a smaller learning rate for a pretrained backbone).

use super::{
    AdadeltaConfig, AdagradConfig, AdamConfig, AdamaxConfig, NAdamConfig, RAdamConfig, RmsPropConfig, SgdConfig,
};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use std::fmt;
use std::sync::Arc;

/// Which parameters a group holds: `select(name, dims)`.
type Selector = Arc<dyn Fn(&str, &[usize]) -> bool + Send + Sync>;

/// Parameters with settings of their own, PyTorch's
/// `{"params": [...], "weight_decay": 0.0}`: the parameters for which
/// `select(name, dims)` holds, given to an optimizer with
/// [`Sgd::with_group`](super::Sgd::with_group) or
/// [`AdamW`](super::AdamW)'s `with_group`. Parameters no
/// group selects use the optimizer's own settings; one that two groups
/// select makes the step fail, as PyTorch refuses a parameter in two groups.
///
/// The nanoGPT recipe, weight decay on matrices only:
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{AdamConfig, AdamW, Optimizer, ParamGroup};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(3, 2);
/// let config = AdamConfig { lr: 1e-3, weight_decay: 0.1, ..AdamConfig::adamw() };
/// let no_decay = ParamGroup::new("no_decay", AdamConfig { weight_decay: 0.0, ..config }, |_, dims| dims.len() < 2);
/// let mut opt = AdamW::new(&model, config).with_group(no_decay);
/// let bias = model.bias.as_ref().unwrap().to_vec();
/// // A zero gradient: only weight decay moves a parameter.
/// let grads = (model.forward(&Tensor::<Cpu>::ones([1, 3])) * 0.0).sum().backward();
/// opt.step(&mut model, &grads);
/// assert_eq!(model.bias.as_ref().unwrap().to_vec(), bias);
/// ```
#[derive(Clone)]
pub struct ParamGroup<C> {
    label: String,
    select: Selector,
    config: C,
}

impl<C> ParamGroup<C> {
    /// The parameters for which `select(name, dims)` holds (names as
    /// [`Module::named_tensors`](crate::nn::Module::named_tensors) gives
    /// them), with `config`. `label` names the group in checkpoints and
    /// errors.
    pub fn new(
        label: impl Into<String>,
        config: C,
        select: impl Fn(&str, &[usize]) -> bool + Send + Sync + 'static,
    ) -> Self {
        ParamGroup { label: label.into(), select: Arc::new(select), config }
    }

    /// The parameters named in `names`, with `config`.
    ///
    /// ```
    /// use devtensor::optim::{ParamGroup, SgdConfig};
    /// let head = ParamGroup::named("head", SgdConfig { lr: 0.1, ..Default::default() }, ["fc.weight", "fc.bias"]);
    /// assert_eq!(head.label(), "head");
    /// ```
    pub fn named<S: AsRef<str>>(label: impl Into<String>, config: C, names: impl IntoIterator<Item = S>) -> Self {
        let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_string()).collect();
        Self::new(label, config, move |name, _| names.iter().any(|n| n == name))
    }

    /// The group's name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The group's settings.
    pub fn config(&self) -> &C {
        &self.config
    }
}

impl<C: fmt::Debug> fmt::Debug for ParamGroup<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamGroup").field("label", &self.label).field("config", &self.config).finish_non_exhaustive()
    }
}

/// The settings a group can override and a checkpoint keeps: implemented
/// by the settings of every optimizer ([`SgdConfig`], [`AdamConfig`], ...).
pub trait GroupConfig: Copy {
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Sets the learning rate.
    fn set_lr(&mut self, lr: f64);
    /// The weight decay.
    fn weight_decay(&self) -> f64;
    /// Sets the weight decay.
    fn set_weight_decay(&mut self, weight_decay: f64);
    /// Sets the momentum (SGD's, or Adam's first beta).
    fn set_momentum(&mut self, momentum: f64);
}

/// Both configs name their rate `lr` and their decay `weight_decay`.
macro_rules! group_config {
    ($($config:ty => |$c:ident, $m:ident| $set_momentum:expr),*) => {$(
        impl GroupConfig for $config {
            fn set_momentum(&mut self, momentum: f64) {
                let ($c, $m) = (self, momentum);
                $set_momentum
            }
            fn lr(&self) -> f64 {
                self.lr
            }
            fn set_lr(&mut self, lr: f64) {
                self.lr = lr;
            }
            fn weight_decay(&self) -> f64 {
                self.weight_decay
            }
            fn set_weight_decay(&mut self, weight_decay: f64) {
                self.weight_decay = weight_decay;
            }
        }
    )*};
}

// The momentum a schedule cycles: SGD's and RMSprop's own, the first beta
// of the Adam family; Adagrad and Adadelta have none.
group_config!(
    SgdConfig => |c, m| c.momentum = m,
    RmsPropConfig => |c, m| c.momentum = m,
    AdamConfig => |c, m| c.betas.0 = m,
    AdamaxConfig => |c, m| c.betas.0 = m,
    NAdamConfig => |c, m| c.betas.0 = m,
    RAdamConfig => |c, m| c.betas.0 = m,
    AdagradConfig => |_c, _m| (),
    AdadeltaConfig => |_c, _m| ()
);

/// An optimizer's settings: its own, and its groups'. Each group keeps its
/// learning rate's ratio to the optimizer's own through
/// [`set_lr`](Self::set_lr), as a PyTorch schedule scales every group from
/// its own initial rate.
#[derive(Clone, Debug)]
pub(crate) struct Settings<C> {
    base: C,
    groups: Vec<(ParamGroup<C>, f64)>,
}

/// A group's learning rate over the optimizer's: what `set_lr` keeps. With
/// no rate of its own to scale, the optimizer's sets the group's.
fn lr_ratio<C: GroupConfig>(base: &C, group: &C) -> f64 {
    if base.lr() == 0.0 { 1.0 } else { group.lr() / base.lr() }
}

/// Where a group's settings live in an optimizer's state.
const PREFIX: &str = "param_groups.";

impl<C: GroupConfig> Settings<C> {
    pub(crate) fn new(base: C) -> Self {
        Settings { base, groups: Vec::new() }
    }

    pub(crate) fn with_group(mut self, group: ParamGroup<C>) -> Self {
        let ratio = lr_ratio(&self.base, &group.config);
        self.groups.push((group, ratio));
        self
    }

    pub(crate) fn lr(&self) -> f64 {
        self.base.lr()
    }

    pub(crate) fn set_momentum(&mut self, momentum: f64) {
        self.base.set_momentum(momentum);
        for (group, _) in &mut self.groups {
            group.config.set_momentum(momentum);
        }
    }

    pub(crate) fn set_lr(&mut self, lr: f64) {
        self.base.set_lr(lr);
        for (group, ratio) in &mut self.groups {
            group.config.set_lr(lr * *ratio);
        }
    }

    /// The groups, in the order they were added.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &ParamGroup<C>> {
        self.groups.iter().map(|(g, _)| g)
    }

    /// The settings of the parameter `name` of shape `dims`: its group's,
    /// else the optimizer's own. Fails when two groups select it.
    pub(crate) fn for_parameter<D: Device>(&self, op: &'static str, name: &str, dims: &[usize]) -> Result<C> {
        let mut chosen = self.groups().filter(|g| (g.select)(name, dims));
        match (chosen.next(), chosen.next()) {
            (Some(first), Some(second)) => Err(Error::Argument {
                op,
                device: D::name(),
                reason: format!(
                    "parameter `{name}` is in two parameter groups, `{}` and `{}`; a parameter belongs to one group",
                    first.label, second.label
                ),
            }),
            (Some(group), None) => Ok(group.config),
            _ => Ok(self.base),
        }
    }

    /// The learning rate and weight decay, the optimizer's own as the state
    /// entries `param_groups.lr` and `param_groups.weight_decay`, each
    /// group's as `param_groups.<label>.lr` and `.weight_decay`.
    pub(crate) fn state<D: Device, E: FloatElement>(&self) -> Vec<(String, Tensor<D, E>)> {
        let entries = |prefix: String, c: &C| {
            let scalar = |v: f64| Tensor::scalar(E::from_f64(v));
            [(format!("{prefix}lr"), scalar(c.lr())), (format!("{prefix}weight_decay"), scalar(c.weight_decay()))]
        };
        let mut state = entries(PREFIX.to_string(), &self.base).to_vec();
        for g in self.groups() {
            state.extend(entries(format!("{PREFIX}{}.", g.label), &g.config));
        }
        state
    }

    /// Takes the `param_groups.` entries out of `state` and applies them
    /// (a checkpoint's groups must be this optimizer's); returns the other
    /// entries. Each group's ratio to the optimizer's learning rate becomes
    /// the saved one.
    pub(crate) fn load_state<D: Device, E: FloatElement>(
        &mut self,
        op: &'static str,
        state: Vec<(String, Tensor<D, E>)>,
    ) -> Result<Vec<(String, Tensor<D, E>)>> {
        let labels = self.groups().map(|g| format!("`{}`", g.label)).collect::<Vec<_>>().join(", ");
        let mut rest = Vec::new();
        for (name, t) in state {
            let Some(entry) = name.strip_prefix(PREFIX) else {
                rest.push((name, t));
                continue;
            };
            let unknown = || Error::Argument {
                op,
                device: D::name(),
                reason: format!("unknown optimizer state `{name}` (this optimizer's groups: [{labels}])"),
            };
            let (label, setting) = entry.rsplit_once('.').map_or((None, entry), |(l, s)| (Some(l), s));
            let config = match label {
                None => &mut self.base,
                Some(label) => {
                    &mut self.groups.iter_mut().find(|(g, _)| g.label == label).ok_or_else(unknown)?.0.config
                }
            };
            let value = t.try_item()?.to_f64();
            match setting {
                "lr" => config.set_lr(value),
                "weight_decay" => config.set_weight_decay(value),
                _ => return Err(unknown()),
            }
        }
        for (group, ratio) in &mut self.groups {
            *ratio = lr_ratio(&self.base, &group.config);
        }
        Ok(rest)
    }
}
