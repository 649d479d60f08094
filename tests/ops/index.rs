//! Indexing and joining (`index_select`, `gather`, `scatter_add`,
//! `index_add`, `cat`, `stack`) checked against plain loops on random
//! shapes and axes, with non-contiguous data and index tensors, several
//! element types, empty tensors, and every error message.

use crate::common::*;
use devtensor::ops::index::PadMode;
use devtensor::{Cpu, Device, Element, Error, Tensor};
use proptest::prelude::*;

/// `len` small whole numbers (plus a half for floats), exact in every
/// element type, derived from `seed`.
fn values<E: Element>(len: usize, seed: u64) -> Vec<E> {
    let half = if E::IS_FLOAT { 0.5 } else { 0.0 };
    (0..len as u64).map(|i| E::from_f64((splitmix(seed ^ i) % 40) as f64 + half)).collect()
}

/// `len` indices in `0..bound`, derived from `seed`.
fn index_values(len: usize, bound: usize, seed: u64) -> Vec<i64> {
    (0..len as u64).map(|i| (splitmix(seed.wrapping_add(i)) % bound as u64) as i64).collect()
}

/// `axis` as the caller writes it: the negative form when `negative`.
fn signed_axis(axis: usize, rank: usize, negative: bool) -> isize {
    if negative { axis as isize - rank as isize } else { axis as isize }
}

/// A shape of rank 1 to `max_rank` (dimensions may be 0) and an axis of it.
fn shape_and_axis(max_rank: usize, max_dim: usize) -> impl Strategy<Value = (Vec<usize>, usize)> {
    prop::collection::vec(0..=max_dim, 1..=max_rank).prop_flat_map(|dims| {
        let rank = dims.len();
        (Just(dims), 0..rank)
    })
}

/// A shape, an axis, and an index shape for `gather` / `scatter_add`: the
/// index's size is at most the shape's on every axis but `axis`, and any
/// small size on `axis` (0 when the shape has nothing to pick from there).
fn gather_case() -> impl Strategy<Value = (Vec<usize>, usize, Vec<usize>)> {
    shape_and_axis(4, 4).prop_flat_map(|(dims, axis)| {
        let rank = dims.len();
        let index_dims = prop::collection::vec(0..=4usize, rank).prop_map({
            let dims = dims.clone();
            move |sizes| {
                let mut out: Vec<usize> = sizes.iter().zip(&dims).map(|(&s, &d)| s.min(d)).collect();
                out[axis] = if dims[axis] == 0 { 0 } else { sizes[axis] };
                out
            }
        });
        (Just(dims), Just(axis), index_dims)
    })
}

/// `dims` with `axis` set to `size`.
fn with_axis(dims: &[usize], axis: usize, size: usize) -> Vec<usize> {
    let mut out = dims.to_vec();
    out[axis] = size;
    out
}

// ---------------------------------------------------------------------------
// index_select and index_add

fn check_index_select<D: Device, E: Element>(
    (dims, axis): (Vec<usize>, usize),
    negative: bool,
    n: usize,
    seed: u64,
    (vx, vi): (Variant, Variant),
) {
    let data = values::<E>(dims.iter().product(), seed);
    let size = dims[axis];
    let n = if size == 0 { 0 } else { n };
    let picks = index_values(n, size.max(1), seed ^ 1);
    let x = tensor_with::<D, E>(&data, &dims, vx);
    let idx = tensor_with::<D, i64>(&picks, &[n], vi);
    let got = x.index_select(signed_axis(axis, dims.len(), negative), &idx);

    let out_dims = with_axis(&dims, axis, n);
    let expected: Vec<E> = indices(&out_dims)
        .map(|mut i| {
            i[axis] = picks[i[axis]] as usize;
            data[ravel(&i, &dims)]
        })
        .collect();
    assert_eq!(got.dims(), out_dims.as_slice());
    assert_eq!(got.to_vec(), expected);
}

fn check_index_add<D: Device, E: Element>(
    (dims, axis): (Vec<usize>, usize),
    negative: bool,
    n: usize,
    seed: u64,
    (vx, vi, vs): (Variant, Variant, Variant),
) {
    let size = dims[axis];
    let n = if size == 0 { 0 } else { n };
    let src_dims = with_axis(&dims, axis, n);
    let base = values::<E>(dims.iter().product(), seed);
    let src_data = values::<E>(src_dims.iter().product(), seed ^ 2);
    let picks = index_values(n, size.max(1), seed ^ 3);
    let x = tensor_with::<D, E>(&base, &dims, vx);
    let idx = tensor_with::<D, i64>(&picks, &[n], vi);
    let src = tensor_with::<D, E>(&src_data, &src_dims, vs);
    let got = x.index_add(signed_axis(axis, dims.len(), negative), &idx, &src);

    let mut expected = base.clone();
    for (flat, mut i) in indices(&src_dims).enumerate() {
        i[axis] = picks[i[axis]] as usize;
        let at = ravel(&i, &dims);
        expected[at] = expected[at].add(src_data[flat]);
    }
    assert_eq!(got.dims(), dims.as_slice());
    assert_eq!(got.to_vec(), expected);
    // Out of place: the input is untouched.
    assert_eq!(x.to_vec(), base);
}

/// pad against a loop that maps each output position to its source by the
/// mode's rule per axis (constant mode also crops), and its gradient: the
/// values `1..=n` in `dims` laid out as `v`, padded by `raw` (before, after)
/// per axis from the last, each kept in the range of mode `mode`
/// (constant, reflect, edge, circular).
fn check_pad<D: Device>(dims: &[usize], raw: &[(isize, isize)], mode: usize, v: Variant) -> Result<(), TestCaseError> {
    let rank = dims.len();
    let data: Vec<f64> = (0..dims.iter().product()).map(|i| i as f64 + 1.0).collect();
    // (before, after) per axis, last axis first, kept in each mode's range.
    let pairs: Vec<(isize, isize)> = raw
        .iter()
        .take(rank)
        .enumerate()
        .map(|(p, &(b, a))| {
            let size = dims[rank - 1 - p] as isize;
            match mode {
                0 => (b.max(-size / 2), a.max(-size / 2)),
                1 => (b.abs().min(size - 1), a.abs().min(size - 1)),
                _ => (b.abs().min(size), a.abs().min(size)),
            }
        })
        .collect();
    let flat: Vec<isize> = pairs.iter().flat_map(|&(b, a)| [b, a]).collect();
    let padded = |axis: usize| pairs[rank - 1 - axis];
    let out_dims: Vec<usize> = (0..rank).map(|a| (dims[a] as isize + padded(a).0 + padded(a).1) as usize).collect();
    let expected: Vec<f64> = indices(&out_dims)
        .map(|i| {
            let mut at = Vec::new();
            for (a, &k) in i.iter().enumerate() {
                let (size, k) = (dims[a] as isize, k as isize - padded(a).0);
                let src = match mode {
                    0 => {
                        if (0..size).contains(&k) {
                            k
                        } else {
                            return -5.0;
                        }
                    }
                    1 => {
                        if k < 0 {
                            -k
                        } else if k >= size {
                            2 * (size - 1) - k
                        } else {
                            k
                        }
                    }
                    2 => k.clamp(0, size - 1),
                    _ => k.rem_euclid(size),
                };
                at.push(src as usize);
            }
            data[ravel(&at, dims)]
        })
        .collect();
    let mode = [PadMode::Constant(-5.0), PadMode::Reflect, PadMode::Edge, PadMode::Circular][mode];
    let t = tensor_with::<D, f64>(&data, dims, v);
    let got = t.pad(&flat, mode);
    prop_assert_eq!(got.dims(), out_dims.as_slice());
    prop_assert_eq!(got.to_vec(), expected);
    if out_dims.iter().product::<usize>() > 0 {
        let x = Tensor::<D, f64>::from_vec(data.clone(), dims.to_vec());
        gradcheck::gradcheck("pad", std::slice::from_ref(&x), |xs| xs[0].pad(&flat, mode));
        gradcheck::gradgradcheck("pad", std::slice::from_ref(&x), |xs| xs[0].pad(&flat, mode).square());
    }
    Ok(())
}

