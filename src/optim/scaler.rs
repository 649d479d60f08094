//! [`GradScaler`]: dynamic loss scaling for training with `f16` products,
//! with the semantics of PyTorch's `torch.amp.GradScaler`.
//!
//! `f16` holds numbers from about 6e-8 to 65504, and small gradients of a
//! half-precision product underflow to zero. Multiplying the loss by a
//! large scale before `backward` moves every gradient up into range; the
//! gradients are divided by it again before the optimizer sees them. A scale
//! too large makes some gradient overflow to inf: that step is skipped and
//! the scale halved, and after `growth_interval` steps without overflow the
//! scale doubles again. `bf16` has `f32`'s range and needs no scaler.

use super::clip::parameters_with_gradients;
use super::{ModelOn, Optimizer};
use crate::autograd::Gradients;
use crate::element::FloatElement;
use crate::error::Error;
use crate::nn::Module;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// Dynamic loss scaling, as PyTorch's `GradScaler`: scale the loss, unscale
/// the gradients (before clipping them), step unless a gradient is inf or
/// NaN, and update the scale.
///
/// The defaults are PyTorch's: a first scale of 2^16, doubled after 2000
/// steps in a row without overflow, halved on every overflow.
///
/// ```
/// use devtensor::nn::{Linear, Module};
/// use devtensor::optim::{GradScaler, Optimizer, Sgd, SgdConfig, clip_grad_norm};
/// use devtensor::{Cpu, Tensor};
/// let mut model = Linear::<Cpu>::new(2, 1);
/// let mut opt = Sgd::new(&model, SgdConfig { lr: 0.1, ..Default::default() });
/// let mut scaler = GradScaler::new();
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [1, 2]);
/// let loss = model.forward(&x).square().sum();
/// let mut grads = scaler.scale_loss(&loss).backward();
/// scaler.unscale(&model, &mut grads); // before clipping, which needs true gradients
/// clip_grad_norm(&model, &mut grads, 1.0, 2.0);
/// assert!(scaler.step(&mut opt, &mut model, &mut grads)); // no overflow: stepped
/// scaler.update();
/// assert_eq!(scaler.scale(), 65536.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GradScaler {
    scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u32,
    /// Steps without overflow since the scale last changed.
    growth_tracker: u32,
    /// Whether the gradients of this step were unscaled, and if so whether
    /// one of them was inf or NaN.
    found_inf: Option<bool>,
}

impl Default for GradScaler {
    fn default() -> Self {
        Self::new()
    }
}

/// Names of the scaler's entries in a checkpoint, in the order of
/// [`GradScaler::state`]. They are integer tensors, so that the state is
/// exact whatever the model's dtype (2^16 overflows `f16`): the scale and
/// the factors as the bits of their `f64`, the counts as they are.
pub(crate) const SCALER_STATE: [&str; 5] = [
    "scaler.scale_f64_bits",
    "scaler.growth_factor_f64_bits",
    "scaler.backoff_factor_f64_bits",
    "scaler.growth_interval",
    "scaler.growth_tracker",
];

