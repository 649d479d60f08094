//! The activation layers, `Identity` and `Flatten`: all without
//! parameters except [`Prelu`]'s slopes.

use super::forward::call;
use super::module::stateless_module;
use super::parameter::parameter;
use super::{Forward, Hookable, Module, ModuleHooks, TensorKind};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result, resolve_axis};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
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

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
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
    Silu, silu, try_silu, "`x · sigmoid(x)`, PyTorch's `nn.SiLU`.";
    Selu, selu, try_selu, "SELU, `scale · elu(x, alpha)` with PyTorch's constants, PyTorch's `nn.SELU`.";
    Mish, mish, try_mish, "`x · tanh(softplus(x))`, PyTorch's `nn.Mish`.";
    Hardswish, hardswish, try_hardswish, "`x · min(max(x + 3, 0), 6) / 6`, PyTorch's `nn.Hardswish`.";
    Hardsigmoid, hardsigmoid, try_hardsigmoid, "`min(max(x + 3, 0), 6) / 6`, PyTorch's `nn.Hardsigmoid`.";
    Relu6, relu6, try_relu6, "`min(max(x, 0), 6)`, PyTorch's `nn.ReLU6`.";
    LogSigmoid, log_sigmoid, try_log_sigmoid, "`log(sigmoid(x))`, PyTorch's `nn.LogSigmoid`.";
    Softsign, softsign, try_softsign, "`x / (1 + |x|)`, PyTorch's `nn.Softsign`.";
}

