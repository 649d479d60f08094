//! Reductions, softmax and log_softmax checked against plain `f64` loops, on
//! random shapes (empty ones included), every axis (negative ones included),
//! non-contiguous views, four element types and special values.
//!
//! Accuracy checked: float sums within `tol * (1 + sum |x|)` of the exact
//! (`f64`) sum, with `tol` = 2e-6 for `f32` and 1e-13 for `f64`; on a million
//! `f32` elements the blocked summation stays within 1e-6 of `sum |x|`.
//! Softmax and log_softmax within 1e-5 (`f32`) or 1e-12 (`f64`) absolute plus
//! relative. Integer sums are exact (wrapping); max, min and the
//! arg-reductions are exact for every type.

use crate::common::*;
use devtensor::{Cpu, Device, Element, Error, FloatElement, Tensor};
use proptest::prelude::*;

// ---- Plain references ----

/// The shape without `axis`, and for each of its positions (row-major) the
/// values along `axis`, gathered by explicit indexing.
fn runs_along(x: &[f64], dims: &[usize], axis: usize) -> (Vec<usize>, Vec<Vec<f64>>) {
    let mut out_dims = dims.to_vec();
    out_dims.remove(axis);
    let runs = indices(&out_dims)
        .map(|out_index| {
            (0..dims[axis])
                .map(|k| {
                    let mut index = out_index.clone();
                    index.insert(axis, k);
                    x[ravel(&index, dims)]
                })
                .collect()
        })
        .collect();
    (out_dims, runs)
}

/// The sum in `E`'s own arithmetic for integers (wrapping), in `f64` for floats.
fn ref_sum<E: Element>(run: &[f64]) -> f64 {
    if E::IS_FLOAT {
        run.iter().sum()
    } else {
        // Integers (u8 included) sum in i64, wrapping, as PyTorch's int64 sums.
        run.iter().fold(0i64, |acc, &v| acc.wrapping_add(E::from_f64(v).to_f64() as i64)) as f64
    }
}

fn ref_extreme(run: &[f64], max: bool) -> f64 {
    let mut best = run[0];
    for &v in &run[1..] {
        if best.is_nan() {
            break;
        }
        if v.is_nan() || (max && v > best) || (!max && v < best) {
            best = v;
        }
    }
    best
}

fn ref_arg(run: &[f64], max: bool) -> i64 {
    if let Some(i) = run.iter().position(|v| v.is_nan()) {
        return i as i64;
    }
    let mut best = 0;
    for (i, &v) in run.iter().enumerate() {
        if (max && v > run[best]) || (!max && v < run[best]) {
            best = i;
        }
    }
    best as i64
}

/// Softmax by the textbook formula in `f64`; NaN rows where PyTorch gives them.
fn ref_softmax(run: &[f64], log: bool) -> Vec<f64> {
    let nan_row = run.iter().any(|v| v.is_nan() || *v == f64::INFINITY) || run.iter().all(|v| *v == f64::NEG_INFINITY);
    if nan_row {
        return vec![f64::NAN; run.len()];
    }
    let m = run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = run.iter().map(|v| (v - m).exp()).sum();
    run.iter().map(|v| if log { v - m - total.ln() } else { (v - m).exp() / total }).collect()
}

/// Whether `got` is `expected` within `tol * (1 + scale)`; NaN matches NaN,
/// infinities match exactly.
fn close(got: f64, expected: f64, scale: f64, tol: f64) -> bool {
    (got.is_nan() && expected.is_nan()) || got == expected || (got - expected).abs() <= tol * (1.0 + scale)
}

/// Summation tolerance per element type.
fn sum_tol<E: Element>() -> f64 {
    match E::DTYPE {
        devtensor::DType::F32 => 2e-6,
        devtensor::DType::F64 => 1e-13,
        _ => 0.0,
    }
}

// ---- Checks, generic over the device ----

