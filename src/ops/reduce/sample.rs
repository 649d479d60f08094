//! `multinomial`: sampling categories from rows of weights. With
//! replacement it is built on `cumsum`: a uniform draw in `(0, total]` picks
//! the first category whose running sum reaches it. Without, on `topk`: each
//! category draws an exponential time divided by its weight, and the first
//! `num_samples` to arrive are the samples, which is drawing one at a time
//! in proportion to the weights left (the exponential race).

use super::FloatFns;
use crate::element::FloatElement;
use crate::error::Error;
use crate::error::Result;
use crate::random::Generator;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// `num_samples` category indices per row of these non-negative weights
    /// (`[n]` or `[rows, n]`, not necessarily normalised), drawn from this
    /// thread's generator, like `torch.multinomial(probs, num_samples,
    /// replacement)`: the sampling step of text generation. A category of
    /// weight 0 is never drawn. Without replacement a row's samples are
    /// distinct, each drawn in proportion to the weights not yet drawn.
    /// Fails where PyTorch's does: on a negative, infinite or NaN weight, on
    /// a row whose weights sum to 0, and without replacement on more samples
    /// than a row has categories of positive weight.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor, manual_seed};
    /// manual_seed(0);
    /// let probs = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 0.0, 0.0, 0.5, 0.5], [2, 3]);
    /// let picks = probs.multinomial(4, true);
    /// assert_eq!(picks.dims(), &[2, 4]);
    /// assert_eq!(picks.to_vec2()[0], vec![1, 1, 1, 1]);
    /// assert!(picks.to_vec2()[1].iter().all(|&i| i == 1 || i == 2));
    /// ```
    #[fallible]
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Tensor<D, i64> {
        crate::random::with_thread_generator(|g| self.try_multinomial_with(num_samples, replacement, g))
    }

    /// [`multinomial`](Self::multinomial) drawing from `generator`.
    #[fallible]
    pub fn multinomial_with(&self, num_samples: usize, replacement: bool, generator: &mut Generator) -> Tensor<D, i64> {
        core_call!(D, FloatFns<E>.multinomial(self.core(), num_samples, replacement, generator))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    pub(super) fn core_multinomial(
        &self,
        num_samples: usize,
        replacement: bool,
        generator: &mut Generator,
    ) -> Result<Tensor<D, i64>> {
        const OP: &str = "multinomial";
        let fail = |reason: String| Error::Argument { op: OP, device: D::name(), reason };
        if !(1..=2).contains(&self.rank()) || self.dims()[self.rank() - 1] == 0 {
            return Err(Error::Shape {
                op: OP,
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: "expected weights [n] or [rows, n] with at least one category".into(),
            });
        }
        let n = self.dims()[self.rank() - 1];
        if !replacement && num_samples > n {
            return Err(fail(format!("cannot draw {num_samples} samples from {n} categories without replacement")));
        }
        let rows = if self.rank() == 2 { self.dims()[0] } else { 1 };
        let weights = self.detach().try_reshape([rows, n])?;
        // The checks PyTorch makes, in one read-back of two small reductions.
        let bad = weights.try_lt_scalar(E::ZERO)?.try_logical_or(&weights.try_eq_scalar(E::MAX)?)?;
        let bad = bad.try_logical_or(&weights.try_ne(&weights)?)?.try_max()?.try_item()?;
        if bad != 0 {
            return Err(fail("the weights must be finite and non-negative".into()));
        }
        let running = weights.try_cumsum(1)?;
        let totals = running.try_narrow(1, running.dims()[1] - 1, 1)?;
        if totals.try_min()?.try_item()? <= E::ZERO {
            return Err(fail("every row of weights must have a positive sum".into()));
        }
        let picks = if replacement || num_samples <= 1 {
            // Draws in (0, 1], scaled to (0, total]: the first category whose
            // running sum reaches the draw is the number of running sums below it.
            let draws = Tensor::<D, E>::try_rand_with([rows, num_samples], generator)?;
            let targets = draws.try_neg()?.try_add_scalar(E::ONE)?.try_mul(&totals)?;
            let below = running.try_unsqueeze(1)?.try_lt(&targets.try_unsqueeze(2)?)?;
            below.try_sum_axis(2)?
        } else {
            let positive = weights.try_gt_scalar(E::ZERO)?.try_sum_axis(1)?.try_min()?.try_item()?;
            if (positive as usize) < num_samples {
                return Err(fail(format!(
                    "cannot draw {num_samples} distinct samples from a row with {positive} categories of positive weight"
                )));
            }
            // Exponential times -ln(1 - u), u in [0, 1), over the weights; a
            // weight of 0 never arrives.
            let uniform = Tensor::<D, E>::try_rand_with([rows, n], generator)?;
            let times = uniform.try_neg()?.try_add_scalar(E::ONE)?.try_log()?.try_neg()?;
            let arrivals = times.try_div(&weights)?.try_masked_fill(&weights.try_eq_scalar(E::ZERO)?, E::MAX)?;
            arrivals.try_topk(num_samples, 1, false)?.1
        };
        if self.rank() == 1 { picks.try_reshape([num_samples]) } else { Ok(picks) }
    }
}
