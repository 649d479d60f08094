//! Stochastic gradient descent with momentum.

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

/// The settings of [`Sgd`], PyTorch's defaults by `Default` (with a
/// learning rate of 0.01; PyTorch has none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// The learning rate.
    pub lr: f64,
    /// The momentum factor (0: none).
    pub momentum: f64,
    /// Dampening of the momentum.
    pub dampening: f64,
    /// Nesterov momentum (needs a momentum and no dampening).
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 0.01, momentum: 0.0, dampening: 0.0, nesterov: false, weight_decay: 0.0 }
    }
}

/// PyTorch's `torch.optim.SGD`: with `g` the gradient plus `weight_decay · p`,
/// the momentum buffer is `b = momentum · b + (1 - dampening) · g` (`b = g` at
/// the first step), the step direction is `g + momentum · b` (Nesterov) or
/// `b`, and `p -= lr · direction`.
///
/// Made for one model, whose device it takes; applied to a model on another
/// device it does not compile:
/// ```compile_fail,E0277
/// use devtensor::nn::Linear;
/// use devtensor::optim::{Optimizer, Sgd};
/// use devtensor::{Cpu, Cuda, Gradients};
/// fn train(opt: &mut Sgd<Cuda<0>>, model: &mut Linear<Cpu>, grads: &Gradients) {
///     opt.step(model, grads); // error: `Linear<Cpu>` is not a module on `Cuda<0>`
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Sgd<D: Device, E: FloatElement = f32> {
    settings: Settings<SgdConfig>,
    buffers: Slots<D, E>,
    model: PhantomData<fn(&Tensor<D, E>)>,
}

impl<D: Device, E: FloatElement> Sgd<D, E> {
    /// An optimizer for `model`'s parameters.
    pub fn new<M: Module<D, E>>(model: &M, config: SgdConfig) -> Self {
        let _ = model;
        Sgd { settings: Settings::new(config), buffers: Slots::new(), model: PhantomData }
    }

    /// This optimizer with `group`'s settings for the parameters it selects
    /// (PyTorch's parameter groups; see [`ParamGroup`]).
    pub fn with_group(mut self, group: ParamGroup<SgdConfig>) -> Self {
        self.settings = self.settings.with_group(group);
        self
    }

    /// The parameter groups, in the order they were added.
    pub fn param_groups(&self) -> impl Iterator<Item = &ParamGroup<SgdConfig>> {
        self.settings.groups()
    }

    /// This optimizer with its state (the momentum buffers) copied to
    /// `D2`, for the model moved there. Making the optimizer after moving
    /// the model is simpler; this is for an optimizer that has state
    /// already. Fails when `D2` is unavailable or out of memory.
    ///
    /// ```
    /// use devtensor::nn::{Linear, Module};
    /// use devtensor::optim::{Optimizer, Sgd, SgdConfig};
    /// use devtensor::{Cpu, Tensor};
    /// let mut model = Linear::<Cpu>::new(2, 1);
    /// let mut opt = Sgd::new(&model, SgdConfig { momentum: 0.9, ..Default::default() });
    /// let grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
    /// opt.step(&mut model, &grads);
    /// let (model, opt) = (model.to::<Cpu>(), opt.to::<Cpu>()); // or `Cuda<0>`: both move
    /// // Two momentum buffers, and the learning rate and weight decay.
    /// assert_eq!(opt.state().len(), 4);
    /// # let _ = model;
    /// ```
    #[fallible]
    pub fn to<D2: Device>(&self) -> Sgd<D2, E> {
        Ok(Sgd { settings: self.settings.clone(), buffers: move_slots(&self.buffers)?, model: PhantomData })
    }
}

const MOMENTUM: &str = "momentum_buffer";

impl<D: Device, E: FloatElement> Optimizer<D, E> for Sgd<D, E> {
    fn try_step<M: ModelOn<D, E>>(&mut self, model: &mut M, grads: &Gradients) -> Result<()> {
        const OP: &str = "Sgd::step";
        let (settings, buffers) = (&self.settings, &mut self.buffers);
        for_each_parameter(OP, model, grads, |name, p, g| {
            let c = settings.for_parameter::<D>(OP, name, p.dims())?;
            let mut g = g.clone();
            if c.weight_decay != 0.0 {
                g = g.try_add(&p.try_mul_scalar(E::from_f64(c.weight_decay))?)?;
            }
            if c.momentum != 0.0 {
                let slots = buffers.entry(name.to_string()).or_default();
                let buf = match slots.remove(MOMENTUM) {
                    Some(b) => {
                        check_slot("Sgd", name, &b, p)?;
                        b.try_mul_scalar(E::from_f64(c.momentum))?
                            .try_add(&g.try_mul_scalar(E::from_f64(1.0 - c.dampening))?)?
                    }
                    None => g.clone(),
                };
                g = if c.nesterov { g.try_add(&buf.try_mul_scalar(E::from_f64(c.momentum))?)? } else { buf.clone() };
                slots.insert(MOMENTUM, buf);
            }
            p.try_sub_assign(&g.try_mul_scalar(E::from_f64(c.lr))?)
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
        let mut state = flatten_state(&self.buffers);
        state.extend(self.settings.state());
        state
    }

    fn try_load_state<DS: Device>(&mut self, state: Vec<(String, Tensor<DS, E>)>) -> Result<()>
    where
        D: SameDevice<DS>,
    {
        let state = self.settings.load_state("Sgd", state)?;
        self.buffers = unflatten_state("Sgd", state, &[MOMENTUM])?;
        Ok(())
    }
}