/// The draw that made CI fail by chance (issue 38): edge padding of the
/// values `1..=64` to 567 elements, a loss near 27 000 whose differences'
/// rounding broke the gradient check's old fixed bound.
fn pad_of_large_values_regression<D: Device>() {
    check_pad::<D>(&[4, 4, 4], &[(2, 1), (-3, 2), (-2, 3)], 2, Variant::Contiguous).unwrap();
}

device_proptests! {
    cases = 48;

    /// [`check_pad`] on random shapes, paddings, modes and layouts.
    fn pad_matches_a_loop<D>(
        dims in prop::collection::vec(1usize..=4, 1..=3),
        raw in prop::collection::vec((-3isize..=3, -3isize..=3), 3),
        mode in 0usize..4,
        v in variant(),
    ) {
        check_pad::<D>(&dims, &raw, mode, v)?;
    }

    /// repeat tiles the tensor: output element `i` is input element
    /// `i % dims` along every axis (new leading axes repeat the whole); its
    /// gradient sums the copies.
    fn repeat_matches_modular_indexing<D>(
        dims in prop::collection::vec(0usize..=3, 0..=3),
        extra in 0usize..=2,
        repeats in prop::collection::vec(0usize..=3, 5),
        v in variant(),
    ) {
        let repeats = &repeats[..dims.len() + extra];
        let data: Vec<f64> = (0..dims.iter().product()).map(|i| i as f64).collect();
        let out_dims: Vec<usize> = repeats.iter().enumerate().map(|(i, &r)| r * i.checked_sub(extra).map_or(1, |a| dims[a])).collect();
        let expected: Vec<f64> = indices(&out_dims).map(|i| {
            let at: Vec<usize> = dims.iter().enumerate().map(|(a, &d)| i[a + extra] % d).collect();
            data[ravel(&at, &dims)]
        }).collect();
        let t = tensor_with::<D, f64>(&data, &dims, v);
        let got = t.repeat(repeats);
        prop_assert_eq!(got.dims(), out_dims.as_slice());
        prop_assert_eq!(got.to_vec(), expected);
        if !data.is_empty() && out_dims.iter().product::<usize>() > 0 {
            let x = Tensor::<D, f64>::from_vec(data.clone(), dims.clone());
            gradcheck::gradcheck("repeat", std::slice::from_ref(&x), |xs| xs[0].repeat(repeats));
            gradcheck::gradgradcheck("repeat", std::slice::from_ref(&x), |xs| xs[0].repeat(repeats).square());
        }
    }
}

/// `flip`, `roll`, `repeat_interleave` (a count, and a tensor of counts),
/// `take_along_dim` (broadcasting the index) and `unflatten` against index
/// arithmetic on each output position; the gradients by finite
/// differences where there are elements.
fn check_reorderings<D: Device>(
    dims: &[usize],
    axis: usize,
    negative: bool,
    shift: isize,
    r: usize,
    seed: u64,
    v: Variant,
) {
    let a = signed_axis(axis, dims.len(), negative);
    let data: Vec<f64> = (0..dims.iter().product()).map(|i| i as f64).collect();
    let t = tensor_with::<D, f64>(&data, dims, v);
    let n = dims[axis];
    let at = |i: &[usize]| data[ravel(i, dims)];
    let moved = |out_dims: &[usize], source: &dyn Fn(usize) -> usize| -> Vec<f64> {
        indices(out_dims)
            .map(|mut i| {
                i[axis] = source(i[axis]);
                at(&i)
            })
            .collect()
    };
    let with = |len: usize| -> Vec<usize> {
        let mut d = dims.to_vec();
        d[axis] = len;
        d
    };
    let x = Tensor::<D, f64>::from_vec(data.clone(), dims);
    let xs = std::slice::from_ref(&x);
    let differentiable = !data.is_empty();

    assert_eq!(t.flip(a).to_vec(), moved(dims, &|i| n - 1 - i), "flip");
    let rolled = moved(dims, &|i| (i as isize - shift).rem_euclid(n as isize) as usize);
    assert_eq!(t.roll([shift], a).to_vec(), rolled, "roll");
    let flat_shift = (shift * 3).rem_euclid(data.len().max(1) as isize) as usize;
    let flat: Vec<f64> = (0..data.len()).map(|i| data[(i + data.len() - flat_shift) % data.len()]).collect();
    assert_eq!(t.roll([shift * 3], ()).to_vec(), flat, "roll (flattened)");

    let got = t.repeat_interleave(r, a);
    assert_eq!(got.dims(), with(n * r).as_slice(), "repeat_interleave");
    assert_eq!(got.to_vec(), moved(&with(n * r), &|i| i / r), "repeat_interleave");
    let counts: Vec<i64> = (0..n).map(|k| (splitmix(seed ^ k as u64) % 3) as i64).collect();
    let source: Vec<usize> = counts.iter().enumerate().flat_map(|(k, &c)| std::iter::repeat_n(k, c as usize)).collect();
    let got = t.repeat_interleave_tensor(&Tensor::<D, i64>::from_slice(&counts, [n]), a);
    assert_eq!(got.dims(), with(source.len()).as_slice(), "repeat_interleave_tensor");
    assert_eq!(got.to_vec(), moved(&with(source.len()), &|i| source[i]), "repeat_interleave_tensor");

    // An index of 0 to 3 picks per line, broadcast along one other axis.
    let picks = (seed % 4) as usize;
    let mut index_dims = with(picks);
    let spread = (dims.len() > 1 && seed & 4 != 0).then(|| (axis + 1) % dims.len());
    if let Some(b) = spread {
        index_dims[b] = 1;
    }
    if n > 0 {
        let index = index_values(index_dims.iter().product(), n, seed);
        let got = t.take_along_dim(&Tensor::<D, i64>::from_slice(&index, &index_dims[..]), a);
        let expected: Vec<f64> = indices(&with(picks))
            .map(|mut i| {
                let mut j = i.clone();
                if let Some(b) = spread {
                    j[b] = 0;
                }
                i[axis] = index[ravel(&j, &index_dims)] as usize;
                at(&i)
            })
            .collect();
        assert_eq!(got.dims(), with(picks).as_slice(), "take_along_dim");
        assert_eq!(got.to_vec(), expected, "take_along_dim");
        if differentiable && picks > 0 {
            let index = Tensor::<D, i64>::from_slice(&index, &index_dims[..]);
            gradcheck::gradcheck("take_along_dim", xs, |xs| xs[0].take_along_dim(&index, a));
        }
    }

    let mut split = dims.to_vec();
    split.splice(axis..=axis, [1, n]);
    // -1 is inferred, except from an empty axis (which PyTorch refuses too).
    let got = t.unflatten(a, [if n > 0 { -1 } else { 1 }, n as isize]);
    assert_eq!(got.dims(), split.as_slice(), "unflatten");
    assert_eq!(got.to_vec(), data, "unflatten");

    if differentiable {
        gradcheck::gradcheck("flip", xs, |xs| xs[0].flip(a));
        gradcheck::gradcheck("roll", xs, |xs| xs[0].roll([shift], a));
        if r > 0 {
            gradcheck::gradcheck("repeat_interleave", xs, |xs| xs[0].repeat_interleave(r, a));
        }
        if !source.is_empty() {
            let counts = Tensor::<D, i64>::from_slice(&counts, [n]);
            gradcheck::gradcheck("repeat_interleave_tensor", xs, |xs| xs[0].repeat_interleave_tensor(&counts, a));
        }
        gradcheck::gradgradcheck("roll", xs, |xs| xs[0].roll([shift], a).square());
    }
}

