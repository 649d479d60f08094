//! `repeat` and `repeat_interleave`: a tensor tiled along every axis, or
//! each element repeated in place along one, built from a broadcast view
//! and one copy (or `index_select`), so their gradients come from those
//! ops.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, check_elem_count, resolve_axis};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, SameDevice, Tensor, same_device};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor tiled `repeats[i]` times along axis `i`, like PyTorch's
    /// `x.repeat(repeats)` (NumPy's `tile`): a new tensor, not a view. More
    /// repeats than axes add leading axes. Fails on fewer repeats than axes
    /// and on a result too large to count.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2], [2]);
    /// assert_eq!(x.repeat([2, 2]).to_vec2(), vec![vec![1, 2, 1, 2], vec![1, 2, 1, 2]]);
    /// let err = Tensor::<Cpu>::zeros([2, 2]).try_repeat([3]).unwrap_err();
    /// assert_eq!(err.to_string(), "repeat on Cpu: shape [2, 2]: 1 repeats for a tensor of rank 2; give at least one per axis");
    /// ```
    #[fallible]
    pub fn repeat(&self, repeats: impl AsRef<[usize]>) -> Self {
        core_call!(D, Fns<E>.repeat(self.core(), repeats.as_ref()))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_repeat(&self, repeats: &[usize]) -> crate::Result<Self> {
        const OP: &str = "repeat";
        let fail =
            |reason: String| Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason };
        if repeats.len() < self.rank() {
            return Err(fail(format!(
                "{} repeats for a tensor of rank {}; give at least one per axis",
                repeats.len(),
                self.rank()
            )));
        }
        let lead = repeats.len() - self.rank();
        let dims: Vec<usize> = (0..repeats.len()).map(|i| i.checked_sub(lead).map_or(1, |a| self.dims()[a])).collect();
        // Each axis `d` becomes the pair `[repeat, d]`: broadcast the
        // repeat, then merge the pair into one axis of `repeat * d`.
        let pairs = |repeat_of: &dyn Fn(usize) -> usize| -> Vec<usize> {
            dims.iter().enumerate().flat_map(|(i, &d)| [repeat_of(i), d]).collect()
        };
        let merged: Option<Vec<usize>> = dims.iter().zip(repeats).map(|(&d, &r)| d.checked_mul(r)).collect();
        let merged = merged.ok_or_else(|| fail(format!("{repeats:?} repeats of it overflow a dimension")))?;
        check_elem_count(OP, D::name, &[self.shape(), &Shape::from(merged.clone())])?;
        self.try_reshape(pairs(&|_| 1))?.try_broadcast_to(pairs(&|i| repeats[i]))?.try_reshape(merged)
    }
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// Each element repeated `repeats` times in place along `axis`, like
    /// `x.repeat_interleave(repeats, dim=axis)` (Llama's `repeat_kv` uses
    /// it); `[a, b]` becomes `[a, a, b, b]`, where [`repeat`](Self::repeat)
    /// gives `[a, b, a, b]`. PyTorch's form without `dim` is this on
    /// `x.flatten_all()`. Fails on an axis out of range and on a result
    /// too large to count.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4], [2, 2]);
    /// assert_eq!(x.repeat_interleave(2, 1).to_vec2(), vec![vec![1, 1, 2, 2], vec![3, 3, 4, 4]]);
    /// assert_eq!(x.repeat_interleave(2, 0).dims(), &[4, 2]);
    /// ```
    #[fallible]
    pub fn repeat_interleave(&self, repeats: usize, axis: isize) -> Self {
        core_call!(D, Fns<E>.repeat_interleave(self.core(), repeats, axis))
    }

    /// Element `i` along `axis` repeated `repeats[i]` times, like
    /// `x.repeat_interleave(repeats, dim=axis)` with a tensor of repeats (one
    /// per element of the axis, or one for all). The result's length is
    /// the repeats' sum, so they are read back from the device first, as
    /// PyTorch does without `output_size`. Fails on a negative repeat and on
    /// a count that is neither 1 nor the axis's size.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0], [3]);
    /// let repeats = Tensor::<Cpu, i64>::from_vec(vec![2, 0, 1], [3]);
    /// assert_eq!(x.repeat_interleave_tensor(&repeats, 0).to_vec(), vec![1.0, 1.0, 3.0]);
    /// ```
    #[fallible]
    pub fn repeat_interleave_tensor<D2: Device>(&self, repeats: &Tensor<D2, i64>, axis: isize) -> Self
    where
        D: SameDevice<D2>,
    {
        let repeats: &Tensor<D, i64> = same_device(repeats);
        core_call!(D, Fns<E>.repeat_interleave_tensor(self.core(), repeats.core(), axis))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_repeat_interleave(&self, repeats: usize, axis: isize) -> crate::Result<Self> {
        const OP: &str = "repeat_interleave";
        let axis = resolve_axis(OP, D::name, self.shape(), axis)?;
        let mut dims = self.dims().to_vec();
        let Some(merged) = dims[axis].checked_mul(repeats) else {
            let reason = format!("{repeats} repeats of axis {axis} overflow a dimension");
            return Err(Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason });
        };
        // Axis `d` becomes the pair `[d, repeats]`, broadcast, then merged.
        let mut pairs = dims.clone();
        pairs.insert(axis + 1, repeats);
        dims[axis] = merged;
        check_elem_count(OP, D::name, &[self.shape(), &Shape::from(dims.clone())])?;
        self.try_unsqueeze(axis as isize + 1)?.try_broadcast_to(pairs)?.try_reshape(dims)
    }

    pub(super) fn core_repeat_interleave_tensor(&self, repeats: &Tensor<D, i64>, axis: isize) -> crate::Result<Self> {
        const OP: &str = "repeat_interleave";
        let axis = resolve_axis(OP, D::name, self.shape(), axis)?;
        let len = self.dims()[axis];
        let fail = |reason: String| Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![self.shape().clone(), repeats.shape().clone()],
            reason,
        };
        if repeats.rank() > 1 || (repeats.elem_count() != 1 && repeats.elem_count() != len) {
            return Err(fail(format!("expected one repeat, or one per element of axis {axis} ({len})")));
        }
        let counts = repeats.try_to_vec()?;
        if let Some(&negative) = counts.iter().find(|&&r| r < 0) {
            return Err(fail(format!("repeats must not be negative, found {negative}")));
        }
        if let [every] = counts[..] {
            return self.core_repeat_interleave(every as usize, axis as isize);
        }
        let total = counts.iter().try_fold(0usize, |sum, &r| sum.checked_add(r as usize));
        let total = total.ok_or_else(|| fail("the repeats' sum overflows a dimension".into()))?;
        let mut dims = self.dims().to_vec();
        dims[axis] = total;
        check_elem_count(OP, D::name, &[self.shape(), &Shape::from(dims)])?;
        let picks: Vec<i64> =
            counts.iter().enumerate().flat_map(|(i, &r)| std::iter::repeat_n(i as i64, r as usize)).collect();
        self.try_index_select(axis as isize, &Tensor::<D, i64>::try_from_vec(picks, [total])?)
    }
}
