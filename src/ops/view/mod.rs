//! Views: operations that only change the shape, strides or offset and copy
//! no elements (`reshape` copies only when the input is not contiguous), and
//! the pieces of a tensor (`split`, `chunk`, `unbind`).

mod grad;
mod reshape_dims;
mod split;

pub use reshape_dims::ReshapeDims;

/// A position along an axis that may count from the end, as Python's
/// integers do in PyTorch: `-1` is the last element. What
/// [`Tensor::select`] and [`Tensor::narrow`] take, implemented for the
/// integer types a position is held in (`usize`, `isize`, `i64`, `i32`),
/// so that both `x.select(1, -1)` and `x.select(1, t - 1)` with `t: usize`
/// read as in PyTorch.
pub trait AxisIndex: Copy {
    /// The position as an `i64` (a `usize` past `i64::MAX` saturates, and
    /// is then out of range of any axis).
    fn to_i64(self) -> i64;
}

macro_rules! axis_index {
    ($($t:ty),*) => {$(
        impl AxisIndex for $t {
            #[inline(always)]
            fn to_i64(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
        }
    )*};
}
axis_index!(usize, isize, i64, i32);

use crate::autograd::{self, float_rule};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::error::{check_elem_count, resolve_axis, resolve_axis_or_scalar};
use crate::layout::{Dims, Layout, Shape};
use crate::tensor::shell::{core_call, core_table};
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;
use grad::ViewGrad;

impl<D: Device, E: Element> Tensor<D, E> {
    /// The same elements with another shape of the same element count;
    /// copies only when this tensor is not contiguous (PyTorch's `reshape`).
    /// One size may be `-1`, for the size that keeps the element count
    /// (see [`ReshapeDims`]).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([2, 3]);
    /// assert_eq!(x.to_vec2(), vec![vec![0, 1, 2], vec![3, 4, 5]]);
    /// ```
    #[fallible]
    pub fn reshape(&self, shape: impl ReshapeDims) -> Self {
        let shape = shape.resolve("reshape", D::name(), self.shape())?;
        core_call!(D, Fns<E>.reshape(self.core(), shape))
    }

    /// Like [`reshape`](Self::reshape), but never copies: fails on a
    /// non-contiguous tensor (PyTorch's `view`).
    #[fallible]
    pub fn view(&self, shape: impl ReshapeDims) -> Self {
        let op = if self.is_contiguous() { "reshape" } else { "view" };
        let shape = shape.resolve(op, D::name(), self.shape())?;
        core_call!(D, Fns<E>.view(self.core(), shape))
    }

    /// Dimensions `start..=end` merged into one, like `torch.flatten`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([64, 16, 32, 32]);
    /// assert_eq!(x.flatten(1, -1).dims(), &[64, 16384]);
    /// ```
    #[fallible]
    pub fn flatten(&self, start: isize, end: isize) -> Self {
        core_call!(D, Fns<E>.flatten(self.core(), start, end))
    }

    /// Axis `axis` split into `sizes`, the inverse of
    /// [`flatten`](Self::flatten), like `x.unflatten(dim, sizes)`: one size
    /// may be -1, inferred from the others. A view where the layout allows,
    /// as [`reshape`](Self::reshape). Fails when the sizes do not multiply
    /// to the axis's size.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([2, 12, 5]);
    /// assert_eq!(x.unflatten(1, [3, 4]).dims(), &[2, 3, 4, 5]);
    /// assert_eq!(x.unflatten(-2, [2, -1]).dims(), &[2, 2, 6, 5]); // heads, head width
    /// assert!(x.try_unflatten(1, [5, -1]).is_err());
    /// ```
    #[fallible]
    pub fn unflatten(&self, axis: isize, sizes: impl AsRef<[isize]>) -> Self {
        core_call!(D, Fns<E>.unflatten(self.core(), axis, sizes.as_ref()))
    }

    /// All dimensions merged into one.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).flatten_all().dims(), &[6]);
    /// ```
    #[fallible]
    pub fn flatten_all(&self) -> Self {
        core_call!(D, Fns<E>.flatten_all(self.core()))
    }

    /// The dimensions reordered: output axis `i` is input axis `axes[i]`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::zeros([2, 3, 4]);
    /// assert_eq!(x.permute([2, 0, 1]).dims(), &[4, 2, 3]);
    /// ```
    #[fallible]
    pub fn permute(&self, axes: impl AsRef<[usize]>) -> Self {
        core_call!(D, Fns<E>.permute(self.core(), axes.as_ref()))
    }

    /// Axes `a` and `b` swapped. A rank-0 tensor accepts axes 0 and -1 and
    /// is returned as it is, as in PyTorch.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3, 4]).transpose(0, -1).dims(), &[4, 3, 2]);
    /// ```
    #[fallible]
    pub fn transpose(&self, a: isize, b: isize) -> Self {
        core_call!(D, Fns<E>.transpose(self.core(), a, b))
    }

    /// The transpose of a matrix; tensors of rank 0 and 1 are returned as
    /// they are, like PyTorch's `t()`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).t().dims(), &[3, 2]);
    /// ```
    #[fallible]
    pub fn t(&self) -> Self {
        core_call!(D, Fns<E>.t(self.core()))
    }

    /// Axis `axis` removed if its size is 1 (otherwise unchanged, as in
    /// PyTorch); a rank-0 tensor accepts axes 0 and -1 and stays as it is.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 1, 3]).squeeze(1).dims(), &[2, 3]);
    /// ```
    #[fallible]
    pub fn squeeze(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.squeeze(self.core(), axis))
    }

    /// Every size-1 axis removed.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([1, 2, 1]).squeeze_all().dims(), &[2]);
    /// ```
    #[fallible]
    pub fn squeeze_all(&self) -> Self {
        core_call!(D, Fns<E>.squeeze_all(self.core()))
    }

    /// A size-1 axis inserted at `axis` (`-1` appends one at the end).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).unsqueeze(0).dims(), &[1, 2, 3]);
    /// assert_eq!(Tensor::<Cpu>::zeros([2, 3]).unsqueeze(-1).dims(), &[2, 3, 1]);
    /// ```
    #[fallible]
    pub fn unsqueeze(&self, axis: isize) -> Self {
        core_call!(D, Fns<E>.unsqueeze(self.core(), axis))
    }

    /// Elements `start..start + len` along `axis`, like `torch.narrow` or
    /// slicing `x[:, start:start+len]`; a negative `start` counts from the
    /// end, as in PyTorch.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([2, 3]);
    /// assert_eq!(x.narrow(1, 1, 2).to_vec2(), vec![vec![1, 2], vec![4, 5]]);
    /// assert_eq!(x.narrow(-1, -2, 2).to_vec2(), vec![vec![1, 2], vec![4, 5]]);
    /// ```
    #[fallible]
    pub fn narrow(&self, axis: isize, start: impl AxisIndex, len: usize) -> Self {
        core_call!(D, Fns<E>.narrow(self.core(), axis, start.to_i64(), len))
    }

    /// The slice at `index` along `axis`, with that axis removed, like
    /// `x.select(dim, index)`; a negative `index` counts from the end
    /// (`logits[:, -1]` is `logits.select(1, -1)`).
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([2, 3]);
    /// assert_eq!(x.select(0, 1).to_vec(), vec![3, 4, 5]);
    /// assert_eq!(x.select(1, 0).to_vec(), vec![0, 3]);
    /// assert_eq!(x.select(1, -1).to_vec(), vec![2, 5]);
    /// assert_eq!(x.try_select(1, -4).unwrap_err().to_string(),
    ///            "select on Cpu: index -4 is out of range for axis 1 of size 3 (shape [2, 3])");
    /// ```
    #[fallible]
    pub fn select(&self, axis: isize, index: impl AxisIndex) -> Self {
        core_call!(D, Fns<E>.select(self.core(), axis, index.to_i64()))
    }

    /// A view repeating this tensor to `shape` by NumPy broadcasting, like
    /// PyTorch's `expand`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let row = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2]);
    /// assert_eq!(row.broadcast_to([2, 2]).to_vec(), vec![1.0, 2.0, 1.0, 2.0]);
    /// ```
    #[fallible]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Self {
        core_call!(D, Fns<E>.broadcast_to(self.core(), shape.into()))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    fn shape_error(&self, op: &'static str, shapes: Vec<Shape>, reason: String) -> Error {
        Error::Shape { op, device: D::name(), shapes, reason }
    }

    fn resolve(&self, op: &'static str, axis: isize) -> Result<usize> {
        resolve_axis(op, D::name, self.shape(), axis)
    }

    /// `forward()`, a view of `self` recorded as op `name`, with `how()` (only
    /// called when recording) saying how its gradient maps back.
    fn view_op(
        &self,
        name: &'static str,
        how: impl FnOnce() -> ViewGrad,
        forward: impl FnOnce() -> Result<Self>,
    ) -> Result<Self> {
        autograd::track(name, &[self.node()], forward, |_| float_rule!(E, F => grad::view::<D, F>(how())))
    }

    /// A view of `self` with its shape changed and its elements in the same
    /// order, recorded as op `name`.
    fn reshaped_view(&self, name: &'static str, forward: impl FnOnce() -> Result<Self>) -> Result<Self> {
        self.view_op(name, || ViewGrad::Reshape(self.shape().clone()), forward)
    }

    pub(super) fn core_reshape(&self, shape: Shape) -> Result<Self> {
        check_elem_count("reshape", D::name, &[self.shape(), &shape])?;
        if shape.elem_count() != self.elem_count() {
            return Err(self.shape_error(
                "reshape",
                vec![self.shape().clone(), shape.clone()],
                format!("{} elements cannot be viewed as {}", self.elem_count(), shape.elem_count()),
            ));
        }
        self.reshaped_view("reshape", || {
            let dense = self.try_contiguous()?;
            let offset = dense.layout().offset();
            Ok(dense.with_layout(Layout::new(shape.clone(), shape.contiguous_strides(), offset)))
        })
    }

    pub(super) fn core_view(&self, shape: Shape) -> Result<Self> {
        if !self.is_contiguous() {
            return Err(self.shape_error(
                "view",
                vec![self.shape().clone(), shape],
                "the tensor is not contiguous; call `.contiguous()` or use `reshape`".into(),
            ));
        }
        self.try_reshape(shape)
    }

    pub(super) fn core_flatten(&self, start: isize, end: isize) -> Result<Self> {
        if self.rank() == 0 {
            return self.try_reshape([1]);
        }
        let (s, e) = (self.resolve("flatten", start)?, self.resolve("flatten", end)?);
        if s > e {
            return Err(Error::Argument {
                op: "flatten",
                device: D::name(),
                reason: format!("start axis {start} comes after end axis {end}"),
            });
        }
        let dims = self.dims();
        let mut new: Vec<usize> = dims[..s].to_vec();
        // Other axes may be 0, so the merged one can be too large even though
        // the tensor has no elements.
        let merged = Shape::from(&dims[s..=e]).checked_elem_count().ok_or_else(|| Error::Shape {
            op: "flatten",
            device: D::name(),
            shapes: vec![self.shape().clone()],
            reason: format!("axes {s}..={e} would merge into more than 2^63 - 1 elements"),
        })?;
        new.push(merged);
        new.extend_from_slice(&dims[e + 1..]);
        self.try_reshape(new)
    }

    pub(super) fn core_unflatten(&self, axis: isize, sizes: &[isize]) -> Result<Self> {
        let at = self.resolve("unflatten", axis)?;
        let len = self.dims()[at];
        let fail = |reason: String| self.shape_error("unflatten", vec![self.shape().clone()], reason);
        let inferred: Vec<usize> = sizes.iter().enumerate().filter(|&(_, &s)| s == -1).map(|(i, _)| i).collect();
        if sizes.is_empty() || inferred.len() > 1 || sizes.iter().any(|&s| s < -1) {
            return Err(fail(format!(
                "{sizes:?} are not sizes for axis {at}: give at least one, at most one of them -1"
            )));
        }
        let known = sizes.iter().filter(|&&s| s != -1).try_fold(1usize, |product, &s| product.checked_mul(s as usize));
        let mut split: Vec<usize> = sizes.iter().map(|&s| s.max(0) as usize).collect();
        match (known, inferred.first()) {
            (Some(known), Some(&i)) if known > 0 && len.is_multiple_of(known) => split[i] = len / known,
            (Some(known), None) if known == len => {}
            _ => return Err(fail(format!("sizes {sizes:?} do not split axis {at} of size {len}"))),
        }
        let dims = self.dims();
        let new: Vec<usize> = dims[..at].iter().chain(&split).chain(&dims[at + 1..]).copied().collect();
        self.try_reshape(new)
    }

    pub(super) fn core_flatten_all(&self) -> Result<Self> {
        self.try_reshape([self.elem_count()])
    }

    pub(super) fn core_permute(&self, axes: &[usize]) -> Result<Self> {
        let mut seen = vec![false; self.rank()];
        let valid = axes.len() == self.rank()
            && axes.iter().all(|&a| a < self.rank() && !std::mem::replace(&mut seen[a], true));
        if !valid {
            return Err(self.shape_error(
                "permute",
                vec![self.shape().clone()],
                format!("{axes:?} is not a permutation of the {} axes", self.rank()),
            ));
        }
        let inverse = || {
            let mut inverse = vec![0; axes.len()];
            for (i, &a) in axes.iter().enumerate() {
                inverse[a] = i;
            }
            ViewGrad::Permute(inverse)
        };
        self.view_op("permute", inverse, || {
            let l = self.layout();
            let dims: Dims = axes.iter().map(|&a| l.dims()[a]).collect();
            let strides: Dims = axes.iter().map(|&a| l.strides()[a]).collect();
            Ok(self.with_layout(Layout::new(Shape::from_dims(dims), strides, l.offset())))
        })
    }

    pub(super) fn core_transpose(&self, a: isize, b: isize) -> Result<Self> {
        let scalar = |axis| resolve_axis_or_scalar("transpose", D::name, self.shape(), axis);
        if let (None, None) = (scalar(a)?, scalar(b)?) {
            return Ok(self.clone());
        }
        let (a, b) = (self.resolve("transpose", a)?, self.resolve("transpose", b)?);
        let mut axes: Vec<usize> = (0..self.rank()).collect();
        axes.swap(a, b);
        self.try_permute(axes)
    }

    pub(super) fn core_t(&self) -> Result<Self> {
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.try_transpose(0, 1),
            r => Err(self.shape_error("t", vec![self.shape().clone()], format!("expected rank 2 or less, got {r}"))),
        }
    }

    pub(super) fn core_squeeze(&self, axis: isize) -> Result<Self> {
        let Some(axis) = resolve_axis_or_scalar("squeeze", D::name, self.shape(), axis)? else {
            return Ok(self.clone());
        };
        if self.dims()[axis] != 1 {
            return Ok(self.clone());
        }
        self.reshaped_view("squeeze", || {
            let l = self.layout();
            let mut dims: Dims = l.dims().into();
            let mut strides: Dims = l.strides().into();
            dims.remove(axis);
            strides.remove(axis);
            Ok(self.with_layout(Layout::new(Shape::from_dims(dims), strides, l.offset())))
        })
    }

    pub(super) fn core_squeeze_all(&self) -> Result<Self> {
        self.reshaped_view("squeeze_all", || {
            let l = self.layout();
            let (dims, strides): (Dims, Dims) =
                l.dims().iter().zip(l.strides()).filter(|&(&d, _)| d != 1).map(|(&d, &s)| (d, s)).unzip();
            Ok(self.with_layout(Layout::new(Shape::from_dims(dims), strides, l.offset())))
        })
    }

    pub(super) fn core_unsqueeze(&self, axis: isize) -> Result<Self> {
        let rank = self.rank() as isize;
        let resolved = if axis < 0 { axis + rank + 1 } else { axis };
        if !(0..=rank).contains(&resolved) {
            return Err(Error::Axis { op: "unsqueeze", device: D::name(), shape: self.shape().clone(), axis });
        }
        let at = resolved as usize;
        self.reshaped_view("unsqueeze", || {
            let l = self.layout();
            let mut dims: Dims = l.dims().into();
            let mut strides: Dims = l.strides().into();
            // Saturating: an empty tensor may have dimensions whose strides overflow.
            let stride = if at < dims.len() { dims[at].saturating_mul(strides[at]) } else { 1 };
            dims.insert(at, 1);
            strides.insert(at, stride);
            Ok(self.with_layout(Layout::new(Shape::from_dims(dims), strides, l.offset())))
        })
    }

    pub(super) fn core_narrow(&self, axis: isize, start: i64, len: usize) -> Result<Self> {
        let ax = self.resolve("narrow", axis)?;
        let size = self.dims()[ax];
        let resolved = if start < 0 { start + size as i64 } else { start };
        let end = usize::try_from(resolved).ok().and_then(|s| s.checked_add(len));
        let Some(start) = usize::try_from(resolved).ok().filter(|_| end.is_some_and(|end| end <= size)) else {
            return Err(self.shape_error(
                "narrow",
                vec![self.shape().clone()],
                format!(
                    "elements {start}..{} are out of range for axis {ax} of size {size}",
                    start.saturating_add(len as i64)
                ),
            ));
        };
        self.strided_slice(ax, start, len, 1)
    }

    /// `len` elements along axis `ax` from `start`, `step` apart, as a view
    /// (PyTorch's `x[.., start::step]` basic slicing); the caller checks that
    /// they are in range.
    pub(crate) fn strided_slice(&self, ax: usize, start: usize, len: usize, step: usize) -> Result<Self> {
        let size = self.dims()[ax];
        self.view_op(
            if step == 1 { "narrow" } else { "slice" },
            || ViewGrad::Slice { axis: ax, start, step, size },
            || {
                let l = self.layout();
                let (mut dims, mut strides): (Dims, Dims) = (l.dims().into(), l.strides().into());
                dims[ax] = len;
                let offset = if len == 0 { l.offset() } else { l.offset() + start * strides[ax] };
                // Saturating: a stride only ever multiplies an index below `len`.
                strides[ax] = strides[ax].saturating_mul(step);
                Ok(self.with_layout(Layout::new(Shape::from_dims(dims), strides, offset)))
            },
        )
    }

    pub(super) fn core_select(&self, axis: isize, index: i64) -> Result<Self> {
        let ax = self.resolve("select", axis)?;
        let size = self.dims()[ax] as i64;
        if !(-size..size).contains(&index) {
            return Err(Error::Index { op: "select", device: D::name(), shape: self.shape().clone(), axis: ax, index });
        }
        let at = if index < 0 { index + size } else { index };
        self.strided_slice(ax, at as usize, 1, 1)?.try_squeeze(ax as isize)
    }

    pub(super) fn core_broadcast_to(&self, shape: Shape) -> Result<Self> {
        check_elem_count("broadcast_to", D::name, &[self.shape(), &shape])?;
        let layout = self.layout().broadcast_to(&shape).ok_or_else(|| {
            self.shape_error(
                "broadcast_to",
                vec![self.shape().clone(), shape.clone()],
                "the shape cannot be broadcast to the target".into(),
            )
        })?;
        self.view_op("broadcast_to", || ViewGrad::Broadcast(self.shape().clone()), || Ok(self.with_layout(layout)))
    }
}

