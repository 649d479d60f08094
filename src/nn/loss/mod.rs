//! Loss functions, with PyTorch's definitions and defaults. Targets must be
//! on the predictions' device: a mismatch is a compile error.
//!
//! Here: cross-entropy (class indices, with class weights, or class
//! probabilities), negative log-likelihood and the regression losses
//! (`mse_loss`, `l1_loss`, `smooth_l1_loss`, `huber_loss`); in
//! `probability.rs` the binary cross-entropies and `kl_div`; in `margin.rs`
//! the ranking, hinge, cosine and triplet losses; in `ctc.rs` the CTC loss.

mod ctc;
mod margin;
mod probability;

pub use ctc::{CtcLoss, ctc_loss, try_ctc_loss};

pub use margin::{
    TripletMargin, cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, soft_margin_loss,
    triplet_margin_loss, try_cosine_embedding_loss, try_hinge_embedding_loss, try_margin_ranking_loss,
    try_soft_margin_loss, try_triplet_margin_loss,
};
pub use probability::{
    KlReduction, binary_cross_entropy, binary_cross_entropy_with_logits, binary_cross_entropy_with_logits_weighted,
    kl_div, try_binary_cross_entropy, try_binary_cross_entropy_with_logits,
    try_binary_cross_entropy_with_logits_weighted, try_kl_div,
};

use crate::autograd::{Context, Function, no_grad, try_apply};
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use devtensor_macros::fallible;
use std::sync::Arc;

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
    negative_log_likelihood("cross_entropy", &log_p, &targets, labels, None, options)
}