/// Every reduction of `vals` (shape `dims`, laid out as `variant`) along
/// every axis and over the whole tensor, against the references.
fn check_reductions<D: Device, E: Element>(dims: &[usize], vals: &[f64], variant: Variant) {
    let data: Vec<E> = cast_all(vals);
    let x = as_f64(&data);
    let t = tensor_with::<D, E>(&data, dims, variant);
    let tol = sum_tol::<E>();
    let abs_sum = |run: &[f64]| run.iter().map(|v| v.abs()).filter(|v| v.is_finite()).sum::<f64>();

    // Whole tensor.
    let sum = t.sum();
    assert_eq!(sum.dims(), &[] as &[usize]);
    let (got, expected) = (sum.item().to_f64(), ref_sum::<E>(&x));
    assert!(close(got, expected, abs_sum(&x), tol), "sum: got {got}, expected {expected}");
    if x.is_empty() {
        for err in [t.try_max().err(), t.try_min().err()] {
            assert!(matches!(err, Some(Error::Shape { .. })), "{err:?}");
        }
        for err in [t.try_argmax_all().err(), t.try_argmin_all().err()] {
            assert!(matches!(err, Some(Error::Shape { .. })), "{err:?}");
        }
    } else {
        assert_close(&[t.max().item().to_f64()], &[ref_extreme(&x, true)], 0.0, 0.0);
        assert_close(&[t.min().item().to_f64()], &[ref_extreme(&x, false)], 0.0, 0.0);
        assert_eq!(t.argmax_all().item(), ref_arg(&x, true), "argmax_all of {x:?}");
        assert_eq!(t.argmin_all().item(), ref_arg(&x, false), "argmin_all of {x:?}");
        assert_eq!(t.argmax_all().dims(), &[] as &[usize]);
    }

    // Each axis, named both ways.
    let rank = dims.len() as isize;
    for axis in -rank..rank {
        let a = if axis < 0 { (axis + rank) as usize } else { axis as usize };
        let (out_dims, runs) = runs_along(&x, dims, a);
        let mut keep_dims = dims.to_vec();
        keep_dims[a] = 1;

        let sums = [t.sum_axis(axis), t.sum_keepdim(axis)];
        assert_eq!(sums[0].dims(), out_dims.as_slice());
        assert_eq!(sums[1].dims(), keep_dims.as_slice());
        for s in &sums {
            for (i, (&g, run)) in as_f64(&s.to_vec()).iter().zip(&runs).enumerate() {
                let expected = ref_sum::<E>(run);
                assert!(
                    close(g, expected, abs_sum(run), tol),
                    "sum_axis({axis}) of {dims:?} at {i}: got {g}, expected {expected}"
                );
            }
        }

        if dims[a] == 0 {
            let errs = [t.try_max_axis(axis).err(), t.try_min_keepdim(axis).err()];
            for err in errs {
                assert!(matches!(err, Some(Error::Shape { .. })), "{err:?}");
            }
            let errs = [t.try_argmax(axis).err(), t.try_argmin_keepdim(axis).err()];
            for err in errs {
                assert!(matches!(err, Some(Error::Shape { .. })), "{err:?}");
            }
            continue;
        }
        let maxes: Vec<f64> = runs.iter().map(|r| ref_extreme(r, true)).collect();
        let mins: Vec<f64> = runs.iter().map(|r| ref_extreme(r, false)).collect();
        let argmaxes: Vec<i64> = runs.iter().map(|r| ref_arg(r, true)).collect();
        let argmins: Vec<i64> = runs.iter().map(|r| ref_arg(r, false)).collect();
        for (got, keep) in [(t.max_axis(axis), false), (t.max_keepdim(axis), true)] {
            assert_eq!(got.dims(), if keep { keep_dims.as_slice() } else { out_dims.as_slice() });
            assert_close(&as_f64(&got.to_vec()), &maxes, 0.0, 0.0);
        }
        for (got, keep) in [(t.min_axis(axis), false), (t.min_keepdim(axis), true)] {
            assert_eq!(got.dims(), if keep { keep_dims.as_slice() } else { out_dims.as_slice() });
            assert_close(&as_f64(&got.to_vec()), &mins, 0.0, 0.0);
        }
        for (got, keep) in [(t.argmax(axis), false), (t.argmax_keepdim(axis), true)] {
            assert_eq!(got.dims(), if keep { keep_dims.as_slice() } else { out_dims.as_slice() });
            assert_eq!(got.to_vec(), argmaxes, "argmax({axis}) of {dims:?} {x:?}");
        }
        for (got, keep) in [(t.argmin(axis), false), (t.argmin_keepdim(axis), true)] {
            assert_eq!(got.dims(), if keep { keep_dims.as_slice() } else { out_dims.as_slice() });
            assert_eq!(got.to_vec(), argmins, "argmin({axis}) of {dims:?} {x:?}");
        }
    }
}

/// Means, softmax and log_softmax of a float tensor along every axis.
fn check_float_ops<D: Device, E: FloatElement>(dims: &[usize], vals: &[f64], variant: Variant, tol: f64) {
    let data: Vec<E> = cast_all(vals);
    let x = as_f64(&data);
    let t = tensor_with::<D, E>(&data, dims, variant);
    let abs_mean =
        |run: &[f64]| run.iter().map(|v| v.abs()).filter(|v| v.is_finite()).sum::<f64>() / run.len().max(1) as f64;

    let mean = t.mean().item().to_f64();
    let expected = x.iter().sum::<f64>() / x.len() as f64;
    assert!(close(mean, expected, abs_mean(&x), tol), "mean: got {mean}, expected {expected}");

    let rank = dims.len() as isize;
    for axis in -rank..rank {
        let a = if axis < 0 { (axis + rank) as usize } else { axis as usize };
        let (out_dims, runs) = runs_along(&x, dims, a);
        let means: Vec<f64> = runs.iter().map(|r| r.iter().sum::<f64>() / r.len() as f64).collect();
        let mut keep_dims = dims.to_vec();
        keep_dims[a] = 1;
        for (got, keep) in [(t.mean_axis(axis), false), (t.mean_keepdim(axis), true)] {
            assert_eq!(got.dims(), if keep { keep_dims.as_slice() } else { out_dims.as_slice() });
            for ((g, e), run) in as_f64(&got.to_vec()).into_iter().zip(&means).zip(&runs) {
                assert!(close(g, *e, abs_mean(run), tol), "mean_axis({axis}): got {g}, expected {e}");
            }
        }

        let soft = t.softmax(axis);
        let log_soft = t.log_softmax(axis);
        assert_eq!(soft.dims(), dims);
        assert_eq!(log_soft.dims(), dims);
        let (_, soft_runs) = runs_along(&as_f64(&soft.to_vec()), dims, a);
        let (_, log_runs) = runs_along(&as_f64(&log_soft.to_vec()), dims, a);
        for ((run, s), l) in runs.iter().zip(&soft_runs).zip(&log_runs) {
            assert_close(s, &ref_softmax(run, false), tol, tol);
            assert_close(l, &ref_softmax(run, true), tol, tol);
            if !run.is_empty() && !ref_softmax(run, false)[0].is_nan() {
                let total: f64 = s.iter().sum();
                assert!((total - 1.0).abs() <= tol * run.len() as f64, "softmax row sums to {total}");
                // log_softmax = log(softmax) where the probability does not underflow.
                for (&p, &lp) in s.iter().zip(l) {
                    if p > 1e-30 {
                        assert!((p.ln() - lp).abs() <= tol * (1.0 + lp.abs()) * 10.0, "log {p} vs {lp}");
                    }
                }
            }
        }
    }
}

