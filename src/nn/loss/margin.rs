//! Losses that compare scores or embeddings with a margin: ranking, hinge,
//! cosine and triplet losses, for metric learning and siamese networks.

use super::{Reduction, paired};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::nn::distance::pairwise_distance_of;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// `max(0, -y (x1 - x2) + margin)` for labels `y` of 1 (`x1` should rank
/// higher) or -1, PyTorch's `F.margin_ranking_loss`
/// (`nn.MarginRankingLoss`, `margin` 0 by default).
///
/// Fails when the shapes do not broadcast together.
///
/// ```
/// use devtensor::nn::{Reduction, margin_ranking_loss};
/// use devtensor::{Cpu, Tensor};
/// let x1 = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0], [2]);
/// let x2 = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0], [2]);
/// let y = Tensor::<Cpu, f64>::from_vec(vec![1.0, 1.0], [2]);
/// let loss = margin_ranking_loss(&x1, &x2, &y, 0.5, Reduction::None);
/// assert_eq!(loss.to_vec(), vec![0.0, 1.5]);
/// ```
#[fallible(free)]
pub fn margin_ranking_loss<D: Device, D2: Device, D3: Device, E: FloatElement, E2: Element, E3: Element>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D2, E2>,
    y: &Tensor<D3, E3>,
    margin: f64,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2> + SameDevice<D3>,
    E: SameDtype<E2> + SameDtype<E3>,
{
    margin_ranking_loss_on(x1, same_device(x2), same_device(y), margin, reduction)
}

/// [`margin_ranking_loss`] on one device and element type.
fn margin_ranking_loss_on<D: Device, E: FloatElement>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D, E>,
    y: &Tensor<D, E>,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    const OP: &str = "margin_ranking_loss";
    paired(OP, x1, x2)?;
    paired(OP, x1, y)?;
    let losses = y.try_neg()?.try_mul(&x1.try_sub(x2)?)?.try_add_scalar(E::from_f64(margin))?;
    reduction.apply(losses.try_clamp_min(E::ZERO)?)
}

/// `x` where `y = 1`, `max(0, margin - x)` where `y = -1`, PyTorch's
/// `F.hinge_embedding_loss` (`nn.HingeEmbeddingLoss`, `margin` 1 by
/// default): `x` is usually a distance between two embeddings.
///
/// Fails when the shapes do not broadcast together.
///
/// ```
/// use devtensor::nn::{Reduction, hinge_embedding_loss};
/// use devtensor::{Cpu, Tensor};
/// let d = Tensor::<Cpu, f64>::from_vec(vec![0.3, 0.3, 2.0], [3]);
/// let y = Tensor::<Cpu, f64>::from_vec(vec![1.0, -1.0, -1.0], [3]);
/// assert_eq!(hinge_embedding_loss(&d, &y, 1.0, Reduction::None).to_vec(), vec![0.3, 0.7, 0.0]);
/// ```
#[fallible(free)]
pub fn hinge_embedding_loss<D: Device, D2: Device, E: FloatElement, E2: Element>(
    x: &Tensor<D, E>,
    y: &Tensor<D2, E2>,
    margin: f64,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    hinge_embedding_loss_on(x, same_device(y), margin, reduction)
}

/// [`hinge_embedding_loss`] on one device and element type.
fn hinge_embedding_loss_on<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    y: &Tensor<D, E>,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    const OP: &str = "hinge_embedding_loss";
    paired(OP, x, y)?;
    let zero = Tensor::<D, E>::try_scalar(E::ZERO)?;
    let apart = x.try_rsub_scalar(E::from_f64(margin))?.try_clamp_min(E::ZERO)?;
    let from_margin = y.try_ne_scalar(E::ONE)?.try_where_cond(&apart, &zero)?;
    let from_self = y.try_ne_scalar(E::from_f64(-1.0))?.try_where_cond(x, &zero)?;
    reduction.apply(from_margin.try_add(&from_self)?)
}

