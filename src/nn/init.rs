//! Parameter initialisation with PyTorch's defaults, drawn from the
//! generator that [`manual_seed`](crate::manual_seed) seeds.

use crate::element::FloatElement;
use crate::error::Result;
use crate::layout::Shape;
use crate::tensor::Device;
use crate::tensor::Tensor;

/// Samples of `U(-bound, bound)`: PyTorch's `nn.init.uniform_`.
pub fn uniform<D: Device, E: FloatElement>(shape: impl Into<Shape>, bound: f64) -> Result<Tensor<D, E>> {
    let bound = E::from_f64(bound);
    Tensor::<D, E>::try_rand(shape)?.try_mul_scalar(bound + bound)?.try_sub_scalar(bound)
}

/// PyTorch's default for the weight of `Linear` and `Conv2d`:
/// `kaiming_uniform_(w, a=sqrt(5))`, which is `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`.
/// The bias gets the same bound.
pub fn default_bound(fan_in: usize) -> f64 {
    if fan_in == 0 { 0.0 } else { 1.0 / (fan_in as f64).sqrt() }
}
