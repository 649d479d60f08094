//! `median`, `nanmedian`, `quantile` and `nanquantile` against a plain
//! sort of each line, on random shapes, layouts and axes, with ties and
//! NaN; the gradient by finite differences on distinct values; the errors.
//! PyTorch's values are checked in `pytorch.rs`.

use crate::common::*;
use devtensor::ops::reduce::QuantileInterpolation;
use devtensor::{Device, Tensor};
use proptest::prelude::*;

const INTERPOLATIONS: [QuantileInterpolation; 5] = [
    QuantileInterpolation::Lerp,
    QuantileInterpolation::Lower,
    QuantileInterpolation::Higher,
    QuantileInterpolation::Midpoint,
    QuantileInterpolation::Nearest,
];

/// The lines of `data` (shape `dims`) along `axis`, each as its elements
/// with their positions on the axis, in the order of the other axes.
fn lines(data: &[f64], dims: &[usize], axis: usize) -> Vec<Vec<(f64, usize)>> {
    let mut outer = dims.to_vec();
    outer[axis] = 1;
    indices(&outer)
        .map(|p| {
            (0..dims[axis])
                .map(|k| {
                    let mut q = p.clone();
                    q[axis] = k;
                    (data[ravel(&q, dims)], k)
                })
                .collect()
        })
        .collect()
}

/// A line sorted as devtensor sorts: stable, NaN after every number.
fn sorted(line: &[(f64, usize)]) -> Vec<(f64, usize)> {
    let mut s = line.to_vec();
    s.sort_by(|a, b| match (a.0.is_nan(), b.0.is_nan()) {
        (false, false) => a.0.partial_cmp(&b.0).unwrap(),
        (x, y) => x.cmp(&y),
    });
    s
}

/// The median and its position, written out (see `Tensor::median_axis`).
fn median_of(line: &[(f64, usize)], ignore_nan: bool) -> (f64, usize) {
    let s = sorted(line);
    let numbers = s.iter().filter(|v| !v.0.is_nan()).count();
    let at = match (ignore_nan, numbers) {
        (true, 0) => (s.len() - 1) / 2,
        (true, k) => (k - 1) / 2,
        (false, k) if k < s.len() => k,
        (false, _) => (s.len() - 1) / 2,
    };
    s[at]
}

/// The `q`-quantile of a line, written out from its definition.
fn quantile_of(line: &[(f64, usize)], q: f64, how: QuantileInterpolation, ignore_nan: bool) -> f64 {
    let s: Vec<f64> = sorted(line).iter().map(|v| v.0).collect();
    let numbers = s.iter().filter(|v| !v.is_nan()).count();
    let last = (s.len() - 1) as f64;
    let rank = if ignore_nan && numbers > 0 {
        q * (numbers - 1) as f64
    } else if numbers == s.len() {
        q * last
    } else {
        last
    };
    let (lo, hi) = (s[rank.floor() as usize], s[rank.ceil() as usize]);
    let w = rank - rank.floor();
    match how {
        QuantileInterpolation::Lower => lo,
        QuantileInterpolation::Higher => hi,
        QuantileInterpolation::Nearest => s[rank.round_ties_even() as usize],
        QuantileInterpolation::Midpoint => lo + 0.5 * (hi - lo),
        // `torch.lerp`'s definition: from `hi` backwards for weights of 0.5 and more.
        QuantileInterpolation::Lerp if w < 0.5 => lo + w * (hi - lo),
        QuantileInterpolation::Lerp => hi - (hi - lo) * (1.0 - w),
    }
}

