//! Where a tensor's elements are: its run-time shape, its strides, and the
//! strided walk every CPU kernel is built on. (Shapes checked at compile time
//! are the other module, [`static_shapes`](crate::static_shapes).)
//!
//! A [`Shape`] is the user-visible list of dimension sizes (here). A
//! [`Layout`] adds strides and an offset into storage, which is what lets
//! `permute`, `narrow`, `transpose` and broadcasting be views that copy
//! nothing (`strided.rs`). `walk.rs` visits the elements of strided
//! operands. The checks operations make of shapes, sizes and axes, which
//! build errors, are in `error/checks.rs`: errors describe shapes, so
//! `error` is the layer above.

mod strided;
mod walk;

pub use strided::Layout;
pub(crate) use walk::*;

use smallvec::SmallVec;
use std::fmt;

/// Dimension sizes or strides; tensors of rank six or less need no heap.
pub type Dims = SmallVec<[usize; 6]>;

/// The most elements a tensor may have, `2^63 - 1`: PyTorch's sizes are
/// `int64`, and so are devtensor's flat indices (`argmax_all` returns one).
/// A view may reach this many elements without the memory for them
/// (`broadcast_to`); a dense tensor is further limited by its bytes.
pub const MAX_ELEMS: usize = isize::MAX as usize;

/// The size of each dimension of a tensor, outermost first.
///
/// Built from arrays, slices, vectors or `()` (a scalar):
/// ```
/// use devtensor::Shape;
/// assert_eq!(Shape::from([2, 3]).elem_count(), 6);
/// assert_eq!(Shape::from(()).rank(), 0);
/// assert_eq!(Shape::from(vec![4]).to_string(), "[4]");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(Dims);

impl Shape {
    /// The dimension sizes.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of dimensions (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements: the product of the dimensions (1 for a scalar).
    ///
    /// Saturates at `usize::MAX` for a shape too large to exist (see
    /// [`checked_elem_count`](Self::checked_elem_count)); no tensor has such
    /// a shape, since every operation that makes one checks it first.
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.checked_elem_count().unwrap_or(usize::MAX)
    }

    /// Number of elements, or `None` when the product of the dimensions
    /// exceeds [`MAX_ELEMS`] (`2^63 - 1`). A shape with a zero dimension
    /// has no elements, whatever its other dimensions.
    ///
    /// ```
    /// use devtensor::Shape;
    /// assert_eq!(Shape::from([2, 3]).checked_elem_count(), Some(6));
    /// assert_eq!(Shape::from([1 << 32, 1 << 32]).checked_elem_count(), None);
    /// assert_eq!(Shape::from([1 << 62, 1 << 62, 0]).checked_elem_count(), Some(0));
    /// ```
    #[inline]
    pub fn checked_elem_count(&self) -> Option<usize> {
        let mut count = 1usize;
        for &dim in &self.0 {
            match count.checked_mul(dim) {
                Some(next) => count = next,
                // An overflowing product is still 0 if a later dimension is.
                None => return self.0.contains(&0).then_some(0),
            }
        }
        (count <= MAX_ELEMS).then_some(count)
    }

    /// Row-major (C-contiguous) strides for this shape. Saturating, so that
    /// an empty shape with huge dimensions still has strides; they address
    /// nothing.
    pub fn contiguous_strides(&self) -> Dims {
        let mut strides: Dims = SmallVec::from_elem(0, self.rank());
        let mut acc = 1usize;
        for (stride, &dim) in strides.iter_mut().zip(self.0.iter()).rev() {
            *stride = acc;
            acc = acc.saturating_mul(dim);
        }
        strides
    }

    /// The shape both operands broadcast to, following NumPy's rules: align
    /// the trailing dimensions; each pair must be equal or contain a 1.
    ///
    /// ```
    /// use devtensor::Shape;
    /// let s = Shape::from([3, 1, 5]).broadcast_with(&Shape::from([4, 1]));
    /// assert_eq!(s, Some(Shape::from([3, 4, 5])));
    /// assert_eq!(Shape::from([2]).broadcast_with(&Shape::from([3])), None);
    /// ```
    pub fn broadcast_with(&self, other: &Shape) -> Option<Shape> {
        let rank = self.rank().max(other.rank());
        let mut dims: Dims = SmallVec::from_elem(0, rank);
        for (i, out) in dims.iter_mut().enumerate() {
            let a = dim_from_end(&self.0, rank - 1 - i);
            let b = dim_from_end(&other.0, rank - 1 - i);
            *out = match (a, b) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => return None,
            };
        }
        Some(Shape(dims))
    }

    /// Turns a possibly negative axis (`-1` is the last) into an index.
    pub(crate) fn axis(&self, axis: isize) -> Option<usize> {
        let rank = self.rank() as isize;
        let resolved = if axis < 0 { axis + rank } else { axis };
        (0..rank).contains(&resolved).then_some(resolved as usize)
    }

    pub(crate) fn from_dims(dims: Dims) -> Self {
        Shape(dims)
    }
}

