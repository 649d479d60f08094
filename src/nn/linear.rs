//! `Linear`: `y = x Wᵀ + b`.

use super::forward::call;
use super::init::{default_bound, uniform};
use super::parameter::{check, parameter};
use super::{Forward, Hookable, ModuleHooks};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// A fully connected layer, PyTorch's `nn.Linear`: `y = x Wᵀ + b` over the
/// last axis of `x`, with `weight` of shape `[out_features, in_features]`
/// and `bias` of shape `[out_features]`.
///
/// ```
/// use devtensor::nn::Linear;
/// use devtensor::{Cpu, Tensor};
/// let layer = Linear::<Cpu>::new(3, 2);
/// let y = layer.forward(&Tensor::<Cpu>::ones([5, 3]));
/// assert_eq!(y.dims(), &[5, 2]);
/// ```
///
/// An input on another device than the layer does not compile:
/// ```compile_fail,E0277
/// use devtensor::nn::Linear;
/// use devtensor::{Cpu, Cuda, Tensor};
/// fn run(layer: &Linear<Cuda<0>>, x: &Tensor<Cpu>) -> Tensor<Cuda<0>> {
///     layer.forward(x) // error: expected all tensors to be on the same device
/// }
/// ```
///
/// Built from your own tensors with [`from_weights`](Self::from_weights).
/// The fields are public to read and assign, as `layer.weight` is in
/// PyTorch (tying a weight is `head.weight = wte.weight.clone()`), but the
/// struct is `#[non_exhaustive]`: it is built through its constructors, so
/// a field added later breaks no program.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Linear<D: Device, E: FloatElement = f32> {
    /// `[out_features, in_features]`.
    pub weight: Tensor<D, E>,
    /// `[out_features]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
    /// The hooks registered on the layer ([`Hooks`](super::Hooks)).
    hooks: ModuleHooks<D, E>,
}

impl<D: Device, E: FloatElement> Linear<D, E> {
    /// A layer with PyTorch's initialisation (`U(-k, k)`, `k = 1/sqrt(in_features)`,
    /// for weight and bias) drawn from the thread's generator. Fails when
    /// `D` is unavailable or out of memory.
    #[fallible]
    pub fn new(in_features: usize, out_features: usize) -> Self {
        let bound = default_bound(in_features);
        Ok(Linear {
            weight: uniform::<D, E>([out_features, in_features], bound)?.requires_grad(),
            bias: Some(uniform::<D, E>([out_features], bound)?.requires_grad()),
            hooks: ModuleHooks::new(),
        })
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// A layer with the given `weight` (`[out_features, in_features]`) and
    /// `bias` (`[out_features]`), which become its parameters: a leaf
    /// tensor stays the same leaf (so one weight given to two layers is
    /// tied), a computed one becomes a new leaf with its values. Fails,
    /// naming both shapes, when they do not fit.
    ///
    /// ```
    /// use devtensor::nn::Linear;
    /// use devtensor::{Cpu, Tensor};
    /// let weight = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// let layer = Linear::from_weights(weight, Some(Tensor::from_vec(vec![0.5, -0.5], [2])));
    /// assert_eq!(layer.forward(&Tensor::<Cpu>::ones([1, 3])).to_vec(), vec![6.5, 14.5]);
    ///
    /// let wrong = Linear::try_from_weights(Tensor::<Cpu>::zeros([4, 3]), Some(Tensor::zeros([5])));
    /// assert_eq!(
    ///     wrong.unwrap_err().to_string(),
    ///     "Linear::from_weights on Cpu: shapes [4, 3] and [5]: \
    ///      expected a weight [out_features, in_features] and a bias [out_features]"
    /// );
    /// ```
    #[fallible]
    pub fn from_weights(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>) -> Self {
        let mut tensors = vec![&weight];
        tensors.extend(bias.as_ref());
        let fits = weight.rank() == 2 && bias.as_ref().is_none_or(|b| b.dims() == [weight.dims()[0]]);
        check(fits, "Linear::from_weights", &tensors, || {
            "expected a weight [out_features, in_features] and a bias [out_features]".into()
        })?;
        Ok(Linear { weight: parameter(weight), bias: bias.map(parameter), hooks: ModuleHooks::new() })
    }

    /// The former name of [`try_from_weights`](Self::try_from_weights).
    #[deprecated(note = "renamed `try_from_weights` (and `from_weights`, which panics)")]
    pub fn try_from_tensors(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>) -> Result<Self> {
        Self::try_from_weights(weight, bias)
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for Linear<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for Linear<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let in_features = self.weight.dims()[1];
        if x.rank() == 0 || x.dims()[x.rank() - 1] != in_features {
            return Err(Error::Shape {
                op: "Linear",
                device: D::name(),
                shapes: vec![x.shape().clone(), self.weight.shape().clone()],
                reason: format!("the input's last axis must have in_features = {in_features} elements"),
            });
        }
        let weight_t = self.weight.try_t()?;
        if let Some(bias) = &self.bias
            && let Some(y) = x.try_matmul_bias(&weight_t, bias)?
        {
            return Ok(y);
        }
        let y = x.try_matmul(&weight_t)?;
        match &self.bias {
            Some(b) => y.try_add(b),
            None => Ok(y),
        }
    }
}

impl<D: Device, E: FloatElement> Linear<D, E> {
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

crate::module!(Linear<E> { weight, bias, hooks });