/// [`cross_entropy_with`] with a weight per class, PyTorch's
/// `F.cross_entropy(logits, labels, weight=weight, ...)` and
/// `nn.CrossEntropyLoss(weight=...)` (the class-balanced losses of
/// segmentation and imbalanced classification): each target's loss is
/// multiplied by its class's weight, label smoothing weighs each class's
/// term by its weight, and the mean divides by the sum of the weights of
/// the targets kept, not by their count. `weight` (`[C]`) is a constant,
/// as in PyTorch.
///
/// ```
/// use devtensor::nn::{CrossEntropy, cross_entropy_weighted};
/// use devtensor::{Cpu, Tensor};
/// let logits = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0, 2.0, 0.0], [2, 2]);
/// let labels = Tensor::<Cpu, i64>::from_vec(vec![1, 0], [2]);
/// let weight = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0], [2]);
/// let loss = cross_entropy_weighted(&logits, &labels, &weight, &CrossEntropy::default());
/// // (3 · ln 2 + 1 · ln(1 + e^-2)) / (3 + 1)
/// let expected = (3.0 * 2f64.ln() + (1.0 + (-2f64).exp()).ln()) / 4.0;
/// assert!((loss.item() - expected).abs() < 1e-12);
/// ```
///
/// Fails when the shapes do not fit (the weight must be `[C]`) or a label
/// (other than the ignored one) is outside `0..C`.
#[fallible(free)]
pub fn cross_entropy_weighted<D: Device, D2: Device, E: FloatElement, L: Element>(
    logits: &Tensor<D, E>,
    labels: &Tensor<D2, L>,
    weight: &Tensor<D, E>,
    options: &CrossEntropy,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    i64: SameDtype<L>,
{
    const OP: &str = "cross_entropy";
    let labels: &Tensor<D, i64> = same_device(labels);
    let weight = class_weight(OP, logits, weight)?;
    let (rows, targets) = class_rows(OP, logits, labels)?;
    let log_p = rows.try_log_softmax(-1)?;
    negative_log_likelihood(OP, &log_p, &targets, labels, Some(&weight), options)
}

/// The cross-entropy of `logits` against class probabilities `target` of
/// the same shape (`[C]`, `[N, C]` or `[N, C, d..]`), PyTorch's
/// `F.cross_entropy` with a float target (soft labels, mixup, knowledge
/// distillation): `-Σ_c w_c · t_c · log softmax(logits)_c` per target,
/// with `t` smoothed to `(1 - ε) t + ε / C` first. The mean divides by
/// the number of targets (`N · d..`), whatever the weights, and
/// `ignore_index` does not apply, as in PyTorch.
///
/// In PyTorch one `F.cross_entropy` takes both kinds of target and tells
/// them apart by dtype at run time; here class indices go to
/// [`cross_entropy`] and probabilities here, so a float target handed to
/// `cross_entropy` is a compile error naming the dtypes.
///
/// ```
/// use devtensor::nn::{CrossEntropy, cross_entropy_probs};
/// use devtensor::{Cpu, Tensor};
/// let logits = Tensor::<Cpu, f64>::from_vec(vec![0.0, 0.0], [1, 2]);
/// let target = Tensor::<Cpu, f64>::from_vec(vec![0.25, 0.75], [1, 2]);
/// let loss = cross_entropy_probs(&logits, &target, None, &CrossEntropy::default());
/// assert!((loss.item() - 2f64.ln()).abs() < 1e-12);
/// ```
///
/// Fails when `target`'s shape is not the logits' or a weight is not `[C]`.
#[fallible(free)]
pub fn cross_entropy_probs<D: Device, D2: Device, E: FloatElement, E2: Element>(
    logits: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    weight: Option<&Tensor<D, E>>,
    options: &CrossEntropy,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    cross_entropy_probs_on(logits, same_device(target), weight, options)
}

/// [`cross_entropy_probs`] on one device and element type.
fn cross_entropy_probs_on<D: Device, E: FloatElement>(
    logits: &Tensor<D, E>,
    target: &Tensor<D, E>,
    weight: Option<&Tensor<D, E>>,
    options: &CrossEntropy,
) -> Result<Tensor<D, E>> {
    const OP: &str = "cross_entropy";
    if logits.rank() == 0 || logits.shape() != target.shape() {
        return Err(Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![logits.shape().clone(), target.shape().clone()],
            reason: "expected class probabilities of the logits' shape, [N, C, d..] (or [C])".into(),
        });
    }
    let weight = weight.map(|w| class_weight(OP, logits, w)).transpose()?;
    let (rows, mut t) = (class_last(logits)?, class_last(target)?);
    let eps = options.label_smoothing;
    if eps != 0.0 {
        let classes = rows.dims()[1] as f64;
        t = t.try_mul_scalar(E::from_f64(1.0 - eps))?.try_add_scalar(E::from_f64(eps / classes))?;
    }
    let mut terms = rows.try_log_softmax(-1)?.try_mul(&t)?;
    if let Some(weight) = &weight {
        terms = terms.try_mul(weight)?;
    }
    let losses = terms.try_sum_axis(-1)?.try_neg()?;
    match options.reduction {
        Reduction::None => {
            let mut dims = logits.dims().to_vec();
            dims.remove(usize::from(dims.len() > 1));
            losses.try_reshape(dims)
        }
        other => other.apply(losses),
    }
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
    negative_log_likelihood("nll_loss", &rows, &targets, labels, None, &CrossEntropy::default())
}