/// `log(1 + e^(-y x))` for labels `y` of 1 or -1, PyTorch's
/// `F.soft_margin_loss` (`nn.SoftMarginLoss`): a smooth hinge for two-class
/// classification.
///
/// Fails when the shapes do not broadcast together.
///
/// ```
/// use devtensor::nn::{Reduction, soft_margin_loss};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 2.0], [2]);
/// let y = Tensor::<Cpu, f64>::from_vec(vec![1.0, -1.0], [2]);
/// let loss = soft_margin_loss(&x, &y, Reduction::None).to_vec();
/// assert!((loss[0] - 2f64.ln()).abs() < 1e-12 && (loss[1] - (1.0 + 2f64.exp()).ln()).abs() < 1e-12);
/// ```
#[fallible(free)]
pub fn soft_margin_loss<D: Device, D2: Device, E: FloatElement, E2: Element>(
    x: &Tensor<D, E>,
    y: &Tensor<D2, E2>,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    soft_margin_loss_on(x, same_device(y), reduction)
}

/// [`soft_margin_loss`] on one device and element type.
fn soft_margin_loss_on<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    y: &Tensor<D, E>,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    paired("soft_margin_loss", x, y)?;
    reduction.apply(x.try_neg()?.try_mul(y)?.try_exp()?.try_log1p()?)
}

/// `1 - cos(x1, x2)` where `y = 1`, `max(0, cos(x1, x2) - margin)` where
/// `y = -1`, per row of `x1` and `x2` (`[N, D]` with `y` `[N]`, or `[D]`
/// with a rank-0 `y`), PyTorch's `F.cosine_embedding_loss`
/// (`nn.CosineEmbeddingLoss`, `margin` 0 by default); the cosine is
/// PyTorch's, with `1e-12` added to each squared norm.
///
/// Fails when the shapes do not fit.
///
/// ```
/// use devtensor::nn::{Reduction, cosine_embedding_loss};
/// use devtensor::{Cpu, Tensor};
/// let a = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0, 1.0, 0.0], [2, 2]);
/// let b = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0, 1.0, 0.0], [2, 2]);
/// let y = Tensor::<Cpu, f64>::from_vec(vec![1.0, -1.0], [2]);
/// let loss = cosine_embedding_loss(&a, &b, &y, 0.5, Reduction::None).to_vec();
/// assert!((loss[0] - 1.0).abs() < 1e-9 && (loss[1] - 0.5).abs() < 1e-9);
/// ```
#[fallible(free)]
pub fn cosine_embedding_loss<D: Device, D2: Device, D3: Device, E: FloatElement, E2: Element, E3: Element>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D2, E2>,
    y: &Tensor<D3, E3>,
    margin: f64,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2> + SameDevice<D3>,
    E: SameDtype<E2> + SameDtype<E3>,
{
    cosine_embedding_loss_on(x1, same_device(x2), same_device(y), margin, reduction)
}

/// [`cosine_embedding_loss`] on one device and element type.
fn cosine_embedding_loss_on<D: Device, E: FloatElement>(
    x1: &Tensor<D, E>,
    x2: &Tensor<D, E>,
    y: &Tensor<D, E>,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    const OP: &str = "cosine_embedding_loss";
    let rows_fit = x1.dims() == x2.dims() && matches!(x1.rank(), 1 | 2) && y.rank() + 1 == x1.rank();
    if !rows_fit || (x1.rank() == 2 && y.dims()[0] != x1.dims()[0]) {
        return Err(Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![x1.shape().clone(), x2.shape().clone(), y.shape().clone()],
            reason: "expected inputs [N, D] with labels [N], or [D] with a rank-0 label".into(),
        });
    }
    // PyTorch's: (x1 · x2) / sqrt((|x1|² + 1e-12)(|x2|² + 1e-12)).
    let axis = y.rank() as isize;
    let eps = E::from_f64(1e-12);
    let dot = x1.try_mul(x2)?.try_sum_axis(axis)?;
    let square1 = x1.try_square()?.try_sum_axis(axis)?.try_add_scalar(eps)?;
    let square2 = x2.try_square()?.try_sum_axis(axis)?.try_add_scalar(eps)?;
    let cos = dot.try_div(&square1.try_mul(&square2)?.try_sqrt()?)?;
    let zero = Tensor::<D, E>::try_scalar(E::ZERO)?;
    let similar = y.try_eq_scalar(E::ONE)?.try_where_cond(&cos.try_rsub_scalar(E::ONE)?, &zero)?;
    let apart = cos.try_sub_scalar(E::from_f64(margin))?.try_clamp_min(E::ZERO)?;
    let dissimilar = y.try_eq_scalar(E::from_f64(-1.0))?.try_where_cond(&apart, &zero)?;
    reduction.apply(similar.try_add(&dissimilar)?)
}

