//! Views that cut a tensor into pieces along an axis (`split`, `chunk`,
//! `unbind`) and `expand`, PyTorch's spelling of a broadcast.

use super::Fns;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, E: Element> Tensor<D, E> {
    /// Views of consecutive pieces of `split_size` elements along `axis`,
    /// the last one shorter when `split_size` does not divide the axis, like
    /// `torch.split(x, split_size, dim)`. An axis of size 0 gives one empty
    /// piece. Each piece is a view: gradients flow back to this tensor.
    /// Fails when `axis` is out of range, and for a `split_size` of 0 on a
    /// non-empty axis.
    ///
    /// Cutting the fused `qkv` projection of attention into `q`, `k` and `v`:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let qkv = Tensor::<Cpu, i64>::arange(0, 12).reshape([2, 6]);
    /// let parts = qkv.split(2, -1);
    /// assert_eq!(parts.len(), 3);
    /// assert_eq!(parts[1].to_vec2(), vec![vec![2, 3], vec![8, 9]]);
    /// assert_eq!(qkv.split(4, 1)[1].dims(), &[2, 2]); // the last piece is shorter
    /// ```
    #[fallible]
    pub fn split(&self, split_size: usize, axis: isize) -> Vec<Self> {
        core_call!(D, Fns<E>.split(self.core(), split_size, axis))
    }

    /// Views of consecutive pieces of the given sizes along `axis`, like
    /// `torch.split(x, [s0, s1, ..], dim)`. Fails when the sizes do not add
    /// up to the axis's size, and when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 5);
    /// let parts = x.split_sizes(&[1, 4], 0);
    /// assert_eq!(parts[1].to_vec(), vec![1, 2, 3, 4]);
    /// let err = x.try_split_sizes(&[1, 2], 0).unwrap_err();
    /// assert_eq!(err.to_string(), "split_sizes on Cpu: shape [5]: the sizes [1, 2] add up to 3, not to axis 0's size 5");
    /// ```
    #[fallible]
    pub fn split_sizes(&self, sizes: &[usize], axis: isize) -> Vec<Self> {
        core_call!(D, Fns<E>.split_sizes(self.core(), sizes, axis))
    }

    /// At most `chunks` views of equal size along `axis` (the last one
    /// smaller, and fewer of them when the size does not allow `chunks`),
    /// like `torch.chunk`: pieces of `ceil(size / chunks)` elements. An axis
    /// of size 0 gives `chunks` empty pieces, as in PyTorch. Fails for 0
    /// chunks and an out-of-range `axis`.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 5);
    /// let sizes: Vec<usize> = x.chunk(3, 0).iter().map(|c| c.elem_count()).collect();
    /// assert_eq!(sizes, vec![2, 2, 1]);
    /// assert_eq!(Tensor::<Cpu, i64>::arange(0, 6).chunk(4, 0).len(), 3); // pieces of 2
    /// ```
    #[fallible]
    pub fn chunk(&self, chunks: usize, axis: isize) -> Vec<Self> {
        core_call!(D, Fns<E>.chunk(self.core(), chunks, axis))
    }

    /// The slices along `axis`, each without that axis, like `torch.unbind`
    /// (or `list(x)` for axis 0). Fails when `axis` is out of range.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let x = Tensor::<Cpu, i64>::arange(0, 6).reshape([2, 3]);
    /// let columns = x.unbind(1);
    /// assert_eq!(columns.len(), 3);
    /// assert_eq!(columns[2].to_vec(), vec![2, 5]);
    /// ```
    #[fallible]
    pub fn unbind(&self, axis: isize) -> Vec<Self> {
        core_call!(D, Fns<E>.unbind(self.core(), axis))
    }

    /// A view repeating this tensor along its size-1 axes (and new leading
    /// axes), like PyTorch's `x.expand(sizes)`: a size of `-1` keeps that
    /// axis as it is. [`broadcast_to`](Self::broadcast_to) is the same with
    /// every size written out. Fails on fewer sizes than axes, a `-1` for a
    /// new leading axis, and a size that does not broadcast.
    ///
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let column = Tensor::<Cpu>::from_vec(vec![1.0, 2.0], [2, 1]);
    /// assert_eq!(column.expand([-1, 3]).to_vec2(), vec![vec![1.0; 3], vec![2.0; 3]]);
    /// assert_eq!(column.expand([4, -1, 3]).dims(), &[4, 2, 3]);
    /// ```
    #[fallible]
    pub fn expand(&self, sizes: impl AsRef<[isize]>) -> Self {
        core_call!(D, Fns<E>.expand(self.core(), sizes.as_ref()))
    }
}

