//! `pad`: PyTorch's `F.pad`, built from `cat` (constant padding) and
//! `index_select` (reflect, replicate, circular), so its gradient is theirs.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

/// How [`Tensor::pad`] fills the new positions: PyTorch's `mode`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode<E> {
    /// `mode="constant", value=..`: the value. Negative padding crops.
    Constant(E),
    /// `mode="reflect"`: the input mirrored at its edges, the edge itself
    /// not repeated (`[1, 2, 3]` padded by 2 on the left: `[3, 2, 1, 2, 3]`).
    /// Each padding must be smaller than its axis.
    Reflect,
    /// `mode="replicate"` (NumPy's `"edge"`): the edge element repeated.
    /// Not called `Replicate`, a name `parallel::Replicate` holds: two items
    /// of one name make rustc print full paths in compile errors.
    Edge,
    /// `mode="circular"`: the input wrapped around. Each padding must be at
    /// most its axis's size.
    Circular,
}

impl<D: Device, E: Element> Tensor<D, E> {
    /// This tensor padded like `F.pad(x, pad, mode)`: `pad` lists
    /// `(before, after)` pairs starting from the last axis, as PyTorch's
    /// tuple does (`[1, 1, 2, 0]` pads the last axis by one on each side and
    /// the one before it by two in front). Fails on an odd-length `pad` or
    /// one longer than two per axis, and on paddings the mode cannot fill.
    ///
    /// ```
    /// use devtensor::ops::index::PadMode;
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::from_vec(vec![1, 2, 3], [1, 3]);
    /// assert_eq!(x.pad(&[2, 1], PadMode::Constant(0)).to_vec(), vec![0, 0, 1, 2, 3, 0]);
    /// assert_eq!(x.pad(&[2, 1], PadMode::Reflect).to_vec(), vec![3, 2, 1, 2, 3, 2]);
    /// assert_eq!(x.pad(&[2, 1], PadMode::Edge).to_vec(), vec![1, 1, 1, 2, 3, 3]);
    /// assert_eq!(x.pad(&[2, 1], PadMode::Circular).to_vec(), vec![2, 3, 1, 2, 3, 1]);
    /// assert_eq!(x.pad(&[-1, 0, 1, 0], PadMode::Constant(9)).to_vec2(), vec![vec![9, 9], vec![2, 3]]);
    /// ```
    #[fallible]
    pub fn pad(&self, pad: &[isize], mode: PadMode<E>) -> Self {
        core_call!(D, Fns<E>.pad(self.core(), pad, mode))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    pub(super) fn core_pad(&self, pad: &[isize], mode: PadMode<E>) -> Result<Self> {
        const OP: &str = "pad";
        let fail =
            |reason: String| Error::Shape { op: OP, device: D::name(), shapes: vec![self.shape().clone()], reason };
        if !pad.len().is_multiple_of(2) || pad.len() > 2 * self.rank() {
            return Err(fail(format!(
                "{} padding sizes for a tensor of rank {}: give (before, after) pairs from the last axis",
                pad.len(),
                self.rank()
            )));
        }
        let mut out = self.clone();
        for (pair, sides) in pad.chunks_exact(2).enumerate() {
            let axis = self.rank() - 1 - pair;
            let (before, after) = (sides[0], sides[1]);
            out = match mode {
                PadMode::Constant(value) => out.pad_constant(axis, before, after, value)?,
                _ => {
                    let size = out.dims()[axis];
                    let (before, after) = match (usize::try_from(before), usize::try_from(after)) {
                        (Ok(b), Ok(a)) => (b, a),
                        _ => return Err(fail(format!("negative padding {sides:?} is only allowed in constant mode"))),
                    };
                    let too_far = match mode {
                        PadMode::Reflect => before >= size || after >= size,
                        PadMode::Edge => size == 0 && before + after > 0,
                        _ => before > size || after > size || (size == 0 && before + after > 0),
                    };
                    if too_far {
                        return Err(fail(format!(
                            "padding ({before}, {after}) does not fit axis {axis} of size {size} in {mode:?} mode"
                        )));
                    }
                    let size = size as i64;
                    let picks: Vec<i64> = (-(before as i64)..size + after as i64)
                        .map(|k| match mode {
                            PadMode::Reflect if k < 0 => -k,
                            PadMode::Reflect if k >= size => 2 * (size - 1) - k,
                            PadMode::Edge => k.clamp(0, size - 1),
                            PadMode::Circular => k.rem_euclid(size),
                            _ => k,
                        })
                        .collect();
                    let len = picks.len();
                    out.try_index_select::<D>(axis as isize, &Tensor::try_from_vec(picks, [len])?)?
                }
            };
        }
        Ok(out)
    }

    /// Axis `axis` cropped where a side is negative, then extended with
    /// `value` where it is positive.
    fn pad_constant(&self, axis: usize, before: isize, after: isize, value: E) -> Result<Self> {
        let size = self.dims()[axis];
        let (cut_before, cut_after) = (before.min(0).unsigned_abs(), after.min(0).unsigned_abs());
        if cut_before + cut_after > size {
            return Err(Error::Shape {
                op: "pad",
                device: D::name(),
                shapes: vec![self.shape().clone()],
                reason: format!("cropping ({before}, {after}) leaves less than nothing of axis {axis} of size {size}"),
            });
        }
        let kept = self.try_narrow(axis as isize, cut_before, size - cut_before - cut_after)?;
        let kept_dims = kept.dims().to_vec();
        let fill = |n: usize| -> Result<Self> {
            let mut dims = kept_dims.clone();
            dims[axis] = n;
            Tensor::try_full(dims, value)
        };
        let (before, after) = (before.max(0) as usize, after.max(0) as usize);
        let pieces = [fill(before)?, kept, fill(after)?];
        Tensor::try_cat(&pieces.iter().collect::<Vec<_>>(), axis as isize)
    }
}
