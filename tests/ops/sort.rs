//! `sort`, `argsort` and `topk` against the standard library's stable sort
//! of each line, on random shapes, axes and layouts, with ties, NaN and
//! infinities; rows long enough for the GPU's multi-pass sort; the values'
//! gradient; and the errors.

use crate::common::*;
use devtensor::{Device, Element, Tensor};
use proptest::prelude::*;
use std::cmp::Ordering;

/// The reference order of one line: the standard library's stable sort of
/// its positions by value, NaN above every number (below, descending).
fn reference_order<E: Element>(line: &[E], descending: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..line.len()).collect();
    order.sort_by(|&a, &b| {
        let (va, vb) = (line[a], line[b]);
        let by_value = match (va.is_nan(), vb.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => va.to_f64().partial_cmp(&vb.to_f64()).unwrap(),
        };
        if descending { by_value.reverse() } else { by_value }
    });
    order
}

/// Values with many ties (and, for floats, NaN and infinities) from `seed`.
fn tied_values<E: Element>(len: usize, seed: u64) -> Vec<E> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = (state >> 33) % 23;
            match r {
                20 if E::IS_FLOAT => E::from_f64(f64::NAN),
                21 if E::IS_FLOAT => E::MAX,
                22 if E::IS_FLOAT => E::MIN,
                _ => E::from_f64((r % 12) as f64),
            }
        })
        .collect()
}

/// Checks `sort`, `argsort` and `topk(k)` of a tensor of `dims` along
/// `axis` against [`reference_order`] applied to each line.
fn check_sort<D: Device, E: Element>(dims: &[usize], axis: usize, descending: bool, k: usize, seed: u64, v: Variant) {
    let data = tied_values::<E>(dims.iter().product(), seed);
    let x = tensor_with::<D, E>(&data, dims, v);
    let (values, indices) = x.sort(axis as isize, descending);
    let argsort = x.argsort(axis as isize - dims.len() as isize, descending);
    let (top_values, top_indices) = x.topk(k, axis as isize, descending);
    let mut top_dims = dims.to_vec();
    top_dims[axis] = k;
    assert_eq!(values.dims(), dims);
    assert_eq!(top_values.dims(), top_dims.as_slice());
    let (values, indices, argsort) = (values.to_vec(), indices.to_vec(), argsort.to_vec());
    let (top_values, top_indices) = (top_values.to_vec(), top_indices.to_vec());
    assert_eq!(indices, argsort);
    // Every line along `axis`: the positions with that axis at 0.
    for start in indices_of_lines(dims, axis) {
        let at = |j: usize, dims: &[usize]| {
            let mut p = start.clone();
            p[axis] = j;
            ravel(&p, dims)
        };
        let line: Vec<E> = (0..dims[axis]).map(|j| data[at(j, dims)]).collect();
        let order = reference_order(&line, descending);
        for (j, &from) in order.iter().enumerate() {
            assert_eq!(indices[at(j, dims)], from as i64, "line {start:?} of {line:?}, position {j}");
            let (got, want) = (values[at(j, dims)], line[from]);
            assert!(got == want || (got.is_nan() && want.is_nan()), "value {got} for {want}");
            if j < k {
                assert_eq!(top_indices[at(j, &top_dims)], from as i64);
                let got = top_values[at(j, &top_dims)];
                assert!(got == want || (got.is_nan() && want.is_nan()));
            }
        }
    }
}

/// The positions of `dims` with `axis` at 0: one per line along `axis`.
fn indices_of_lines(dims: &[usize], axis: usize) -> Vec<Vec<usize>> {
    let mut heads = dims.to_vec();
    heads[axis] = 1;
    if dims[axis] == 0 {
        return Vec::new();
    }
    indices(&heads).collect()
}

fn sort_case() -> impl Strategy<Value = (Vec<usize>, usize, usize)> {
    shape_maybe_empty(4, 6).prop_flat_map(|dims| {
        let rank = dims.len().max(1);
        let dims = if dims.is_empty() { vec![1] } else { dims };
        (Just(dims), 0..rank).prop_flat_map(|(dims, axis)| {
            let n = dims[axis];
            (Just(dims), Just(axis), 0..=n)
        })
    })
}