/// The gradients of softmax and log_softmax along every axis against the
/// plain formulas `y (g - sum g y)` and `g - exp(y) sum g`, with an incoming
/// gradient `g` that reaches the rule contiguous or, through a transpose,
/// strided.
fn check_softmax_grads<D: Device, E: FloatElement>(dims: &[usize], vals: &[f64], variant: Variant, tol: f64) {
    let data: Vec<E> = cast_all(vals);
    let x = as_f64(&data);
    let n = x.len();
    let g: Vec<f64> = (0..n).map(|i| ((i * 7 % 11) as f64 - 5.0) / 3.0).collect();
    let gt = Tensor::<D, E>::from_vec(cast_all(&g), dims);
    let rank = dims.len() as isize;
    for axis in -rank..rank {
        let a = if axis < 0 { (axis + rank) as usize } else { axis as usize };
        let (_, runs) = runs_along(&x, dims, a);
        let (_, g_runs) = runs_along(&g, dims, a);
        for log in [false, true] {
            let leaf = tensor_with::<D, E>(&data, dims, variant).requires_grad();
            let y = if log { leaf.log_softmax(axis) } else { leaf.softmax(axis) };
            let loss = match rank {
                0 | 1 => (&y * &gt).sum(),
                _ => (&y.transpose(0, -1) * &gt.transpose(0, -1)).sum(),
            };
            let got = loss.backward().get(&leaf).expect("a gradient").to_vec();
            let (_, got_runs) = runs_along(&as_f64(&got), dims, a);
            for ((run, g), got) in runs.iter().zip(&g_runs).zip(&got_runs) {
                let y = ref_softmax(run, log);
                let expected: Vec<f64> = if log {
                    let s: f64 = g.iter().sum();
                    y.iter().zip(g).map(|(y, g)| g - y.exp() * s).collect()
                } else {
                    let s: f64 = y.iter().zip(g).map(|(y, g)| y * g).sum();
                    y.iter().zip(g).map(|(y, g)| y * (g - s)).collect()
                };
                let scale = 1.0 + g.iter().map(|g| g.abs()).sum::<f64>();
                for (got, e) in got.iter().zip(&expected) {
                    assert!(
                        (got - e).abs() <= tol * scale,
                        "{} backward along {axis} of {dims:?}: got {got}, expected {e} (row {run:?})",
                        if log { "log_softmax" } else { "softmax" }
                    );
                }
            }
        }
    }
}

// ---- Strategies ----

/// Values with frequent ties (small integers) between continuous ones.
fn value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![3 => -10.0..10.0f64, 2 => (-4i32..=4).prop_map(f64::from)]
}

/// Float values that are sometimes NaN or infinite.
fn special_value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        12 => value(),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
    ]
}

/// A shape of rank 0..=4 (dimensions 0..=5) and data for it.
fn shaped(values: impl Strategy<Value = f64> + Clone + 'static) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    shape_maybe_empty(4, 5).prop_flat_map(move |dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(values.clone(), len))
    })
}

/// Integer test data: non-negative for `u8`, signed for `i64`; large enough
/// that `u8` sums wrap.
fn integer_values<E: Element>(vals: &[f64]) -> Vec<f64> {
    let unsigned = E::DTYPE == devtensor::DType::U8;
    vals.iter().map(|v| if unsigned { (v.abs() * 12.0).round() } else { (v * 1e3).round() }).collect()
}

/// `cumsum` along every axis against running sums of plain loops (exact
/// for integers, which sum in `i64` and wrap; within the summation
/// tolerance of the line's absolute sum for floats), and its gradient (the
/// running sum of the upstream gradient from the end of each line).
fn check_cumsum<D: Device, E: Element>(dims: &[usize], vals: &[f64], variant: Variant) {
    let data: Vec<E> = cast_all(vals);
    let x = as_f64(&data);
    let t = tensor_with::<D, E>(&data, dims, variant);
    for axis in 0..dims.len() {
        let got = as_f64(&t.cumsum(axis as isize - dims.len() as isize).to_vec());
        assert_eq!(got.len(), x.len());
        for out_index in indices(dims) {
            let k = out_index[axis];
            let prefix: Vec<f64> = (0..=k)
                .map(|j| {
                    let mut at = out_index.clone();
                    at[axis] = j;
                    x[ravel(&at, dims)]
                })
                .collect();
            let (expected, got) = (ref_sum::<E>(&prefix), got[ravel(&out_index, dims)]);
            let scale: f64 = prefix.iter().map(|v| v.abs()).sum();
            assert!(
                close(got, expected, scale, sum_tol::<E>()),
                "cumsum axis {axis} at {out_index:?}: {got} vs {expected}"
            );
        }
    }
}

/// `cumprod` along every axis against running products of plain loops
/// (exact for integers, which multiply in `i64` and wrap; within `4 k ε`
/// of the product's magnitude for floats, `k` the prefix length), with
/// zeros in the data.
fn check_cumprod<D: Device, E: Element>(dims: &[usize], vals: &[f64], variant: Variant) {
    // Small values with some zeros, so that products neither overflow nor vanish.
    let vals: Vec<f64> = vals.iter().map(|v| if v.abs() < 0.2 { 0.0 } else { (v * 4.0).round() / 4.0 }).collect();
    let data: Vec<E> = cast_all(&vals);
    let x = as_f64(&data);
    let t = tensor_with::<D, E>(&data, dims, variant);
    for axis in 0..dims.len() {
        let got = as_f64(&t.cumprod(axis as isize).to_vec());
        for out_index in indices(dims) {
            let mut expected = if E::IS_FLOAT { 1.0f64 } else { 0.0 };
            let mut exact = 1i64;
            for j in 0..=out_index[axis] {
                let mut at = out_index.clone();
                at[axis] = j;
                expected *= if E::IS_FLOAT { x[ravel(&at, dims)] } else { 1.0 };
                exact = exact.wrapping_mul(x[ravel(&at, dims)] as i64);
            }
            let got = got[ravel(&out_index, dims)];
            let ok = if E::IS_FLOAT {
                (got - expected).abs() <= 4.0 * (out_index[axis] + 1) as f64 * sum_tol::<E>() * expected.abs()
            } else {
                got == exact as f64
            };
            assert!(
                ok,
                "cumprod axis {axis} at {out_index:?}: {got} vs {}",
                if E::IS_FLOAT { expected } else { exact as f64 }
            );
        }
    }
}