/// [`nll_loss`] with PyTorch's options, `F.nll_loss(log_p, labels,
/// weight=weight, ignore_index=..., reduction=...)`: a weight per class
/// (`[C]`, or `None`) weighs each target's loss, and the mean divides by
/// the weights of the targets kept, as in [`cross_entropy_weighted`].
/// `options.label_smoothing` must be 0 (PyTorch's `nll_loss` has none).
///
/// ```
/// use devtensor::nn::{CrossEntropy, Reduction, nll_loss_with};
/// use devtensor::{Cpu, Tensor};
/// let log_p = Tensor::<Cpu, f64>::from_vec(vec![-1.0, -2.0, -3.0, -4.0], [2, 2]);
/// let labels = Tensor::<Cpu, i64>::from_vec(vec![1, 0], [2]);
/// let weight = Tensor::<Cpu, f64>::from_vec(vec![0.5, 2.0], [2]);
/// let options = CrossEntropy { reduction: Reduction::Sum, ..Default::default() };
/// assert_eq!(nll_loss_with(&log_p, &labels, Some(&weight), &options).item(), 2.0 * 2.0 + 0.5 * 3.0);
/// ```
///
/// Fails as [`nll_loss`] does, when a weight is not `[C]`, or when label
/// smoothing is asked for.
#[fallible(free)]
pub fn nll_loss_with<D: Device, D2: Device, E: FloatElement, L: Element>(
    log_p: &Tensor<D, E>,
    labels: &Tensor<D2, L>,
    weight: Option<&Tensor<D, E>>,
    options: &CrossEntropy,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    i64: SameDtype<L>,
{
    const OP: &str = "nll_loss";
    if options.label_smoothing != 0.0 {
        return Err(Error::Argument {
            op: OP,
            device: D::name(),
            reason: format!(
                "nll_loss has no label_smoothing (got {}): smooth with cross_entropy_with on the logits",
                options.label_smoothing
            ),
        });
    }
    let labels: &Tensor<D, i64> = same_device(labels);
    let weight = weight.map(|w| class_weight(OP, log_p, w)).transpose()?;
    let (rows, targets) = class_rows(OP, log_p, labels)?;
    negative_log_likelihood(OP, &rows, &targets, labels, weight.as_ref(), options)
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
    Ok((class_last(scores)?, labels.try_reshape([labels.elem_count()])?))
}

/// Scores `[C]`, `[N, C]` or `[N, C, d..]` as rows `[M, C]`, one per
/// target (`[N, C, d..]` -> `[N, d.., C]` -> `[M, C]`).
fn class_last<D: Device, E: FloatElement>(scores: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    let dims = scores.dims();
    let classes = if dims.len() == 1 { dims[0] } else { dims[1] };
    let rows = scores.elem_count().checked_div(classes).unwrap_or(0);
    match dims.len() {
        1 | 2 => scores.try_reshape([rows, classes]),
        rank => {
            let mut axes: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
            axes.push(1);
            scores.try_permute(axes)?.try_reshape([rows, classes])
        }
    }
}

/// The per-class weight of the weighted losses, checked to have one
/// element per class (PyTorch's `weight`, a constant: never differentiated).
fn class_weight<D: Device, E: FloatElement>(
    op: &'static str,
    scores: &Tensor<D, E>,
    weight: &Tensor<D, E>,
) -> Result<Tensor<D, E>> {
    let classes = scores.dims().get(1).or(scores.dims().first()).copied();
    if scores.rank() == 0 || weight.dims() != [classes.unwrap_or(0)] {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![scores.shape().clone(), weight.shape().clone()],
            reason: "expected a weight [C], one per class of the scores [N, C, d..] (or [C])".into(),
        });
    }
    Ok(weight.detach())
}