device_proptests! {
    cases = 32;

    fn reorderings_match_index_arithmetic<D>(
        (dims, axis) in shape_and_axis(3, 4), negative in any::<bool>(), shift in -9isize..=9, r in 0usize..=3,
        seed in any::<u64>(), v in variant(),
    ) {
        check_reorderings::<D>(&dims, axis, negative, shift, r, seed, v);
    }
}

/// `masked_select`, `nonzero`, `unique`, `searchsorted` and `bincount`
/// against plain loops on random shapes (empty ones too) and layouts, on
/// few distinct values (so that there are ties and zeros); the selected
/// elements' gradient by finite differences.
fn check_by_value<D: Device>(dims: &[usize], seed: u64, v: Variant, right: bool) {
    let n: usize = dims.iter().product();
    let data: Vec<f64> = (0..n as u64).map(|i| (splitmix(seed ^ i) % 5) as f64 - 2.0).collect();
    let t = tensor_with::<D, f64>(&data, dims, v);
    let mask: Vec<u8> = (0..n as u64).map(|i| (splitmix(seed.wrapping_add(i)) % 2) as u8).collect();
    let selected: Vec<f64> = data.iter().zip(&mask).filter(|(_, m)| **m != 0).map(|(x, _)| *x).collect();
    let m = tensor_with::<D, u8>(&mask, dims, v);
    assert_eq!(t.masked_select(&m).to_vec(), selected, "masked_select");
    let nonzero: Vec<i64> =
        indices(dims).filter(|i| data[ravel(i, dims)] != 0.0).flat_map(|i| i.into_iter().map(|c| c as i64)).collect();
    let got = t.nonzero();
    assert_eq!(got.dims(), &[nonzero.len() / dims.len(), dims.len()], "nonzero");
    assert_eq!(got.to_vec(), nonzero, "nonzero");

    let mut distinct = data.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let (values, inverse, got_counts) = t.unique(true, true);
    assert_eq!(values.to_vec(), distinct, "unique");
    let inverse = inverse.unwrap().to_vec();
    assert!(data.iter().zip(&inverse).all(|(x, &k)| distinct[k as usize] == *x), "unique's inverse");
    let counts: Vec<i64> = distinct.iter().map(|d| data.iter().filter(|x| *x == d).count() as i64).collect();
    assert_eq!(got_counts.unwrap().to_vec(), counts, "unique's counts");
    assert_eq!(t.unique(false, true).2.unwrap().to_vec(), counts, "unique's counts, without the inverse");

    let edges = Tensor::<D, f64>::from_vec(distinct.clone(), [distinct.len()]);
    let found: Vec<i64> = data
        .iter()
        .map(|x| distinct.iter().filter(|&&e| if right { e <= *x } else { e < *x }).count() as i64)
        .collect();
    assert_eq!(edges.searchsorted(&t, right).to_vec(), found, "searchsorted");

    let labels: Vec<i64> = data.iter().map(|x| (*x + 2.0) as i64).collect();
    let bins = 7usize.max(labels.iter().max().map_or(0, |&l| l as usize + 1));
    let counted: Vec<i64> = (0..bins as i64).map(|b| labels.iter().filter(|&&l| l == b).count() as i64).collect();
    let flat = Tensor::<D, i64>::from_vec(labels.clone(), [n]);
    assert_eq!(flat.bincount(7).to_vec(), counted, "bincount");
    let weights = Tensor::<D, f64>::from_vec(data.clone(), [n]);
    let summed: Vec<f64> =
        (0..bins as i64).map(|b| labels.iter().zip(&data).filter(|(l, _)| **l == b).map(|(_, w)| w).sum()).collect();
    assert_eq!(flat.bincount_weighted(&weights, 7).to_vec(), summed, "bincount (weights)");

    if !selected.is_empty() {
        let x = Tensor::<D, f64>::from_vec(data.clone(), dims);
        gradcheck::gradcheck("masked_select", std::slice::from_ref(&x), |xs| xs[0].masked_select(&m));
    }
}

device_proptests! {
    cases = 32;

    fn value_dependent_ops_match_plain_loops<D>(
        dims in prop::collection::vec(0usize..=4, 1..=3), seed in any::<u64>(), v in variant(), right in any::<bool>(),
    ) {
        check_by_value::<D>(&dims, seed, v, right);
    }
}