/// `var` and `std` (every axis and the whole tensor, corrections 0-2, with
/// and without `keepdim`) against the two-pass textbook formula in `f64`.
fn check_spreads<D: Device, E: FloatElement>(dims: &[usize], vals: &[f64], tol: f64) {
    let data: Vec<E> = cast_all(vals);
    let x = as_f64(&data);
    let t = Tensor::<D, E>::from_slice(&data, dims);
    let variance = |run: &[f64], correction: usize| {
        let mean = run.iter().sum::<f64>() / run.len() as f64;
        run.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / run.len().saturating_sub(correction) as f64
    };
    let agree = |got: Vec<E>, expected: Vec<f64>, what: &str| {
        assert_eq!(got.len(), expected.len(), "{what}");
        for (g, e) in as_f64(&got).into_iter().zip(expected) {
            assert!(close(g, e, e.abs(), tol), "{what}: got {g}, expected {e} ({dims:?})");
        }
    };
    for correction in 0..3 {
        agree(t.var(correction).to_vec(), vec![variance(&x, correction)], "var");
        agree(t.std(correction).to_vec(), vec![variance(&x, correction).sqrt()], "std");
        for axis in 0..dims.len() {
            let (out_dims, runs) = runs_along(&x, dims, axis);
            let expected: Vec<f64> = runs.iter().map(|r| variance(r, correction)).collect();
            let a = axis as isize;
            let var = t.var_axis(a, correction);
            assert_eq!(var.dims(), out_dims.as_slice());
            agree(var.to_vec(), expected.clone(), "var_axis");
            let kept = t.var_keepdim(a, correction);
            assert_eq!(kept.dims()[axis], 1);
            agree(kept.to_vec(), expected.clone(), "var_keepdim");
            agree(t.std_axis(a, correction).to_vec(), expected.iter().map(|v| v.sqrt()).collect(), "std_axis");
            agree(t.std_keepdim(a, correction).to_vec(), expected.iter().map(|v| v.sqrt()).collect(), "std_keepdim");
        }
    }
}

device_proptests! {
    cases = 96;

    /// Reductions of a broadcast view, which skip its stride-0 axes (sums
    /// scale by the repeat count, arg-reductions map the view's pick back),
    /// agree with the same reductions of a dense copy; values repeat, so
    /// ties test the first-occurrence rule.
    fn broadcast_views_match_their_dense_copies<D>(
        (big, small) in broadcast_pair(4, 4),
        seed in prop::collection::vec(-3i64..3, 1..6),
        nan in any::<bool>(),
    ) {
        let (big, small) = if small.iter().product::<usize>() <= big.iter().product() { (big, small) } else { (small, big) };
        let Some(out) = broadcast_dims(&big, &small) else { return Ok(()) };
        let mut data: Vec<f64> = (0..small.iter().product::<usize>()).map(|i| seed[i % seed.len()] as f64).collect();
        if nan && data.len() > 1 {
            data[1] = f64::NAN;
        }
        let view = Tensor::<D, f64>::from_vec(data, small.clone()).broadcast_to(out.clone());
        let dense = view.contiguous();
        let same = |a: Vec<f64>, b: Vec<f64>| a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));
        prop_assert!(same(view.sum().to_vec(), dense.sum().to_vec()), "sum {:?} -> {:?}", small, out);
        if view.elem_count() > 0 {
            prop_assert!(same(view.max().to_vec(), dense.max().to_vec()));
            prop_assert!(same(view.min().to_vec(), dense.min().to_vec()));
            prop_assert_eq!(view.argmax_all().item(), dense.argmax_all().item(), "argmax_all {:?} -> {:?}", small, out);
            prop_assert_eq!(view.argmin_all().item(), dense.argmin_all().item(), "argmin_all {:?} -> {:?}", small, out);
        }
        for axis in 0..out.len() as isize {
            prop_assert!(same(view.sum_axis(axis).to_vec(), dense.sum_axis(axis).to_vec()), "sum_axis {}", axis);
            prop_assert!(same(view.mean_keepdim(axis).to_vec(), dense.mean_keepdim(axis).to_vec()), "mean_keepdim {}", axis);
            if out[axis as usize] > 0 {
                prop_assert!(same(view.max_axis(axis).to_vec(), dense.max_axis(axis).to_vec()), "max_axis {}", axis);
                prop_assert_eq!(view.argmin(axis).to_vec(), dense.argmin(axis).to_vec(), "argmin {}", axis);
                prop_assert_eq!(view.argmax_keepdim(axis).to_vec(), dense.argmax_keepdim(axis).to_vec(), "argmax {}", axis);
            }
        }
    }

    fn cumsum_matches_running_sums<D>((dims, vals) in shaped(value()), v in variant()) {
        check_cumsum::<D, f32>(&dims, &vals, v);
        check_cumsum::<D, f64>(&dims, &vals, v);
        check_cumsum::<D, i64>(&dims, &integer_values::<i64>(&vals), v);
        check_cumsum::<D, u8>(&dims, &integer_values::<u8>(&vals), v);
        check_cumprod::<D, f32>(&dims, &vals, v);
        check_cumprod::<D, f64>(&dims, &vals, v);
        check_cumprod::<D, i64>(&dims, &integer_values::<i64>(&vals), v);
    }

    fn var_and_std_match_the_textbook_formula<D>((dims, vals) in shaped(value())) {
        check_spreads::<D, f32>(&dims, &vals, 1e-4);
        check_spreads::<D, f64>(&dims, &vals, 1e-11);
    }

    /// Gradients of cumsum (either direction of the axis), var and std
    /// against central differences.
    fn scan_and_spread_gradients_match_finite_differences<D>(
        (dims, vals) in gradcheck::inputs(3, 4, gradcheck::Values::Distinct),
        axis in 0usize..3,
        correction in 0usize..2,
    ) {
        let x = Tensor::<D, f64>::from_vec(vals, dims.clone());
        let a = if dims.is_empty() { 0 } else { axis % dims.len() };
        // A divisor of 0 (no more elements than the correction) gives NaN.
        let along = if dims.is_empty() { 1 } else { dims[a] };
        let (c_axis, c_all) = (correction.min(along - 1), correction.min(x.elem_count() - 1));
        let a = a as isize;
        gradcheck::gradcheck("cumsum", std::slice::from_ref(&x), |xs| xs[0].cumsum(a));
        gradcheck::gradcheck("var_keepdim", std::slice::from_ref(&x), |xs| xs[0].var_keepdim(a, c_axis));
        gradcheck::gradcheck("std", std::slice::from_ref(&x), |xs| xs[0].std(c_all));
        gradcheck::gradcheck("std_axis", std::slice::from_ref(&x), |xs| xs[0].std_axis(a, c_axis));
        // Second derivatives (`create_graph`); squared where the first
        // derivative is constant.
        gradcheck::gradgradcheck("cumsum", std::slice::from_ref(&x), |xs| xs[0].cumsum(a).square());
        gradcheck::gradcheck("cumprod", std::slice::from_ref(&x), |xs| xs[0].cumprod(a));
        gradcheck::gradgradcheck("cumprod", std::slice::from_ref(&x), |xs| xs[0].cumprod(a));
        gradcheck::gradgradcheck("var_keepdim", std::slice::from_ref(&x), |xs| xs[0].var_keepdim(a, c_axis));
        gradcheck::gradgradcheck("std", std::slice::from_ref(&x), |xs| xs[0].std(c_all));
        gradcheck::gradgradcheck("std_axis", std::slice::from_ref(&x), |xs| xs[0].std_axis(a, c_axis));
        gradcheck::gradgradcheck("softmax", std::slice::from_ref(&x), |xs| xs[0].softmax(a));
        gradcheck::gradgradcheck("log_softmax", std::slice::from_ref(&x), |xs| xs[0].log_softmax(a));
    }

    fn reductions_match_reference_f32<D>((dims, vals) in shaped(special_value()), v in variant()) {
        check_reductions::<D, f32>(&dims, &vals, v);
    }

    fn reductions_match_reference_f64<D>((dims, vals) in shaped(special_value()), v in variant()) {
        check_reductions::<D, f64>(&dims, &vals, v);
    }

    fn reductions_match_reference_integers<D>((dims, vals) in shaped(value()), v in variant()) {
        check_reductions::<D, i64>(&dims, &integer_values::<i64>(&vals), v);
        check_reductions::<D, u8>(&dims, &integer_values::<u8>(&vals), v);
    }

    fn float_ops_match_reference<D>((dims, vals) in shaped(value()), v in variant()) {
        check_float_ops::<D, f32>(&dims, &vals, v, 1e-5);
        check_float_ops::<D, f64>(&dims, &vals, v, 1e-12);
    }

    fn softmax_gradients_match_reference<D>((dims, vals) in shaped(value()), v in variant()) {
        check_softmax_grads::<D, f32>(&dims, &vals, v, 1e-5);
        check_softmax_grads::<D, f64>(&dims, &vals, v, 1e-12);
    }

    fn float_ops_handle_special_values<D>((dims, vals) in shaped(special_value()), v in variant()) {
        check_float_ops::<D, f32>(&dims, &vals, v, 1e-5);
    }

    fn softmax_of_large_magnitudes_does_not_overflow<D>(
        (dims, vals) in shape(3, 6).prop_flat_map(|dims| {
            let len: usize = dims.iter().product();
            (Just(dims), prop::collection::vec(prop_oneof![Just(-1e4), Just(1e4), -1e4..1e4f64], len))
        }),
        v in variant(),
    ) {
        check_float_ops::<D, f32>(&dims, &vals, v, 1e-5);
    }
}

