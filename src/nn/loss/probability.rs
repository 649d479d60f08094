//! Losses of probabilities: binary cross-entropy on probabilities and on
//! logits with class weights, and the Kullback-Leibler divergence.

use super::{Derivative, Reduction, paired, same_shape, with_gradients};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;
use std::sync::Arc;

/// PyTorch's floor under `log`: a probability of exactly 0 or 1 costs 100,
/// not infinity.
const LOG_FLOOR: f64 = -100.0;
/// PyTorch's floor under `x (1 - x)` in the gradient of
/// `binary_cross_entropy`: 1e-12, as the `f32` its kernel holds it in
/// (the gradient of a saturated `f64` probability agrees to the last digit
/// with it, and is 4e-9 off without).
const BCE_EPSILON: f64 = 1e-12f32 as f64;

/// The binary cross-entropy of probabilities `pred` (in `[0, 1]`, a
/// sigmoid's output) for targets in `[0, 1]`, PyTorch's
/// `F.binary_cross_entropy` (`nn.BCELoss`):
/// `-w · (t · log(p) + (1 - t) · log(1 - p))` with each log floored at
/// -100, so that a saturated probability gives a finite loss, and PyTorch's
/// gradient `w · (p - t) / max(p (1 - p), 1e-12)`. `weight` (broadcast to
/// `pred`) rescales each element's loss. A probability outside `[0, 1]`
/// gives NaN (PyTorch's CPU kernel refuses it). Prefer
/// [`binary_cross_entropy_with_logits`](super::binary_cross_entropy_with_logits)
/// on the logits: it is exact where this one saturates.
///
/// Fails when the target's shape is not the prediction's (PyTorch refuses
/// to broadcast them here) or the weight does not broadcast to it.
///
/// ```
/// use devtensor::nn::{Reduction, binary_cross_entropy};
/// use devtensor::{Cpu, Tensor};
/// let p = Tensor::<Cpu, f64>::from_vec(vec![0.9, 0.2, 1.0], [3]).requires_grad();
/// let t = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0, 0.0], [3]);
/// let loss = binary_cross_entropy(&p, &t, None, Reduction::None);
/// let want = [-(0.9f64.ln()), -(0.8f64.ln()), 100.0];
/// for (got, want) in loss.to_vec().iter().zip(want) {
///     assert!((got - want).abs() < 1e-12);
/// }
/// let grads = loss.sum().backward();
/// // Finite where p saturates: (p - t) / 1e-12.
/// assert!((grads.get(&p).unwrap().to_vec()[2] / 1e12 - 1.0).abs() < 1e-8);
/// ```
#[fallible(free)]
pub fn binary_cross_entropy<D: Device, D2: Device, E: FloatElement, E2: Element>(
    pred: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    weight: Option<&Tensor<D, E>>,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    binary_cross_entropy_on(pred, same_device(target), weight, reduction)
}

/// [`binary_cross_entropy`] on one device and element type.
fn binary_cross_entropy_on<D: Device, E: FloatElement>(
    pred: &Tensor<D, E>,
    target: &Tensor<D, E>,
    weight: Option<&Tensor<D, E>>,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    const OP: &str = "binary_cross_entropy";
    same_shape(OP, pred, target)?;
    let (p, t) = (pred.detach(), target.detach());
    let floor = E::from_f64(LOG_FLOOR);
    let log_p = p.try_log()?.try_clamp_min(floor)?;
    let log_q = p.try_neg()?.try_log1p()?.try_clamp_min(floor)?;
    // (t - 1) log(1 - p) - t log(p), as PyTorch's kernel computes it.
    let losses = t.try_sub_scalar(E::ONE)?.try_mul(&log_q)?.try_sub(&t.try_mul(&log_p)?)?;
    let losses = weighted(OP, losses, weight)?;
    let w = weight.map(Tensor::detach);
    let toward_pred: Derivative<D, E> = {
        let w = w.clone();
        Arc::new(move |x: &[Tensor<D, E>]| {
            let (p, t) = (&x[0], &x[1]);
            let spread = p.try_mul(&p.try_rsub_scalar(E::ONE)?)?.try_clamp_min(E::from_f64(BCE_EPSILON))?;
            weighted(OP, p.try_sub(t)?.try_div(&spread)?, w.as_ref())
        })
    };
    // PyTorch's gradient for the target: -logit(p).
    let toward_target: Derivative<D, E> = Arc::new(move |x: &[Tensor<D, E>]| {
        let p = &x[0];
        weighted(OP, p.try_neg()?.try_log1p()?.try_sub(&p.try_log()?)?, w.as_ref())
    });
    let losses = with_gradients(OP, losses, &[pred, target], [toward_pred, toward_target])?;
    reduction.apply(losses)
}