impl GradScaler {
    /// A scaler with PyTorch's defaults: scale 2^16, growth factor 2,
    /// backoff factor 0.5, growth interval 2000.
    ///
    /// ```
    /// let scaler = devtensor::optim::GradScaler::new();
    /// assert_eq!(scaler.scale(), 65536.0);
    /// ```
    pub fn new() -> Self {
        GradScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            growth_tracker: 0,
            found_inf: None,
        }
    }

    /// The same scaler with a first scale of `scale` (PyTorch's `init_scale`).
    ///
    /// ```
    /// let scaler = devtensor::optim::GradScaler::new().with_init_scale(1024.0);
    /// assert_eq!(scaler.scale(), 1024.0);
    /// ```
    pub fn with_init_scale(mut self, scale: f64) -> Self {
        self.scale = scale;
        self
    }

    /// The same scaler multiplying its scale by `factor` after
    /// [`growth_interval`](Self::with_growth_interval) good steps.
    ///
    /// ```
    /// let scaler = devtensor::optim::GradScaler::new().with_growth_factor(4.0);
    /// # let _ = scaler;
    /// ```
    pub fn with_growth_factor(mut self, factor: f64) -> Self {
        self.growth_factor = factor;
        self
    }

    /// The same scaler multiplying its scale by `factor` on an overflow.
    ///
    /// ```
    /// let scaler = devtensor::optim::GradScaler::new().with_backoff_factor(0.25);
    /// # let _ = scaler;
    /// ```
    pub fn with_backoff_factor(mut self, factor: f64) -> Self {
        self.backoff_factor = factor;
        self
    }

    /// The same scaler growing its scale after `steps` steps in a row
    /// without overflow.
    ///
    /// ```
    /// let scaler = devtensor::optim::GradScaler::new().with_growth_interval(100);
    /// # let _ = scaler;
    /// ```
    pub fn with_growth_interval(mut self, steps: u32) -> Self {
        self.growth_interval = steps;
        self
    }

    /// The current scale (PyTorch's `get_scale`).
    ///
    /// ```
    /// assert_eq!(devtensor::optim::GradScaler::new().scale(), 65536.0);
    /// ```
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// `loss` times the scale, to call `backward` on.
    ///
    /// ```
    /// use devtensor::optim::GradScaler;
    /// use devtensor::{Cpu, Tensor};
    /// let scaled = GradScaler::new().with_init_scale(8.0).scale_loss(&Tensor::<Cpu>::scalar(0.5));
    /// assert_eq!(scaled.item(), 4.0);
    /// ```
    #[fallible]
    pub fn scale_loss<D: Device, E: FloatElement>(&self, loss: &Tensor<D, E>) -> Tensor<D, E> {
        loss.try_mul_scalar(E::from_f64(self.scale))
    }

    /// Divides every gradient of `model`'s parameters in `grads` by the
    /// scale, and notes whether one of them is inf or NaN (the step will
    /// then be skipped). Call it before anything that needs the true
    /// gradients, such as [`clip_grad_norm`](super::clip_grad_norm);
    /// [`step`](Self::step) calls it otherwise.
    ///
    /// Fails when the gradients were already unscaled since the last
    /// [`update`](Self::update), when `grads` holds none of `model`'s
    /// gradients, and when a device operation fails.
    ///
    /// ```
    /// use devtensor::nn::{Linear, Module};
    /// use devtensor::optim::GradScaler;
    /// use devtensor::{Cpu, Tensor};
    /// let model = Linear::<Cpu>::from_weights(Tensor::from_vec(vec![1.0, 1.0], [1, 2]), None);
    /// let mut scaler = GradScaler::new().with_init_scale(4.0);
    /// let x = Tensor::<Cpu>::from_vec(vec![3.0, -1.0], [1, 2]);
    /// let mut grads = scaler.scale_loss(&model.forward(&x).sum()).backward();
    /// assert_eq!(grads.get(&model.weight).unwrap().to_vec(), vec![12.0, -4.0]);
    /// scaler.unscale(&model, &mut grads);
    /// assert_eq!(grads.get(&model.weight).unwrap().to_vec(), vec![3.0, -1.0]);
    /// assert!(scaler.try_unscale(&model, &mut grads).is_err()); // once per step
    /// ```
    #[fallible]
    pub fn unscale<D: Device, E: FloatElement, M: Module<D, E>>(&mut self, model: &M, grads: &mut Gradients) {
        const OP: &str = "GradScaler::unscale";
        if self.found_inf.is_some() {
            return Err(Error::Argument {
                op: OP,
                device: D::name(),
                reason: "the gradients were already unscaled since the last update(); unscale once per step, \
                         then step and update"
                    .into(),
            });
        }
        let inverse = E::from_f64(1.0 / self.scale);
        // Each gradient times 0 is 0, or NaN where it holds an inf or a NaN:
        // one sum over all of them on the device, read back once.
        let mut non_finite: Option<Tensor<D, E>> = None;
        for (param, grad) in parameters_with_gradients(OP, model, grads)? {
            let grad = grad.try_mul_scalar(inverse)?;
            let check = grad.try_mul_scalar(E::ZERO)?.try_sum()?;
            non_finite = Some(match non_finite {
                Some(sum) => sum.try_add(&check)?,
                None => check,
            });
            grads.insert(&param, grad)?;
        }
        let found_inf = match non_finite {
            Some(sum) => sum.try_item()?.to_f64().is_nan(),
            None => false,
        };
        self.found_inf = Some(found_inf);
        Ok(())
    }

    /// Unscales the gradients if [`unscale`](Self::unscale) was not called
    /// this step, then steps `optimizer` unless a gradient is inf or NaN.
    /// Returns whether it stepped.
    ///
    /// Fails as [`unscale`](Self::unscale) and the optimizer's step do.
    ///
    /// ```
    /// use devtensor::nn::{Linear, Module};
    /// use devtensor::optim::{GradScaler, Sgd, SgdConfig};
    /// use devtensor::{Cpu, Tensor};
    /// let mut model = Linear::<Cpu>::new(2, 1);
    /// let mut opt = Sgd::new(&model, SgdConfig::default());
    /// let mut scaler = GradScaler::new();
    /// let mut grads = model.forward(&Tensor::<Cpu>::ones([1, 2])).sum().backward();
    /// grads.insert(&model.weight, Tensor::from_vec(vec![f32::INFINITY, 0.0], [1, 2])).unwrap();
    /// assert!(!scaler.step(&mut opt, &mut model, &mut grads)); // overflow: skipped
    /// scaler.update();
    /// assert_eq!(scaler.scale(), 32768.0); // and backed off
    /// ```
    #[fallible]
    pub fn step<D: Device, E: FloatElement, M: ModelOn<D, E>, O: Optimizer<D, E>>(
        &mut self,
        optimizer: &mut O,
        model: &mut M,
        grads: &mut Gradients,
    ) -> bool {
        if self.found_inf.is_none() {
            self.try_unscale(model, grads)?;
        }
        if self.found_inf == Some(true) {
            return Ok(false);
        }
        optimizer.try_step(model, grads)?;
        Ok(true)
    }

    /// Updates the scale after a step: times the backoff factor if a
    /// gradient overflowed, else times the growth factor once
    /// `growth_interval` steps in a row went without overflow.
    ///
    /// Fails when the gradients were not unscaled since the last update
    /// (PyTorch: "No inf checks were recorded prior to update").
    ///
    /// ```
    /// use devtensor::optim::GradScaler;
    /// assert!(GradScaler::new().try_update().is_err()); // no step yet
    /// ```
    #[fallible]
    pub fn update(&mut self) {
        let Some(found_inf) = self.found_inf.take() else {
            return Err(Error::Argument {
                op: "GradScaler::update",
                device: "any".into(),
                reason: "no inf checks were recorded since the last update(): call step() (or unscale()) first".into(),
            });
        };
        if found_inf {
            self.scale *= self.backoff_factor;
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker >= self.growth_interval {
                self.scale *= self.growth_factor;
                self.growth_tracker = 0;
            }
        }
        Ok(())
    }

    /// The state to save, under the names of [`SCALER_STATE`]: the scale,
    /// both factors, the growth interval and the good steps so far.
    pub(crate) fn state(&self) -> [i64; 5] {
        let bits = |v: f64| v.to_bits() as i64;
        [
            bits(self.scale),
            bits(self.growth_factor),
            bits(self.backoff_factor),
            i64::from(self.growth_interval),
            i64::from(self.growth_tracker),
        ]
    }

    /// A scaler in the saved `state` (see [`state`](Self::state)), between
    /// steps; `None` when a count does not fit.
    pub(crate) fn from_state([scale, growth_factor, backoff_factor, interval, tracker]: [i64; 5]) -> Option<Self> {
        let value = |bits: i64| f64::from_bits(bits as u64);
        Some(GradScaler {
            scale: value(scale),
            growth_factor: value(growth_factor),
            backoff_factor: value(backoff_factor),
            growth_interval: u32::try_from(interval).ok()?,
            growth_tracker: u32::try_from(tracker).ok()?,
            found_inf: None,
        })
    }
}
