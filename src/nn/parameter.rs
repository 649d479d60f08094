//! What the layers' `from_weights` constructors share: the tensors a user
//! gives become the layer's parameters, and a shape that does not fit is an
//! [`Error::Shape`] naming the layer, the constructor and every tensor's shape.

use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};

/// `tensor` as a parameter: a leaf that requires grad. A tensor that is
/// already a leaf stays the same leaf, so that a weight given to two
/// layers (`Linear::from_weights(wte.weight.clone(), None)`) is one tied
/// parameter, and a gradient check's inputs are the layer's parameters. A
/// computed tensor becomes a new leaf with its values, as
/// `nn.Parameter(t)` makes one.
pub(crate) fn parameter<D: Device, E: FloatElement>(tensor: Tensor<D, E>) -> Tensor<D, E> {
    if tensor.is_leaf() { tensor.requires_grad() } else { tensor.detach().requires_grad() }
}

/// The error of `Layer::from_weights` when `tensors` do not have the shapes
/// `expected` describes.
pub(crate) fn shape_error<D: Device, E: FloatElement>(
    op: &'static str,
    tensors: &[&Tensor<D, E>],
    expected: impl Into<String>,
) -> Error {
    Error::Shape {
        op,
        device: D::name(),
        shapes: tensors.iter().map(|t| t.shape().clone()).collect(),
        reason: expected.into(),
    }
}

/// Fails with [`shape_error`] unless `fits`.
pub(crate) fn check<D: Device, E: FloatElement>(
    fits: bool,
    op: &'static str,
    tensors: &[&Tensor<D, E>],
    expected: impl FnOnce() -> String,
) -> Result<()> {
    if fits { Ok(()) } else { Err(shape_error(op, tensors, expected())) }
}
