//! The strided walk: visiting the elements of several operands of one shape
//! in runs that the CPU kernels turn into plain loops.

use smallvec::SmallVec;

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
    if let Some(walk) = Walk::plan(dims, strides) {
        walk.run(offsets, &mut block);
    }
}

/// The merged dimensions of a walk ([`for_each_block`]), planned apart from
/// the caller's closure, which the odometer calls as a trait object: both
/// are compiled once per operand count `K` rather than once per kernel. A
/// block is a whole run of the innermost merged dimension, so the indirect
/// call is paid per run, and the caller's loop over the run is its own,
/// fully optimised function.
struct Walk<const K: usize> {
    /// The sizes of the merged dimensions, innermost first.
    sizes: SmallVec<[usize; 6]>,
    /// Each operand's stride along each merged dimension.
    merged: SmallVec<[[usize; K]; 6]>,
}

impl<const K: usize> Walk<K> {
    /// The merged dimensions of operands of shape `dims`; `None` when the
    /// shape has no elements.
    fn plan(dims: &[usize], strides: [&[usize]; K]) -> Option<Self> {
        if dims.contains(&0) {
            return None;
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
        Some(Walk { sizes, merged })
    }

    /// Calls `block` for each innermost run, the outer dimensions walked
    /// like an odometer from `offsets`.
    fn run(&self, offsets: [usize; K], block: &mut dyn FnMut([usize; K], usize, [usize; K])) {
        let (sizes, merged) = (&self.sizes, &self.merged);
        if sizes.is_empty() {
            block(offsets, 1, [0; K]);
            return;
        }
        // sizes[0] is the innermost dimension.
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
}
