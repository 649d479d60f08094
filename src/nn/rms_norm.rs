//! `RmsNorm`: scaling by the root mean square over the trailing axes.

use super::forward::call;
use super::parameter::parameter;
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// PyTorch's `nn.RMSNorm(normalized_shape)`: `x / sqrt(mean(x²) + eps) ·
/// weight` over the trailing axes of sizes `normalized_shape`, `weight`
/// starting at ones; `eps` defaults, as in PyTorch, to the element type's
/// machine epsilon. No mean is subtracted and there is no bias (LLaMA's
/// normalisation).
///
/// ```
/// use devtensor::nn::RmsNorm;
/// use devtensor::{Cpu, Tensor};
/// let norm = RmsNorm::<Cpu, f64>::new(&[2]);
/// let y = norm.forward(&Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0], [1, 2]));
/// let rms = (12.5f64 + f64::EPSILON).sqrt();
/// assert_eq!(y.to_vec(), vec![3.0 / rms, 4.0 / rms]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RmsNorm<D: Device, E: FloatElement = f32> {
    /// The scale, shaped like the normalised axes.
    pub weight: Tensor<D, E>,
    /// Added to the mean square before the square root.
    pub eps: f64,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

impl<D: Device, E: FloatElement> RmsNorm<D, E> {
    /// A layer over trailing axes of sizes `normalized_shape`, `eps` the
    /// machine epsilon of `E`. Fails when `D` is unavailable.
    #[fallible]
    pub fn new(normalized_shape: &[usize]) -> Self {
        Ok(RmsNorm {
            weight: Tensor::try_ones(normalized_shape)?.requires_grad(),
            eps: E::epsilon().to_f64(),
            hooks: ModuleHooks::new(),
        })
    }

    /// A layer with your own `weight`, shaped like the normalised axes,
    /// which becomes its parameter as in
    /// [`Linear::from_weights`](super::Linear::from_weights); `eps` as
    /// [`new`](Self::new)'s.
    ///
    /// ```
    /// use devtensor::nn::RmsNorm;
    /// use devtensor::{Cpu, Tensor};
    /// let norm = RmsNorm::from_weights(Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0], [2])).eps(0.0);
    /// let y = norm.forward(&Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0], [1, 2]));
    /// let rms = 12.5f64.sqrt();
    /// assert_eq!(y.to_vec(), vec![3.0 / rms, 8.0 / rms]);
    /// ```
    pub fn from_weights(weight: Tensor<D, E>) -> Self {
        RmsNorm { weight: parameter(weight), eps: E::epsilon().to_f64(), hooks: ModuleHooks::new() }
    }

    /// The layer with `eps` added to the mean square (PyTorch's `eps=`).
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for RmsNorm<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for RmsNorm<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let norm = self.weight.dims();
        let lead = x.rank().checked_sub(norm.len());
        let Some(lead) = lead.filter(|&lead| &x.dims()[lead..] == norm) else {
            return Err(Error::Shape {
                op: "RmsNorm",
                device: D::name(),
                shapes: vec![x.shape().clone(), self.weight.shape().clone()],
                reason: "the input's trailing axes must match normalized_shape".into(),
            });
        };
        let rows: Vec<usize> = x.dims()[..lead].iter().copied().chain([norm.iter().product()]).collect();
        let flat = x.try_reshape(rows)?;
        let scale =
            flat.try_square()?.try_mean_keepdim(-1)?.try_add_scalar(E::from_f64(self.eps))?.try_sqrt()?.try_recip()?;
        flat.try_mul(&scale)?.try_reshape(x.shape().clone())?.try_mul(&self.weight)
    }
}

impl<D: Device, E: FloatElement> RmsNorm<D, E> {
    /// The layer applied to `x`, which must be on the layer's device
    /// (checked at compile time). Fails when `x`'s shape does not fit.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

crate::module!(RmsNorm<E> { weight, hooks; eps });