/// Defines a parameterless layer with scalar settings (`f64`, converted to
/// the input's element type), their PyTorch defaults, a constructor taking
/// them in PyTorch's order, and its forward pass.
macro_rules! activation_with_settings {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($(#[$field_doc:meta])* $field:ident = $default:expr),* }
        => |$layer:ident, $x:ident| $call:expr;
    )*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[non_exhaustive]
        pub struct $name {
            $($(#[$field_doc])* pub $field: f64,)*
        }

        impl Default for $name {
            /// PyTorch's defaults.
            fn default() -> Self {
                $name { $($field: $default),* }
            }
        }

        impl $name {
            /// The layer with these settings, in the order PyTorch's
            /// constructor takes them.
            pub fn new($($field: f64),*) -> Self {
                $name { $($field),* }
            }

            /// The activation of `x`, on any device.
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, $x: &Tensor<D, E>) -> Tensor<D, E> {
                let $layer = self;
                $call
            }
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

activation_with_settings! {
    /// `x` where positive and `negative_slope · x` elsewhere, PyTorch's
    /// `nn.LeakyReLU` (DCGAN's discriminator uses a slope of 0.2).
    ///
    /// ```
    /// use devtensor::nn::LeakyRelu;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-10.0, 3.0], [2]);
    /// assert_eq!(LeakyRelu::new(0.2).forward(&x).to_vec(), vec![-2.0, 3.0]);
    /// assert_eq!(LeakyRelu::default().negative_slope, 0.01);
    /// ```
    LeakyRelu {
        /// The slope below zero.
        negative_slope = 0.01
    } => |layer, x| x.try_leaky_relu(E::from_f64(layer.negative_slope));
    /// `x` where positive and `alpha · (e^x - 1)` elsewhere, PyTorch's `nn.ELU`.
    ///
    /// ```
    /// use devtensor::nn::Elu;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::NEG_INFINITY, 3.0], [2]);
    /// assert_eq!(Elu::default().forward(&x).to_vec(), vec![-1.0, 3.0]);
    /// ```
    Elu {
        /// `-alpha` is the limit at `-inf`.
        alpha = 1.0
    } => |layer, x| x.try_elu(E::from_f64(layer.alpha));
    /// `x` where positive and `alpha · (e^(x / alpha) - 1)` elsewhere,
    /// PyTorch's `nn.CELU`.
    ///
    /// ```
    /// use devtensor::nn::Celu;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![f32::NEG_INFINITY, 3.0], [2]);
    /// assert_eq!(Celu::new(2.0).forward(&x).to_vec(), vec![-2.0, 3.0]);
    /// ```
    Celu {
        /// `-alpha` is the limit at `-inf`.
        alpha = 1.0
    } => |layer, x| x.try_celu(E::from_f64(layer.alpha));
    /// `log(1 + e^(beta · x)) / beta`, and `x` where `beta · x > threshold`,
    /// PyTorch's `nn.Softplus`.
    ///
    /// ```
    /// use devtensor::nn::Softplus;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 25.0], [2]);
    /// assert_eq!(Softplus::default().forward(&x).to_vec(), vec![std::f64::consts::LN_2, 25.0]);
    /// ```
    Softplus {
        /// The sharpness.
        beta = 1.0,
        /// Where the layer becomes the identity (in units of `beta · x`).
        threshold = 20.0
    } => |layer, x| x.try_softplus(E::from_f64(layer.beta), E::from_f64(layer.threshold));
    /// `x` limited to `min_val..=max_val`, PyTorch's `nn.Hardtanh`.
    ///
    /// ```
    /// use devtensor::nn::Hardtanh;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![-3.0, 0.5, 3.0], [3]);
    /// assert_eq!(Hardtanh::default().forward(&x).to_vec(), vec![-1.0, 0.5, 1.0]);
    /// ```
    Hardtanh {
        /// The lower bound.
        min_val = -1.0,
        /// The upper bound.
        max_val = 1.0
    } => |layer, x| x.try_hardtanh(E::from_f64(layer.min_val), E::from_f64(layer.max_val));
}

/// Its input unchanged, PyTorch's `nn.Identity`: the placeholder that
/// replaces a layer (a ViT's head before fine-tuning, a skipped
/// normalisation).
///
/// ```
/// use devtensor::nn::Identity;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
/// assert_eq!(Identity.forward(&x).to_vec(), vec![1.0, 2.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Identity;

impl Identity {
    /// `x` itself (the same storage, as PyTorch returns the same tensor).
    pub fn forward<D: Device, E: Element>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        x.clone()
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Identity {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        Ok(self.forward(x))
    }
}

stateless_module!(Identity);

/// Defines a parameterless layer that applies a tensor method along one
/// axis.
macro_rules! along_axis {
    ($($(#[$doc:meta])* $name:ident, $method:ident, $try_method:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            /// The axis (negative counts from the end).
            pub dim: isize,
        }

        impl $name {
            /// The layer along `dim` (negative counts from the end).
            pub fn new(dim: isize) -> Self {
                $name { dim }
            }

            #[doc = concat!("`x.", stringify!($method), "(dim)`, on any device. Fails when `dim` is out of range.")]
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
                x.$try_method(self.dim)
            }
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        stateless_module!($name);
    )*};
}

along_axis! {
    /// PyTorch's `nn.Softmax(dim)`: `e^x` normalised to sum to 1 along `dim`.
    ///
    /// ```
    /// use devtensor::nn::Softmax;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 1.0, 5.0, 5.0], [2, 2]);
    /// assert_eq!(Softmax::new(-1).forward(&x).to_vec(), vec![0.5, 0.5, 0.5, 0.5]);
    /// ```
    Softmax, softmax, try_softmax;
    /// PyTorch's `nn.LogSoftmax(dim)`: the logarithm of [`Softmax`], in one
    /// pass that keeps its digits where the probabilities underflow.
    ///
    /// ```
    /// use devtensor::nn::LogSoftmax;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0], [2]);
    /// assert_eq!(LogSoftmax::new(0).forward(&x).to_vec(), vec![-std::f64::consts::LN_2; 2]);
    /// ```
    LogSoftmax, log_softmax, try_log_softmax;
    /// PyTorch's `nn.GLU(dim=-1)`: the first half of `dim` gated by the
    /// sigmoid of the second, [`Tensor::glu`].
    ///
    /// ```
    /// use devtensor::nn::Glu;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![3.0, 0.0], [1, 2]);
    /// assert_eq!(Glu::default().forward(&x).to_vec(), vec![1.5]);
    /// ```
    Glu, glu, try_glu;
}

impl Default for Glu {
    /// The last axis, PyTorch's default.
    fn default() -> Self {
        Glu { dim: -1 }
    }
}

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `F.glu(x, dim)`, the gated linear unit: `a · sigmoid(b)` with `a` and
    /// `b` the two halves of `dim`. Fails when `dim` is out of range or its
    /// size is odd.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, 4.0, 0.0, 1000.0], [4]);
    /// assert_eq!(x.glu(0).to_vec(), vec![1.0, 4.0]);
    /// assert!(x.narrow(0, 0, 3).try_glu(0).unwrap_err().to_string().contains("even"));
    /// ```
    #[fallible]
    pub fn glu(&self, dim: isize) -> Self {
        let axis = resolve_axis("glu", D::name, self.shape(), dim)?;
        let size = self.dims()[axis];
        if !size.is_multiple_of(2) {
            return Err(Error::Shape {
                op: "glu",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("the halved axis must have an even size, but axis {axis} has size {size}"),
            });
        }
        let half = size / 2;
        self.try_narrow(dim, 0, half)?.try_mul(&self.try_narrow(dim, half, half)?.try_sigmoid()?)
    }
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

impl<D: Device, E: FloatElement> Forward<D, E> for Flatten {
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

impl<D: Device, E: FloatElement> Forward<D, E> for Gelu {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(Gelu);

/// PyTorch's `nn.PReLU(num_parameters=1, init=0.25)`: leaky ReLU with a
/// learned slope, one for all channels or one per channel (axis 1 of the
/// input, or the only axis of a 1-D one). Its parameter is `weight`, as in
/// PyTorch's `state_dict`.
///
/// ```
/// use devtensor::nn::Prelu;
/// use devtensor::{Cpu, Tensor};
/// let prelu = Prelu::<Cpu>::new(2, 0.25);
/// let x = Tensor::<Cpu>::from_vec(vec![-4.0, -4.0, 4.0, 4.0], [1, 2, 2]);
/// assert_eq!(prelu.forward(&x).to_vec(), vec![-1.0, -1.0, 4.0, 4.0]);
/// ```
///
/// The fields are public to read and assign, and the struct is
/// `#[non_exhaustive]`, as [`Linear`](super::Linear)'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Prelu<D: Device, E: FloatElement = f32> {
    /// The slopes below zero, `[num_parameters]`.
    pub weight: Tensor<D, E>,
    /// The hooks registered on the layer ([`Hooks`](crate::nn::Hooks)).
    hooks: ModuleHooks<D, E>,
}

impl<D: Device, E: FloatElement> Prelu<D, E> {
    /// `num_parameters` slopes (1, or the number of channels), each
    /// starting at `init` (PyTorch's default: 0.25). Fails when `D` is
    /// unavailable.
    #[fallible]
    pub fn new(num_parameters: usize, init: f64) -> Self {
        Ok(Prelu {
            weight: Tensor::try_full([num_parameters], E::from_f64(init))?.requires_grad(),
            hooks: ModuleHooks::new(),
        })
    }

    /// A layer with your own slopes, `[num_parameters]`, which become its
    /// parameter as in [`Linear::from_weights`](super::Linear::from_weights).
    pub fn from_weights(weight: Tensor<D, E>) -> Self {
        Prelu { weight: parameter(weight), hooks: ModuleHooks::new() }
    }

    /// The layer applied to `x`, which must be on the layer's device
    /// (checked at compile time). Fails when there is more than one slope
    /// and `x`'s channel axis (axis 1, or axis 0 of a 1-D input) has another size.
    #[fallible]
    pub fn forward<D2: Device, EX: Element>(&self, x: &Tensor<D2, EX>) -> Tensor<D, E>
    where
        D: SameDevice<D2>,
        E: SameDtype<EX>,
    {
        call(self, same_device(x))
    }
}

impl<D: Device, E: FloatElement> Hookable<D, E> for Prelu<D, E> {}

impl<D: Device, E: FloatElement> Forward<D, E> for Prelu<D, E> {
    fn hooks(&self) -> Option<&ModuleHooks<D, E>> {
        Some(&self.hooks)
    }

    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        let slopes = self.weight.elem_count();
        let slope = if slopes == 1 {
            self.weight.try_reshape(Vec::<usize>::new())?
        } else {
            let channel = usize::from(x.rank() >= 2);
            if x.rank() == 0 || x.dims()[channel] != slopes {
                return Err(Error::Shape {
                    op: "Prelu",
                    device: D::name(),
                    shapes: vec![x.shape().clone(), self.weight.shape().clone()],
                    reason: format!(
                        "{slopes} slopes need an input whose channel axis (axis 1, or 0 of a 1-D input) has that size"
                    ),
                });
            }
            // `[C, 1, ...]`: one slope per channel, broadcast over the axes after it.
            let mut dims = vec![slopes];
            dims.resize(x.rank() - channel, 1);
            self.weight.try_reshape(dims)?
        };
        // `where`, not `relu(x) + slope · min(x, 0)`, so that the gradient at
        // 0 is the slope's, as PyTorch's.
        x.try_gt_scalar(E::ZERO)?.try_where_cond(x, &x.try_mul(&slope)?)
    }
}

crate::module!(Prelu<E> { weight, hooks });