// ---- Large inputs: the blocked, vectorised and parallel paths ----

fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 20.0 - 10.0
        })
        .collect()
}

/// Returns the three results, which the CUDA instances also compare with
/// the `Cpu` ones.
fn large_f32_sum_is_accurate<D: Device>() -> Vec<f32> {
    let n = LARGE_SIZES[1];
    let x: Vec<f32> = cast_all(&pseudo_random(n, 1));
    let exact: f64 = x.iter().map(|&v| v as f64).sum();
    let scale: f64 = x.iter().map(|&v| v.abs() as f64).sum();
    let got = Tensor::<D>::from_vec(x.clone(), [n]).sum().item() as f64;
    assert!((got - exact).abs() <= 1e-6 * scale, "got {got}, exact {exact}");
    // The same through a 2-D view and the mean.
    let side = sized(1000, 45);
    let t = Tensor::<D>::from_vec(x[..side * side].to_vec(), [side, side]);
    let exact: f64 = x[..side * side].iter().map(|&v| v as f64).sum();
    let (sum2, mean) = (t.sum().item(), t.mean().item());
    assert!((sum2 as f64 - exact).abs() <= 1e-6 * scale);
    assert!((mean as f64 - exact / (side * side) as f64).abs() <= 1e-12 * scale);
    vec![got as f32, sum2, mean]
}

/// `cumsum` of a large `f32` tensor (past the parallel threshold) along
/// both axes equals a sequential `f32` running sum exactly: each line is
/// summed in order on every device, so CUDA must match the CPU bit for bit.
fn large_cumsum_sums_each_line_in_order<D: Device>() -> Vec<f32> {
    let (rows, cols) = (sized(37, 5), sized(4_001, 300));
    let x: Vec<f32> = cast_all(&pseudo_random(rows * cols, 3));
    let t = Tensor::<D>::from_vec(x.clone(), [rows, cols]);
    let along_rows = t.cumsum(1).to_vec();
    let along_columns = t.cumsum(0).to_vec();
    let mut expected = x.clone();
    for r in 0..rows {
        for c in 1..cols {
            expected[r * cols + c] = expected[r * cols + c - 1] + x[r * cols + c];
        }
    }
    assert!(along_rows == expected, "cumsum along the rows differs from a sequential loop");
    let mut expected = x.clone();
    for i in cols..rows * cols {
        expected[i] = expected[i - cols] + x[i];
    }
    assert!(along_columns == expected, "cumsum along the columns differs from a sequential loop");
    [along_rows, along_columns].concat()
}

