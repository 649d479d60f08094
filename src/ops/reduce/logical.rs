//! Truth reductions: `all`, `any` and `count_nonzero`, over every element
//! or over several axes at once.

use super::Fns;
use super::axes::Axes;
use crate::element::Element;
use crate::error::Result;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

/// Which truth reduction a `logical` entry of the core computes.
#[derive(Clone, Copy)]
pub(crate) enum Logical {
    /// Every element is nonzero.
    All,
    /// Some element is nonzero.
    Any,
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// 1 if every element is nonzero (NaN counts as nonzero), else 0, as a
    /// rank-0 mask, like `torch.all(x)`: 1 for an empty tensor. devtensor's
    /// masks are `u8` (PyTorch's `all` gives `bool`, or `uint8` for a
    /// `uint8` input).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, f32::NAN, -2.0], [3]);
    /// assert_eq!(x.all().item(), 1);
    /// assert_eq!(x.isfinite().all().item(), 0); // torch.isfinite(x).all()
    /// assert_eq!(Tensor::<Cpu>::zeros([0]).all().item(), 1);
    /// ```
    #[fallible]
    pub fn all(&self) -> Tensor<D, u8> {
        core_call!(D, Fns<E>.logical(self.core(), Logical::All, "all", &[], false))
    }

    /// 1 if some element is nonzero, else 0, as a rank-0 mask, like
    /// `torch.any(x)`: 0 for an empty tensor.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, f32::INFINITY], [3]);
    /// assert_eq!(x.isinf().any().item(), 1);
    /// assert_eq!(Tensor::<Cpu>::zeros([0]).any().item(), 0);
    /// ```
    #[fallible]
    pub fn any(&self) -> Tensor<D, u8> {
        core_call!(D, Fns<E>.logical(self.core(), Logical::Any, "any", &[], false))
    }

    /// Whether every element over `axes` (one axis or several, [`Axes`];
    /// empty: every axis) is nonzero, with the axes removed, like
    /// `torch.all(x, dim)`. Fails when an axis is out of range or named twice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 0, 3], [2, 2]);
    /// assert_eq!(x.all_axis(1).to_vec(), vec![1, 0]);
    /// assert_eq!(x.all_axis([0, 1]).item(), 0);
    /// ```
    #[fallible]
    pub fn all_axis(&self, axes: impl Axes) -> Tensor<D, u8> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.logical(self.core(), Logical::All, "all_axis", &axes, false))
    }

    /// Like [`all_axis`](Self::all_axis), keeping the axes as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 0, 3], [2, 2]);
    /// assert_eq!(x.all_keepdim(0).to_vec2(), vec![vec![0, 1]]);
    /// ```
    #[fallible]
    pub fn all_keepdim(&self, axes: impl Axes) -> Tensor<D, u8> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.logical(self.core(), Logical::All, "all_keepdim", &axes, true))
    }

    /// Whether some element over `axes` is nonzero, with the axes removed,
    /// like `torch.any(x, dim)`. Fails when an axis is out of range or
    /// named twice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, u8>::from_vec(vec![0, 0, 0, 1], [2, 2]);
    /// assert_eq!(x.any_axis(-1).to_vec(), vec![0, 1]);
    /// ```
    #[fallible]
    pub fn any_axis(&self, axes: impl Axes) -> Tensor<D, u8> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.logical(self.core(), Logical::Any, "any_axis", &axes, false))
    }

    /// Like [`any_axis`](Self::any_axis), keeping the axes as size 1.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, u8>::from_vec(vec![0, 0, 0, 1], [2, 2]);
    /// assert_eq!(x.any_keepdim(0).to_vec2(), vec![vec![0, 1]]);
    /// ```
    #[fallible]
    pub fn any_keepdim(&self, axes: impl Axes) -> Tensor<D, u8> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.logical(self.core(), Logical::Any, "any_keepdim", &axes, true))
    }

    /// How many elements are nonzero (NaN counts), as a rank-0 `i64`
    /// tensor, like `torch.count_nonzero(x)`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 0.0, f32::NAN, 0.0], [2, 3]);
    /// assert_eq!(x.count_nonzero().item(), 3);
    /// ```
    #[fallible]
    pub fn count_nonzero(&self) -> Tensor<D, i64> {
        core_call!(D, Fns<E>.count_nonzero(self.core(), &[]))
    }

    /// How many elements are nonzero over `axes` (one axis or several;
    /// empty: every axis), with the axes removed, in `i64`, like
    /// `torch.count_nonzero(x, dim)`; NaN counts. Fails when an axis is
    /// out of range or named twice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![0.0, 1.0, 2.0, 0.0, f32::NAN, 0.0], [2, 3]);
    /// assert_eq!(x.count_nonzero_axis(0).to_vec(), vec![0, 2, 1]);
    /// assert_eq!(x.count_nonzero_axis([0, 1]).item(), 3);
    /// ```
    #[fallible]
    pub fn count_nonzero_axis(&self, axes: impl Axes) -> Tensor<D, i64> {
        let axes = axes.to_axes();
        core_call!(D, Fns<E>.count_nonzero(self.core(), &axes))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The core of `all` and `any`: the nonzero elements counted over
    /// `axes`, compared with the count of all (`all`) or with 0 (`any`).
    pub(super) fn core_logical(
        &self,
        op: Logical,
        name: &'static str,
        axes: &[isize],
        keepdim: bool,
    ) -> Result<Tensor<D, u8>> {
        match op {
            // A zero anywhere makes `all` false: count the zeros.
            Logical::All => self.try_eq_scalar(E::ZERO)?.sum_over(name, axes, keepdim)?.try_eq_scalar(0),
            Logical::Any => self.try_ne_scalar(E::ZERO)?.sum_over(name, axes, keepdim)?.try_ne_scalar(0),
        }
    }

    /// The core of [`count_nonzero`](Tensor::count_nonzero) and
    /// [`count_nonzero_axis`](Tensor::count_nonzero_axis).
    pub(super) fn core_count_nonzero(&self, axes: &[isize]) -> Result<Tensor<D, i64>> {
        self.try_ne_scalar(E::ZERO)?.sum_over("count_nonzero", axes, false)
    }
}
