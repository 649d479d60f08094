//! The axes a reduction runs over: one, or several at once as PyTorch's
//! `x.sum(dim=(2, 3))` takes them ([`Axes`]), their resolution against a
//! shape, and the sum over several axes that `sum_axis`, `mean_axis`,
//! `var_axis` and their `_keepdim` forms share.

use super::grad;
use crate::autograd::{self, float_rule};
use crate::element::Element;
use crate::error::{Error, Result, check_elem_count, resolve_axis_or_scalar};
use crate::layout::{Dims, Shape};
use crate::tensor::{CoreDevice, Tensor};
use smallvec::SmallVec;

/// The axes of a reduction, signed, as the caller wrote them.
pub type AxisList = SmallVec<[isize; 6]>;

/// The `dim` argument of a reduction: one axis (`1`, `-1`) or several
/// (`[2, 3]`, `&[0, -1][..]`, a `Vec`), negative ones counting from the
/// end, as PyTorch's `dim` takes an int or a tuple. An empty list means
/// every axis, as `dim=()` does in PyTorch; an axis named twice is an
/// error.
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::ones([2, 3, 4, 5]);
/// assert_eq!(x.sum_axis(1).dims(), &[2, 4, 5]);
/// assert_eq!(x.mean_axis([2, 3]).dims(), &[2, 3]); // x.mean((2, 3))
/// assert_eq!(x.mean_keepdim([-2, -1]).dims(), &[2, 3, 1, 1]);
/// assert_eq!(x.sum_axis(vec![0, 2]).to_vec(), vec![8.0; 15]);
/// assert!(x.try_sum_axis([1, -3]).is_err()); // axis 1 twice
/// ```
pub trait Axes {
    /// The axes, as written.
    #[doc(hidden)]
    fn to_axes(&self) -> AxisList;
}

macro_rules! axes_of_integers {
    ($($t:ty),*) => {$(
        impl Axes for $t {
            fn to_axes(&self) -> AxisList {
                smallvec::smallvec![*self as isize]
            }
        }
        impl<const N: usize> Axes for [$t; N] {
            fn to_axes(&self) -> AxisList {
                self.iter().map(|&a| a as isize).collect()
            }
        }
        impl Axes for &[$t] {
            fn to_axes(&self) -> AxisList {
                self.iter().map(|&a| a as isize).collect()
            }
        }
        impl Axes for Vec<$t> {
            fn to_axes(&self) -> AxisList {
                self.iter().map(|&a| a as isize).collect()
            }
        }
    )*};
}
// `i32` is what an unsuffixed literal (`sum_axis(-1)`) defaults to; axes
// are far below every type's range, so the casts are exact.
axes_of_integers!(isize, i32, i64, usize);

/// No axes, `()`: a reduction over every axis (PyTorch's `dim=()`), and
/// for [`roll`](crate::Tensor::roll) the flattened tensor (its `dims`
/// left out).
impl Axes for () {
    fn to_axes(&self) -> AxisList {
        AxisList::new()
    }
}

/// The distinct axes `axes` names in `shape`, increasing: every axis when
/// `axes` is empty (PyTorch's `dim=()`), none of a rank-0 tensor (which
/// accepts axis 0 and -1, as PyTorch's reductions do).
pub(crate) fn resolve_axes(
    op: &'static str,
    device: impl Fn() -> String,
    shape: &Shape,
    axes: &[isize],
) -> Result<Dims> {
    if axes.is_empty() {
        return Ok((0..shape.rank()).collect());
    }
    let mut resolved = Dims::new();
    for &axis in axes {
        let Some(axis) = resolve_axis_or_scalar(op, &device, shape, axis)? else { continue };
        if resolved.contains(&axis) {
            let reason = format!("axis {axis} appears more than once in the axes {axes:?}");
            return Err(Error::Shape { op, device: device(), shapes: vec![shape.clone()], reason });
        }
        resolved.push(axis);
    }
    resolved.sort_unstable();
    Ok(resolved)
}