/// The errors of the reorderings name the op and say what is wrong.
fn reordering_errors_say_what_is_wrong<D: Device>() {
    let x = Tensor::<D, f64>::zeros([2, 3]);
    let message = |e: Error| e.to_string();
    assert!(message(x.try_flip([0, -2]).unwrap_err()).contains("axis 0 appears more than once"));
    let err = message(x.try_roll([1, 2], 0).unwrap_err());
    assert!(err.starts_with("roll on ") && err.contains("2 shifts for 1 dims"), "{err}");
    assert!(message(x.try_roll([1, 2], ()).unwrap_err()).contains("without dims, roll takes one shift, not 2"));
    let negative = Tensor::<D, i64>::from_vec(vec![1, -1, 0], [3]);
    assert!(
        message(x.try_repeat_interleave_tensor(&negative, 1).unwrap_err()).contains("must not be negative, found -1")
    );
    let two = Tensor::<D, i64>::from_vec(vec![1, 1], [2]);
    assert!(message(x.try_repeat_interleave_tensor(&two, 1).unwrap_err()).contains("one per element of axis 1 (3)"));
    let index = Tensor::<D, i64>::zeros([3, 1]);
    let err = message(x.try_take_along_dim(&index, 1).unwrap_err());
    assert!(err.contains("axis 0 does not broadcast (2 in the input, 3 in the indices)"), "{err}");
    assert!(message(x.try_take_along_dim(&Tensor::<D, i64>::zeros([3]), 0).unwrap_err()).contains("the input's rank"));
    assert!(message(x.try_unflatten(1, [2, -1]).unwrap_err()).contains("do not split axis 1 of size 3"));
    assert!(message(x.try_unflatten(1, [-1, -1]).unwrap_err()).contains("at most one of them -1"));
    let mask = Tensor::<D, u8>::ones([2]);
    assert!(message(x.try_masked_select(&mask).unwrap_err()).contains("do not broadcast"));
    let labels = Tensor::<D, i64>::from_vec(vec![1, -2], [2]);
    assert!(message(labels.try_bincount(0).unwrap_err()).contains("non-negative values, found -2"));
    assert!(message(labels.reshape([1, 2]).try_bincount(0).unwrap_err()).contains("1-D"));
    let weights = Tensor::<D, f64>::ones([3]);
    let err = message(labels.abs().try_bincount_weighted(&weights, 0).unwrap_err());
    assert!(err.contains("the weights must have the input's shape"), "{err}");
    let values = Tensor::<D, f64>::zeros([3, 2]);
    assert!(message(x.try_searchsorted(&values, false).unwrap_err()).contains("the same leading axes"));
}

device_proptests! {
    cases = 64;

    fn index_select_matches_reference<D>(
        case in shape_and_axis(4, 5), negative in any::<bool>(), n in 0..7usize, seed in any::<u64>(),
        vx in variant(), vi in variant(),
    ) {
        check_index_select::<D, f32>(case.clone(), negative, n, seed, (vx, vi));
        check_index_select::<D, i64>(case.clone(), negative, n, seed, (vx, vi));
        check_index_select::<D, u8>(case, negative, n, seed, (vx, vi));
    }

    fn index_add_matches_reference<D>(
        case in shape_and_axis(4, 4), negative in any::<bool>(), n in 0..7usize, seed in any::<u64>(),
        vx in variant(), vi in variant(), vs in variant(),
    ) {
        check_index_add::<D, f32>(case.clone(), negative, n, seed, (vx, vi, vs));
        check_index_add::<D, i64>(case.clone(), negative, n, seed, (vx, vi, vs));
        check_index_add::<D, u8>(case, negative, n, seed, (vx, vi, vs));
    }
}

// ---------------------------------------------------------------------------
// gather and scatter_add

fn check_gather<D: Device, E: Element>(
    (dims, axis, index_dims): (Vec<usize>, usize, Vec<usize>),
    negative: bool,
    seed: u64,
    (vx, vi): (Variant, Variant),
) {
    let data = values::<E>(dims.iter().product(), seed);
    let picks = index_values(index_dims.iter().product(), dims[axis].max(1), seed ^ 4);
    let x = tensor_with::<D, E>(&data, &dims, vx);
    let idx = tensor_with::<D, i64>(&picks, &index_dims, vi);
    let got = x.gather(signed_axis(axis, dims.len(), negative), &idx);

    let expected: Vec<E> = indices(&index_dims)
        .enumerate()
        .map(|(flat, mut i)| {
            i[axis] = picks[flat] as usize;
            data[ravel(&i, &dims)]
        })
        .collect();
    assert_eq!(got.dims(), index_dims.as_slice());
    assert_eq!(got.to_vec(), expected);
}

fn check_scatter_add<D: Device, E: Element>(
    (dims, axis, index_dims): (Vec<usize>, usize, Vec<usize>),
    extra: Vec<usize>,
    negative: bool,
    seed: u64,
    (vx, vi, vs): (Variant, Variant, Variant),
) {
    // `src` may be larger than `index`; only index's extent of it is read.
    let src_dims: Vec<usize> = index_dims.iter().zip(extra.iter().cycle()).map(|(&d, &e)| d + e).collect();
    let base = values::<E>(dims.iter().product(), seed);
    let src_data = values::<E>(src_dims.iter().product(), seed ^ 5);
    let picks = index_values(index_dims.iter().product(), dims[axis].max(1), seed ^ 6);
    let x = tensor_with::<D, E>(&base, &dims, vx);
    let idx = tensor_with::<D, i64>(&picks, &index_dims, vi);
    let src = tensor_with::<D, E>(&src_data, &src_dims, vs);
    let got = x.scatter_add(signed_axis(axis, dims.len(), negative), &idx, &src);

    let mut expected = base.clone();
    for (flat, p) in indices(&index_dims).enumerate() {
        let mut at = p.clone();
        at[axis] = picks[flat] as usize;
        let at = ravel(&at, &dims);
        expected[at] = expected[at].add(src_data[ravel(&p, &src_dims)]);
    }
    assert_eq!(got.dims(), dims.as_slice());
    assert_eq!(got.to_vec(), expected);
    assert_eq!(x.to_vec(), base);
}

