//! Connectionist temporal classification: PyTorch's `F.ctc_loss` and
//! `nn.CTCLoss`, for speech and handwriting recognisers whose outputs are
//! not aligned with their targets.

use super::Reduction;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::ops::index::PadMode;
use crate::tensor::{Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

/// The settings of [`ctc_loss`], PyTorch's defaults by `Default`: blank 0,
/// the mean over the batch of each loss divided by its target length, and
/// infinite losses kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtcLoss {
    /// The blank class.
    pub blank: usize,
    /// How the per-sequence losses are combined. `Mean` divides each by
    /// its target length (at least 1) before averaging, as PyTorch does.
    pub reduction: Reduction,
    /// Whether an impossible alignment (an input shorter than its target
    /// needs) gives a loss of 0 and no gradient instead of infinity.
    pub zero_infinity: bool,
}

/// A stand-in for `-inf` in the recursion: finite, so that a state no
/// path reaches carries no NaN into the gradient.
const UNREACHABLE: f64 = -1e30;

/// The CTC loss of `log_probs` (`[T, N, C]`, log-probabilities over `C`
/// classes for `T` steps of `N` sequences, or `[T, C]` for one) for
/// `targets`: PyTorch's `F.ctc_loss`, the negative log of the summed
/// probability of every alignment of each target (with blanks and repeats)
/// to the first `input_lengths[n]` steps. `targets` is `[N, S]` padded
/// (the first `target_lengths[n]` of row `n` count), the targets one after
/// another (1-D, `sum(target_lengths)` long), or `[S]` for one sequence;
/// each label in `0..C` and not the blank.
///
/// Computed as the forward (alpha) recursion with recorded operations, so
/// its gradient is exact and can be differentiated again. PyTorch's own
/// backward assumes that `log_probs` came from `log_softmax`: through
/// `log_softmax` the two gradients agree; taken with respect to
/// `log_probs` themselves, PyTorch's adds `exp(log_probs)`.
///
/// An impossible alignment's loss is infinite (0 with `zero_infinity`) and
/// sends no gradient back; PyTorch's gradient there is NaN without
/// `zero_infinity`.
///
/// Fails when the shapes or lengths do not fit or a label is out of range.
///
/// ```
/// use devtensor::nn::{CtcLoss, Reduction, ctc_loss};
/// use devtensor::{Cpu, Tensor};
/// // Two steps, classes {blank, a}: the target "a" is read as "a a", "a _" or "_ a".
/// let p = [[0.5f64, 0.5], [0.2, 0.8]];
/// let log_probs = Tensor::<Cpu, f64>::from_vec(p.concat().iter().map(|v| v.ln()).collect(), [2, 2]);
/// let targets = Tensor::<Cpu, i64>::from_vec(vec![1], [1]);
/// let none = CtcLoss { reduction: Reduction::None, ..Default::default() };
/// let loss = ctc_loss(&log_probs, &targets, &[2], &[1], none);
/// let paths = 0.5 * 0.8 + 0.5 * 0.2 + 0.5 * 0.8;
/// assert!((loss.item() + f64::ln(paths)).abs() < 1e-12);
/// ```
#[fallible(free)]
pub fn ctc_loss<D: Device, D2: Device, F: FloatElement>(
    log_probs: &Tensor<D, F>,
    targets: &Tensor<D2, i64>,
    input_lengths: &[usize],
    target_lengths: &[usize],
    options: CtcLoss,
) -> Tensor<D, F>
where
    D: SameDevice<D2>,
{
    let log_probs_wide = log_probs.try_to_dtype::<F::Accumulator>()?;
    let loss = ctc_loss_on(&log_probs_wide, same_device(targets), input_lengths, target_lengths, options)?;
    loss.try_to_dtype::<F>()
}

