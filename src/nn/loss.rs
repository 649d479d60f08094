//! Loss functions, with PyTorch's definitions and defaults. Targets must be
//! on the predictions' device: a mismatch is a compile error.

use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;

/// How per-element losses are combined, PyTorch's `reduction`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean (the default); for cross-entropy, over the targets not ignored.
    #[default]
    Mean,
    /// The sum.
    Sum,
    /// No reduction: one loss per element (per target for cross-entropy).
    None,
}

impl Reduction {
    fn apply<D: Device, E: FloatElement>(self, losses: Tensor<D, E>) -> Result<Tensor<D, E>> {
        match self {
            Reduction::Mean => losses.try_mean(),
            Reduction::Sum => losses.try_sum(),
            Reduction::None => Ok(losses),
        }
    }
}

/// The options of [`try_cross_entropy_with`], PyTorch's defaults by
/// `Default`: mean reduction, no label smoothing, `ignore_index = -100`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropy {
    /// How the per-target losses are combined.
    pub reduction: Reduction,
    /// `ε` in `(1 - ε) · nll + ε · mean over classes of -log p`.
    pub label_smoothing: f64,
    /// Targets equal to this contribute nothing (and are not counted by the mean).
    pub ignore_index: Option<i64>,
}

impl Default for CrossEntropy {
    fn default() -> Self {
        CrossEntropy { reduction: Reduction::Mean, label_smoothing: 0.0, ignore_index: Some(-100) }
    }
}

/// The cross-entropy of `logits` for the classes `labels`, PyTorch's
/// `F.cross_entropy` with its defaults; see [`try_cross_entropy_with`].
///
/// ```
/// use devtensor::nn::try_cross_entropy;
/// use devtensor::{Cpu, Tensor};
/// let logits = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, 2.0, 0.0], [2, 2]);
/// let labels = Tensor::<Cpu, i64>::from_vec(vec![1, 0], [2]);
/// let loss = try_cross_entropy(&logits, &labels)?;
/// let expected = (2f64.ln() + (1.0 + (-2f64).exp()).ln()) / 2.0;
/// assert!((loss.item() - expected).abs() < 1e-12);
/// # Ok::<(), devtensor::Error>(())
/// ```
///
/// Labels on another device than the logits do not compile:
/// ```compile_fail,E0277
/// use devtensor::nn::cross_entropy;
/// use devtensor::{Cpu, Cuda, Tensor};
/// fn loss(logits: &Tensor<Cuda<0>>, labels: &Tensor<Cpu, i64>) -> Tensor<Cuda<0>> {
///     cross_entropy(logits, labels) // error: expected all tensors to be on the same device
/// }
/// ```
#[fallible(free)]
pub fn cross_entropy<D: Device, D2: Device, E: FloatElement, L: Element>(
    logits: &Tensor<D, E>,
    labels: &Tensor<D2, L>,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    i64: SameDtype<L>,
{
    try_cross_entropy_with(logits, labels, &CrossEntropy::default())
}

/// The cross-entropy of `logits` (`[C]`, `[N, C]` or `[N, C, d..]`,
/// unnormalised scores) for the class indices `labels` (`[]`, `[N]` or
/// `[N, d..]`), PyTorch's `F.cross_entropy`: `-log softmax(logits)[label]`
/// per target, with label smoothing and an ignored index as `options` say.
///
/// Fails when the shapes do not fit or a label (other than the ignored
/// one) is outside `0..C`.
#[fallible(free)]
pub fn cross_entropy_with<D: Device, D2: Device, E: FloatElement, L: Element>(
    logits: &Tensor<D, E>,
    labels: &Tensor<D2, L>,
    options: &CrossEntropy,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    i64: SameDtype<L>,
{
    let labels: &Tensor<D, i64> = same_device(labels);
    let (rows, targets) = class_rows("cross_entropy", logits, labels)?;
    let log_p = rows.try_log_softmax(-1)?;
    negative_log_likelihood("cross_entropy", &log_p, &targets, labels, options)
}

/// The negative log-likelihood of log-probabilities `log_p` (shaped as
/// cross-entropy's logits) for the classes `labels`, PyTorch's `F.nll_loss`
/// (mean over targets not equal to `-100`).
#[fallible(free)]
pub fn nll_loss<D: Device, D2: Device, E: FloatElement, L: Element>(
    log_p: &Tensor<D, E>,
    labels: &Tensor<D2, L>,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    i64: SameDtype<L>,
{
    let labels: &Tensor<D, i64> = same_device(labels);
    let (rows, targets) = class_rows("nll_loss", log_p, labels)?;
    negative_log_likelihood("nll_loss", &rows, &targets, labels, &CrossEntropy::default())
}

/// The scores as rows `[M, C]` and the labels as `[M]`, after checking
/// that their shapes fit (`[N, C, d..]` with `[N, d..]`).
fn class_rows<D: Device, E: FloatElement>(
    op: &'static str,
    scores: &Tensor<D, E>,
    labels: &Tensor<D, i64>,
) -> Result<(Tensor<D, E>, Tensor<D, i64>)> {
    let dims = scores.dims();
    let expected: Vec<usize> = match dims.len() {
        0 => vec![usize::MAX], // never matches: a rank-0 score has no classes
        1 => vec![],
        _ => [&dims[..1], &dims[2..]].concat(),
    };
    if labels.dims() != expected.as_slice() {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![scores.shape().clone(), labels.shape().clone()],
            reason: "expected scores [N, C, d..] (or [C]) with labels [N, d..] (or [])".into(),
        });
    }
    let classes = if dims.len() == 1 { dims[0] } else { dims[1] };
    // [N, C, d..] -> [N, d.., C] -> [M, C]
    let rows = match dims.len() {
        1 | 2 => scores.try_reshape([labels.elem_count(), classes])?,
        rank => {
            let mut axes: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
            axes.push(1);
            scores.try_permute(axes)?.try_reshape([labels.elem_count(), classes])?
        }
    };
    Ok((rows, labels.try_reshape([labels.elem_count()])?))
}

/// `-log_p[label]` per row, smoothed and with ignored targets zeroed, then
/// reduced; `None` keeps the labels' shape.
fn negative_log_likelihood<D: Device, E: FloatElement>(
    op: &'static str,
    log_p: &Tensor<D, E>,
    targets: &Tensor<D, i64>,
    labels: &Tensor<D, i64>,
    options: &CrossEntropy,
) -> Result<Tensor<D, E>> {
    let keep = match options.ignore_index {
        Some(ignored) => Some(targets.try_ne_scalar(ignored)?),
        None => None,
    };
    // Ignored targets read class 0 and are zeroed below.
    let safe = match &keep {
        Some(keep) => keep.try_where_cond(targets, &Tensor::<D, i64>::try_scalar(0)?)?,
        None => targets.clone(),
    };
    // The gather checks the targets; its error is put in the loss's words.
    let picked = log_p.try_gather(1, &safe.try_unsqueeze(1)?).map_err(|e| match e {
        Error::Index { index, .. } => {
            let classes = log_p.dims()[1];
            let ignored = options.ignore_index.map(|i| format!(" (or the ignore_index {i})")).unwrap_or_default();
            Error::Argument {
                op,
                device: D::name(),
                reason: format!(
                    "target {index} is out of range for {classes} classes: targets must be in 0..{classes}{ignored}"
                ),
            }
        }
        other => other,
    })?;
    let picked = picked.try_squeeze(1)?;
    let mut losses = picked.try_neg()?;
    let eps = options.label_smoothing;
    if eps != 0.0 {
        let smooth = log_p.try_mean_axis(-1)?.try_neg()?;
        losses = losses.try_mul_scalar(E::from_f64(1.0 - eps))?.try_add(&smooth.try_mul_scalar(E::from_f64(eps))?)?;
    }
    let Some(keep) = keep else {
        return match options.reduction {
            Reduction::None => losses.try_reshape(labels.shape().clone()),
            other => other.apply(losses),
        };
    };
    let losses = keep.try_where_cond(&losses, &Tensor::<D, E>::try_scalar(E::ZERO)?)?;
    match options.reduction {
        Reduction::None => losses.try_reshape(labels.shape().clone()),
        Reduction::Sum => losses.try_sum(),
        // Over the targets kept, as PyTorch: NaN (0 / 0) when all are ignored.
        Reduction::Mean => losses.try_sum()?.try_div(&keep.try_sum()?.try_to_dtype::<E>()?),
    }
}

/// Checks that a prediction and its target broadcast together.
fn paired<D: Device, E: FloatElement>(op: &'static str, pred: &Tensor<D, E>, target: &Tensor<D, E>) -> Result<()> {
    if pred.shape().broadcast_with(target.shape()).is_none() {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![pred.shape().clone(), target.shape().clone()],
            reason: "the prediction and the target must have broadcastable shapes".into(),
        });
    }
    Ok(())
}