device_proptests! {
    cases = 64;

    fn gather_matches_reference<D>(
        case in gather_case(), negative in any::<bool>(), seed in any::<u64>(), vx in variant(), vi in variant(),
    ) {
        check_gather::<D, f32>(case.clone(), negative, seed, (vx, vi));
        check_gather::<D, i64>(case.clone(), negative, seed, (vx, vi));
        check_gather::<D, u8>(case, negative, seed, (vx, vi));
    }

    fn scatter_add_matches_reference<D>(
        case in gather_case(), extra in prop::collection::vec(0..3usize, 1..4), negative in any::<bool>(),
        seed in any::<u64>(), vx in variant(), vi in variant(), vs in variant(),
    ) {
        check_scatter_add::<D, f32>(case.clone(), extra.clone(), negative, seed, (vx, vi, vs));
        check_scatter_add::<D, i64>(case.clone(), extra.clone(), negative, seed, (vx, vi, vs));
        check_scatter_add::<D, u8>(case, extra, negative, seed, (vx, vi, vs));
    }

    /// scatter_add is gather's adjoint: <gather(x), g> = <x, scatter_add(0, g)>,
    /// which is what makes it gather's backward.
    fn scatter_add_is_the_adjoint_of_gather<D>(case in gather_case(), seed in any::<u64>(), vi in variant()) {
        adjoint::<D>(case, seed, vi);
    }

    /// With a permutation along the axis, scatter_add undoes gather exactly.
    fn scatter_add_undoes_a_permuting_gather<D>((dims, axis) in shape_and_axis(3, 4), seed in any::<u64>(), vi in variant()) {
        let data = values::<f64>(dims.iter().product(), seed);
        // index[p] = (p[axis] + shift(p)) mod size: a permutation along each lane.
        let size = dims[axis];
        let picks: Vec<i64> = indices(&dims)
            .map(|p| {
                let mut lane = p.clone();
                lane[axis] = 0;
                ((p[axis] + ravel(&lane, &dims) + seed as usize % 5) % size) as i64
            })
            .collect();
        let x = Tensor::<D, f64>::from_slice(&data, dims.as_slice());
        let idx = tensor_with::<D, i64>(&picks, &dims, vi);
        let back = x.zeros_like().scatter_add(axis as isize, &idx, &x.gather(axis as isize, &idx));
        prop_assert_eq!(back.to_vec(), data);
    }
}

fn adjoint<D: Device>((dims, axis, index_dims): (Vec<usize>, usize, Vec<usize>), seed: u64, vi: Variant) {
    let x_data = values::<f64>(dims.iter().product(), seed);
    let g_data = values::<f64>(index_dims.iter().product(), seed ^ 7);
    let picks = index_values(index_dims.iter().product(), dims[axis].max(1), seed ^ 8);
    let x = Tensor::<D, f64>::from_slice(&x_data, dims.as_slice());
    let g = Tensor::<D, f64>::from_slice(&g_data, index_dims.as_slice());
    let idx = tensor_with::<D, i64>(&picks, &index_dims, vi);
    let lhs: f64 = x.gather(axis as isize, &idx).to_vec().iter().zip(&g_data).map(|(a, b)| a * b).sum();
    let back = x.zeros_like().scatter_add(axis as isize, &idx, &g).to_vec();
    let rhs: f64 = back.iter().zip(&x_data).map(|(a, b)| a * b).sum();
    assert_close(&[lhs], &[rhs], 1e-9, 1e-12);
}

fn gather_and_scatter_add_match_hand_built_examples<D: Device>() {
    // PyTorch's documented example: torch.gather(t, 1, [[0, 0], [1, 0]]).
    let t = Tensor::<D, i64>::from_vec(vec![1, 2, 3, 4], [2, 2]);
    let idx = Tensor::<D, i64>::from_vec(vec![0, 0, 1, 0], [2, 2]);
    assert_eq!(t.gather(1, &idx).to_vec2(), vec![vec![1, 1], vec![4, 3]]);
    assert_eq!(t.gather(0, &idx).to_vec2(), vec![vec![1, 2], vec![3, 2]]);

    // scatter_add along axis 0 with repeated targets accumulates.
    let src = Tensor::<D>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let idx = Tensor::<D, i64>::from_vec(vec![0, 1, 2, 0, 0, 0], [2, 3]);
    let out = Tensor::<D>::zeros([3, 3]).scatter_add(0, &idx, &src);
    assert_eq!(out.to_vec2(), vec![vec![5.0, 5.0, 6.0], vec![0.0, 2.0, 0.0], vec![0.0, 0.0, 3.0]]);

    // A smaller index reads only its corner of a larger src.
    let idx = Tensor::<D, i64>::from_vec(vec![2, 0], [1, 2]);
    let out = Tensor::<D>::ones([2, 3]).scatter_add(-1, &idx, &src);
    assert_eq!(out.to_vec2(), vec![vec![3.0, 1.0, 2.0], vec![1.0, 1.0, 1.0]]);

    // Cross-entropy's pick and its backward on a transposed (strided) logits tensor.
    let logits = Tensor::<D>::from_vec(vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0], [3, 2]).t();
    let labels = Tensor::<D, i64>::from_vec(vec![2, 0], [2, 1]);
    assert_eq!(logits.gather(1, &labels).to_vec(), vec![2.0, 10.0]);
    let grad = logits.zeros_like().scatter_add(1, &labels, &Tensor::<D>::ones([2, 1]));
    assert_eq!(grad.to_vec2(), vec![vec![0.0, 0.0, 1.0], vec![1.0, 0.0, 0.0]]);
}

fn index_select_and_index_add_match_hand_built_examples<D: Device>() {
    let x = Tensor::<D, u8>::from_vec((0..12).collect(), [3, 4]);
    let idx = Tensor::<D, i64>::from_vec(vec![3, 3, 0], [3]);
    assert_eq!(x.index_select(1, &idx).to_vec2(), vec![vec![3, 3, 0], vec![7, 7, 4], vec![11, 11, 8]]);
    // A strided index tensor (every other element).
    let strided = Tensor::<D, i64>::from_vec(vec![2, 9, 0, 9], [2, 2]).select(1, 0);
    assert!(!strided.is_contiguous());
    assert_eq!(x.index_select(0, &strided).to_vec2(), vec![vec![8, 9, 10, 11], vec![0, 1, 2, 3]]);
    // index_add is index_select's adjoint: selected rows scattered back, counted.
    let back = x.zeros_like().index_add(1, &idx, &x.index_select(1, &idx));
    assert_eq!(back.to_vec2(), vec![vec![0, 0, 0, 6], vec![4, 0, 0, 14], vec![8, 0, 0, 22]]);
}

// ---------------------------------------------------------------------------
// cat and stack

/// Plain-loop concatenation of row-major parts along `axis`.
fn cat_reference<E: Copy>(parts: &[(Vec<usize>, Vec<E>)], axis: usize) -> (Vec<usize>, Vec<E>) {
    let total = parts.iter().map(|(d, _)| d[axis]).sum();
    let out_dims = with_axis(&parts[0].0, axis, total);
    let data = indices(&out_dims)
        .map(|mut i| {
            for (dims, data) in parts {
                if i[axis] < dims[axis] {
                    return data[ravel(&i, dims)];
                }
                i[axis] -= dims[axis];
            }
            unreachable!("the axis position lies within the total")
        })
        .collect();
    (out_dims, data)
}

