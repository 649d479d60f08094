//! Spread statistics: `var` and `std`, with PyTorch's `correction`.

use super::axes::{Axes, AxisList, count_over, resolve_axes};
use super::{FloatFns, grad};
use crate::autograd;
use crate::element::FloatElement;
use crate::error::Result;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: FloatElement> Tensor<D, E> {
    /// The variance of all elements, `sum((x - mean)^2) / (N - correction)`,
    /// as a rank-0 tensor, like `torch.var(x, correction=c)`: `correction`
    /// 1 is the unbiased sample variance (PyTorch's default), 0 the
    /// population variance. Where `N <= correction` the divisor is 0, which
    /// gives infinity or NaN, as in PyTorch.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0, 3.0, 6.0], [2, 2]);
    /// assert_eq!(x.var(1).item(), 14.0 / 3.0);
    /// assert_eq!(x.var(0).item(), 3.5);
    /// assert!(Tensor::<Cpu>::ones([1]).var(1).item().is_nan());
    /// ```
    #[fallible]
    pub fn var(&self, correction: usize) -> Self {
        core_call!(D, FloatFns<E>.spread(self.core(), "var", None, correction, false, false))
    }

    /// The variances along `axis`, which is removed, like
    /// `torch.var(x, dim, correction=c)`. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 2.0, 2.0], [2, 2]);
    /// assert_eq!(x.var_axis(1, 1).to_vec(), vec![2.0, 0.0]);
    /// ```
    #[fallible]
    pub fn var_axis(&self, axes: impl Axes, correction: usize) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.spread(self.core(), "var_axis", Some(&axes), correction, false, false))
    }

    /// Like [`var_axis`](Self::var_axis), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 2.0, 2.0], [2, 2]);
    /// assert_eq!(x.var_keepdim(-1, 0).to_vec2(), vec![vec![1.0], vec![0.0]]);
    /// ```
    #[fallible]
    pub fn var_keepdim(&self, axes: impl Axes, correction: usize) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.spread(self.core(), "var_keepdim", Some(&axes), correction, true, false))
    }

    /// The standard deviation of all elements, the square root of
    /// [`var`](Self::var), like `torch.std(x, correction=c)`. Its gradient is
    /// 0 where the result is 0 (all elements equal), as PyTorch's is, not the
    /// NaN that differentiating the square root would give.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], [8]);
    /// assert_eq!(x.std(0).item(), 2.0);
    /// let flat = Tensor::<Cpu, f64>::ones([3]).requires_grad();
    /// assert_eq!(flat.std(1).backward().get(&flat).unwrap().to_vec(), vec![0.0; 3]);
    /// ```
    #[fallible]
    pub fn std(&self, correction: usize) -> Self {
        core_call!(D, FloatFns<E>.spread(self.core(), "std", None, correction, false, true))
    }

    /// The standard deviations along `axis`, which is removed, like
    /// `torch.std(x, dim, correction=c)`. Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 2.0, 2.0], [2, 2]);
    /// assert_eq!(x.std_axis(1, 0).to_vec(), vec![1.0, 0.0]);
    /// ```
    #[fallible]
    pub fn std_axis(&self, axes: impl Axes, correction: usize) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.spread(self.core(), "std_axis", Some(&axes), correction, false, true))
    }

    /// Like [`std_axis`](Self::std_axis), keeping `axis` as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 3.0, 2.0, 2.0], [2, 2]);
    /// assert_eq!(x.std_keepdim(0, 1).dims(), &[1, 2]);
    /// ```
    #[fallible]
    pub fn std_keepdim(&self, axes: impl Axes, correction: usize) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<E>.spread(self.core(), "std_keepdim", Some(&axes), correction, true, true))
    }
}

impl<D: CoreDevice, E: FloatElement> Tensor<D, E> {
    /// The variance (or, with `root`, the standard deviation) over `axis`
    /// or every element: the mean first, then the squared deviations from
    /// it, which stays accurate where the one-pass `E[x^2] - E[x]^2`
    /// cancels. The half types compute it in `f32` and round once, as
    /// PyTorch does: a mean rounded to 8 bits would shift every deviation.
    pub(super) fn spread(
        &self,
        op: &'static str,
        axes: Option<&[isize]>,
        correction: usize,
        keepdim: bool,
        root: bool,
    ) -> Result<Self> {
        if E::DTYPE.is_half() {
            return self.try_to_dtype::<f32>()?.spread(op, axes, correction, keepdim, root)?.try_to_dtype::<E>();
        }
        // The whole tensor is every axis, removed.
        let (resolved, keepdim) = match axes {
            Some(axes) => (resolve_axes(op, D::name, self.shape(), axes)?, keepdim),
            None => ((0..self.rank()).collect(), false),
        };
        let signed: AxisList = resolved.iter().map(|&a| a as isize).collect();
        let divisor = E::from_f64(count_over(self.shape(), &resolved).saturating_sub(correction) as f64);
        let variance = || {
            let squares = self.try_sub(&self.try_mean_keepdim(&signed[..])?)?.try_square()?;
            let sums =
                if keepdim { squares.try_sum_keepdim(&signed[..])? } else { squares.try_sum_axis(&signed[..])? };
            sums.try_div_scalar(divisor)
        };
        if !root {
            return variance();
        }
        autograd::track(
            op,
            &[self.node()],
            || variance()?.try_sqrt(),
            |out| grad::std::<D, E>(self.clone(), out.clone(), resolved, keepdim, divisor),
        )
    }
}
