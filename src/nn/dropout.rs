//! `Dropout`, which zeroes random elements while training, and the
//! channel-wise `Dropout1d`, `Dropout2d` and `Dropout3d`, which zero whole
//! channels.

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
        drop_with_mask(x, self.p, x.dims().to_vec())
    }
}

/// `x` with the elements of a random mask of `mask_dims` (which broadcast
/// to `x`'s) zeroed with probability `p`, the others scaled by
/// `1 / (1 - p)`; `0 < p <= 1`.
fn drop_with_mask<D: Device, E: FloatElement>(x: &Tensor<D, E>, p: f64, mask_dims: Vec<usize>) -> Result<Tensor<D, E>> {
    if p == 1.0 {
        return x.try_mul_scalar(E::ZERO);
    }
    let keep = Tensor::<D, E>::try_rand(mask_dims)?.try_ge_scalar(E::from_f64(p))?;
    let scaled = x.try_mul_scalar(E::from_f64(1.0 / (1.0 - p)))?;
    keep.try_where_cond(&scaled, &Tensor::<D, E>::try_scalar(E::ZERO)?)
}

/// Writes one channel-wise dropout layer over inputs with `$spatial`
/// spatial axes.
macro_rules! channel_dropout {
    ($(#[$doc:meta])* $name:ident, $op:literal, $spatial:literal, $layout:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            p: f64,
            training: bool,
        }

        impl $name {
            /// The layer zeroing each channel with probability `p`. Fails
            /// unless `0 <= p <= 1`.
            #[fallible]
            pub fn new(p: f64) -> Self {
                if !(0.0..=1.0).contains(&p) {
                    return Err(Error::Argument {
                        op: $op,
                        device: String::new(),
                        reason: format!("the probability must be between 0 and 1, got {p}"),
                    });
                }
                Ok($name { p, training: true })
            }

            /// The probability of zeroing a channel.
            pub fn p(&self) -> f64 {
                self.p
            }

            /// `x` (batched, or one sample without the batch axis) with
            /// random channels zeroed (training), or `x` itself
            /// (evaluation). Fails when the rank does not fit.
            #[fallible]
            pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
                let rank = x.rank();
                if rank != $spatial + 1 && rank != $spatial + 2 {
                    return Err(Error::Shape {
                        op: $op,
                        device: D::name(),
                        shapes: vec![x.shape().clone()],
                        reason: $layout.into(),
                    });
                }
                if !self.training || self.p == 0.0 {
                    return Ok(x.clone());
                }
                // One draw per channel, broadcast over its positions.
                let mut mask = x.dims().to_vec();
                mask[rank - $spatial..].fill(1);
                drop_with_mask(x, self.p, mask)
            }
        }

        impl<D: Device, E: FloatElement> Forward<D, E> for $name {
            fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                self.try_forward(x)
            }
        }

        impl<D: Device, E: FloatElement> Module<D, E> for $name {
            type On<D2: Device> = $name;

            fn try_to<D2: Device>(&self) -> Result<$name> {
                Ok(*self)
            }

            fn visit(&self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &Tensor<D, E>)) {}

            fn visit_mut(&mut self, _: &str, _: &mut dyn FnMut(&str, TensorKind, &mut Tensor<D, E>)) {}

            fn set_training(&mut self, training: bool) {
                self.training = training;
            }
        }

        impl<D: Device, E: FloatElement> ToDtype<D, E> for $name {
            type Of<T: FloatElement> = $name;

            fn try_to_dtype<T: FloatElement>(&self) -> Result<$name> {
                Ok(*self)
            }
        }
    };
}

channel_dropout! {
    /// PyTorch's `nn.Dropout1d`: in training, each channel of `[N, C, L]`
    /// (or `[C, L]`) is zeroed whole with probability `p`, the others scaled
    /// by `1 / (1 - p)`; in evaluation the input passes through.
    Dropout1d, "Dropout1d", 1, "expected [N, C, L] or [C, L]"
}

channel_dropout! {
    /// PyTorch's `nn.Dropout2d` (spatial dropout): in training, each
    /// channel of `[N, C, H, W]` (or `[C, H, W]`) is zeroed whole with
    /// probability `p`, the others scaled by `1 / (1 - p)`, since
    /// neighbouring pixels are too alike for element-wise dropout to
    /// regularise; in evaluation the input passes through.
    ///
    /// ```
    /// use devtensor::nn::Dropout2d;
    /// use devtensor::{Cpu, Tensor};
    /// let y = Dropout2d::new(0.5).forward(&Tensor::<Cpu>::ones([4, 8, 3, 3]));
    /// // Each channel is all 0 or all 2.
    /// for channel in y.reshape([32, 9]).to_vec2() {
    ///     assert!(channel.iter().all(|&v| v == channel[0]) && (channel[0] == 0.0 || channel[0] == 2.0));
    /// }
    /// ```
    Dropout2d, "Dropout2d", 2, "expected [N, C, H, W] or [C, H, W]"
}

channel_dropout! {
    /// PyTorch's `nn.Dropout3d`: in training, each channel of
    /// `[N, C, D, H, W]` (or `[C, D, H, W]`) is zeroed whole with
    /// probability `p`, the others scaled by `1 / (1 - p)`; in evaluation
    /// the input passes through.
    Dropout3d, "Dropout3d", 3, "expected [N, C, D, H, W] or [C, D, H, W]"
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