/// The binary cross-entropy of `sigmoid(pred)` for targets in `[0, 1]`,
/// PyTorch's `F.binary_cross_entropy_with_logits`
/// (`nn.BCEWithLogitsLoss`): `(1 - t) x + log(1 + e^-x)`, computed as
/// `(1 - t) x + max(-x, 0) + log(1 + e^-|x|)` so that large logits do not
/// overflow, with PyTorch's gradient `σ(x) - t`.
///
/// Fails when the target's shape is not the prediction's (PyTorch refuses
/// to broadcast them here).
///
/// ```
/// use devtensor::nn::{Reduction, binary_cross_entropy_with_logits};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::from_vec(vec![0.0, 1000.0], [2]).requires_grad();
/// let t = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0], [2]);
/// let loss = binary_cross_entropy_with_logits(&x, &t, Reduction::None);
/// assert_eq!(loss.to_vec(), vec![2f64.ln(), 1000.0]);
/// let grads = loss.sum().backward();
/// assert_eq!(grads.get(&x).unwrap().to_vec(), vec![-0.5, 1.0]);
/// ```
#[fallible(free)]
pub fn binary_cross_entropy_with_logits<D: Device, D2: Device, E: FloatElement, E2: Element>(
    pred: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    try_binary_cross_entropy_with_logits_weighted(pred, target, None, None, reduction)
}

/// [`binary_cross_entropy_with_logits`] with PyTorch's `weight` (each element's loss rescaled, broadcast to
/// `pred`) and `pos_weight` (the positive term's weight, broadcast along
/// the last axis: one per class in multi-label classification):
/// `w · ((1 - t) x + (1 + (pw - 1) t) · log(1 + e^-x))`, computed without
/// overflow, with PyTorch's gradient `w · ((1 + (pw - 1) t) σ(x) - pw t)`
/// (exact at `x = 0` too).
///
/// Fails when the target's shape is not the prediction's (PyTorch refuses
/// to broadcast them here) or a weight does not broadcast to it.
///
/// ```
/// use devtensor::nn::{Reduction, binary_cross_entropy_with_logits_weighted};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::zeros([2, 3]).requires_grad();
/// let t = Tensor::<Cpu, f64>::from_vec(vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [2, 3]);
/// let pos_weight = Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0, 3.0], [3]);
/// let loss = binary_cross_entropy_with_logits_weighted(&x, &t, None, Some(&pos_weight), Reduction::Sum);
/// let ln2 = 2f64.ln();
/// assert!((loss.item() - ln2 * (1.0 + 1.0 + 3.0 + 1.0 + 2.0 + 1.0)).abs() < 1e-12);
/// let grads = loss.backward();
/// assert_eq!(grads.get(&x).unwrap().to_vec(), vec![-0.5, 0.5, -1.5, 0.5, -1.0, 0.5]);
/// ```
#[fallible(free)]
pub fn binary_cross_entropy_with_logits_weighted<D: Device, D2: Device, E: FloatElement, E2: Element>(
    pred: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    weight: Option<&Tensor<D, E>>,
    pos_weight: Option<&Tensor<D, E>>,
    reduction: Reduction,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    binary_cross_entropy_with_logits_weighted_on(pred, same_device(target), weight, pos_weight, reduction)
}