/// multinomial draws each category in proportion to its weight (40,000
/// draws: each frequency within 4.5 standard deviations), never one of
/// weight 0, reproducibly from a seeded generator, and refuses what
/// PyTorch refuses.
fn multinomial_draws_in_proportion<D: Device>() {
    let weights = [0.2, 0.0, 1.2, 0.6];
    let total: f64 = weights.iter().sum();
    let rows = Tensor::<D, f64>::from_vec([weights, [0.0, 0.0, 0.0, 3.0]].concat(), [2, 4]);
    let draws = 20_000;
    let mut generator = devtensor::Generator::new(5);
    let picks = rows.multinomial_with(draws, true, &mut generator).to_vec2();
    assert!(picks[1].iter().all(|&i| i == 3), "a row with one non-zero weight");
    let mut counts = [0usize; 4];
    for &i in &picks[0] {
        counts[i as usize] += 1;
    }
    assert_eq!(counts[1], 0, "a category of weight 0 was drawn");
    for (k, &w) in weights.iter().enumerate() {
        let p = w / total;
        let sigma = (draws as f64 * p * (1.0 - p)).sqrt();
        assert!((counts[k] as f64 - draws as f64 * p).abs() <= 4.5 * sigma + 1e-9, "category {k}: {counts:?}");
    }
    let again = rows.multinomial_with(draws, true, &mut devtensor::Generator::new(5)).to_vec2();
    assert_eq!(again, picks);
    let flat = Tensor::<D>::from_vec(vec![1.0, 1.0], [2]).multinomial(3, true);
    assert_eq!(flat.dims(), &[3]);
    for bad in [vec![1.0, -0.5], vec![0.0, 0.0], vec![f32::NAN, 1.0], vec![f32::INFINITY, 1.0]] {
        let err = Tensor::<D>::from_vec(bad.clone(), [2]).try_multinomial(1, true).unwrap_err();
        assert!(matches!(err, Error::Argument { op: "multinomial", .. }), "{bad:?}: {err}");
    }
}

/// multinomial without replacement: distinct samples, weight-0 categories
/// never drawn, and each ordered pair (i, j) of a row's two samples as
/// frequent as drawing i in proportion to the weights and then j in
/// proportion to those left, w_i / W · w_j / (W - w_i) (20,000 draws, each
/// within 4.5 standard deviations).
fn multinomial_without_replacement_draws_in_sequence<D: Device>() {
    let weights = [1.0, 0.0, 2.0, 3.0, 4.0];
    let total: f64 = weights.iter().sum();
    let draws = 20_000;
    let rows = Tensor::<D, f64>::from_vec(weights.repeat(draws), [draws, 5]);
    let picks = rows.multinomial_with(2, false, &mut devtensor::Generator::new(9)).to_vec2();
    let mut counts = [[0usize; 5]; 5];
    for pick in &picks {
        assert_ne!(pick[0], pick[1], "a category drawn twice");
        counts[pick[0] as usize][pick[1] as usize] += 1;
    }
    for (i, &wi) in weights.iter().enumerate() {
        for (j, &wj) in weights.iter().enumerate() {
            let p = if i == j { 0.0 } else { wi / total * wj / (total - wi) };
            let sigma = (draws as f64 * p * (1.0 - p)).sqrt();
            let count = counts[i][j] as f64;
            assert!((count - draws as f64 * p).abs() <= 4.5 * sigma + 1e-9, "pair ({i}, {j}): {counts:?}");
        }
    }
    // Every category of positive weight, once each.
    let all = Tensor::<D>::from_vec(vec![0.5, 0.0, 2.0, 1.0], [4]).multinomial(3, false).to_vec();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 2, 3], "{all:?}");
    let device = D::name();
    let few = Tensor::<D>::from_vec(vec![0.5, 0.0, 2.0], [3]);
    assert_eq!(
        few.try_multinomial(3, false).unwrap_err().to_string(),
        format!(
            "multinomial on {device}: cannot draw 3 distinct samples from a row with 2 categories of positive weight"
        )
    );
    assert_eq!(
        few.try_multinomial(4, false).unwrap_err().to_string(),
        format!("multinomial on {device}: cannot draw 4 samples from 3 categories without replacement")
    );
}

fn check_large<D: Device>(dims: &[usize], variant: Variant) {
    let n: usize = dims.iter().product();
    let mut vals = pseudo_random(n, 7);
    vals[n / 3] = f64::NAN;
    vals[n / 2] = 50.0;
    vals[(n / 2 + dims[1] + 1) % n] = -50.0;
    check_reductions::<D, f32>(dims, &vals, variant);
    check_reductions::<D, i64>(dims, &integer_values::<i64>(&vals), variant);
    let finite: Vec<f64> = pseudo_random(n, 9);
    check_float_ops::<D, f32>(dims, &finite, variant, 1e-5);
}

fn large_reductions_match_reference_on_every_layout<D: Device>() {
    // Past the parallel threshold, rows long and short, with NaN, ties and extremes.
    // On `Cpu` every shape in every layout. Elsewhere each shape once and
    // each layout at least once, because the host reference alone costs
    // seconds per shape and the emulated GPU runs its kernels 10-100x slower;
    // under Miri likewise, where each shape takes minutes.
    // On a GPU the shapes are smaller, and still take every launch plan of
    // `ops/reduce/cuda.rs`: a block per row (rows of 256 and more), a
    // thread per output (short rows), tiles (strided rows), and the
    // two-pass kernels of whole tensors (16384 elements and more).
    let cpu = D::name() == "Cpu";
    let layouts = [Variant::Contiguous, Variant::Permuted, Variant::Narrowed];
    let (wide, long, deep) = if cpu { ([300, 700], 70_000, 40) } else { ([150, 300], 20_011, 16) };
    for (i, variant) in layouts.into_iter().enumerate() {
        let all = cpu && !cfg!(miri);
        if all || i == 0 {
            check_large::<D>(&[sized(wide[0], 7), sized(wide[1], 60)], variant);
        }
        if all || i == 1 {
            check_large::<D>(&[sized(long, 600), 2], variant);
        }
        // Rank 3: strided views walk many short blocks, grouped into tasks.
        if all || i == 2 {
            check_large::<D>(&[sized(deep, 4), sized(50, 5), 41], variant);
        }
    }
    check_large::<D>(&[2, sized(long, 600)], Variant::Contiguous);
}

