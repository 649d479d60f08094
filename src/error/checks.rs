//! Checks every operation shares, with their errors: shapes that broadcast,
//! element counts and byte sizes that fit, axes in range.

use super::{Error, Result};
use crate::element::Element;
use crate::layout::Shape;

/// Builds the error for two shapes that do not broadcast.
pub(crate) fn broadcast_error(op: &'static str, device: String, lhs: &Shape, rhs: &Shape) -> Error {
    Error::Shape {
        op,
        device,
        shapes: vec![lhs.clone(), rhs.clone()],
        reason: "the shapes cannot be broadcast together".into(),
    }
}

/// The element count of `shape`, a new shape an operation is about to
/// produce (or view data as), or an [`Error::Shape`] naming `op` and
/// `shapes` (the operands, then the result) when it exceeds [`MAX_ELEMS`].
///
/// Every operation whose output shape comes from the caller or from
/// combining operands (broadcasting, `matmul`, `cat`, ...) checks it before
/// anything is allocated, so no tensor ever has a shape whose count wraps.
pub(crate) fn check_elem_count(op: &'static str, device: impl FnOnce() -> String, shapes: &[&Shape]) -> Result<usize> {
    let out = shapes.last().expect("check_elem_count is given the result shape last");
    out.checked_elem_count().ok_or_else(|| Error::Shape {
        op,
        device: device(),
        shapes: shapes.iter().map(|&s| s.clone()).collect(),
        reason: format!(
            "{} would have more than 2^63 - 1 elements (the product of its dimensions overflows)",
            if shapes.len() > 1 { "the result" } else { "a tensor of this shape" }
        ),
    })
}

/// The bytes of `len` elements of `E`, or an [`Error::Shape`] naming `op`
/// when they would exceed `isize::MAX`, the most any allocation can hold.
/// Every allocation's size goes through here (CPU buffers, device buffers,
/// page-locked buffers), so a byte count never wraps.
#[inline]
pub(crate) fn checked_bytes<E: Element>(
    op: &'static str,
    device: impl FnOnce() -> String,
    len: usize,
) -> Result<usize> {
    match len.checked_mul(size_of::<E>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(bytes),
        _ => Err(too_many_bytes(op, device(), len, E::DTYPE.name())),
    }
}

#[cold]
fn too_many_bytes(op: &'static str, device: String, len: usize, dtype: &str) -> Error {
    Error::Shape {
        op,
        device,
        shapes: vec![Shape::from(len)],
        reason: format!("{len} elements of {dtype} need more than isize::MAX bytes, more than any memory holds"),
    }
}

/// Resolves `axis` against `shape` or reports it out of range. A rank-0
/// tensor has no axis to give, which is a shape error (PyTorch: "cannot be
/// applied to a 0-dim tensor"); operations that treat a scalar as one
/// element use [`resolve_axis_or_scalar`] instead.
pub(crate) fn resolve_axis(
    op: &'static str,
    device: impl FnOnce() -> String,
    shape: &Shape,
    axis: isize,
) -> Result<usize> {
    if shape.rank() == 0 {
        return Err(Error::Shape {
            op,
            device: device(),
            shapes: vec![shape.clone()],
            reason: format!("a rank-0 tensor has no axis {axis}; this operation needs at least one axis"),
        });
    }
    shape.axis(axis).ok_or_else(|| Error::Axis { op, device: device(), shape: shape.clone(), axis })
}

/// Like [`resolve_axis`], but a rank-0 tensor accepts axis `0` and `-1`,
/// as PyTorch's reductions and softmax do, and resolves to `None`.
pub(crate) fn resolve_axis_or_scalar(
    op: &'static str,
    device: impl FnOnce() -> String,
    shape: &Shape,
    axis: isize,
) -> Result<Option<usize>> {
    match (shape.rank(), axis) {
        (0, 0 | -1) => Ok(None),
        (0, _) => Err(Error::Axis { op, device: device(), shape: shape.clone(), axis }),
        _ => resolve_axis(op, device, shape, axis).map(Some),
    }
}
