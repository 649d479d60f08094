//! `Dropout`: zeroes random elements while training.

use super::{Forward, Module, TensorKind, ToDtype};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;

/// PyTorch's `nn.Dropout`: in training, each element is zeroed with
/// probability `p` and the others are scaled by `1 / (1 - p)`, so that the
/// expected value is unchanged; in evaluation the input passes through.
/// Layers start in training mode, as in PyTorch. The mask is drawn from the
/// thread's generator ([`manual_seed`](crate::manual_seed)).
///
/// ```
/// use devtensor::nn::{Dropout, Module};
/// use devtensor::{Cpu, Tensor};
/// let mut drop = Dropout::new(0.5);
/// let x = Tensor::<Cpu>::ones([1000]);
/// let y = drop.forward(&x).to_vec();
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// Module::<Cpu>::eval(&mut drop);
/// assert_eq!(drop.forward(&x).to_vec(), x.to_vec());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dropout {
    p: f64,
    training: bool,
}

impl Dropout {
    /// A dropout layer zeroing with probability `p`. Fails unless `0 <= p <= 1`.
    #[fallible]
    pub fn new(p: f64) -> Self {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::Argument {
                op: "Dropout",
                device: String::new(),
                reason: format!("the probability must be between 0 and 1, got {p}"),
            });
        }
        Ok(Dropout { p, training: true })
    }

    /// The probability of zeroing an element.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// Whether [`forward`](Self::forward) zeroes anything: training, with
    /// a probability above 0.
    pub fn is_active(&self) -> bool {
        self.training && self.p > 0.0
    }

    /// `x` with random elements zeroed (training) or `x` itself (evaluation).
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        if !self.training || self.p == 0.0 {
            return Ok(x.clone());
        }
        if self.p == 1.0 {
            return x.try_mul_scalar(E::ZERO);
        }
        let keep = Tensor::<D, E>::try_rand(x.shape().clone())?.try_ge_scalar(E::from_f64(self.p))?;
        let scaled = x.try_mul_scalar(E::from_f64(1.0 / (1.0 - self.p)))?;
        keep.try_where_cond(&scaled, &Tensor::<D, E>::try_scalar(E::ZERO)?)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Dropout {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

impl<D: Device, E: FloatElement> Module<D, E> for Dropout {
    type On<D2: Device> = Dropout;

    fn try_to<D2: Device>(&self) -> Result<Dropout> {
        Ok(*self)
    }

    fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

    fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl<D: Device, E: FloatElement> ToDtype<D, E> for Dropout {
    type Of<T: FloatElement> = Dropout;

    fn try_to_dtype<T: FloatElement>(&self) -> Result<Dropout> {
        Ok(*self)
    }
}