impl<D: CoreDevice, E: Element> Tensor<D, E> {
    /// Consecutive views of `sizes` elements along `axis`, which add up to
    /// its size.
    fn pieces(&self, axis: usize, sizes: &[usize]) -> Result<Vec<Self>> {
        let mut start = 0;
        sizes
            .iter()
            .map(|&size| {
                let piece = self.try_narrow(axis as isize, start, size);
                start += size;
                piece
            })
            .collect()
    }

    pub(super) fn core_split(&self, split_size: usize, axis: isize) -> Result<Vec<Self>> {
        let ax = self.resolve("split", axis)?;
        let len = self.dims()[ax];
        if split_size == 0 && len > 0 {
            return Err(self.shape_error(
                "split",
                vec![self.shape().clone()],
                format!("a split size of 0 cannot cover axis {ax} of size {len}"),
            ));
        }
        let sizes: Vec<usize> = match len {
            0 => vec![0],
            _ => (0..len).step_by(split_size).map(|start| split_size.min(len - start)).collect(),
        };
        self.pieces(ax, &sizes)
    }

    pub(super) fn core_split_sizes(&self, sizes: &[usize], axis: isize) -> Result<Vec<Self>> {
        let ax = self.resolve("split_sizes", axis)?;
        let len = self.dims()[ax];
        let total = sizes.iter().try_fold(0usize, |sum, &s| sum.checked_add(s));
        if total != Some(len) {
            let total = total.map_or_else(|| "more than 2^64 - 1".to_string(), |t| t.to_string());
            return Err(self.shape_error(
                "split_sizes",
                vec![self.shape().clone()],
                format!("the sizes {sizes:?} add up to {total}, not to axis {ax}'s size {len}"),
            ));
        }
        self.pieces(ax, sizes)
    }

    pub(super) fn core_chunk(&self, chunks: usize, axis: isize) -> Result<Vec<Self>> {
        let ax = self.resolve("chunk", axis)?;
        if chunks == 0 {
            return Err(self.shape_error(
                "chunk",
                vec![self.shape().clone()],
                "the number of chunks must be at least 1".into(),
            ));
        }
        match self.dims()[ax] {
            0 => self.pieces(ax, &vec![0; chunks]),
            len => self.try_split(len.div_ceil(chunks), ax as isize),
        }
    }

    pub(super) fn core_unbind(&self, axis: isize) -> Result<Vec<Self>> {
        let ax = self.resolve("unbind", axis)?;
        (0..self.dims()[ax]).map(|i| self.try_select(ax as isize, i)).collect()
    }

    pub(super) fn core_expand(&self, sizes: &[isize]) -> Result<Self> {
        let rank = self.rank();
        let fail = |reason: String| self.shape_error("expand", vec![self.shape().clone()], reason);
        if sizes.len() < rank {
            return Err(fail(format!("{} sizes {sizes:?} for a tensor of rank {rank}", sizes.len())));
        }
        let lead = sizes.len() - rank;
        let dims = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| match (size, i.checked_sub(lead)) {
                (-1, Some(axis)) => Ok(self.dims()[axis]),
                (-1, None) => Err(fail(format!("size -1 for the new leading axis {i}: a new axis needs its size"))),
                (size, _) => usize::try_from(size).map_err(|_| fail(format!("size {size} is negative"))),
            })
            .collect::<Result<Vec<usize>>>()?;
        self.try_broadcast_to(dims).map_err(|e| match e {
            Error::Shape { reason, .. } => fail(reason),
            other => other,
        })
    }
}