device_proptests! {
    cases = 64;

    fn sort_argsort_and_topk_match_a_stable_sort<D>(
        (dims, axis, k) in sort_case(), descending in any::<bool>(), seed in any::<u64>(), v in variant(),
    ) {
        check_sort::<D, f32>(&dims, axis, descending, k, seed, v);
        check_sort::<D, i64>(&dims, axis, descending, k, seed, v);
        check_sort::<D, u8>(&dims, axis, descending, k, seed, v);
    }

    fn the_gradient_of_sorted_values_returns_to_their_positions<D>(
        (dims, axis, k) in sort_case(), descending in any::<bool>(), seed in any::<u64>(),
    ) {
        // d/dx of sum(w · topk(x).values): w[j] at the position value j came from.
        let n: usize = dims.iter().product();
        let data: Vec<f64> = (0..n).map(|i| ((i as u64 ^ seed) % 97) as f64 + i as f64 * 1e-3).collect();
        let x = Tensor::<D, f64>::from_slice(&data, dims.clone()).requires_grad();
        let (values, _) = x.topk(k, axis as isize, descending);
        let w = Tensor::<D, f64>::from_slice(&(0..values.elem_count()).map(|i| 1.0 + i as f64).collect::<Vec<_>>(), values.dims().to_vec());
        let grads = (&values * &w).sum().backward();
        let got = grads.get(&x).expect("x has a gradient").to_vec();
        let mut expected = vec![0.0; n];
        let w = w.to_vec();
        let mut top_dims = dims.clone();
        top_dims[axis] = k;
        for start in indices_of_lines(&dims, axis) {
            let at = |j: usize, dims: &[usize]| {
                let mut p = start.clone();
                p[axis] = j;
                ravel(&p, dims)
            };
            let line: Vec<f64> = (0..dims[axis]).map(|j| data[at(j, &dims)]).collect();
            for (j, &from) in reference_order(&line, descending).iter().take(k).enumerate() {
                expected[at(from, &dims)] += w[at(j, &top_dims)];
            }
        }
        prop_assert_eq!(got, expected);
    }
}

/// Rows around and beyond the 2048 positions one GPU block sorts (the
/// multi-pass path), with few distinct values so stability matters.
fn long_rows<D: Device>() {
    for n in [2047, 2048, 2049, 5000] {
        check_sort::<D, f32>(&[2, n], 1, false, 7, n as u64, Variant::Contiguous);
        check_sort::<D, i64>(&[n, 2], 0, true, n, n as u64 + 1, Variant::Contiguous);
    }
}

/// PyTorch's results for these calls (`stable=True`).
fn hand_built_examples<D: Device>() {
    let x = Tensor::<D>::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY, f32::NAN, 1.0], [5]);
    let (values, indices) = x.sort(0, false);
    assert_eq!(indices.to_vec(), vec![2, 1, 4, 0, 3]);
    assert_eq!(values.to_vec()[..3], [f32::NEG_INFINITY, 1.0, 1.0]);
    assert_eq!(x.argsort(0, true).to_vec(), vec![0, 3, 1, 4, 2]);
    let (values, indices) = x.topk(2, 0, false);
    assert_eq!((values.to_vec(), indices.to_vec()), (vec![f32::NEG_INFINITY, 1.0], vec![2, 1]));
    // A scalar is its own order; an empty axis gives empty results.
    let (values, indices) = Tensor::<D>::scalar(4.0).sort(0, false);
    assert_eq!((values.to_vec(), indices.to_vec(), indices.rank()), (vec![4.0], vec![0], 0));
    let (values, indices) = Tensor::<D>::zeros([3, 0]).topk(0, 1, true);
    assert_eq!((values.dims(), indices.dims()), (&[3, 0][..], &[3, 0][..]));
}

fn error_texts<D: Device>() {
    let x = Tensor::<D>::zeros([2, 3]);
    let device = D::name();
    assert_eq!(
        x.try_topk(4, 1, true).unwrap_err().to_string(),
        format!("topk on {device}: shape [2, 3]: k = 4 is larger than axis 1 (size 3)")
    );
    assert_eq!(
        x.try_sort(2, false).unwrap_err().to_string(),
        format!("sort on {device}: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)")
    );
}

device_tests! {
    rows_longer_than_a_gpu_block_sort_correctly => long_rows,
    sort_matches_hand_built_examples => hand_built_examples,
    sort_errors_name_the_op_the_shape_and_the_device => error_texts,
}