/// [`binary_cross_entropy_with_logits_weighted`] on one device and element type.
fn binary_cross_entropy_with_logits_weighted_on<D: Device, E: FloatElement>(
    pred: &Tensor<D, E>,
    target: &Tensor<D, E>,
    weight: Option<&Tensor<D, E>>,
    pos_weight: Option<&Tensor<D, E>>,
    reduction: Reduction,
) -> Result<Tensor<D, E>> {
    const OP: &str = "binary_cross_entropy_with_logits";
    same_shape(OP, pred, target)?;
    if let Some(pw) = pos_weight {
        broadcasts_to(OP, "pos_weight", pw, pred)?;
    }
    let (x, t, pw) = (pred.detach(), target.detach(), pos_weight.map(Tensor::detach));
    let losses = t
        .try_rsub_scalar(E::ONE)?
        .try_mul(&x)?
        .try_add(&positive_weight(pw.as_ref(), &t)?.try_mul(&softplus_neg(&x)?)?)?;
    let losses = weighted(OP, losses, weight)?;
    let w = weight.map(Tensor::detach);
    let toward_pred: Derivative<D, E> = {
        let (w, pw) = (w.clone(), pw.clone());
        Arc::new(move |operands: &[Tensor<D, E>]| {
            let (x, t) = (&operands[0], &operands[1]);
            let positive = match &pw {
                Some(pw) => pw.try_mul(t)?,
                None => t.clone(),
            };
            weighted(OP, positive_weight(pw.as_ref(), t)?.try_mul(&x.try_sigmoid()?)?.try_sub(&positive)?, w.as_ref())
        })
    };
    let toward_target: Derivative<D, E> = Arc::new(move |operands: &[Tensor<D, E>]| {
        let x = &operands[0];
        let derivative = match &pw {
            Some(pw) => pw.try_sub_scalar(E::ONE)?.try_mul(&softplus_neg(x)?)?.try_sub(x)?,
            None => x.try_neg()?,
        };
        weighted(OP, derivative, w.as_ref())
    });
    let losses = with_gradients(OP, losses, &[pred, target], [toward_pred, toward_target])?;
    reduction.apply(losses)
}

/// `1 + (pw - 1) t`, the weight of the positive term's log-sigmoid (1
/// without a `pos_weight`).
fn positive_weight<D: Device, E: FloatElement>(pw: Option<&Tensor<D, E>>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    match pw {
        Some(pw) => pw.try_sub_scalar(E::ONE)?.try_mul(t)?.try_add_scalar(E::ONE),
        None => t.try_ones_like(),
    }
}

/// `softplus(-x) = log(1 + e^-x)`, as `max(-x, 0) + log(1 + e^-|x|)`, which
/// does not overflow.
fn softplus_neg<D: Device, E: FloatElement>(x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    x.try_neg()?.try_relu()?.try_add(&x.try_abs()?.try_neg()?.try_exp()?.try_log1p()?)
}

/// `losses · weight`, the weight broadcast to the losses' shape.
fn weighted<D: Device, E: FloatElement>(
    op: &'static str,
    losses: Tensor<D, E>,
    weight: Option<&Tensor<D, E>>,
) -> Result<Tensor<D, E>> {
    let Some(weight) = weight else { return Ok(losses) };
    broadcasts_to(op, "weight", weight, &losses)?;
    losses.try_mul(&weight.detach())
}

/// Checks that a loss's `weight` (named `what`) broadcasts to `input`'s shape.
fn broadcasts_to<D: Device, E: FloatElement>(
    op: &'static str,
    what: &str,
    weight: &Tensor<D, E>,
    input: &Tensor<D, E>,
) -> Result<()> {
    if weight.shape().broadcast_with(input.shape()).as_ref() == Some(input.shape()) {
        return Ok(());
    }
    Err(Error::Shape {
        op,
        device: D::name(),
        shapes: vec![input.shape().clone(), weight.shape().clone()],
        reason: format!("the {what} must broadcast to the input's shape"),
    })
}