fn check_cat<D: Device, E: Element>(
    (dims, axis): (Vec<usize>, usize),
    sizes: Vec<(usize, Variant)>,
    negative: bool,
    seed: u64,
) {
    let parts: Vec<(Vec<usize>, Vec<E>)> = sizes
        .iter()
        .enumerate()
        .map(|(k, &(s, _))| {
            let d = with_axis(&dims, axis, s);
            let data = values::<E>(d.iter().product(), seed ^ k as u64);
            (d, data)
        })
        .collect();
    let tensors: Vec<Tensor<D, E>> =
        parts.iter().zip(&sizes).map(|((d, data), &(_, v))| tensor_with::<D, E>(data, d, v)).collect();
    let refs: Vec<&Tensor<D, E>> = tensors.iter().collect();
    let ax = signed_axis(axis, dims.len(), negative);
    let got = Tensor::cat(&refs, ax);
    let (out_dims, expected) = cat_reference(&parts, axis);
    assert_eq!(got.dims(), out_dims.as_slice());
    assert_eq!(got.to_vec(), expected);
    // Narrowing the result gives every part back.
    let mut start = 0;
    for (d, data) in &parts {
        assert_eq!(&got.narrow(ax, start, d[axis]).to_vec(), data);
        start += d[axis];
    }
}

fn check_stack<D: Device, E: Element>(
    dims: Vec<usize>,
    variants: Vec<Variant>,
    axis: usize,
    negative: bool,
    seed: u64,
) {
    let rank = dims.len();
    let parts: Vec<Vec<E>> = (0..variants.len()).map(|k| values::<E>(dims.iter().product(), seed ^ k as u64)).collect();
    let tensors: Vec<Tensor<D, E>> =
        parts.iter().zip(&variants).map(|(data, &v)| tensor_with(data, &dims, v)).collect();
    let refs: Vec<&Tensor<D, E>> = tensors.iter().collect();
    // The new axis ranges over rank + 1 positions.
    let ax = if negative { axis as isize - rank as isize - 1 } else { axis as isize };
    let got = Tensor::stack(&refs, ax);

    let unsqueezed: Vec<Tensor<D, E>> = tensors.iter().map(|t| t.unsqueeze(ax)).collect();
    let via_cat = Tensor::cat(&unsqueezed.iter().collect::<Vec<_>>(), axis as isize);
    assert_eq!(got.dims(), via_cat.dims());
    assert_eq!(got.to_vec(), via_cat.to_vec());

    let mut out_dims = dims.clone();
    out_dims.insert(axis, parts.len());
    let expected: Vec<E> = indices(&out_dims)
        .map(|mut i| {
            let k = i.remove(axis);
            parts[k][ravel(&i, &dims)]
        })
        .collect();
    assert_eq!(got.dims(), out_dims.as_slice());
    assert_eq!(got.to_vec(), expected);
}

device_proptests! {
    cases = 64;

    fn cat_matches_reference_and_narrows_back<D>(
        case in shape_and_axis(4, 4),
        sizes in prop::collection::vec((0..4usize, variant()), 1..5),
        negative in any::<bool>(), seed in any::<u64>(),
    ) {
        check_cat::<D, f32>(case.clone(), sizes.clone(), negative, seed);
        check_cat::<D, i64>(case.clone(), sizes.clone(), negative, seed);
        check_cat::<D, u8>(case, sizes, negative, seed);
    }

    fn stack_matches_unsqueeze_then_cat<D>(
        (dims, axis) in shape_maybe_empty(3, 4).prop_flat_map(|d| { let r = d.len(); (Just(d), 0..=r) }),
        variants in prop::collection::vec(variant(), 1..5),
        negative in any::<bool>(), seed in any::<u64>(),
    ) {
        check_stack::<D, f32>(dims.clone(), variants.clone(), axis, negative, seed);
        check_stack::<D, i64>(dims.clone(), variants.clone(), axis, negative, seed);
        check_stack::<D, u8>(dims, variants, axis, negative, seed);
    }
}

// ---------------------------------------------------------------------------
// Large inputs: the parallel paths

fn large_inputs_take_the_parallel_paths_correctly<D: Device>() {
    let (rows, cols) = (sized(700, 24), sized(301, 13));
    let (row_picks, col_picks_len) = (sized(500, 20), sized(400, 11));
    let data = values::<f32>(rows * cols, 11);
    let x = Tensor::<D>::from_slice(&data, [rows, cols]);
    let picks = index_values(row_picks, rows, 12);
    let idx = Tensor::<D, i64>::from_slice(&picks, [row_picks]);
    let rows_out = x.index_select(0, &idx).to_vec();
    assert!(
        picks
            .iter()
            .enumerate()
            .all(|(j, &p)| { rows_out[j * cols..(j + 1) * cols] == data[p as usize * cols..(p as usize + 1) * cols] })
    );
    let col_picks = index_values(col_picks_len, cols, 13);
    let cols_out = x.index_select(1, &Tensor::<D, i64>::from_slice(&col_picks, [col_picks_len])).to_vec();
    assert!((0..rows).all(|r| {
        (0..col_picks_len).all(|j| cols_out[r * col_picks_len + j] == data[r * cols + col_picks[j] as usize])
    }));

    let y = Tensor::<D>::from_slice(&values::<f32>(rows * 5, 14), [rows, 5]);
    let parts = [(vec![rows, cols], data.clone()), (vec![rows, 5], y.to_vec())];
    assert_eq!(Tensor::cat(&[&x, &y], 1).to_vec(), cat_reference(&parts, 1).1);
    // The same with a transposed input, through the strided path.
    let xt = x.t().contiguous().t();
    assert_eq!(Tensor::cat(&[&xt, &y], 1).to_vec(), cat_reference(&parts, 1).1);
}

fn large_gather_and_scatter_add_match_reference<D: Device>() {
    // Past the parallel threshold, on both kinds of axis and strided layouts.
    for (axis, v) in [(0, Variant::Contiguous), (1, Variant::Permuted), (1, Variant::Narrowed)] {
        let case = (vec![sized(300, 20), sized(260, 16)], axis, vec![sized(290, 18), sized(250, 15)]);
        check_gather::<D, f32>(case.clone(), false, 21, (v, v));
        check_scatter_add::<D, f32>(case, vec![1], true, 22, (v, v, v));
    }
}

// ---------------------------------------------------------------------------
// Empty tensors and empty index lists