core_table! {
    /// The core's views.
    pub(crate) struct Fns<C, E: Element> {
        reshape: fn(&Tensor<C, E>, Shape) -> Result<Tensor<C, E>> = Tensor::core_reshape,
        view: fn(&Tensor<C, E>, Shape) -> Result<Tensor<C, E>> = Tensor::core_view,
        flatten: fn(&Tensor<C, E>, isize, isize) -> Result<Tensor<C, E>> = Tensor::core_flatten,
        flatten_all: fn(&Tensor<C, E>) -> Result<Tensor<C, E>> = Tensor::core_flatten_all,
        unflatten: fn(&Tensor<C, E>, isize, &[isize]) -> Result<Tensor<C, E>> = Tensor::core_unflatten,
        permute: fn(&Tensor<C, E>, &[usize]) -> Result<Tensor<C, E>> = Tensor::core_permute,
        transpose: fn(&Tensor<C, E>, isize, isize) -> Result<Tensor<C, E>> = Tensor::core_transpose,
        t: fn(&Tensor<C, E>) -> Result<Tensor<C, E>> = Tensor::core_t,
        squeeze: fn(&Tensor<C, E>, isize) -> Result<Tensor<C, E>> = Tensor::core_squeeze,
        squeeze_all: fn(&Tensor<C, E>) -> Result<Tensor<C, E>> = Tensor::core_squeeze_all,
        unsqueeze: fn(&Tensor<C, E>, isize) -> Result<Tensor<C, E>> = Tensor::core_unsqueeze,
        narrow: fn(&Tensor<C, E>, isize, i64, usize) -> Result<Tensor<C, E>> = Tensor::core_narrow,
        select: fn(&Tensor<C, E>, isize, i64) -> Result<Tensor<C, E>> = Tensor::core_select,
        broadcast_to: fn(&Tensor<C, E>, Shape) -> Result<Tensor<C, E>> = Tensor::core_broadcast_to,
        split: fn(&Tensor<C, E>, usize, isize) -> Result<Vec<Tensor<C, E>>> = Tensor::core_split,
        split_sizes: fn(&Tensor<C, E>, &[usize], isize) -> Result<Vec<Tensor<C, E>>> = Tensor::core_split_sizes,
        chunk: fn(&Tensor<C, E>, usize, isize) -> Result<Vec<Tensor<C, E>>> = Tensor::core_chunk,
        unbind: fn(&Tensor<C, E>, isize) -> Result<Vec<Tensor<C, E>>> = Tensor::core_unbind,
        expand: fn(&Tensor<C, E>, &[isize]) -> Result<Tensor<C, E>> = Tensor::core_expand,
    }
}
