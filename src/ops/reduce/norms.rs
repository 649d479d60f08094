//! Vector norms, `torch.linalg.vector_norm`: over every element or over
//! several axes at once, for any order `ord`.

use super::FloatFns;
use super::axes::{Axes, AxisList, resolve_axes, without_axes};
use crate::autograd::{self, rule};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::layout::Dims;
use crate::ops::compare::masked;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// The `ord`-norm of all elements, as a rank-0 tensor, like
    /// `torch.linalg.vector_norm(x, ord)`: `(Σ|x|^ord)^(1/ord)`, the largest
    /// magnitude for `ord = inf`, the smallest for `-inf`, the count of
    /// nonzero elements for 0. PyTorch's default order is 2. At a zero
    /// norm the gradient is 0, as PyTorch's is (not the NaN of
    /// differentiating the root); for `±inf` it is shared by the tied
    /// largest (smallest) magnitudes. The half types compute in `f32` and
    /// round once. Fails for an `ord` that is NaN, and for `±inf` or a
    /// negative order over no elements (their norms have no identity).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![3.0, -4.0, 0.0], [3]);
    /// assert_eq!(x.vector_norm(2.0).item(), 5.0);
    /// assert_eq!(x.vector_norm(1.0).item(), 7.0);
    /// assert_eq!(x.vector_norm(f64::INFINITY).item(), 4.0);
    /// assert_eq!(x.vector_norm(0.0).item(), 2.0);
    /// let zero = Tensor::<Cpu, f64>::zeros([2]).requires_grad();
    /// assert_eq!(zero.vector_norm(2.0).backward().get(&zero).unwrap().to_vec(), vec![0.0, 0.0]);
    /// ```
    #[fallible]
    pub fn vector_norm(&self, ord: f64) -> Self {
        core_call!(D, FloatFns<F>.vector_norm(self.core(), "vector_norm", ord, None, false))
    }

    /// The `ord`-norms over `axes` (one axis or several, [`Axes`]; empty:
    /// every axis), which are removed, like
    /// `torch.linalg.vector_norm(x, ord, dim)`; as
    /// [`vector_norm`](Self::vector_norm) otherwise.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0, 0.0, 1.0], [2, 2]);
    /// assert_eq!(x.vector_norm_axis(2.0, -1).to_vec(), vec![5.0, 1.0]);
    /// assert_eq!(x.vector_norm_axis(1.0, [0, 1]).item(), 8.0);
    /// ```
    #[fallible]
    pub fn vector_norm_axis(&self, ord: f64, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<F>.vector_norm(self.core(), "vector_norm_axis", ord, Some(&axes), false))
    }

    /// Like [`vector_norm_axis`](Self::vector_norm_axis), keeping the axes
    /// as size 1 (`keepdim=True`): `x / x.vector_norm_keepdim(2.0, -1)`
    /// scales each row to unit length.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, f64>::from_vec(vec![3.0, 4.0, 0.0, 2.0], [2, 2]);
    /// let unit = &x / &x.vector_norm_keepdim(2.0, -1);
    /// assert_eq!(unit.to_vec2(), vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    /// ```
    #[fallible]
    pub fn vector_norm_keepdim(&self, ord: f64, axes: impl Axes) -> Self {
        let axes = axes.to_axes();
        core_call!(D, FloatFns<F>.vector_norm(self.core(), "vector_norm_keepdim", ord, Some(&axes), true))
    }
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    /// The core of the `vector_norm` family: every element (`axes`
    /// `None`, rank 0), or over `axes`, removed or kept.
    pub(super) fn core_vector_norm(
        &self,
        name: &'static str,
        ord: f64,
        axes: Option<&[isize]>,
        keepdim: bool,
    ) -> Result<Self> {
        if F::DTYPE.is_half() {
            return self.try_to_dtype::<f32>()?.core_vector_norm(name, ord, axes, keepdim)?.try_to_dtype::<F>();
        }
        let (resolved, keepdim) = match axes {
            Some(axes) => (resolve_axes(name, D::name, self.shape(), axes)?, keepdim),
            None => ((0..self.rank()).collect(), false),
        };
        let signed: AxisList = resolved.iter().map(|&a| a as isize).collect();
        let count: usize = resolved.iter().map(|&a| self.dims()[a]).product();
        // As in PyTorch, the orders without an identity (below 0, and
        // `inf`: a largest magnitude) need elements.
        if ord.is_nan() || ((ord < 0.0 || ord == f64::INFINITY) && count == 0) {
            let reason = match ord.is_nan() {
                true => "the order is NaN".to_string(),
                false => format!("a norm of order {ord} over no elements is undefined"),
            };
            return Err(Error::Shape { op: name, device: D::name(), shapes: vec![self.shape().clone()], reason });
        }
        let magnitudes = self.try_abs()?;
        let over = |t: &Self| if keepdim { t.try_sum_keepdim(&signed[..]) } else { t.try_sum_axis(&signed[..]) };
        // The orders whose composition already has PyTorch's gradient (the
        // magnitude's sign, 0 at 0; ties of the extremes shared).
        if ord == f64::INFINITY {
            return if keepdim { magnitudes.try_amax_keepdim(&signed[..]) } else { magnitudes.try_amax(&signed[..]) };
        }
        if ord == f64::NEG_INFINITY {
            return if keepdim { magnitudes.try_amin_keepdim(&signed[..]) } else { magnitudes.try_amin(&signed[..]) };
        }
        if ord == 0.0 {
            return over(&self.detach().try_ne_scalar(F::ZERO)?.try_to_dtype::<F>()?);
        }
        if ord == 1.0 {
            return over(&magnitudes);
        }
        let p = F::from_f64(ord);
        // Order 2 as PyTorch computes it, the root of the sum of squares.
        let norm = || match ord {
            2.0 => over(&magnitudes.detach().try_square()?)?.try_sqrt(),
            _ => over(&magnitudes.detach().try_powf(p)?)?.try_powf(F::from_f64(1.0 / ord)),
        };
        let x = self.clone();
        autograd::track(name, &[self.node()], norm, |out| norm_rule(x, out.clone(), resolved, keepdim, ord))
    }
}

/// The gradient of a `p`-norm `out` of `x` over `axes`:
/// `sign(x)·|x|^(p-1) / out^(p-1)`, 0 where `out` is 0 (PyTorch's rule).
fn norm_rule<D: CoreDevice, F: FloatElement>(
    x: Tensor<D, F>,
    out: Tensor<D, F>,
    axes: Dims,
    keepdim: bool,
    p: f64,
) -> Box<dyn autograd::Backward> {
    rule(move |g: &Tensor<D, F>, _| {
        let out = autograd::saved_output(&out);
        let kept = without_axes(x.shape(), &axes, true);
        let (out, g) =
            if keepdim { (out.clone(), g.clone()) } else { (out.try_reshape(&kept)?, g.try_reshape(&kept)?) };
        let q = F::from_f64(p - 1.0);
        let scale = masked(&out.try_ne_scalar(F::ZERO)?, &g.try_div(&out.try_powf(q)?)?)?;
        let share = x.try_sign()?.try_mul(&x.try_abs()?.try_powf(q)?)?;
        Ok(vec![Some(share.try_mul(&scale)?)])
    })
}
