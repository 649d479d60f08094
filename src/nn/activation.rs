//! Layers without parameters: activations and `Flatten`.

use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::Device;
use crate::tensor::Tensor;
use devtensor_macros::fallible;

/// Defines a parameterless layer that applies one tensor method.
macro_rules! activation {
    ($($name:ident, $method:ident, $try_method:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;

        impl $name {
            #[doc = concat!("`x.", stringify!($method), "()`, on any device.")]
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
                x.$try_method()
            }
        }

        impl<D: Device, E: FloatElement> super::Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

activation! {
    Relu, relu, try_relu, "`max(x, 0)`, PyTorch's `nn.ReLU`.";
    Sigmoid, sigmoid, try_sigmoid, "`1 / (1 + e^-x)`, PyTorch's `nn.Sigmoid`.";
    Tanh, tanh, try_tanh, "The hyperbolic tangent, PyTorch's `nn.Tanh`.";
}

/// Merges the axes `start..=end` into one, PyTorch's `nn.Flatten` (by
/// default every axis after the batch axis: `Flatten::default()` is
/// `start = 1`, `end = -1`).
///
/// ```
/// use devtensor::nn::Flatten;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::zeros([64, 16, 32, 32]);
/// assert_eq!(Flatten::default().forward(&x).dims(), &[64, 16384]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Flatten {
    /// First axis merged.
    pub start: isize,
    /// Last axis merged.
    pub end: isize,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start: 1, end: -1 }
    }
}

impl Flatten {
    /// Merges the axes `start..=end` (negative counts from the end), as
    /// PyTorch's `nn.Flatten(start_dim, end_dim)`.
    pub fn new(start: isize, end: isize) -> Self {
        Flatten { start, end }
    }

    /// `x` with its axes `start..=end` merged. Fails when an axis is out of range.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        x.try_flatten(self.start, self.end)
    }
}

impl<D: Device, E: FloatElement> super::Forward<D, E> for Flatten {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(Flatten);

/// PyTorch's `nn.GELU`: `x · Φ(x)`, with `Φ` the standard normal CDF,
/// computed exactly as `x / 2 · (1 + erf(x / √2))` (the default), or with
/// PyTorch's `approximate="tanh"` form,
/// `x / 2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`, from [`Gelu::tanh`].
///
/// ```
/// use devtensor::nn::Gelu;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::from_vec(vec![-1.0, 0.0, 1.0], [3]);
/// let y = Gelu::default().forward(&x).to_vec();
/// assert!((y[2] - 0.8413447460685429).abs() < 1e-12 && y[1] == 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gelu {
    /// Whether the tanh approximation is used.
    pub approximate: bool,
}

impl Gelu {
    /// The tanh approximation, PyTorch's `nn.GELU(approximate="tanh")`.
    pub fn tanh() -> Self {
        Gelu { approximate: true }
    }

    /// GELU of `x`, on any device.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        if self.approximate { x.try_gelu_tanh() } else { x.try_gelu() }
    }
}

impl<D: Device, E: FloatElement> super::Forward<D, E> for Gelu {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(Gelu);