/// `shape` without the (increasing, distinct) `axes`, or with them set to
/// 1 when `keepdim`.
pub(super) fn without_axes(shape: &Shape, axes: &[usize], keepdim: bool) -> Shape {
    let dims = shape.dims().iter().enumerate();
    let dims: Dims = match keepdim {
        true => dims.map(|(a, &d)| if axes.contains(&a) { 1 } else { d }).collect(),
        false => dims.filter(|(a, _)| !axes.contains(a)).map(|(_, &d)| d).collect(),
    };
    Shape::from_dims(dims)
}

/// How many elements the (resolved) `axes` of `shape` hold together: the
/// count a mean or a variance divides by.
pub(super) fn count_over(shape: &Shape, axes: &[usize]) -> usize {
    axes.iter().map(|&a| shape.dims()[a]).product()
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// The sums over `axes` (empty: every axis), removed or kept as size 1,
    /// in `E::Sum`: one recorded operation however many axes it sums.
    pub(super) fn sum_over(&self, name: &'static str, axes: &[isize], keepdim: bool) -> Result<Tensor<D, E::Sum>> {
        let resolved = resolve_axes(name, D::name, self.shape(), axes)?;
        if resolved.len() == self.rank() && !keepdim {
            return self.sum_all(); // the flat kernel: no strided walk
        }
        autograd::track(
            name,
            &[self.node()],
            || self.as_sum_input(|x| x.sum_over_untracked(name, &resolved, keepdim)),
            |_| float_rule!(E, F => grad::sum::<D, F>(self.shape().clone(), resolved.clone(), keepdim)),
        )
    }

    /// The sums over the resolved `axes` in the element type, untracked.
    /// Neighbouring axes of a contiguous tensor are one run of memory and
    /// are summed as one (`[n, c, h, w]` over `h, w` is one pass over rows
    /// of `h·w`); the others one axis at a time, the longest first. The
    /// half types sum in `f32` and round once.
    pub(super) fn sum_over_untracked(&self, name: &'static str, axes: &[usize], keepdim: bool) -> Result<Self> {
        if E::DTYPE.is_half() && axes.len() > 1 {
            // One rounding of the `f32` sums, not one per axis.
            return self.try_to_dtype::<f32>()?.sum_over_untracked(name, axes, keepdim)?.try_to_dtype::<E>();
        }
        let shape = without_axes(self.shape(), axes, keepdim);
        // Summing away an empty axis leaves the others, whose product may not fit.
        check_elem_count(name, D::name, &[self.shape(), &shape])?;
        let (mut x, axes) = self.merge_neighbours(axes)?;
        let mut order: Dims = axes;
        order.sort_by_key(|&a| std::cmp::Reverse(x.dims()[a]));
        for &axis in &order {
            x = x.sum_same_type(axis, true)?;
        }
        x.try_reshape(shape)
    }

    /// This tensor with each run of neighbouring `axes` merged into one
    /// when it is contiguous (a view), and the axes of the result that
    /// stand for them; itself and `axes` otherwise.
    pub(super) fn merge_neighbours(&self, axes: &[usize]) -> Result<(Self, Dims)> {
        let runs = axes.windows(2).any(|w| w[1] == w[0] + 1);
        if !runs || !self.layout().is_contiguous() {
            return Ok((self.clone(), axes.into()));
        }
        let (mut dims, mut merged) = (Dims::new(), Dims::new());
        for (a, &d) in self.dims().iter().enumerate() {
            let joins = a > 0 && axes.contains(&a) && axes.contains(&(a - 1));
            match dims.last_mut() {
                Some(last) if joins => *last *= d,
                _ => {
                    if axes.contains(&a) {
                        merged.push(dims.len());
                    }
                    dims.push(d);
                }
            }
        }
        Ok((self.try_reshape(Shape::from_dims(dims))?, merged))
    }
}
