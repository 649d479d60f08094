//! Shared helpers for the integration tests: proptest strategies for shapes
//! and data, non-contiguous views with known contents, and index arithmetic
//! for plain-loop reference implementations.
#![allow(dead_code)]

use devtensor::{Device, Element, Tensor};
use proptest::prelude::*;

/// Row-major strides of `dims`.
pub fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    strides
}

/// The multi-index of flat (row-major) position `flat`.
pub fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        index[i] = flat % d;
        flat /= d;
    }
    index
}

/// The flat (row-major) position of a multi-index.
pub fn ravel(index: &[usize], dims: &[usize]) -> usize {
    index.iter().zip(strides_of(dims)).map(|(i, s)| i * s).sum()
}

/// Every multi-index of `dims`, row-major.
pub fn indices(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    (0..dims.iter().product()).map(move |flat| unravel(flat, dims))
}

/// The element of `data` (row-major, shape `dims`) that broadcasting reads
/// for output multi-index `out_index` (NumPy rules: align at the end, size-1
/// axes repeat).
pub fn broadcast_read<T: Copy>(data: &[T], dims: &[usize], out_index: &[usize]) -> T {
    let lead = out_index.len() - dims.len();
    let index: Vec<usize> = dims.iter().enumerate().map(|(i, &d)| if d == 1 { 0 } else { out_index[lead + i] }).collect();
    data[ravel(&index, dims)]
}

/// NumPy's broadcast shape, computed the plain way.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let get = |d: &[usize], i: usize| if i + d.len() >= rank { d[i + d.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Shapes of rank `0..=max_rank` with dimensions `1..=max_dim`.
pub fn shape(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..=max_dim, 0..=max_rank)
}

/// Shapes that may contain zero-sized dimensions.
pub fn shape_maybe_empty(max_rank: usize, max_dim: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max_dim, 0..=max_rank)
}

/// A shape and `f64` data in `-10..10` for it.
pub fn shaped_data(max_rank: usize, max_dim: usize) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    shape(max_rank, max_dim).prop_flat_map(|dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(-10.0..10.0f64, len))
    })
}

/// Two shapes that broadcast together: a base shape, and a copy in which
/// some axes are 1 and some leading axes are dropped; randomly swapped.
pub fn broadcast_pair(max_rank: usize, max_dim: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    shape(max_rank, max_dim)
        .prop_flat_map(|dims| {
            let rank = dims.len();
            (Just(dims), prop::collection::vec(any::<bool>(), rank), 0..=rank, any::<bool>())
        })
        .prop_map(|(dims, ones, drop, swap)| {
            let other: Vec<usize> =
                dims.iter().zip(&ones).map(|(&d, &one)| if one { 1 } else { d }).skip(drop).collect();
            if swap { (other, dims) } else { (dims, other) }
        })
}

/// How a test tensor is laid out in storage.
#[derive(Clone, Copy, Debug)]
pub enum Variant {
    /// Dense, row-major.
    Contiguous,
    /// Stored with its axes reversed, then permuted back: strides out of order.
    Permuted,
    /// Cut with `narrow` out of a larger tensor: an offset and gaps.
    Narrowed,
}

/// Any [`Variant`].
pub fn variant() -> impl Strategy<Value = Variant> {
    prop_oneof![Just(Variant::Contiguous), Just(Variant::Permuted), Just(Variant::Narrowed)]
}

/// A tensor on `D` whose logical contents are `data` (row-major, shape `dims`),
/// laid out as `variant` says.
pub fn tensor_with<D: Device, E: Element>(data: &[E], dims: &[usize], variant: Variant) -> Tensor<D, E> {
    let rank = dims.len();
    match variant {
        Variant::Contiguous => Tensor::from_slice(data, dims),
        Variant::Permuted => {
            let reversed: Vec<usize> = dims.iter().rev().copied().collect();
            let mut stored = vec![E::ZERO; data.len()];
            for (flat, index) in indices(dims).enumerate() {
                let rev: Vec<usize> = index.iter().rev().copied().collect();
                stored[ravel(&rev, &reversed)] = data[flat];
            }
            let axes: Vec<usize> = (0..rank).rev().collect();
            Tensor::<D, E>::from_vec(stored, reversed).permute(axes)
        }
        Variant::Narrowed => {
            // Each axis gets one extra element in front and one behind.
            let padded: Vec<usize> = dims.iter().map(|d| d + 2).collect();
            let mut stored = vec![E::ZERO; padded.iter().product()];
            for (flat, index) in indices(dims).enumerate() {
                let shifted: Vec<usize> = index.iter().map(|i| i + 1).collect();
                stored[ravel(&shifted, &padded)] = data[flat];
            }
            let mut t = Tensor::<D, E>::from_vec(stored, padded);
            for (axis, &d) in dims.iter().enumerate() {
                t = t.narrow(axis as isize, 1, d);
            }
            t
        }
    }
}

/// Converts test data to the element type under test.
pub fn cast_all<E: Element>(data: &[f64]) -> Vec<E> {
    data.iter().map(|&x| E::from_f64(x)).collect()
}

/// Asserts two float sequences agree within `abs + rel * |expected|`.
#[track_caller]
pub fn assert_close(actual: &[f64], expected: &[f64], abs: f64, rel: f64) {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || a == e || (a - e).abs() <= abs + rel * e.abs();
        assert!(ok, "element {i}: got {a}, expected {e}\nactual:   {actual:?}\nexpected: {expected:?}");
    }
}

/// Element values as `f64`, for comparisons.
pub fn as_f64<E: Element>(data: &[E]) -> Vec<f64> {
    data.iter().map(|x| x.to_f64()).collect()
}
