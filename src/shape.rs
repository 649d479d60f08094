//! Shapes, strides and the strided walk every CPU kernel is built on.
//!
//! A [`Shape`] is the user-visible list of dimension sizes. A [`Layout`] adds
//! strides and an offset into storage, which is what lets `permute`, `narrow`,
//! `transpose` and broadcasting be views that copy nothing.

use crate::element::Element;
use crate::error::{Error, Result};
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

/// The element count of `dims` for a kernel's loop bounds: 0 when any
/// dimension is 0, the saturating product otherwise.
///
/// A plain `product()` can overflow on an empty shape before it reaches the
/// 0 (`[2, 2^63, 0]`). Operations check that every non-empty result fits, so
/// saturation only shows in sub-products of empty shapes, and kernels
/// return before looping over those.
pub(crate) fn count_of<'a>(dims: impl IntoIterator<Item = &'a usize>) -> usize {
    let (product, empty) =
        dims.into_iter().fold((1usize, false), |(p, empty), &d| (p.saturating_mul(d), empty || d == 0));
    if empty { 0 } else { product }
}

/// Walks `K` strided operands of one shape together, calling
/// `block(bases, len, strides)` for each run of `len` elements along the
/// innermost (merged) dimension: operand `k`'s elements are at
/// `bases[k] + i * strides[k]` for `i in 0..len`.
///
/// Dimensions that are contiguous with respect to each other in *every*
/// operand are merged first, so a dense tensor is one single block and the
/// caller's inner loop sees long, vectorisable runs.
pub(crate) fn for_each_block<const K: usize>(
    dims: &[usize],
    strides: [&[usize]; K],
    offsets: [usize; K],
    mut block: impl FnMut([usize; K], usize, [usize; K]),
) {
    if dims.contains(&0) {
        return;
    }
    // Merge dimensions, innermost first; size-1 dimensions vanish.
    let mut sizes: SmallVec<[usize; 6]> = SmallVec::new();
    let mut merged: SmallVec<[[usize; K]; 6]> = SmallVec::new();
    for axis in (0..dims.len()).rev() {
        let size = dims[axis];
        if size == 1 {
            continue;
        }
        let st: [usize; K] = std::array::from_fn(|k| strides[k][axis]);
        // Checked: the axes of an empty tensor may multiply past usize.
        if let (Some(inner_size), Some(inner)) = (sizes.last_mut(), merged.last())
            && let Some(merged_size) = inner_size.checked_mul(size)
            && (0..K).all(|k| inner[k].checked_mul(*inner_size) == Some(st[k]))
        {
            *inner_size = merged_size;
            continue;
        }
        sizes.push(size);
        merged.push(st);
    }
    if sizes.is_empty() {
        block(offsets, 1, [0; K]);
        return;
    }
    // sizes[0] is the innermost dimension; walk the rest like an odometer.
    let (inner_len, inner_strides) = (sizes[0], merged[0]);
    let outer = &sizes[1..];
    let mut counter: SmallVec<[usize; 6]> = SmallVec::from_elem(0, outer.len());
    let mut bases = offsets;
    loop {
        block(bases, inner_len, inner_strides);
        let mut axis = 0;
        loop {
            if axis == outer.len() {
                return;
            }
            counter[axis] += 1;
            for k in 0..K {
                bases[k] += merged[axis + 1][k];
            }
            if counter[axis] < outer[axis] {
                break;
            }
            for k in 0..K {
                bases[k] -= merged[axis + 1][k] * outer[axis];
            }
            counter[axis] = 0;
            axis += 1;
        }
    }
}

/// Builds the error for two shapes that do not broadcast.
pub(crate) fn broadcast_error(op: &'static str, device: String, lhs: &Shape, rhs: &Shape) -> Error {
    Error::Shape {
        op,
        device,
        shapes: vec![lhs.clone(), rhs.clone()],
        reason: "the shapes cannot be broadcast together".into(),
    }
}

/// The element count of `shape`, a new shape an operation is about to
/// produce (or view data as), or an [`Error::Shape`] naming `op` and
/// `shapes` (the operands, then the result) when it exceeds [`MAX_ELEMS`].
///
/// Every operation whose output shape comes from the caller or from
/// combining operands (broadcasting, `matmul`, `cat`, ...) checks it before
/// anything is allocated, so no tensor ever has a shape whose count wraps.
pub(crate) fn check_elem_count(op: &'static str, device: impl FnOnce() -> String, shapes: &[&Shape]) -> Result<usize> {
    let out = shapes.last().expect("check_elem_count is given the result shape last");
    out.checked_elem_count().ok_or_else(|| Error::Shape {
        op,
        device: device(),
        shapes: shapes.iter().map(|&s| s.clone()).collect(),
        reason: format!(
            "{} would have more than 2^63 - 1 elements (the product of its dimensions overflows)",
            if shapes.len() > 1 { "the result" } else { "a tensor of this shape" }
        ),
    })
}

/// The bytes of `len` elements of `E`, or an [`Error::Shape`] naming `op`
/// when they would exceed `isize::MAX`, the most any allocation can hold.
/// Every allocation's size goes through here (CPU buffers, device buffers,
/// page-locked buffers), so a byte count never wraps.
#[inline]
pub(crate) fn checked_bytes<E: Element>(
    op: &'static str,
    device: impl FnOnce() -> String,
    len: usize,
) -> Result<usize> {
    match len.checked_mul(size_of::<E>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(bytes),
        _ => Err(too_many_bytes(op, device(), len, E::DTYPE.name())),
    }
}

#[cold]
fn too_many_bytes(op: &'static str, device: String, len: usize, dtype: &str) -> Error {
    Error::Shape {
        op,
        device,
        shapes: vec![Shape::from(len)],
        reason: format!("{len} elements of {dtype} need more than isize::MAX bytes, more than any memory holds"),
    }
}

/// Resolves `axis` against `shape` or reports it out of range. A rank-0
/// tensor has no axis to give, which is a shape error (PyTorch: "cannot be
/// applied to a 0-dim tensor"); operations that treat a scalar as one
/// element use [`resolve_axis_or_scalar`] instead.
pub(crate) fn resolve_axis(
    op: &'static str,
    device: impl FnOnce() -> String,
    shape: &Shape,
    axis: isize,
) -> Result<usize> {
    if shape.rank() == 0 {
        return Err(Error::Shape {
            op,
            device: device(),
            shapes: vec![shape.clone()],
            reason: format!("a rank-0 tensor has no axis {axis}; this operation needs at least one axis"),
        });
    }
    shape.axis(axis).ok_or_else(|| Error::Axis { op, device: device(), shape: shape.clone(), axis })
}

/// Like [`resolve_axis`], but a rank-0 tensor accepts axis `0` and `-1`,
/// as PyTorch's reductions and softmax do, and resolves to `None`.
pub(crate) fn resolve_axis_or_scalar(
    op: &'static str,
    device: impl FnOnce() -> String,
    shape: &Shape,
    axis: isize,
) -> Result<Option<usize>> {
    match (shape.rank(), axis) {
        (0, 0 | -1) => Ok(None),
        (0, _) => Err(Error::Axis { op, device: device(), shape: shape.clone(), axis }),
        _ => resolve_axis(op, device, shape, axis).map(Some),
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

    #[test]
    fn broadcast_layout_sets_zero_strides() {
        let l = Layout::contiguous(Shape::from([3, 1])).broadcast_to(&Shape::from([2, 3, 4])).unwrap();
        assert_eq!(l.strides(), &[0, 1, 0]);
        assert!(Layout::contiguous(Shape::from([3])).broadcast_to(&Shape::from([4])).is_none());
    }
}
