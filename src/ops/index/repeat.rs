//! `repeat`: a tensor tiled along every axis, built from a broadcast view
//! and one copy, so its gradient comes from theirs.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, check_elem_count};
use crate::layout::Shape;
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
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