impl CtcLoss {
    /// PyTorch's `nn.CTCLoss()(log_probs, targets, input_lengths,
    /// target_lengths)`: [`ctc_loss`] with these settings.
    #[fallible]
    pub fn forward<D: Device, D2: Device, F: FloatElement>(
        &self,
        log_probs: &Tensor<D, F>,
        targets: &Tensor<D2, i64>,
        input_lengths: &[usize],
        target_lengths: &[usize],
    ) -> Tensor<D, F>
    where
        D: SameDevice<D2>,
    {
        try_ctc_loss(log_probs, targets, input_lengths, target_lengths, *self)
    }
}

/// [`ctc_loss`] on one device, in a type that holds [`UNREACHABLE`].
fn ctc_loss_on<D: Device, F: FloatElement>(
    log_probs: &Tensor<D, F>,
    targets: &Tensor<D, i64>,
    input_lengths: &[usize],
    target_lengths: &[usize],
    options: CtcLoss,
) -> Result<Tensor<D, F>> {
    const OP: &str = "ctc_loss";
    let shape_error = |reason: String| Error::Shape {
        op: OP,
        device: D::name(),
        shapes: vec![log_probs.shape().clone(), targets.shape().clone()],
        reason,
    };
    let unbatched = log_probs.rank() == 2;
    let log_probs = match log_probs.rank() {
        3 => log_probs.clone(),
        2 => log_probs.try_unsqueeze(1)?,
        _ => return Err(shape_error("expected log_probs [T, N, C] or [T, C]".into())),
    };
    let &[steps, batch, classes] = log_probs.dims() else { unreachable!("rank 3") };
    if input_lengths.len() != batch || target_lengths.len() != batch {
        return Err(shape_error(format!(
            "expected {batch} input and target lengths, got {} and {}",
            input_lengths.len(),
            target_lengths.len()
        )));
    }
    if let Some(len) = input_lengths.iter().find(|&&len| len > steps) {
        return Err(shape_error(format!("an input length of {len} exceeds the {steps} steps of log_probs")));
    }
    if options.blank >= classes {
        return Err(shape_error(format!("blank = {} is not one of the {classes} classes", options.blank)));
    }
    // The targets on the host, one list per sequence.
    let values = targets.try_to_vec()?;
    let total: usize = target_lengths.iter().sum();
    let sequences: Vec<&[i64]> = match (targets.rank(), unbatched) {
        (2, false) if targets.dims()[0] == batch && target_lengths.iter().all(|&l| l <= targets.dims()[1]) => {
            let width = targets.dims()[1];
            target_lengths.iter().enumerate().map(|(n, &len)| &values[n * width..n * width + len]).collect()
        }
        (1, _) if values.len() == total || (unbatched && target_lengths[0] <= values.len()) => {
            let mut start = 0;
            target_lengths
                .iter()
                .map(|&len| {
                    start += len;
                    &values[start - len..start]
                })
                .collect()
        }
        _ => {
            return Err(shape_error(format!(
                "expected targets [N, S] with S at least every target length, or 1-D of their sum {total}"
            )));
        }
    };
    let blank = options.blank as i64;
    if let Some(&label) = sequences.iter().flat_map(|s| s.iter()).find(|&&l| l < 0 || l >= classes as i64 || l == blank)
    {
        return Err(Error::Argument {
            op: OP,
            device: D::name(),
            reason: format!("target label {label} is not a class other than the blank {blank} (0..{classes})"),
        });
    }

    // The extended targets `_ l1 _ l2 _ ... _` (padded with blanks to the
    // longest), and the additive mask of the skip from state s - 2 (allowed
    // onto a label that differs from the one two states back).
    let states = 2 * sequences.iter().map(|s| s.len()).max().unwrap_or(0) + 1;
    let unreachable = F::from_f64(UNREACHABLE);
    let mut extended = vec![blank; batch * states];
    let mut skip = vec![unreachable; batch * states];
    for (n, labels) in sequences.iter().enumerate() {
        for (k, &label) in labels.iter().enumerate() {
            extended[n * states + 2 * k + 1] = label;
            // State 1 has nothing two states back; a repeat needs the blank between.
            if k > 0 && labels[k - 1] != label {
                skip[n * states + 2 * k + 1] = F::ZERO;
            }
        }
    }
    let extended = Tensor::<D, i64>::try_from_vec(extended, [1, batch, states])?;
    let skip = Tensor::<D, F>::try_from_vec(skip, [batch, states])?;
    // log p of each state's label at every step: [T, N, states].
    let emissions = log_probs.try_gather(2, &extended.try_expand([steps as isize, -1, -1])?)?;

    // alpha_0: the blank or the first label; then
    // alpha_t(s) = logsumexp(alpha(s), alpha(s - 1), alpha(s - 2) where allowed) + emission_t(s).
    let start: Vec<F> = (0..states).map(|s| if s < 2 { F::ZERO } else { unreachable }).collect();
    let mut alpha = emissions.try_select(0, 0usize)?.try_add(&Tensor::<D, F>::try_from_vec(start, [states])?)?;
    let mut alphas = vec![alpha.clone()];
    for t in 1..steps {
        let shifted = |by: isize| alpha.try_pad(&[by, -by], PadMode::Constant(unreachable));
        let stacked = Tensor::try_stack(&[&alpha, &shifted(1)?, &shifted(2)?.try_add(&skip)?], 2)?;
        alpha = stacked.try_logsumexp(2)?.try_add(&emissions.try_select(0, t)?)?;
        alphas.push(alpha.clone());
    }
    // Each sequence's alpha at its last step, at its last two states (the
    // last label and the blank after it; the blank alone for an empty target).
    let at_last_step: Vec<i64> =
        input_lengths.iter().flat_map(|&len| vec![len.saturating_sub(1) as i64; states]).collect();
    let last = Tensor::try_stack(&alphas.iter().collect::<Vec<_>>(), 0)?
        .try_gather(0, &Tensor::<D, i64>::try_from_vec(at_last_step, [1, batch, states])?)?
        .try_squeeze(0)?;
    let ends: Vec<i64> = sequences.iter().flat_map(|s| [2 * s.len() as i64, (2 * s.len() as i64 - 1).max(0)]).collect();
    let end_mask: Vec<F> =
        sequences.iter().flat_map(|s| [F::ZERO, if s.is_empty() { unreachable } else { F::ZERO }]).collect();
    let ends = last
        .try_gather(1, &Tensor::<D, i64>::try_from_vec(ends, [batch, 2])?)?
        .try_add(&Tensor::<D, F>::try_from_vec(end_mask, [batch, 2])?)?;
    let losses = ends.try_logsumexp(1)?.try_neg()?;

    // An input too short for its target (each label, plus a blank between
    // repeats) has no alignment: infinity, or 0 without gradient.
    let (keep, fill): (Vec<F>, Vec<F>) = sequences
        .iter()
        .zip(input_lengths)
        .map(|(labels, &len)| {
            let repeats = labels.windows(2).filter(|w| w[0] == w[1]).count();
            let possible = len >= labels.len() + repeats && (len > 0 || labels.is_empty());
            match (possible, len, options.zero_infinity) {
                (true, 0, _) => (F::ZERO, F::ZERO),
                (true, _, _) => (F::ONE, F::ZERO),
                (false, _, true) => (F::ZERO, F::ZERO),
                (false, _, false) => (F::ZERO, F::infinity()),
            }
        })
        .unzip();
    let losses = losses
        .try_mul(&Tensor::<D, F>::try_from_vec(keep, [batch])?)?
        .try_add(&Tensor::<D, F>::try_from_vec(fill, [batch])?)?;
    let losses = match options.reduction {
        Reduction::Mean => {
            let lengths: Vec<F> = target_lengths.iter().map(|&l| F::from_f64(l.max(1) as f64)).collect();
            return losses.try_div(&Tensor::<D, F>::try_from_vec(lengths, [batch])?)?.try_mean();
        }
        Reduction::Sum => return losses.try_sum(),
        Reduction::None => losses,
    };
    if unbatched { losses.try_squeeze(0) } else { Ok(losses) }
}
