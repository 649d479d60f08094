//! Extremes over several axes at once: `amax` and `amin`, whose gradient
//! is shared by tied elements, and `logsumexp`, the smooth maximum.

use super::axes::{Axes, AxisList, resolve_axes, without_axes};
use super::{Extreme, ExtremeOp, FloatFns, Fns, Max, empty_error, grad};
use crate::autograd::{self, as_float, float_rule};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// The largest elements over `axes` (one axis or several, [`Axes`];
    /// empty: every axis), which are removed, like `torch.amax(x, dim)`;
    /// NaN wins. Unlike [`max_axis`](Self::max_axis), whose gradient goes
    /// to the one element it picked, `amax` shares the gradient evenly
    /// among the elements equal to the result, as PyTorch's does. Fails
    /// when an axis is out of range, named twice, or of size 0.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 3.0, 5.0, 0.0, 2.0], [1, 2, 3]);
    /// assert_eq!(x.amax([1, 2]).to_vec(), vec![5.0]);
    /// assert_eq!(x.amax(-1).to_vec2(), vec![vec![5.0, 5.0]]);
    /// let x = x.requires_grad();
    /// let g = x.amax([1, 2]).sum().backward();
    /// assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0, 0.5, 0.0, 0.5, 0.0, 0.0]);
    /// ```
    #[fallible]
    pub fn amax(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.extreme_over(self.core(), Extreme::Max, "amax", &axes, false))
    }

    /// Like [`amax`](Self::amax), keeping the axes as size 1 (`keepdim=True`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.amax_keepdim([0, 1]).to_vec2(), vec![vec![5.0]]);
    /// ```
    #[fallible]
    pub fn amax_keepdim(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.extreme_over(self.core(), Extreme::Max, "amax_keepdim", &axes, true))
    }

    /// The smallest elements over `axes`, which are removed, like
    /// `torch.amin(x, dim)`; as [`amax`](Self::amax) otherwise.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![4, 2, 7, 1, 9, 3], [2, 3]);
    /// assert_eq!(x.amin(1).to_vec(), vec![2, 1]);
    /// assert_eq!(x.amin([0, 1]).item(), 1);
    /// ```
    #[fallible]
    pub fn amin(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.extreme_over(self.core(), Extreme::Min, "amin", &axes, false))
    }

    /// Like [`amin`](Self::amin), keeping the axes as size 1 (`keepdim=True`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.amin_keepdim(0).to_vec2(), vec![vec![1.0, 4.0]]);
    /// ```
    #[fallible]
    pub fn amin_keepdim(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.extreme_over(self.core(), Extreme::Min, "amin_keepdim", &axes, true))
    }
}

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// `log(sum(exp(x)))` over `axes` (one axis or several; empty: every
    /// axis), which are removed, like `torch.logsumexp(x, dim)`: computed
    /// as `m + log(sum(exp(x - m)))` with `m` the largest element, so that
    /// large inputs do not overflow. An axis of size 0 gives `-inf`, a
    /// line of `-inf` gives `-inf` and one holding `+inf` gives `+inf`, as
    /// in PyTorch; the gradient is the softmax. The half types compute in
    /// `f32` and round once. Fails when an axis is out of range or named
    /// twice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1000.0, 1000.0, 0.0, f64::NEG_INFINITY], [2, 2]);
    /// let ln2 = std::f64::consts::LN_2;
    /// assert_eq!(x.logsumexp(1).to_vec(), vec![1000.0 + ln2, 0.0]);
    /// assert_eq!(Tensor::<Cpu>::zeros([0, 2]).logsumexp(0).to_vec(), vec![f32::NEG_INFINITY; 2]);
    /// ```
    #[fallible]
    pub fn logsumexp(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<F>.logsumexp(self.core(), "logsumexp", &axes, false))
    }

    /// Like [`logsumexp`](Self::logsumexp), keeping the axes as size 1
    /// (`keepdim=True`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::zeros([2, 4]);
    /// assert_eq!(x.logsumexp_keepdim(-1).to_vec2(), vec![vec![4f64.ln()]; 2]);
    /// ```
    #[fallible]
    pub fn logsumexp_keepdim(&self, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<F>.logsumexp(self.core(), "logsumexp_keepdim", &axes, true))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The core of `amax` and `amin`: one recorded operation over `axes`.
    pub(super) fn extreme_over<Op: ExtremeOp>(
        &self,
        op: Op,
        name: &'static str,
        axes: &[isize],
        keepdim: bool,
    ) -> Result<Self> {
        let resolved = resolve_axes(name, D::name, self.shape(), axes)?;
        autograd::track(
            name,
            &[self.node()],
            || self.extreme_over_untracked(op, name, &resolved, keepdim),
            |out| float_rule!(E, F => grad::extreme_over::<D, F>(as_float(self), as_float(out), resolved.clone(), keepdim)),
        )
    }

    fn extreme_over_untracked(
        &self,
        op: impl ExtremeOp,
        name: &'static str,
        axes: &[usize],
        keepdim: bool,
    ) -> Result<Self> {
        if let Some(&empty) = axes.iter().find(|&&a| self.dims()[a] == 0) {
            return Err(empty_error(name, D::name(), self.shape(), Some(empty)));
        }
        let shape = without_axes(self.shape(), axes, keepdim);
        if axes.len() == self.rank() {
            return self.reduce_all_untracked(op, name)?.try_reshape(shape);
        }
        let (mut x, axes) = self.merge_neighbours(axes)?;
        for &axis in axes.iter().rev() {
            x = x.reduce_axis_untracked(op, name, axis as isize, true)?;
        }
        x.try_reshape(shape)
    }
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    /// The core of [`logsumexp`](Tensor::logsumexp), composed of recorded
    /// ops: its gradient, `exp(x - m) / sum(exp(x - m))`, is theirs, the
    /// shift `m` held constant.
    pub(super) fn core_logsumexp(&self, name: &'static str, axes: &[isize], keepdim: bool) -> Result<Self> {
        if F::DTYPE.is_half() {
            return self.try_to_dtype::<f32>()?.core_logsumexp(name, axes, keepdim)?.try_to_dtype::<F>();
        }
        let resolved = resolve_axes(name, D::name, self.shape(), axes)?;
        let signed: AxisList = resolved.iter().map(|&a| a as isize).collect();
        let kept = without_axes(self.shape(), &resolved, true);
        // An infinite largest element (or none: an empty line) shifts by
        // 0, as PyTorch's does, so that `inf - inf` gives no NaN.
        let shift = match self.elem_count() {
            0 => Tensor::try_zeros(kept)?,
            _ => {
                let m = self.detach().extreme_over_untracked(Max, name, &resolved, true)?;
                m.try_masked_fill(&m.try_isinf()?, F::ZERO)?
            }
        };
        let sum = self.try_sub(&shift)?.try_exp()?.try_sum_keepdim(&signed[..])?;
        let out = sum.try_log()?.try_add(&shift)?;
        if keepdim { Ok(out) } else { out.try_reshape(without_axes(self.shape(), &resolved, false)) }
    }
}