/// Size of the `k`-th dimension counted from the end, 1 past the front.
fn dim_from_end(dims: &[usize], k: usize) -> usize {
    if k < dims.len() { dims[dims.len() - 1 - k] } else { 1 }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Self {
        Shape(SmallVec::from_slice(&dims))
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Self {
        Shape(SmallVec::from_slice(dims))
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Self {
        Shape(SmallVec::from_vec(dims))
    }
}

impl From<&Shape> for Shape {
    fn from(shape: &Shape) -> Self {
        shape.clone()
    }
}

impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape(SmallVec::new())
    }
}

impl From<usize> for Shape {
    fn from(len: usize) -> Self {
        Shape(smallvec::smallvec![len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_offsets(layout: &Layout) -> Vec<usize> {
        let n = layout.elem_count();
        (0..n)
            .map(|mut flat| {
                let mut off = layout.offset();
                for (&d, &s) in layout.dims().iter().zip(layout.strides()).rev() {
                    off += (flat % d) * s;
                    flat /= d;
                }
                off
            })
            .collect()
    }

    #[test]
    fn walk_matches_naive_offsets() {
        let cases = [
            Layout::contiguous(Shape::from([2, 3, 4])),
            Layout::new(Shape::from([3, 2]), smallvec::smallvec![1, 3], 0),
            Layout::new(Shape::from([2, 1, 3]), smallvec::smallvec![0, 7, 1], 5),
            Layout::new(Shape::from([2, 3, 2]), smallvec::smallvec![12, 4, 1], 2),
            Layout::contiguous(Shape::from(())),
            Layout::contiguous(Shape::from([0, 3])),
        ];
        for layout in cases {
            assert_eq!(layout.offsets(), naive_offsets(&layout), "{layout:?}");
        }
    }

    #[test]
    fn contiguity() {
        assert!(Layout::contiguous(Shape::from([2, 3])).is_contiguous());
        assert!(!Layout::new(Shape::from([3, 2]), smallvec::smallvec![1, 3], 0).is_contiguous());
        assert!(Layout::new(Shape::from([1, 3]), smallvec::smallvec![99, 1], 4).is_contiguous());
    }

    /// `dense_like` gives every element its own place in `0..n` (checked by
    /// listing them), keeps `like`'s memory order, and the last axis
    /// innermost even where `like`'s is not; `is_dense` tells such layouts
    /// from views with gaps, overlaps or repeats.
    #[test]
    fn dense_layouts_in_another_layouts_order() {
        let dense = |l: &Layout| {
            let mut offsets = l.offsets();
            offsets.sort_unstable();
            offsets == (0..l.elem_count()).collect::<Vec<_>>()
        };
        let cases: [(&[usize], &[usize], &[usize]); 5] = [
            // Heads split off a projection: [B, T, 3·H·D] read as [B, H, T, D].
            (&[2, 3, 4, 5], &[180, 5, 45, 1], &[60, 5, 15, 1]),
            (&[2, 3, 4], &[12, 4, 1], &[12, 4, 1]),
            // Reversed axes; the last one still innermost.
            (&[2, 3, 4], &[1, 2, 6], &[4, 8, 1]),
            // A broadcast batch axis goes inside the others.
            (&[2, 3, 4], &[0, 4, 1], &[4, 8, 1]),
            (&[1, 3, 1, 2], &[7, 2, 7, 1], &[6, 2, 6, 1]),
        ];
        for (dims, like, expected) in cases {
            let like = Layout::new(Shape::from(dims), like.iter().copied().collect(), 3);
            let got = Layout::dense_like(Shape::from(dims), &like);
            assert_eq!(got.strides(), expected, "{like:?}");
            assert!(dense(&got) && got.is_dense(), "{got:?}");
        }
        let gpt = Layout::dense_like(
            Shape::from([2, 3, 4, 5]),
            &Layout::new(Shape::from([2, 3, 4, 5]), smallvec::smallvec![180, 5, 45, 1], 0),
        );
        let back = Layout::new(
            Shape::from([2, 4, 3, 5]),
            smallvec::smallvec![gpt.strides()[0], gpt.strides()[2], gpt.strides()[1], 1],
            0,
        );
        assert!(back.is_contiguous());
        for (dims, strides, is_dense) in [
            (&[3, 2][..], &[1, 3][..], true),
            (&[3, 2], &[2, 1], true),
            (&[3, 2], &[3, 1], false), // a gap
            (&[3, 2], &[1, 1], false), // overlaps
            (&[3, 2], &[0, 1], false), // repeats
            (&[3, 1, 2], &[2, 0, 1], true),
        ] {
            let l = Layout::new(Shape::from(dims), strides.iter().copied().collect(), 0);
            assert_eq!(l.is_dense(), is_dense, "{l:?}");
            assert_eq!(dense(&l), is_dense, "{l:?}");
        }
    }

    #[test]
    fn broadcast_layout_sets_zero_strides() {
        let l = Layout::contiguous(Shape::from([3, 1])).broadcast_to(&Shape::from([2, 3, 4])).unwrap();
        assert_eq!(l.strides(), &[0, 1, 0]);
        assert!(Layout::contiguous(Shape::from([3])).broadcast_to(&Shape::from([4])).is_none());
    }
}