/// The options of [`triplet_margin_loss`], PyTorch's defaults by
/// `Default`: margin 1, the Euclidean distance (`p = 2`), `eps` 1e-6, no
/// swap, mean reduction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TripletMargin {
    /// How much closer the positive must be than the negative.
    pub margin: f64,
    /// The norm of the distance (`f64::INFINITY` for the largest difference).
    pub p: f64,
    /// Added to each difference before its norm, as PyTorch's
    /// `pairwise_distance` does.
    pub eps: f64,
    /// Whether the negative's distance is the smaller of its distances to
    /// the anchor and to the positive (the distance swap of Balntas et al.).
    pub swap: bool,
    /// How the per-triplet losses are combined.
    pub reduction: Reduction,
}

impl Default for TripletMargin {
    fn default() -> Self {
        TripletMargin { margin: 1.0, p: 2.0, eps: 1e-6, swap: false, reduction: Reduction::Mean }
    }
}

/// `max(d(a, p) - d(a, n) + margin, 0)` per triplet of rows (`[N, D]`, or
/// `[D]` for one), with `d` PyTorch's `pairwise_distance`: PyTorch's
/// `F.triplet_margin_loss` (`nn.TripletMarginLoss`).
///
/// Fails when the shapes differ or are not `[N, D]` or `[D]`, or `p` is
/// not positive.
///
/// ```
/// use devtensor::nn::{TripletMargin, triplet_margin_loss};
/// use devtensor::{Cpu, Tensor};
/// let anchor = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0], [1, 2]);
/// let positive = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.0], [1, 2]);
/// let negative = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1.5], [1, 2]);
/// let loss = triplet_margin_loss(&anchor, &positive, &negative, &TripletMargin::default());
/// assert!((loss.item() - 0.5).abs() < 1e-5);
/// ```
#[fallible(free)]
pub fn triplet_margin_loss<D: Device, D2: Device, D3: Device, E: FloatElement, E2: Element, E3: Element>(
    anchor: &Tensor<D, E>,
    positive: &Tensor<D2, E2>,
    negative: &Tensor<D3, E3>,
    options: &TripletMargin,
) -> Tensor<D, E>
where
    D: SameDevice<D2> + SameDevice<D3>,
    E: SameDtype<E2> + SameDtype<E3>,
{
    triplet_margin_loss_on(anchor, same_device(positive), same_device(negative), options)
}

/// [`triplet_margin_loss`] on one device and element type.
fn triplet_margin_loss_on<D: Device, E: FloatElement>(
    anchor: &Tensor<D, E>,
    positive: &Tensor<D, E>,
    negative: &Tensor<D, E>,
    options: &TripletMargin,
) -> Result<Tensor<D, E>> {
    const OP: &str = "triplet_margin_loss";
    if anchor.dims() != positive.dims() || anchor.dims() != negative.dims() || !matches!(anchor.rank(), 1 | 2) {
        return Err(Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![anchor.shape().clone(), positive.shape().clone(), negative.shape().clone()],
            reason: "expected anchor, positive and negative of one shape, [N, D] or [D]".into(),
        });
    }
    let distance = |a: &Tensor<D, E>, b: &Tensor<D, E>| pairwise_distance_of(OP, a, b, options.p, options.eps, false);
    let to_positive = distance(anchor, positive)?;
    let mut to_negative = distance(anchor, negative)?;
    if options.swap {
        to_negative = to_negative.try_minimum(&distance(positive, negative)?)?;
    }
    let losses = to_positive.try_sub(&to_negative)?.try_add_scalar(E::from_f64(options.margin))?;
    options.reduction.apply(losses.try_clamp_min(E::ZERO)?)
}