fn large_one_dimensional_reductions<D: Device>() {
    // Whole-tensor and axis-0 reductions of one long strided row: many CUDA
    // blocks, a length no block size divides, a NaN, ties and extremes. The
    // emulated GPU's time goes with the threads a grid starts, not the
    // elements, so there the larger length (several rounds of a full grid)
    // checks f32 reductions only, and the other types run at the smaller.
    for n in LARGE_SIZES {
        let mut vals = pseudo_random(n, 13);
        vals[n - 2] = 50.0;
        vals[n / 5] = 50.0;
        vals[n / 7] = -50.0;
        check_reductions::<D, f32>(&[n], &vals, Variant::Narrowed);
        if D::name() != "Cpu" && n > LARGE_SIZES[0] {
            continue;
        }
        check_reductions::<D, i64>(&[n], &integer_values::<i64>(&vals), Variant::Permuted);
        check_float_ops::<D, f32>(&[n], &vals, Variant::Narrowed, 1e-5);
        vals[n / 3] = f64::NAN;
        check_reductions::<D, f64>(&[n], &vals, Variant::Contiguous);
    }
}

fn reducing_a_long_leading_axis_is_accurate<D: Device>() {
    // Axis 0 of [n, 4] folds whole rows into the output; blocked, it stays accurate.
    let n = sized(200_000, 600);
    let x: Vec<f32> = cast_all(&pseudo_random(n * 4, 3));
    let t = Tensor::<D>::from_vec(x.clone(), [n, 4]);
    let got = t.sum_axis(0).to_vec();
    for c in 0..4 {
        let exact: f64 = (0..n).map(|r| x[r * 4 + c] as f64).sum();
        let scale: f64 = (0..n).map(|r| x[r * 4 + c].abs() as f64).sum();
        assert!((got[c] as f64 - exact).abs() <= 1e-6 * scale, "column {c}: {} vs {exact}", got[c]);
    }
}

fn broadcast_views_reduce_like_their_copies<D: Device>() {
    let row = Tensor::<D>::from_vec(vec![1.0, -2.0, 3.0], [3]);
    let b = row.broadcast_to([4, 3]);
    assert_eq!(b.sum_axis(0).to_vec(), vec![4.0, -8.0, 12.0]);
    assert_eq!(b.sum_axis(1).to_vec(), vec![2.0; 4]);
    assert_eq!(b.argmin(1).to_vec(), vec![1; 4]);
    assert_eq!(b.argmax(0).to_vec(), vec![0; 3]);
    assert_eq!(b.sum().item(), 8.0);
}

// ---- Special values and PyTorch semantics ----

fn softmax_special_rows_follow_pytorch<D: Device>() {
    let inf = f32::INFINITY;
    let x = Tensor::<D>::from_vec(vec![0.0, f32::NEG_INFINITY, -inf, -inf, 1.0, f32::NAN, 1e4, -1e4, inf, 1.0], [5, 2]);
    let s = x.softmax(1).to_vec();
    assert_eq!(&s[0..2], &[1.0, 0.0]);
    assert!(s[2..4].iter().all(|v| v.is_nan()), "all -inf row: {s:?}");
    assert!(s[4..6].iter().all(|v| v.is_nan()), "NaN row: {s:?}");
    assert_eq!(&s[6..8], &[1.0, 0.0]);
    assert!(s[8..10].iter().all(|v| v.is_nan()), "+inf row: {s:?}");
    let l = x.log_softmax(1).to_vec();
    assert_eq!(&l[0..2], &[0.0, f32::NEG_INFINITY]);
    assert!(l[2..6].iter().all(|v| v.is_nan()));
    assert_eq!(&l[6..8], &[0.0, -2e4]);
}

fn nan_propagates_and_arg_reductions_find_the_first_nan<D: Device>() {
    let x = Tensor::<D>::from_vec(vec![1.0, f32::NAN, 5.0, f32::NAN, 7.0, 7.0], [2, 3]);
    assert!(x.max().item().is_nan());
    assert!(x.min().item().is_nan());
    assert_eq!(x.argmax_all().item(), 1);
    assert_eq!(x.argmin_all().item(), 1);
    assert_eq!(x.argmax(1).to_vec(), vec![1, 0]);
    assert_eq!(x.argmin(0).to_vec(), vec![1, 0, 0]);
    let m = x.max_axis(0).to_vec();
    assert!(m[0].is_nan() && m[1].is_nan() && m[2] == 7.0);
    // Ties: the first occurrence.
    let y = Tensor::<D, i64>::from_vec(vec![2, 9, 9, 1, 1, 2], [6]);
    assert_eq!((y.argmax_all().item(), y.argmin_all().item()), (1, 3));
}

fn integer_sums_wrap<D: Device>() {
    // u8 sums into i64, as PyTorch's: torch.tensor([200, 100, 10], dtype=torch.uint8).sum() == 310.
    let x = Tensor::<D, u8>::from_vec(vec![200, 100, 10], [3]);
    assert_eq!(x.sum().item(), 310i64);
    let y = Tensor::<D, i64>::from_vec(vec![i64::MAX, 1], [2]);
    assert_eq!(y.sum().item(), i64::MIN);
}

