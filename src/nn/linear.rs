//! `Linear`: `y = x Wᵀ + b`.

use super::Forward;
use super::init::{default_bound, uniform};
use crate::element::FloatElement;
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
#[derive(Clone, Debug)]
pub struct Linear<D: Device, E: FloatElement = f32> {
    /// `[out_features, in_features]`.
    pub weight: Tensor<D, E>,
    /// `[out_features]`, if the layer has one.
    pub bias: Option<Tensor<D, E>>,
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
        })
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// A layer with the given tensors, which become leaves that require
    /// grad. Fails when `bias` is not `[out_features]` for a `weight` of
    /// `[out_features, in_features]`.
    pub fn try_from_tensors(weight: Tensor<D, E>, bias: Option<Tensor<D, E>>) -> Result<Self> {
        let fits = weight.rank() == 2 && bias.as_ref().is_none_or(|b| b.dims() == [weight.dims()[0]]);
        if !fits {
            let mut shapes = vec![weight.shape().clone()];
            shapes.extend(bias.iter().map(|b| b.shape().clone()));
            return Err(Error::Shape {
                op: "Linear",
                device: D::name(),
                shapes,
                reason: "expected a weight [out_features, in_features] and a bias [out_features]".into(),
            });
        }
        Ok(Linear { weight: weight.detach().requires_grad(), bias: bias.map(|b| b.detach().requires_grad()) })
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Linear<D, E> {
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
        let y = x.try_matmul(&self.weight.try_t()?)?;
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
    pub fn forward<D2: Device>(&self, x: &Tensor<D2, E>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
    {
        self.forward_on(same_device(x))
    }
}

crate::module!(Linear<E> { weight, bias });