fn empty_tensors_and_empty_index_lists<D: Device>() {
    let x = Tensor::<D>::ones([2, 3]);
    let none = Tensor::<D, i64>::zeros([0]);
    assert_eq!(x.index_select(1, &none).dims(), &[2, 0]);
    assert_eq!(x.index_select(0, &none).to_vec(), Vec::<f32>::new());
    assert_eq!(x.index_add(0, &none, &Tensor::<D>::zeros([0, 3])).to_vec(), vec![1.0; 6]);

    let empty_index = Tensor::<D, i64>::zeros([2, 0]);
    assert_eq!(x.gather(1, &empty_index).dims(), &[2, 0]);
    assert_eq!(x.scatter_add(1, &empty_index, &Tensor::<D>::zeros([2, 0])).to_vec(), vec![1.0; 6]);

    // Selecting from an empty axis with no indices is fine; an empty tensor
    // elsewhere keeps its zero.
    let hollow = Tensor::<D>::zeros([0, 3]);
    assert_eq!(hollow.index_select(0, &none).dims(), &[0, 3]);
    assert_eq!(hollow.index_select(1, &Tensor::<D, i64>::from_vec(vec![2, 2], [2])).dims(), &[0, 2]);

    let a = Tensor::<D>::zeros([0, 2]);
    let b = Tensor::<D>::ones([1, 2]);
    assert_eq!(Tensor::cat(&[&a, &b, &a], 0).to_vec2(), vec![vec![1.0, 1.0]]);
    assert_eq!(Tensor::cat(&[&a, &a], 1).dims(), &[0, 4]);
    assert_eq!(Tensor::stack(&[&a, &a], 0).dims(), &[2, 0, 2]);
    // A narrow of an empty result keeps an offset past the (empty) storage.
    let wide = Tensor::cat(&[&a, &a], 1);
    assert_eq!(wide.narrow(1, 2, 2).to_vec(), Vec::<f32>::new());
    assert_eq!(Tensor::cat(&[&wide.narrow(1, 2, 2), &a], 0).dims(), &[0, 2]);
}

// ---------------------------------------------------------------------------
// Errors: exact text for each kind, and the panicking forms