fn empty_tensors_sum_to_zero_and_average_to_nan<D: Device>() {
    let x = Tensor::<D>::zeros([0, 3]);
    assert_eq!(x.sum().item(), 0.0);
    assert!(x.mean().item().is_nan());
    assert_eq!(x.sum_axis(0).to_vec(), vec![0.0; 3]);
    assert!(x.mean_axis(0).to_vec().iter().all(|v| v.is_nan()));
    assert_eq!(x.sum_axis(1).dims(), &[0]);
    // Only the empty axis is a problem for max: the other one gives an empty result.
    assert_eq!(x.max_axis(1).dims(), &[0]);
    assert_eq!(x.argmin_keepdim(1).dims(), &[0, 1]);
    assert_eq!(x.softmax(0).dims(), &[0, 3]);
    assert_eq!(Tensor::<D, i64>::zeros([2, 0]).sum_keepdim(1).to_vec2(), vec![vec![0], vec![0]]);
}

fn scalars_reduce_to_themselves<D: Device>() {
    let x = Tensor::<D>::scalar(-3.5);
    assert_eq!((x.sum().item(), x.max().item(), x.min().item(), x.mean().item()), (-3.5, -3.5, -3.5, -3.5));
    assert_eq!(x.argmax_all().item(), 0);
}

// ---- Errors ----

fn axis_errors_name_op_shape_and_device<D: Device>() {
    // The expected texts are written for `Cpu`; other devices name themselves.
    let x = Tensor::<D>::zeros([2, 3]);
    assert_eq!(
        x.try_sum_axis(2).unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "sum_axis on Cpu: axis 2 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    assert_eq!(
        x.try_softmax(-3).unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "softmax on Cpu: axis -3 is out of range for shape [2, 3] (expected an axis in -2..2)"
    );
    let errors = [
        x.try_sum_axis(-3).err(),
        x.try_max_axis(2).err(),
        x.try_min_axis(2).err(),
        x.try_mean_axis(2).err(),
        x.try_sum_keepdim(2).err(),
        x.try_max_keepdim(2).err(),
        x.try_min_keepdim(2).err(),
        x.try_mean_keepdim(-3).err(),
        x.try_log_softmax(2).err(),
    ];
    for err in errors {
        assert!(matches!(err, Some(Error::Axis { .. })), "{err:?}");
    }
    for err in
        [x.try_argmax(2).err(), x.try_argmin(2).err(), x.try_argmax_keepdim(-3).err(), x.try_argmin_keepdim(2).err()]
    {
        assert!(matches!(err, Some(Error::Axis { .. })), "{err:?}");
    }
    // A rank-0 tensor takes axis 0 and -1 only, as in PyTorch.
    let scalar = Tensor::<D, i64>::scalar(1);
    assert_eq!(scalar.sum_axis(0).item(), 1);
    assert!(matches!(scalar.try_sum_axis(1), Err(Error::Axis { axis: 1, .. })));
    assert!(matches!(scalar.try_argmax(-2), Err(Error::Axis { axis: -2, .. })));
}

fn empty_reductions_without_identity_are_shape_errors<D: Device>() {
    // The expected texts are written for `Cpu`; other devices name themselves.
    let x = Tensor::<D>::zeros([0, 3]);
    assert_eq!(
        x.try_max().unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "max on Cpu: shape [0, 3]: max of an empty tensor is undefined"
    );
    assert_eq!(
        x.try_argmin_all().unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "argmin_all on Cpu: shape [0, 3]: argmin of an empty tensor is undefined"
    );
    assert_eq!(
        x.try_max_axis(-2).unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "max_axis on Cpu: shape [0, 3]: max over axis 0 of size 0 is undefined"
    );
    assert_eq!(
        x.try_argmax(0).unwrap_err().to_string().replace(&D::name(), "Cpu"),
        "argmax on Cpu: shape [0, 3]: argmax over axis 0 of size 0 is undefined"
    );
    assert!(matches!(x.try_min_keepdim(0), Err(Error::Shape { op: "min_keepdim", .. })));
}

#[test]
#[should_panic(expected = "min_axis on Cpu: shape [2, 0]: min over axis 1 of size 0 is undefined")]
fn plain_form_panics_with_the_try_message() {
    let _ = Tensor::<Cpu>::zeros([2, 0]).min_axis(-1);
}

#[test]
#[should_panic(expected = "argmax on Cpu: axis 1 is out of range for shape [4] (expected an axis in -1..1)")]
fn plain_arg_form_panics_on_a_bad_axis() {
    let _ = Tensor::<Cpu>::zeros([4]).argmax(1);
}

device_tests! {
    multinomial_draws_in_proportion => multinomial_draws_in_proportion,
    multinomial_without_replacement_draws_in_sequence => multinomial_without_replacement_draws_in_sequence,
    large_reductions_match_reference_on_every_layout => large_reductions_match_reference_on_every_layout,
    large_one_dimensional_reductions => large_one_dimensional_reductions,
    reducing_a_long_leading_axis_is_accurate => reducing_a_long_leading_axis_is_accurate,
    broadcast_views_reduce_like_their_copies => broadcast_views_reduce_like_their_copies,
    softmax_special_rows_follow_pytorch => softmax_special_rows_follow_pytorch,
    nan_propagates_and_arg_reductions_find_the_first_nan => nan_propagates_and_arg_reductions_find_the_first_nan,
    integer_sums_wrap => integer_sums_wrap,
    empty_tensors_sum_to_zero_and_average_to_nan => empty_tensors_sum_to_zero_and_average_to_nan,
    scalars_reduce_to_themselves => scalars_reduce_to_themselves,
    axis_errors_name_op_shape_and_device => axis_errors_name_op_shape_and_device,
    empty_reductions_without_identity_are_shape_errors => empty_reductions_without_identity_are_shape_errors,
}

device_tests_vs_cpu! {
    large_f32_sum_is_accurate => large_f32_sum_is_accurate, Family::Reduction;
    large_cumsum_sums_each_line_in_order => large_cumsum_sums_each_line_in_order, Family::Exact;
}