fn check_order_statistics<D: Device>(dims: &[usize], axis: usize, seed: u64, layout: Variant) {
    let n: usize = dims.iter().product();
    // Few distinct values (ties), and NaN now and then.
    let data: Vec<f64> = (0..n as u64)
        .map(|i| {
            let h = (seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 40;
            if h.is_multiple_of(11) { f64::NAN } else { (h % 7) as f64 - 3.0 }
        })
        .collect();
    let x = tensor_with::<D, f64>(&data, dims, layout);
    let a = axis as isize;
    if dims[axis] == 0 {
        assert!(x.try_median_axis(a).is_err());
        assert!(x.try_quantile(0.5, Some(a), false, QuantileInterpolation::Lerp).is_err());
        return;
    }
    let same = |got: &[f64], want: &[f64], what: &str| {
        assert!(
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| g == w || (g.is_nan() && w.is_nan())),
            "{what} of {dims:?} along {axis}: {got:?}, expected {want:?}"
        );
    };
    for ignore_nan in [false, true] {
        let (values, positions) = if ignore_nan { x.nanmedian_axis(a, false) } else { x.median_axis(a) };
        let want: Vec<(f64, usize)> = lines(&data, dims, axis).iter().map(|l| median_of(l, ignore_nan)).collect();
        same(&values.to_vec(), &want.iter().map(|w| w.0).collect::<Vec<_>>(), "median");
        assert_eq!(positions.to_vec(), want.iter().map(|w| w.1 as i64).collect::<Vec<_>>(), "median's positions");
        for how in INTERPOLATIONS {
            let qs = [0.0, 0.3, 0.5, 1.0];
            let got =
                if ignore_nan { x.nanquantile(qs, Some(a), true, how) } else { x.quantile(qs, Some(a), true, how) };
            let mut shape = vec![qs.len()];
            shape.extend(dims.iter().enumerate().map(|(d, &s)| if d == axis { 1 } else { s }));
            assert_eq!(got.dims(), shape.as_slice(), "quantile's shape");
            let want: Vec<f64> = qs
                .iter()
                .flat_map(|&q| lines(&data, dims, axis).into_iter().map(move |l| quantile_of(&l, q, how, ignore_nan)))
                .collect();
            same(&got.to_vec(), &want, "quantile");
        }
    }
    if n == 0 {
        assert!(x.try_median().is_err(), "the median of no elements");
        return;
    }
    let all: Vec<(f64, usize)> = data.iter().copied().zip(0..).collect();
    same(&[x.median().item()], &[median_of(&all, false).0], "median of all");
    let q = x.quantile(0.75, None, false, QuantileInterpolation::Lerp);
    same(&[q.item()], &[quantile_of(&all, 0.75, QuantileInterpolation::Lerp, false)], "quantile of all");
    // Integers: the median moves values as they are.
    let ints = x.to_dtype::<i64>();
    let int_data: Vec<f64> = ints.to_vec().iter().map(|&v| v as f64).collect();
    let want: Vec<f64> = lines(&int_data, dims, axis).iter().map(|l| median_of(l, false).0).collect();
    same(&ints.median_axis(a).0.to_vec().iter().map(|&v| v as f64).collect::<Vec<_>>(), &want, "i64 median");

    if D::name() == "Cpu" && n <= 40 {
        // Distinct values: no tie moves the chosen element under a small step.
        let distinct: Vec<f64> = (0..n).map(|i| ((i * 37 + 11) % 97) as f64 * 0.1).collect();
        let xs = &[tensor_with::<D, f64>(&distinct, dims, layout)];
        gradcheck::gradcheck("median", xs, |xs| xs[0].median_axis(a).0);
        for how in INTERPOLATIONS {
            gradcheck::gradcheck("quantile", xs, |xs| xs[0].quantile([0.2, 0.65], Some(a), false, how));
        }
        gradcheck::gradgradcheck("quantile", xs, |xs| {
            xs[0].quantile(0.4, Some(a), false, QuantileInterpolation::Lerp).square()
        });
    }
}

device_proptests! {
    cases = 48;

    fn order_statistics_match_plain_sorting<D>(
        (dims, axis) in prop::collection::vec(0..=5usize, 1..=3).prop_flat_map(|d| { let r = d.len(); (Just(d), 0..r) }),
        seed in any::<u64>(),
        v in variant(),
    ) {
        check_order_statistics::<D>(&dims, axis, seed, v);
    }
}

fn check_order_statistic_errors<D: Device>() {
    let x = Tensor::<D, f64>::zeros([2, 0]);
    let message = |e: devtensor::Error| e.to_string().replace(&D::name(), "D");
    assert_eq!(
        message(x.try_median_axis(1).unwrap_err()),
        "median on D: shape [2, 0]: axis 1 is empty: an order statistic needs at least one element"
    );
    assert_eq!(
        message(
            Tensor::<D, f64>::zeros([3])
                .try_quantile([0.5, -0.1], None, false, QuantileInterpolation::Lerp)
                .unwrap_err()
        ),
        "quantile on D: q must be in [0, 1], got -0.1"
    );
    assert!(Tensor::<D, f64>::zeros([3]).try_quantile(f64::NAN, None, false, QuantileInterpolation::Lerp).is_err());
    // Half types widen to f32 (PyTorch takes f32 and f64 only).
    let h = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 4.0], [3]).to_dtype::<devtensor::bf16>();
    assert_eq!(h.quantile(0.75, None, false, QuantileInterpolation::Lerp).to_dtype::<f64>().item(), 3.0);
}

device_tests! {
    order_statistic_errors_name_the_problem => check_order_statistic_errors,
}
