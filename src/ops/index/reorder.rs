//! `flip` and `roll`: the elements of a tensor in another order along some
//! axes, built from `index_select`, `narrow` and `cat`, so their gradients
//! come from those ops. Both give new tensors, as PyTorch's do (where
//! nothing moves, one that shares the input's elements, which no write
//! can change: an in-place op on either copies first).

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result, resolve_axis_or_scalar};
use crate::ops::reduce::{Axes, resolve_axes};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor reversed along each of `dims` (one axis or several,
    /// negative ones from the end), like `torch.flip(x, dims)`: a copy, not
    /// a view. An empty list flips nothing (unlike a reduction's, which
    /// means every axis). Fails on an axis out of range or named twice.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4, 5, 6], [2, 3]);
    /// assert_eq!(x.flip(-1).to_vec2(), vec![vec![3, 2, 1], vec![6, 5, 4]]);
    /// assert_eq!(x.flip([0, 1]).to_vec(), vec![6, 5, 4, 3, 2, 1]);
    /// ```
    #[fallible]
    pub fn flip(&self, dims: impl Axes) -> Self {
        core_call!(D, Fns<E>.flip(self.core(), &dims.to_axes()))
    }

    /// This tensor's elements shifted `shifts[i]` places along `dims[i]`
    /// (negative shifts go the other way), those pushed past the end coming
    /// back at the start, like `torch.roll(x, shifts, dims)`: a copy. With
    /// no `dims` (`()`), the tensor is rolled as if flattened and takes its
    /// shape again, as `torch.roll(x, 2)`; then `shifts` holds one shift.
    /// Fails when `shifts` and `dims` differ in length or an axis is out of
    /// range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3, 4, 5, 6], [2, 3]);
    /// assert_eq!(x.roll([1], 1).to_vec2(), vec![vec![3, 1, 2], vec![6, 4, 5]]);
    /// assert_eq!(x.roll([1, -1], [0, 1]).to_vec2(), vec![vec![5, 6, 4], vec![2, 3, 1]]);
    /// assert_eq!(x.roll([2], ()).to_vec(), vec![5, 6, 1, 2, 3, 4]);
    /// ```
    #[fallible]
    pub fn roll(&self, shifts: impl AsRef<[isize]>, dims: impl Axes) -> Self {
        core_call!(D, Fns<E>.roll(self.core(), shifts.as_ref(), &dims.to_axes()))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_flip(&self, dims: &[isize]) -> Result<Self> {
        let axes =
            if dims.is_empty() { Default::default() } else { resolve_axes("flip", D::name, self.shape(), dims)? };
        let mut out = self.clone();
        for axis in axes {
            let len = self.dims()[axis];
            if len > 1 {
                let reversed = Tensor::<D, i64>::try_from_vec((0..len as i64).rev().collect(), [len])?;
                out = out.try_index_select(axis as isize, &reversed)?;
            }
        }
        Ok(out)
    }

    pub(super) fn core_roll(&self, shifts: &[isize], dims: &[isize]) -> Result<Self> {
        const OP: &str = "roll";
        let fail =
            |reason: String| Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason };
        if dims.is_empty() {
            let &[shift] = shifts else {
                return Err(fail(format!("without dims, roll takes one shift, not {}", shifts.len())));
            };
            return self.try_reshape([self.elem_count()])?.core_roll(&[shift], &[0])?.try_reshape(self.shape().clone());
        }
        if shifts.len() != dims.len() {
            return Err(fail(format!("{} shifts for {} dims; give one shift per axis", shifts.len(), dims.len())));
        }
        let mut out = self.clone();
        for (&shift, &axis) in shifts.iter().zip(dims) {
            let Some(axis) = resolve_axis_or_scalar(OP, D::name, self.shape(), axis)? else { continue };
            let len = self.dims()[axis];
            // The last `shift` elements (mod the length) come first.
            let first = if len == 0 { 0 } else { shift.rem_euclid(len as isize) as usize };
            if first == 0 {
                continue;
            }
            let a = axis as isize;
            let (tail, head) = (out.try_narrow(a, len - first, first)?, out.try_narrow(a, 0, len - first)?);
            out = Tensor::try_cat(&[&tail, &head], a)?;
        }
        Ok(out)
    }
}