/// Defines a loss of a prediction and a target of the same device.
macro_rules! pointwise_loss {
    ($($try_name:ident, $name:ident, $losses:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        /// Fails when the shapes do not broadcast together.
        #[fallible(free, $try_name)]
        pub fn $name<D: Device, D2: Device, E: FloatElement, E2: Element>(
            pred: &Tensor<D, E>,
            target: &Tensor<D2, E2>,
            reduction: Reduction,
        ) -> Tensor<D, E>
        where
            D: SameDevice<D2>,
            E: SameDtype<E2>,
        {
            let target: &Tensor<D, E> = same_device(target);
            paired(stringify!($name), pred, target)?;
            reduction.apply($losses(pred, target)?)
        }
    )*};
}

pointwise_loss! {
    try_mse_loss, mse_loss, squared_error, "`(pred - target)^2`, PyTorch's `F.mse_loss`.";
    try_l1_loss, l1_loss, absolute_error, "`|pred - target|`, PyTorch's `F.l1_loss`.";
    try_binary_cross_entropy_with_logits, binary_cross_entropy_with_logits, logistic_loss,
        "The binary cross-entropy of `sigmoid(pred)` for targets in `[0, 1]`, PyTorch's \
         `F.binary_cross_entropy_with_logits`, computed as \
         `max(x, 0) - x t + log(1 + e^-|x|)` so that large logits do not overflow.";
}

fn squared_error<D: Device, E: FloatElement>(p: &Tensor<D, E>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    p.try_sub(t)?.try_square()
}

fn absolute_error<D: Device, E: FloatElement>(p: &Tensor<D, E>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    p.try_sub(t)?.try_abs()
}

fn logistic_loss<D: Device, E: FloatElement>(x: &Tensor<D, E>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    let softplus_of_minus_abs = x.try_abs()?.try_neg()?.try_exp()?.try_add_scalar(E::ONE)?.try_log()?;
    x.try_relu()?.try_sub(&x.try_mul(t)?)?.try_add(&softplus_of_minus_abs)
}
