//! Distances and similarities between embeddings: PyTorch's
//! `F.cosine_similarity` and `F.pairwise_distance` (the metric losses'
//! building blocks), `F.normalize` and `torch.cdist`.

use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// The cosine of the angle between `x1` and `x2` along `axis` (negative
/// counts from the end), broadcast together, PyTorch's
/// `F.cosine_similarity(x1, x2, dim, eps)` (`dim = 1`, `eps = 1e-8` by
/// default): `Σ (x1 / max(|x1|, eps)) (x2 / max(|x2|, eps))`, each norm
/// kept at `eps` or above so that a zero vector gives 0, not NaN.
///
/// Fails when the shapes do not broadcast or `axis` is out of range.
///
/// ```
/// use devtensor::nn::cosine_similarity;
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0, 3.0, 4.0], [2, 2]);
/// let b = Tensor::<Cpu, f64>::from_vec(vec![0.0, 2.0, 3.0, 4.0], [2, 2]);
/// let cos = cosine_similarity(&a, &b, 1, 1e-8).to_vec();
/// assert!(cos[0].abs() < 1e-15 && (cos[1] - 1.0).abs() < 1e-15);
/// ```
#[fallible(free)]
pub fn cosine_similarity<D: Device, D2: Device, E: FloatElement, E2: Element>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D2, E2>,
    axis: isize,
    eps: f64,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    cosine_similarity_along(x1, same_device(x2), axis, eps)
}

/// [`cosine_similarity`] on one device.
pub(crate) fn cosine_similarity_along<D: Device, E: FloatElement>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D, E>,
    axis: isize,
    eps: f64,
) -> Result<Tensor<D, E>> {
    let Some(shape) = x1.shape().broadcast_with(x2.shape()) else {
        return Err(Error::Shape {
            op: "cosine_similarity",
            device: D::name(),
            shapes: vec![x1.shape().clone(), x2.shape().clone()],
            reason: "the inputs must have broadcastable shapes".into(),
        });
    };
    let (x1, x2) = (x1.try_broadcast_to(shape.clone())?, x2.try_broadcast_to(shape)?);
    let unit = |x: &Tensor<D, E>| -> Result<Tensor<D, E>> {
        let norm = x.try_square()?.try_sum_keepdim(axis)?.try_sqrt()?.try_clamp_min(E::from_f64(eps))?;
        x.try_div(&norm)
    };
    unit(&x1)?.try_mul(&unit(&x2)?)?.try_sum_axis(axis)
}

/// The `p`-norm distance between the rows of `x1` and `x2` (their last
/// axis), PyTorch's `F.pairwise_distance(x1, x2, p, eps, keepdim)`
/// (`p = 2`, `eps = 1e-6` by default): `|x1 - x2 + eps|_p`, the `eps`
/// keeping the norm's gradient finite where the rows are equal. `p` may be
/// `f64::INFINITY` (the largest difference).
///
/// Fails when the shapes do not broadcast or `p` is not positive.
///
/// ```
/// use devtensor::nn::pairwise_distance;
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, 1.0, 1.0], [2, 2]);
/// let b = Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0, 1.0, 1.0], [2, 2]);
/// let d = pairwise_distance(&a, &b, 2.0, 0.0, false).to_vec();
/// assert_eq!(d, vec![5.0, 0.0]);
/// ```
#[fallible(free)]
pub fn pairwise_distance<D: Device, D2: Device, E: FloatElement, E2: Element>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D2, E2>,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    pairwise_distance_of("pairwise_distance", x1, same_device(x2), p, eps, keepdim)
}

