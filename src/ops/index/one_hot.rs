//! `one_hot`: class indices as rows of zeros with a one at each index,
//! built from a comparison against the classes.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device> Tensor<D, i64> {
    /// Each index as a row of `num_classes` zeros with a one at the
    /// index, a new last axis, like `F.one_hot(labels, num_classes)`: the
    /// result is `i64`, as PyTorch's; convert it for a loss (UNet's dice
    /// loss: `labels.one_hot(c).permute([0, 3, 1, 2]).to_dtype::<f32>()`).
    /// PyTorch's default `num_classes=-1` (the largest label plus one) is
    /// `labels.one_hot(labels.max().item() as usize + 1)`. Fails on an
    /// index below 0 or not below `num_classes`, as PyTorch does.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let labels = Tensor::<Cpu, i64>::from_vec(vec![2, 0], [2]);
    /// assert_eq!(labels.one_hot(3).to_vec2(), vec![vec![0, 0, 1], vec![1, 0, 0]]);
    /// assert!(labels.try_one_hot(2).is_err());
    /// ```
    #[fallible]
    pub fn one_hot(&self, num_classes: usize) -> Self {
        core_call!(D, Fns<i64>.one_hot(self.core(), num_classes))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_one_hot(&self, num_classes: usize) -> Result<Self> {
        if self.elem_count() > 0 {
            let (low, high) = (self.try_amin(())?.try_item()?.to_f64(), self.try_amax(())?.try_item()?.to_f64());
            if low < 0.0 || high >= num_classes as f64 {
                let reason = format!("class values must be in 0..{num_classes}, found values in {low}..={high}");
                return Err(Error::Argument { op: "one_hot", device: D::name(), reason });
            }
        }
        let classes = (0..num_classes).map(|c| E::from_f64(c as f64)).collect();
        let classes = Tensor::<D, E>::try_from_vec(classes, [num_classes])?;
        self.try_unsqueeze(-1)?.try_eq(&classes)?.try_to_dtype::<E>()
    }
}