/// `-log_p[label]` per row (times the label's class weight), smoothed and
/// with ignored targets zeroed, then reduced; `None` keeps the labels'
/// shape. The mean divides by the weights of the targets kept (their
/// count without a weight), as PyTorch's.
fn negative_log_likelihood<D: Device, E: FloatElement>(
    op: &'static str,
    log_p: &Tensor<D, E>,
    targets: &Tensor<D, i64>,
    labels: &Tensor<D, i64>,
    weight: Option<&Tensor<D, E>>,
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
    // Each target's class weight (ignored ones read class 0's, zeroed below).
    let target_weight = match weight {
        Some(weight) => Some(weight.try_gather(0, &safe)?),
        None => None,
    };
    let mut losses = picked.try_neg()?;
    if let Some(w) = &target_weight {
        losses = losses.try_mul(w)?;
    }
    let eps = options.label_smoothing;
    if eps != 0.0 {
        // ε/C · Σ_c -w_c log p_c, PyTorch's smoothing term.
        let smooth = match weight {
            Some(weight) => log_p.try_mul(weight)?.try_mean_axis(-1)?.try_neg()?,
            None => log_p.try_mean_axis(-1)?.try_neg()?,
        };
        losses = losses.try_mul_scalar(E::from_f64(1.0 - eps))?.try_add(&smooth.try_mul_scalar(E::from_f64(eps))?)?;
    }
    if let Some(keep) = &keep {
        losses = keep.try_where_cond(&losses, &Tensor::<D, E>::try_scalar(E::ZERO)?)?;
    }
    match options.reduction {
        Reduction::None => losses.try_reshape(labels.shape().clone()),
        Reduction::Sum => losses.try_sum(),
        // Over the targets kept, as PyTorch (by their weights when given):
        // NaN (0 / 0) when all are ignored.
        Reduction::Mean => {
            let kept = match (&keep, &target_weight) {
                (Some(keep), Some(w)) => keep.try_where_cond(w, &Tensor::<D, E>::try_scalar(E::ZERO)?)?.try_sum()?,
                (None, Some(w)) => w.try_sum()?,
                (Some(keep), None) => keep.try_sum()?.try_to_dtype::<E>()?,
                (None, None) => return losses.try_mean(),
            };
            losses.try_sum()?.try_div(&kept)
        }
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

/// Checks that a prediction and its target have one shape (the binary
/// cross-entropies, where PyTorch refuses to broadcast).
fn same_shape<D: Device, E: FloatElement>(op: &'static str, pred: &Tensor<D, E>, target: &Tensor<D, E>) -> Result<()> {
    if pred.shape() != target.shape() {
        return Err(Error::Shape {
            op,
            device: D::name(),
            shapes: vec![pred.shape().clone(), target.shape().clone()],
            reason: "the target must have the prediction's shape".into(),
        });
    }
    Ok(())
}

/// A loss's derivative toward one of its operands, per element of the
/// loss, computed from the operands (in the order [`with_gradients`] was
/// given them).
type Derivative<D, E> = Arc<dyn Fn(&[Tensor<D, E>]) -> Result<Tensor<D, E>> + Send + Sync>;

/// `value`, computed from detached operands, with the gradient
/// `derivatives[i]` toward each operand `i` that tracks one: `value` plus,
/// per such operand, a recorded zero whose gradient is that derivative.
/// For the losses whose PyTorch backward is its own formula (a floor under
/// a saturated probability, the exact derivative at a kink), where
/// differentiating the forward's expression would give NaN or another
/// number. The derivative is computed once here, untracked; a backward
/// pass with `create_graph` computes it again from the tracked operands,
/// so that the gradient can be differentiated in turn.
fn with_gradients<D: Device, E: FloatElement>(
    op: &'static str,
    value: Tensor<D, E>,
    operands: &[&Tensor<D, E>],
    derivatives: [Derivative<D, E>; 2],
) -> Result<Tensor<D, E>> {
    let operands: Vec<Tensor<D, E>> = operands.iter().map(|&x| x.clone()).collect();
    let mut out = value;
    for (x, derivative) in operands.iter().zip(derivatives) {
        if x.tracks_grad() && crate::is_grad_enabled() {
            let untracked = no_grad(|| derivative(&operands))?;
            let rule = Linearized { op, untracked, derivative, operands: operands.clone() };
            let zero = try_apply(rule, &[x])?;
            out = out.try_add(&zero[0])?;
        }
    }
    Ok(out)
}

/// Zero, with a loss's own backward formula as its gradient.
struct Linearized<D: Device, E: FloatElement> {
    op: &'static str,
    /// The derivative, computed without a graph, for a plain backward pass.
    untracked: Tensor<D, E>,
    /// How it is computed, for a backward pass that records it.
    derivative: Derivative<D, E>,
    /// The loss's operands, tracking their gradients.
    operands: Vec<Tensor<D, E>>,
}

impl<D: Device, E: FloatElement> Function<D, E> for Linearized<D, E> {
    fn name(&self) -> &'static str {
        self.op
    }

    fn forward(&self, _: &mut Context<D, E>, inputs: &[&Tensor<D, E>]) -> Result<Vec<Tensor<D, E>>> {
        Ok(vec![inputs[0].try_zeros_like()?])
    }

    fn backward(&self, _: &Context<D, E>, grads: &[Tensor<D, E>]) -> Result<Vec<Option<Tensor<D, E>>>> {
        if crate::is_grad_enabled() {
            // Recorded (`create_graph`): from the tracked operands.
            return Ok(vec![Some(grads[0].try_mul(&(self.derivative)(&self.operands)?)?)]);
        }
        Ok(vec![Some(grads[0].try_mul(&self.untracked)?)])
    }

    fn twice_differentiable(&self) -> bool {
        true
    }
}

/// The losses of `smooth_l1_loss` (with `beta`) and `huber_loss` (with
/// `delta`): `0.5 d² / beta` below `beta` and `|d| - 0.5 beta` above, or
/// `0.5 d²` and `delta (|d| - 0.5 delta)`.
fn piecewise_quadratic<D: Device, E: FloatElement>(
    op: &'static str,
    pred: &Tensor<D, E>,
    target: &Tensor<D, E>,
    knee: f64,
    huber: bool,
) -> Result<Tensor<D, E>> {
    paired(op, pred, target)?;
    if knee.is_nan() || knee < 0.0 || (huber && knee == 0.0) {
        let name = if huber { "delta" } else { "beta" };
        let bound = if huber { "positive" } else { "at least 0" };
        return Err(Error::Argument { op, device: D::name(), reason: format!("{name} must be {bound}, not {knee}") });
    }
    let d = pred.try_sub(target)?;
    let abs = d.try_abs()?;
    if knee == 0.0 {
        return Ok(abs);
    }
    let e = E::from_f64;
    let (inner, outer) = match huber {
        false => (d.try_square()?.try_mul_scalar(e(0.5 / knee))?, abs.try_sub_scalar(e(0.5 * knee))?),
        true => (d.try_square()?.try_mul_scalar(e(0.5))?, abs.try_sub_scalar(e(0.5 * knee))?.try_mul_scalar(e(knee))?),
    };
    abs.try_lt_scalar(e(knee))?.try_where_cond(&inner, &outer)
}

/// PyTorch's `F.smooth_l1_loss` (`nn.SmoothL1Loss`): per element
/// `0.5 d² / beta` where `|d| < beta`, else `|d| - 0.5 beta`, with
/// `d = pred - target` (`beta` 1 by default; 0 gives `l1_loss`).
///
/// Fails when the shapes do not broadcast together or `beta` is negative.
///
/// ```
/// use devtensor::nn::{Reduction, smooth_l1_loss};
/// use devtensor::{Cpu, Tensor};
/// let pred = Tensor::<Cpu, f64>::from_vec(vec![0.5, 3.0], [2]);
/// let target = Tensor::<Cpu, f64>::zeros([2]);
/// assert_eq!(smooth_l1_loss(&pred, &target, Reduction::None, 1.0).to_vec(), vec![0.125, 2.5]);
/// ```
#[fallible(free)]
pub fn smooth_l1_loss<D: Device, D2: Device, E: FloatElement, E2: Element>(
    pred: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    reduction: Reduction,
    beta: f64,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    reduction.apply(piecewise_quadratic("smooth_l1_loss", pred, same_device(target), beta, false)?)
}

/// PyTorch's `F.huber_loss` (`nn.HuberLoss`): per element `0.5 d²` where
/// `|d| < delta`, else `delta (|d| - 0.5 delta)`, with `d = pred - target`
/// (`delta` 1 by default): `smooth_l1_loss` times `delta`.
///
/// Fails when the shapes do not broadcast together or `delta` is not
/// positive.
///
/// ```
/// use devtensor::nn::{Reduction, huber_loss};
/// use devtensor::{Cpu, Tensor};
/// let pred = Tensor::<Cpu, f64>::from_vec(vec![0.5, 3.0], [2]);
/// let target = Tensor::<Cpu, f64>::zeros([2]);
/// assert_eq!(huber_loss(&pred, &target, Reduction::None, 2.0).to_vec(), vec![0.125, 4.0]);
/// ```
#[fallible(free)]
pub fn huber_loss<D: Device, D2: Device, E: FloatElement, E2: Element>(
    pred: &Tensor<D, E>,
    target: &Tensor<D2, E2>,
    reduction: Reduction,
    delta: f64,
) -> Tensor<D, E>
where
    D: SameDevice<D2>,
    E: SameDtype<E2>,
{
    reduction.apply(piecewise_quadratic("huber_loss", pred, same_device(target), delta, true)?)
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
}

fn squared_error<D: Device, E: FloatElement>(p: &Tensor<D, E>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    p.try_sub(t)?.try_square()
}

fn absolute_error<D: Device, E: FloatElement>(p: &Tensor<D, E>, t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    p.try_sub(t)?.try_abs()
}