/// [`pairwise_distance`] on one device, its errors named after `op`.
pub(crate) fn pairwise_distance_of<D: Device, E: FloatElement>(
    op: &'static str,
    x1: &Tensor<D, E>,
    x2: &Tensor<D, E>,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> Result<Tensor<D, E>> {
    if p.is_nan() || p <= 0.0 {
        return Err(Error::Argument {
            op,
            device: D::name(),
            reason: format!("the norm's p must be positive, not {p}"),
        });
    }
    let diff = x1.try_sub(x2)?.try_add_scalar(E::from_f64(eps))?;
    let sum = |t: Tensor<D, E>| if keepdim { t.try_sum_keepdim(-1) } else { t.try_sum_axis(-1) };
    if p == 2.0 {
        sum(diff.try_square()?)?.try_sqrt()
    } else if p == 1.0 {
        sum(diff.try_abs()?)
    } else if p.is_infinite() {
        let abs = diff.try_abs()?;
        if keepdim { abs.try_max_keepdim(-1) } else { abs.try_max_axis(-1) }
    } else {
        sum(diff.try_abs()?.try_powf(E::from_f64(p))?)?.try_powf(E::from_f64(1.0 / p))
    }
}

/// `x` divided by its `p`-norm along `axis` (negative counts from the
/// end), kept at `eps` or above, PyTorch's `F.normalize(x, p, dim, eps)`
/// (`p = 2`, `dim = 1`, `eps = 1e-12` by default): rows of unit length,
/// and a zero row stays zero. Fails on an axis out of range.
///
/// ```
/// use devtensor::nn::normalize;
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0, 0.0, 0.0], [2, 2]);
/// assert_eq!(normalize(&x, 2.0, 1, 1e-12).to_vec(), vec![0.6, 0.8, 0.0, 0.0]);
/// ```
#[fallible(free)]
pub fn normalize<D: Device, E: FloatElement>(x: &Tensor<D, E>, p: f64, axis: isize, eps: f64) -> Tensor<D, E> {
    x.try_div(&x.try_vector_norm_keepdim(p, axis)?.try_clamp_min(E::from_f64(eps))?)
}

/// The `p`-norm distance between every row of `x1` and every row of `x2`,
/// PyTorch's `torch.cdist(x1, x2, p)` (`p = 2` by default): `x1`
/// `[.., P, M]` and `x2` `[.., R, M]`, their batch axes broadcast, give
/// `[.., P, R]`. `p` may be 0 (the count of differing coordinates) or
/// `f64::INFINITY`, whose gradient goes in full to every coordinate that
/// ties for the largest difference, as PyTorch's does. The gradient at a
/// zero distance is 0. Computed from the differences directly, so it
/// holds `P · R · M` of them at once (PyTorch's default switches to a
/// product for large `p = 2` inputs, with other rounding).
///
/// Fails unless both are at least 2-D with one row width, when the batch
/// axes do not broadcast, and on a negative or NaN `p`.
///
/// ```
/// use devtensor::nn::cdist;
/// use devtensor::{Cpu, Tensor};
/// let points = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, 3.0, 4.0], [2, 2]);
/// assert_eq!(cdist(&points, &points, 2.0).to_vec2(), vec![vec![0.0, 5.0], vec![5.0, 0.0]]);
/// ```
#[fallible(free)]
pub fn cdist<D: Device, D2: Device, E: FloatElement, E2: Element>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D2, E2>,
    p: f64,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    cdist_of(x1, same_device(x2), p)
}

/// [`cdist`] on one device.
fn cdist_of<D: Device, E: FloatElement>(x1: &Tensor<D, E>, x2: &Tensor<D, E>, p: f64) -> Result<Tensor<D, E>> {
    let fail = |reason: String| Error::Shape {
        op: "cdist",
        device: D::name(),
        shapes: vec![x1.shape().clone(), x2.shape().clone()],
        reason,
    };
    if x1.rank() < 2 || x2.rank() < 2 {
        return Err(fail("expected x1 [.., P, M] and x2 [.., R, M], at least 2-D".into()));
    }
    let (m1, m2) = (x1.dims()[x1.rank() - 1], x2.dims()[x2.rank() - 1]);
    if m1 != m2 {
        return Err(fail(format!("x1 and x2 must have the same number of columns, {m1} and {m2}")));
    }
    if p.is_nan() || p < 0.0 {
        return Err(Error::Argument {
            op: "cdist",
            device: D::name(),
            reason: format!("p must be non-negative, not {p}"),
        });
    }
    // [.., P, 1, M] - [.., 1, R, M]: every pair's difference.
    let diff = x1.try_unsqueeze(-2)?.try_sub(&x2.try_unsqueeze(-3)?)?;
    if m1 == 0 {
        // Rows of no coordinates are at distance 0 under every norm.
        return diff.try_sum_axis(-1);
    }
    if p.is_infinite() {
        // The largest difference, with its gradient to every coordinate
        // at it: `max + Σ (|d| - max) · [|d| = max]` is the max in value,
        // and each tied coordinate's `|d|` carries the gradient.
        let abs = diff.try_abs()?;
        let max = abs.try_amax_keepdim(-1)?.detach();
        let ties = abs.try_eq(&max)?.try_to_dtype::<E>()?;
        return max.try_add(&abs.try_sub(&max)?.try_mul(&ties)?.try_sum_keepdim(-1)?)?.try_squeeze(-1);
    }
    diff.try_vector_norm_axis(p, -1)
}