/// The reduction of [`kl_div`]: PyTorch's four, `BatchMean` among them
/// (the sum over the batch size, the mathematically right mean of a
/// divergence). Every [`Reduction`] converts into it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlReduction {
    /// The mean over every element (PyTorch's default, which warns that it
    /// is not the divergence's mean).
    #[default]
    Mean,
    /// The sum divided by the first axis's length (`reduction="batchmean"`).
    BatchMean,
    /// The sum.
    Sum,
    /// One loss per element.
    None,
}

impl From<Reduction> for KlReduction {
    fn from(reduction: Reduction) -> Self {
        match reduction {
            Reduction::Mean => KlReduction::Mean,
            Reduction::Sum => KlReduction::Sum,
            Reduction::None => KlReduction::None,
        }
    }
}

/// The Kullback-Leibler divergence of the distribution `target` from the
/// log-probabilities `input`, PyTorch's `F.kl_div` (`nn.KLDivLoss`):
/// per element `t · (log t - input)`, zero where `t = 0`, or with
/// `log_target` (the target given as log-probabilities too)
/// `e^t · (t - input)`. `reduction` takes any [`Reduction`] or
/// [`KlReduction::BatchMean`], the divergence of each sample averaged over
/// the batch (what knowledge distillation uses).
///
/// Fails when the shapes do not broadcast together.
///
/// ```
/// use devtensor::nn::{KlReduction, kl_div};
/// use devtensor::{Cpu, Tensor};
/// let log_p = Tensor::<Cpu, f64>::from_vec(vec![0.25f64.ln(), 0.75f64.ln()], [1, 2]);
/// let q = Tensor::<Cpu, f64>::from_vec(vec![0.5, 0.5], [1, 2]);
/// let d = kl_div(&log_p, &q, KlReduction::BatchMean, false);
/// let want = 0.5 * (0.5f64 / 0.25).ln() + 0.5 * (0.5f64 / 0.75).ln();
/// assert!((d.item() - want).abs() < 1e-12);
/// ```
#[fallible(free)]
pub fn kl_div<D: Device, D2: Device, E: FloatElement, E2: Element>(
    input: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    reduction: impl Into<KlReduction>,
    log_target: bool,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    kl_div_on(input, same_device(target), reduction.into(), log_target)
}

/// [`kl_div`] on one device and element type.
fn kl_div_on<D: Device, E: FloatElement>(
    input: &Tensor<D, E>,
    target: &Tensor<D, E>,
    reduction: KlReduction,
    log_target: bool,
) -> Result<Tensor<D, E>> {
    const OP: &str = "kl_div";
    paired(OP, input, target)?;
    let losses = match log_target {
        true => target.try_exp()?.try_mul(&target.try_sub(input)?)?,
        false => {
            // xlogy(t, t): the log of 1 where t = 0, so that neither the
            // value nor a target's gradient meets log(0) (a negative
            // target still gives NaN, as in PyTorch).
            let zero = target.try_eq_scalar(E::ZERO)?;
            let safe = zero.try_where_cond(&Tensor::<D, E>::try_scalar(E::ONE)?, target)?;
            target.try_mul(&safe.try_log()?)?.try_sub(&target.try_mul(input)?)?
        }
    };
    match reduction {
        KlReduction::Mean => losses.try_mean(),
        KlReduction::Sum => losses.try_sum(),
        KlReduction::None => Ok(losses),
        // A scalar has no batch axis: its sum, as in PyTorch.
        KlReduction::BatchMean => match losses.dims().first() {
            Some(&batch) => losses.try_sum()?.try_div_scalar(E::from_f64(batch as f64)),
            None => losses.try_sum(),
        },
    }
}
