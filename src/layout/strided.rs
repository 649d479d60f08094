//! Where a tensor's elements sit in its storage.

use super::walk::for_each_block;
use super::{Dims, Shape};
use smallvec::SmallVec;

/// Where a tensor's elements sit in its storage: element `[i, j, ..]` is at
/// `offset + i * strides[0] + j * strides[1] + ..`. A stride of 0 repeats an
/// element (broadcasting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Shape,
    strides: Dims,
    offset: usize,
}

impl Layout {
    /// A row-major layout starting at offset 0.
    pub fn contiguous(shape: Shape) -> Self {
        let strides = shape.contiguous_strides();
        Layout { shape, strides, offset: 0 }
    }

    /// A dense layout of `shape` (offset 0, each element at its own place)
    /// whose axes lie in memory in the order of `like`'s strides, largest
    /// first, ties in axis order; the last axis always innermost. This is
    /// how PyTorch's `empty_like` keeps a permuted tensor's memory order: for
    /// heads split off a projection (`[B, T, H, D]` viewed as
    /// `[B, H, T, D]`) it is `[B, T, H, D]` again, which transposes back
    /// with no copy. `like` has `shape`'s rank.
    pub(crate) fn dense_like(shape: Shape, like: &Layout) -> Self {
        let rank = shape.rank();
        debug_assert_eq!(rank, like.strides.len());
        let mut order: Vec<usize> = (0..rank.saturating_sub(1)).collect();
        order.sort_by(|&a, &b| like.strides[b].cmp(&like.strides[a]));
        let mut strides: Dims = SmallVec::from_elem(1, rank);
        let mut step = shape.dims().last().copied().unwrap_or(1);
        for &axis in order.iter().rev() {
            strides[axis] = step;
            // Saturating: only a shape too large to allocate overflows.
            step = step.saturating_mul(shape.dims()[axis]);
        }
        Layout { shape, strides, offset: 0 }
    }

    /// Whether every element has a place of its own and the places are
    /// `offset..offset + elem_count`: some order of the axes is contiguous.
    pub(crate) fn is_dense(&self) -> bool {
        let mut axes: SmallVec<[(usize, usize); 6]> =
            self.dims().iter().zip(&self.strides).filter(|&(&d, _)| d > 1).map(|(&d, &s)| (s, d)).collect();
        axes.sort_unstable();
        let mut expected = 1usize;
        for (stride, dim) in axes {
            if stride != expected {
                return false;
            }
            expected = expected.saturating_mul(dim);
        }
        true
    }

    /// A layout from its parts; the caller guarantees every element is in bounds.
    pub(crate) fn new(shape: Shape, strides: Dims, offset: usize) -> Self {
        debug_assert_eq!(shape.rank(), strides.len());
        Layout { shape, strides, offset }
    }

    /// The logical shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dimension sizes.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Element strides, one per dimension.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Offset of element `[0, 0, ..]` in storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.shape.elem_count()
    }

    /// Whether the elements are dense and row-major (sizes-1 dimensions and
    /// empty tensors are contiguous whatever their strides).
    pub fn is_contiguous(&self) -> bool {
        if self.elem_count() == 0 {
            return true;
        }
        let mut expected = 1;
        for (&dim, &stride) in self.dims().iter().zip(self.strides.iter()).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected *= dim;
        }
        true
    }

    /// The storage range when the layout is contiguous.
    ///
    /// An empty layout selects nothing, so its range is `0..0` whatever its
    /// offset (a view of an empty tensor may point past its storage).
    pub fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        if self.elem_count() == 0 {
            return Some(0..0);
        }
        self.is_contiguous().then(|| self.offset..self.offset + self.elem_count())
    }

    /// A view of this layout broadcast to `shape` (stride 0 on new or size-1
    /// dimensions). `None` when the shapes do not broadcast that way.
    pub fn broadcast_to(&self, shape: &Shape) -> Option<Layout> {
        let rank = shape.rank();
        if rank < self.shape.rank() {
            return None;
        }
        let lead = rank - self.shape.rank();
        let mut strides: Dims = SmallVec::from_elem(0, rank);
        for (i, &target) in shape.dims().iter().enumerate() {
            if i < lead {
                continue;
            }
            let (dim, stride) = (self.dims()[i - lead], self.strides[i - lead]);
            strides[i] = match dim {
                d if d == target => stride,
                1 => 0,
                _ => return None,
            };
        }
        Some(Layout { shape: shape.clone(), strides, offset: self.offset })
    }

    /// The storage index of the last element this layout can reach (the
    /// largest offset), `None` for an empty layout or one whose offsets
    /// overflow.
    pub(crate) fn last_offset(&self) -> Option<usize> {
        if self.elem_count() == 0 {
            return None;
        }
        self.dims()
            .iter()
            .zip(self.strides.iter())
            .try_fold(self.offset, |acc, (&d, &s)| (d - 1).checked_mul(s).and_then(|step| acc.checked_add(step)))
    }

    /// This layout without its broadcast axes (stride 0, size above 1):
    /// its distinct elements, in their row-major order, and how many times
    /// each one repeats. `None` when it has no such axis or no element.
    ///
    /// Reductions and index checks over a broadcast view then read only the
    /// memory that exists.
    pub(crate) fn without_broadcast_axes(&self) -> Option<(Layout, usize)> {
        let repeats = |(&d, &s): (&usize, &usize)| s == 0 && d > 1;
        if self.elem_count() == 0 || !self.dims().iter().zip(&self.strides).any(repeats) {
            return None;
        }
        let (mut dims, mut strides, mut repeat) = (Dims::new(), Dims::new(), 1usize);
        for (d, s) in self.dims().iter().zip(&self.strides) {
            if repeats((d, s)) {
                repeat *= d; // a factor of the element count, which fits
            } else {
                dims.push(*d);
                strides.push(*s);
            }
        }
        Some((Layout { shape: Shape(dims), strides, offset: self.offset }, repeat))
    }

    /// Checks a storage length holds every element this layout can reach.
    pub(crate) fn fits_in(&self, storage_len: usize) -> bool {
        self.elem_count() == 0 || self.last_offset().is_some_and(|last| last < storage_len)
    }

    /// The offsets of every element, in row-major order. Slow but simple:
    /// for tests, references and cold paths.
    pub fn offsets(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.elem_count());
        for_each_block(self.dims(), [self.strides()], [self.offset], |[base], len, [stride]| {
            out.extend((0..len).map(|i| base + i * stride));
        });
        out
    }
}