fn error_texts<D: Device>() {
    let x = Tensor::<D>::zeros([2, 3]);
    let ix = |v: Vec<i64>, dims: &[usize]| Tensor::<D, i64>::from_vec(v, dims);
    // The expected texts are written for `Cpu`; other devices name themselves.
    let msg = |e: Error| e.to_string().replace(&D::name(), "Cpu");

    // index_select
    assert_eq!(
        msg(x.try_index_select(2, &ix(vec![0], &[1])).unwrap_err()),
        "index_select on Cpu: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    assert_eq!(
        msg(x.try_index_select(0, &ix(vec![0, 1], &[1, 2])).unwrap_err()),
        "index_select on Cpu: shapes [2, 3] and [1, 2]: the indices must be 1-D, got rank 2"
    );
    let err = x.try_index_select(-1, &ix(vec![0, -1], &[2])).unwrap_err();
    assert!(matches!(err, Error::Index { op: "index_select", axis: 1, index: -1, .. }), "{err}");
    assert_eq!(msg(err), "index_select on Cpu: index -1 is out of range for axis 1 of size 3 (shape [2, 3])");
    assert_eq!(
        msg(x.try_index_select(0, &ix(vec![1, 2, 7], &[3])).unwrap_err()),
        "index_select on Cpu: index 2 is out of range for axis 0 of size 2 (shape [2, 3])"
    );

    // gather
    assert_eq!(
        msg(x.try_gather(-3, &ix(vec![0], &[1, 1])).unwrap_err()),
        "gather on Cpu: axis -3 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    assert_eq!(
        msg(x.try_gather(0, &ix(vec![0], &[1])).unwrap_err()),
        "gather on Cpu: shapes [2, 3] and [1]: the index must have the rank of the input (1 vs 2)"
    );
    assert_eq!(
        msg(x.try_gather(0, &ix(vec![0; 8], &[2, 4])).unwrap_err()),
        "gather on Cpu: shapes [2, 3] and [2, 4]: the index is larger than the input on axis 1 (4 > 3)"
    );
    // Larger than the input on the gathered axis itself is allowed (repeats).
    assert_eq!(x.gather(0, &ix(vec![1; 5], &[5, 1])).dims(), &[5, 1]);
    let err = x.try_gather(1, &ix(vec![0, 3], &[2, 1])).unwrap_err();
    assert!(matches!(err, Error::Index { op: "gather", axis: 1, index: 3, .. }), "{err}");
    assert_eq!(msg(err), "gather on Cpu: index 3 is out of range for axis 1 of size 3 (shape [2, 3])");

    // scatter_add
    let src = Tensor::<D>::ones([2, 3]);
    assert_eq!(
        msg(x.try_scatter_add(2, &ix(vec![0], &[1, 1]), &src).unwrap_err()),
        "scatter_add on Cpu: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    assert_eq!(
        msg(x.try_scatter_add(0, &ix(vec![0], &[1]), &src).unwrap_err()),
        "scatter_add on Cpu: shapes [2, 3], [1] and [2, 3]: the index must have the rank of the input (1 vs 2)"
    );
    assert_eq!(
        msg(x.try_scatter_add(0, &ix(vec![0], &[1, 1]), &Tensor::<D>::ones([3])).unwrap_err()),
        "scatter_add on Cpu: shapes [2, 3], [1, 1] and [3]: the index must have the rank of src (2 vs 1)"
    );
    assert_eq!(
        msg(x.try_scatter_add(0, &ix(vec![0; 3], &[3, 1]), &src).unwrap_err()),
        "scatter_add on Cpu: shapes [2, 3], [3, 1] and [2, 3]: the index is larger than src on axis 0 (3 > 2)"
    );
    let err = x.try_scatter_add(0, &ix(vec![0, 2], &[1, 2]), &src).unwrap_err();
    assert!(matches!(err, Error::Index { op: "scatter_add", axis: 0, index: 2, .. }), "{err}");
    assert_eq!(msg(err), "scatter_add on Cpu: index 2 is out of range for axis 0 of size 2 (shape [2, 3])");

    // index_add
    assert_eq!(
        msg(x.try_index_add(0, &ix(vec![0], &[1, 1]), &src).unwrap_err()),
        "index_add on Cpu: shapes [2, 3], [1, 1] and [2, 3]: the indices must be 1-D, got rank 2"
    );
    assert_eq!(
        msg(x.try_index_add(1, &ix(vec![0], &[1]), &src).unwrap_err()),
        "index_add on Cpu: shapes [2, 3], [1] and [2, 3]: \
         src must have shape [2, 1] (the input's shape with the indices' length on axis 1)"
    );
    let err = x.try_index_add(1, &ix(vec![-4], &[1]), &Tensor::<D>::ones([2, 1])).unwrap_err();
    assert_eq!(msg(err), "index_add on Cpu: index -4 is out of range for axis 1 of size 3 (shape [2, 3])");

    // cat
    let none: [&Tensor<D>; 0] = [];
    assert_eq!(
        msg(Tensor::try_cat(&none, 0).unwrap_err()),
        "cat on Cpu: expected at least one tensor, got an empty list"
    );
    let v = Tensor::<D>::zeros([3]);
    let w = Tensor::<D>::zeros([2, 4]);
    assert_eq!(
        msg(Tensor::try_cat(&[&x, &w, &v], 0).unwrap_err()),
        "cat on Cpu: shapes [2, 3], [2, 4] and [3]: every tensor must have the same rank (found 2 and 1)"
    );
    assert_eq!(
        msg(Tensor::try_cat(&[&x, &x, &w], 0).unwrap_err()),
        "cat on Cpu: shapes [2, 3], [2, 3] and [2, 4]: sizes differ on axis 1 (3 vs 4); only the cat axis 0 may differ"
    );
    assert_eq!(
        msg(Tensor::try_cat(&[&x, &x], 2).unwrap_err()),
        "cat on Cpu: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    let s = Tensor::<D>::scalar(1.0);
    // PyTorch: "zero-dimensional tensor (at position 0) cannot be concatenated".
    assert_eq!(
        msg(Tensor::try_cat(&[&s, &s], 0).unwrap_err()),
        "cat on Cpu: shape []: a rank-0 tensor has no axis 0; this operation needs at least one axis"
    );

    // stack
    assert_eq!(
        msg(Tensor::try_stack(&none, 0).unwrap_err()),
        "stack on Cpu: expected at least one tensor, got an empty list"
    );
    assert_eq!(
        msg(Tensor::try_stack(&[&x, &w], 0).unwrap_err()),
        "stack on Cpu: shapes [2, 3] and [2, 4]: every tensor must have the same shape"
    );
    assert_eq!(
        msg(Tensor::try_stack(&[&x, &x], -4).unwrap_err()),
        "stack on Cpu: axis -4 is out of range for stacking tensors of shape [2, 3] (expected an axis in -3..3)"
    );
    assert_eq!(Tensor::stack(&[&x, &x], 2).dims(), &[2, 3, 2]);
    assert_eq!(Tensor::stack(&[&x, &x], -3).dims(), &[2, 2, 3]);
}

#[test]
#[should_panic(expected = "gather on Cpu: index 5 is out of range for axis 0 of size 2 (shape [2])")]
fn plain_gather_panics_with_the_try_message() {
    let x = Tensor::<Cpu>::zeros([2]);
    let _ = x.gather(0, &Tensor::<Cpu, i64>::from_vec(vec![5i64], [1]));
}

#[test]
#[should_panic(expected = "index_select on Cpu: index -1 is out of range for axis 0 of size 2 (shape [2])")]
fn plain_index_select_panics_with_the_try_message() {
    let _ = Tensor::<Cpu>::zeros([2]).index_select(0, &Tensor::<Cpu, i64>::from_vec(vec![-1i64], [1]));
}

#[test]
#[should_panic(expected = "cat on Cpu: shapes [2] and [1, 2]: every tensor must have the same rank (found 1 and 2)")]
fn plain_cat_panics_with_the_try_message() {
    let _ = Tensor::cat(&[&Tensor::<Cpu>::zeros([2]), &Tensor::<Cpu>::zeros([1, 2])], 0);
}

#[test]
#[should_panic(expected = "scatter_add on Cpu: index 9 is out of range for axis 0 of size 2 (shape [2])")]
fn plain_scatter_add_panics_with_the_try_message() {
    let x = Tensor::<Cpu>::zeros([2]);
    let _ = x.scatter_add(0, &Tensor::<Cpu, i64>::from_vec(vec![9i64], [1]), &Tensor::<Cpu>::ones([1]));
}

/// index_select, gather, scatter_add, index_add and cat on 1-D tensors of
/// [`LARGE_SIZES`] elements, with strided data and index tensors and
/// repeated targets. The values are small whole numbers, so sums are exact
/// in any order (GPU atomics included). Returns every result, which the CUDA
/// instances also compare with the `Cpu` ones.
fn large_one_dimensional<D: Device>() -> Vec<f32> {
    let mut all = Vec::new();
    for n in LARGE_SIZES {
        let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        // Every other element of a [n, 2] tensor: strided data.
        let x = tensor_with::<D, f32>(&data, &[n], Variant::Narrowed);
        let picks: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % n as i64).collect();
        let idx = tensor_with::<D, i64>(&picks, &[n], Variant::Permuted);

        let selected = x.index_select(0, &idx).to_vec();
        assert!(selected.iter().zip(&picks).all(|(&v, &p)| v == data[p as usize]), "index_select of {n}");
        let gathered = x.gather(-1, &idx).to_vec();
        assert_eq!(gathered, selected, "gather of {n}");

        // Everything lands on 1000 targets: heavy collisions.
        let targets: Vec<i64> = (0..n as i64).map(|i| i % 1000).collect();
        let tidx = tensor_with::<D, i64>(&targets, &[n], Variant::Narrowed);
        let ones = Tensor::<D>::ones([n]);
        let counts = Tensor::<D>::zeros([1000]).scatter_add(0, &tidx, &ones).to_vec();
        let added = Tensor::<D>::zeros([1000]).index_add(0, &tidx, &ones).to_vec();
        let expected: Vec<f32> = (0..1000).map(|t| ((n + 999 - t) / 1000) as f32).collect();
        assert_eq!(counts, expected, "scatter_add of {n}");
        assert_eq!(added, expected, "index_add of {n}");

        // Parts of odd lengths, one strided.
        let (a, b) = (x.narrow(0, 0, n / 3), x.narrow(0, n / 3, n - n / 3));
        let joined = Tensor::cat(&[&b, &a], 0).to_vec();
        assert_eq!(joined.len(), n);
        assert!(joined[..n - n / 3] == data[n / 3..] && joined[n - n / 3..] == data[..n / 3], "cat of {n}");

        all.extend(selected.iter().chain(&gathered).chain(&counts).chain(&added).chain(&joined));
    }
    all
}

device_tests! {
    pad_of_large_values_regression => pad_of_large_values_regression,
    gather_and_scatter_add_match_hand_built_examples => gather_and_scatter_add_match_hand_built_examples,
    index_select_and_index_add_match_hand_built_examples => index_select_and_index_add_match_hand_built_examples,
    large_inputs_take_the_parallel_paths_correctly => large_inputs_take_the_parallel_paths_correctly,
    large_gather_and_scatter_add_match_reference => large_gather_and_scatter_add_match_reference,
    empty_tensors_and_empty_index_lists => empty_tensors_and_empty_index_lists,
    errors_name_the_op_the_shapes_and_the_device => error_texts,
    reordering_errors_say_what_is_wrong => reordering_errors_say_what_is_wrong,
}

device_tests_vs_cpu! {
    large_one_dimensional => large_one_dimensional, Family::Exact;
}
