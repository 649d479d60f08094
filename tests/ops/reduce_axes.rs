//! Reductions over several axes at once (`sum_axis([2, 3])`, `amax`,
//! `logsumexp`, `var_axis`, `vector_norm_axis`, `count_nonzero_axis`,
//! `all_axis`, ...) and the
//! products, against plain `f64` loops that group the elements by their
//! output position: random shapes of rank 0 to 4 (empty ones included),
//! random sets of axes written in any order and either sign (the empty set
//! is every axis), strided views, four element types and special values;
//! and their gradients against finite differences.
//!
//! Accuracy checked: float sums and `logsumexp` within `tol * (1 + sum |x|)`
//! (`tol` 1e-13 for `f64`, 2e-6 for `f32`), products within `tol` of the
//! product's magnitude; extremes, counts, masks and integer results exact.

use crate::common::*;
use devtensor::autograd::{GradOptions, grad};
use devtensor::{Device, Element, Error, FloatElement, Tensor};
use proptest::prelude::*;

/// The axes a case reduces, as written (`mask` picks them, `signs` writes
/// some from the end, odd masks list them backwards), and the same axes
/// resolved (every axis for an empty list).
fn chosen_axes(rank: usize, mask: u8, signs: u8) -> (Vec<isize>, Vec<bool>) {
    let mut written: Vec<isize> = (0..rank)
        .filter(|a| mask >> a & 1 == 1)
        .map(|a| if signs >> a & 1 == 1 { a as isize - rank as isize } else { a as isize })
        .collect();
    if mask & 1 == 1 {
        written.reverse();
    }
    let reduced = (0..rank).map(|a| written.is_empty() || mask >> a & 1 == 1).collect();
    (written, reduced)
}

/// The elements grouped by output position (row-major over the kept axes),
/// and the output's dims with the reduced axes removed or kept.
fn groups(x: &[f64], dims: &[usize], reduced: &[bool], keepdim: bool) -> (Vec<usize>, Vec<Vec<f64>>) {
    let out: Vec<usize> = dims.iter().zip(reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let mut groups = vec![Vec::new(); out.iter().product()];
    for index in indices(dims) {
        let at: Vec<usize> = index.iter().zip(reduced).map(|(&i, &r)| if r { 0 } else { i }).collect();
        groups[ravel(&at, &out)].push(x[ravel(&index, dims)]);
    }
    let dims = dims.iter().zip(reduced).filter(|&(_, &r)| keepdim || !r).map(|(&d, &r)| if r { 1 } else { d });
    (dims.collect(), groups)
}

/// `E`'s sum and product of a group: wrapping in `i64` for integers (which
/// reduce into `i64`, as PyTorch's do), in `f64` for floats.
fn fold<E: Element>(group: &[f64], product: bool) -> f64 {
    if E::IS_FLOAT {
        return if product { group.iter().product() } else { group.iter().sum() };
    }
    let ints = group.iter().map(|&v| v as i64);
    (if product { ints.fold(1i64, i64::wrapping_mul) } else { ints.fold(0i64, i64::wrapping_add) }) as f64
}

fn extreme(group: &[f64], max: bool) -> f64 {
    if group.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    group
        .iter()
        .copied()
        .fold(if max { f64::NEG_INFINITY } else { f64::INFINITY }, if max { f64::max } else { f64::min })
}

/// `log(sum(exp(x)))` as PyTorch defines it at the edges: `-inf` for no
/// elements or only `-inf`, `+inf` with a `+inf` (and no NaN).
fn logsumexp(group: &[f64]) -> f64 {
    let m = extreme(group, true);
    if group.is_empty() || m.is_infinite() || m.is_nan() {
        return if group.is_empty() { f64::NEG_INFINITY } else { m };
    }
    m + group.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// `torch.linalg.vector_norm` of a group, from its definition.
fn reference_norm(group: &[f64], ord: f64) -> f64 {
    let magnitudes = group.iter().map(|v| v.abs());
    if ord == 0.0 {
        return group.iter().filter(|&&v| v != 0.0).count() as f64; // NaN counts
    }
    if group.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    match ord {
        f64::INFINITY => magnitudes.fold(0.0, f64::max),
        f64::NEG_INFINITY => magnitudes.fold(f64::INFINITY, f64::min),
        _ => magnitudes.map(|m| m.powf(ord)).sum::<f64>().powf(1.0 / ord),
    }
}

fn variance(group: &[f64], correction: usize) -> f64 {
    let mean = group.iter().sum::<f64>() / group.len() as f64;
    group.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / group.len().saturating_sub(correction) as f64
}

fn same(got: f64, want: f64, scale: f64, tol: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= tol * (1.0 + scale)
}

fn agree(what: &str, got: &[f64], want: &[f64], scales: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scales).enumerate() {
        assert!(same(g, w, s, tol), "{what}[{i}]: got {g}, expected {w}");
    }
}

/// One case: the tensor, the axes as written, and the reference's groups.
struct Case<D: Device, E: Element> {
    t: Tensor<D, E>,
    x: Vec<f64>,
    axes: Vec<isize>,
    reduced: Vec<bool>,
    label: String,
    out_dims: Vec<usize>,
    groups: Vec<Vec<f64>>,
    /// Each group's sum of finite magnitudes: the scale of its tolerance.
    abs: Vec<f64>,
}

impl<D: Device, E: Element> Case<D, E> {
    fn new(dims: &[usize], vals: &[f64], variant: Variant, mask: u8, signs: u8, keepdim: bool) -> Self {
        let data: Vec<E> = cast_all(vals);
        let x = as_f64(&data);
        let t = tensor_with::<D, E>(&data, dims, variant);
        let (axes, reduced) = chosen_axes(dims.len(), mask, signs);
        let (out_dims, groups) = groups(&x, dims, &reduced, keepdim);
        let abs = groups.iter().map(|g| g.iter().map(|v| v.abs()).filter(|v| v.is_finite()).sum()).collect();
        let label = format!("({axes:?}, keepdim {keepdim}) of {dims:?} {variant:?}");
        Case { t, x, axes, reduced, label, out_dims, groups, abs }
    }

    /// `f` of each group.
    fn of(&self, f: &dyn Fn(&[f64]) -> f64) -> Vec<f64> {
        self.groups.iter().map(|g| f(g)).collect()
    }

    fn what(&self, op: &str) -> String {
        format!("{op}{}", self.label)
    }
}

/// Every reduction over `axes` of one tensor of `E`, against the groups.
fn check_axes<D: Device, E: Element>(
    dims: &[usize],
    vals: &[f64],
    variant: Variant,
    mask: u8,
    signs: u8,
    keepdim: bool,
) {
    let case = Case::<D, E>::new(dims, vals, variant, mask, signs, keepdim);
    let Case { t, x, axes, reduced, out_dims, abs, .. } = &case;
    let tol = if E::DTYPE == devtensor::DType::F32 { 2e-6 } else { 1e-13 };
    let tol = if E::IS_FLOAT { tol } else { 0.0 };
    let of = |f: &dyn Fn(&[f64]) -> f64| case.of(f);
    let what = |op: &str| case.what(op);

    let sum = if keepdim { t.sum_keepdim(&axes[..]) } else { t.sum_axis(&axes[..]) };
    assert_eq!(sum.dims(), out_dims.as_slice(), "{}", what("sum"));
    agree(&what("sum"), &as_f64(&sum.to_vec()), &of(&|g| fold::<E>(g, false)), abs, tol);

    let counts = of(&|g| g.iter().filter(|&&v| v != 0.0).count() as f64);
    let count = t.count_nonzero_axis(&axes[..]);
    agree(&what("count_nonzero"), &as_f64(&count.to_vec()), &counts, abs, 0.0);
    let (all, any) = match keepdim {
        true => (t.all_keepdim(&axes[..]), t.any_keepdim(&axes[..])),
        false => (t.all_axis(&axes[..]), t.any_axis(&axes[..])),
    };
    assert_eq!(all.dims(), out_dims.as_slice());
    let sizes = of(&|g| g.len() as f64);
    let all_want: Vec<f64> = counts.iter().zip(&sizes).map(|(c, n)| f64::from(u8::from(c == n))).collect();
    agree(&what("all"), &as_f64(&all.to_vec()), &all_want, abs, 0.0);
    let any_want: Vec<f64> = counts.iter().map(|&c| f64::from(u8::from(c > 0.0))).collect();
    agree(&what("any"), &as_f64(&any.to_vec()), &any_want, abs, 0.0);

    let empty_group = (0..dims.len()).any(|a| reduced[a] && dims[a] == 0);
    for (max, op) in [(true, "amax"), (false, "amin")] {
        let got = match (max, keepdim) {
            (true, false) => t.try_amax(&axes[..]),
            (true, true) => t.try_amax_keepdim(&axes[..]),
            (false, false) => t.try_amin(&axes[..]),
            (false, true) => t.try_amin_keepdim(&axes[..]),
        };
        match got {
            Err(Error::Shape { reason, .. }) if empty_group => assert!(reason.contains("of size 0"), "{reason}"),
            Ok(got) if !empty_group => {
                assert_eq!(got.dims(), out_dims.as_slice());
                agree(&what(op), &as_f64(&got.to_vec()), &of(&|g| extreme(g, max)), abs, 0.0);
            }
            other => panic!("{}: {other:?}", what(op)),
        }
    }

    // `prod` takes one axis, as PyTorch's does.
    let product_scale = |g: &[f64]| g.iter().map(|v| v.abs()).product::<f64>();
    let prod = t.prod();
    let all_axes = vec![true; dims.len()];
    let whole = self::groups(x, dims, &all_axes, false).1;
    let scales: Vec<f64> = whole.iter().map(|g| product_scale(g)).collect();
    agree("prod", &as_f64(&prod.to_vec()), &whole.iter().map(|g| fold::<E>(g, true)).collect::<Vec<_>>(), &scales, tol);
    for axis in 0..dims.len() {
        let one: Vec<bool> = (0..dims.len()).map(|a| a == axis).collect();
        let (one_dims, lines) = self::groups(x, dims, &one, keepdim);
        let a = axis as isize - if signs & 1 == 1 { dims.len() as isize } else { 0 };
        let got = if keepdim { t.prod_keepdim(a) } else { t.prod_axis(a) };
        assert_eq!(got.dims(), one_dims.as_slice());
        let scales: Vec<f64> = lines.iter().map(|g| product_scale(g)).collect();
        let want: Vec<f64> = lines.iter().map(|g| fold::<E>(g, true)).collect();
        agree(&format!("prod_axis({a})"), &as_f64(&got.to_vec()), &want, &scales, tol);
    }
}

/// The float-only reductions over `axes`: mean, var, std and logsumexp.
fn check_float_axes<D: Device, E: FloatElement>(
    dims: &[usize],
    vals: &[f64],
    variant: Variant,
    mask: u8,
    signs: u8,
    keepdim: bool,
) {
    let case = Case::<D, E>::new(dims, vals, variant, mask, signs, keepdim);
    let Case { t, axes, reduced, out_dims, groups, abs, .. } = &case;
    let tol = if E::DTYPE == devtensor::DType::F32 { 1e-5 } else { 1e-12 };
    let of = |f: &dyn Fn(&[f64]) -> f64| case.of(f);
    let what = |op: &str| case.what(op);
    let check = |op: &str, got: Tensor<D, E>, want: Vec<f64>, scales: &[f64]| {
        assert_eq!(got.dims(), out_dims.as_slice(), "{}", what(op));
        agree(&what(op), &as_f64(&got.to_vec()), &want, scales, tol);
    };
    let mean = if keepdim { t.mean_keepdim(&axes[..]) } else { t.mean_axis(&axes[..]) };
    let means = of(&|g| g.iter().sum::<f64>() / g.len() as f64);
    let scaled: Vec<f64> = abs.iter().zip(groups.iter()).map(|(a, g)| a / g.len().max(1) as f64).collect();
    check("mean", mean, means, &scaled);
    let lse = if keepdim { t.logsumexp_keepdim(&axes[..]) } else { t.logsumexp(&axes[..]) };
    check("logsumexp", lse, of(&logsumexp), abs);
    for ord in [2.0, 1.0, 3.0, 0.5, 0.0, f64::INFINITY, f64::NEG_INFINITY, -1.0] {
        let got = match keepdim {
            true => t.try_vector_norm_keepdim(ord, &axes[..]),
            false => t.try_vector_norm_axis(ord, &axes[..]),
        };
        let empty_axis = (0..dims.len()).any(|a| reduced[a] && dims[a] == 0);
        let undefined = (ord < 0.0 || ord == f64::INFINITY) && empty_axis;
        match got {
            Err(Error::Shape { reason, .. }) if undefined => assert!(reason.contains("over no elements"), "{reason}"),
            Ok(got) if !undefined => {
                let want = of(&|g| reference_norm(g, ord));
                let scales: Vec<f64> = want.iter().map(|v| v.abs()).collect();
                check(&format!("vector_norm {ord}"), got, want, &scales);
            }
            other => panic!("{}: {other:?}", what(&format!("vector_norm {ord}"))),
        }
    }
    for correction in 0..2 {
        let var = if keepdim { t.var_keepdim(&axes[..], correction) } else { t.var_axis(&axes[..], correction) };
        let want = of(&|g| variance(g, correction));
        let scales: Vec<f64> = want.iter().map(|v| v.abs()).collect();
        check("var", var, want.clone(), &scales);
        let std = if keepdim { t.std_keepdim(&axes[..], correction) } else { t.std_axis(&axes[..], correction) };
        check("std", std, want.iter().map(|v| v.sqrt()).collect(), &scales);
    }
}

/// Values of `value()` with NaN and infinities mixed in.
fn special_value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![12 => value(), 1 => Just(f64::NAN), 1 => Just(f64::INFINITY), 1 => Just(f64::NEG_INFINITY)]
}

/// Plain values, a third of them integers (ties, zeros and exact products).
fn value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![2 => -3.0..3.0f64, 1 => (-3i32..=3).prop_map(f64::from)]
}

/// A shape of rank 0..=4 (dimensions 0..=4) and data for it.
fn shaped(values: impl Strategy<Value = f64> + Clone + 'static) -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    shape_maybe_empty(4, 4).prop_flat_map(move |dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(values.clone(), len))
    })
}

device_proptests! {
    cases = 64;

    fn reductions_over_axes_match_plain_loops<D>(
        (dims, vals) in shaped(special_value()),
        v in variant(),
        mask in any::<u8>(),
        signs in any::<u8>(),
        keepdim in any::<bool>(),
    ) {
        check_axes::<D, f64>(&dims, &vals, v, mask, signs, keepdim);
        check_axes::<D, f32>(&dims, &vals, v, mask, signs, keepdim);
        check_float_axes::<D, f64>(&dims, &vals, v, mask, signs, keepdim);
        check_float_axes::<D, f32>(&dims, &vals, v, mask, signs, keepdim);
        let ints: Vec<f64> = vals.iter().map(|v| if v.is_finite() { (v * 40.0).round() } else { 7.0 }).collect();
        check_axes::<D, i64>(&dims, &ints, v, mask, signs, keepdim);
        let bytes: Vec<f64> = ints.iter().map(|v| v.abs().min(255.0)).collect();
        check_axes::<D, u8>(&dims, &bytes, v, mask, signs, keepdim);
    }

    /// Gradients over several axes against central differences: the sums,
    /// means, spreads and `logsumexp` anywhere, `amax`/`amin` away from
    /// ties, `prod` along each axis and whole (with zeros among the
    /// elements in the next test).
    fn reductions_over_axes_have_the_gradients_of_finite_differences<D>(
        (dims, vals) in gradcheck::inputs(3, 3, gradcheck::Values::Distinct),
        mask in any::<u8>(),
        signs in any::<u8>(),
    ) {
        let x = Tensor::<D, f64>::from_vec(vals, dims.clone());
        let (axes, _) = chosen_axes(dims.len(), mask, signs);
        let count: usize = if axes.is_empty() { x.elem_count() } else { axes.iter().map(|&a| dims[a.rem_euclid(dims.len() as isize) as usize]).product() };
        let xs = std::slice::from_ref(&x);
        gradcheck::gradcheck("sum_keepdim", xs, |xs| xs[0].sum_keepdim(&axes[..]));
        gradcheck::gradcheck("mean_axis", xs, |xs| xs[0].mean_axis(&axes[..]));
        gradcheck::gradcheck("logsumexp", xs, |xs| xs[0].logsumexp(&axes[..]));
        gradcheck::gradcheck("amax", xs, |xs| xs[0].amax(&axes[..]));
        gradcheck::gradcheck("amin_keepdim", xs, |xs| xs[0].amin_keepdim(&axes[..]));
        if count > 1 {
            gradcheck::gradcheck("std_axis", xs, |xs| xs[0].std_axis(&axes[..], 1));
            gradcheck::gradcheck("var_keepdim", xs, |xs| xs[0].var_keepdim(&axes[..], 0));
        }
        gradcheck::gradcheck("vector_norm_axis", xs, |xs| xs[0].vector_norm_axis(2.0, &axes[..]));
        gradcheck::gradcheck("vector_norm_keepdim", xs, |xs| xs[0].vector_norm_keepdim(3.0, &axes[..]));
        gradcheck::gradcheck("vector_norm", xs, |xs| xs[0].vector_norm(1.5));
        gradcheck::gradcheck("prod", xs, |xs| xs[0].prod());
        for axis in 0..dims.len() as isize {
            gradcheck::gradcheck("prod_axis", xs, |xs| xs[0].prod_axis(axis));
            gradcheck::gradcheck("prod_keepdim", xs, |xs| xs[0].prod_keepdim(axis - dims.len() as isize));
        }
    }

    /// Second derivatives over several axes (`create_graph`) against
    /// central differences of the first, on distinct values shifted off
    /// zero, where the norms and spreads are smooth.
    fn reductions_over_axes_have_second_derivatives<D>(
        (dims, vals) in gradcheck::inputs(3, 3, gradcheck::Values::Distinct),
        mask in any::<u8>(),
        signs in any::<u8>(),
    ) {
        let vals: Vec<f64> = vals.iter().map(|v| v + 0.0625).collect();
        let x = Tensor::<D, f64>::from_vec(vals, dims.clone());
        let (axes, _) = chosen_axes(dims.len(), mask, signs);
        let count: usize = if axes.is_empty() { x.elem_count() } else { axes.iter().map(|&a| dims[a.rem_euclid(dims.len() as isize) as usize]).product() };
        let xs = std::slice::from_ref(&x);
        gradcheck::gradgradcheck("sum_keepdim", xs, |xs| xs[0].sum_keepdim(&axes[..]).square());
        gradcheck::gradgradcheck("mean_axis", xs, |xs| xs[0].mean_axis(&axes[..]).square());
        gradcheck::gradgradcheck("logsumexp", xs, |xs| xs[0].logsumexp(&axes[..]));
        gradcheck::gradgradcheck("amax", xs, |xs| xs[0].amax(&axes[..]).square());
        gradcheck::gradgradcheck("amin_keepdim", xs, |xs| xs[0].amin_keepdim(&axes[..]).square());
        if count > 1 {
            gradcheck::gradgradcheck("std_axis", xs, |xs| xs[0].std_axis(&axes[..], 1));
            gradcheck::gradgradcheck("var_keepdim", xs, |xs| xs[0].var_keepdim(&axes[..], 0));
        }
        gradcheck::gradgradcheck("vector_norm_axis", xs, |xs| xs[0].vector_norm_axis(2.0, &axes[..]));
        gradcheck::gradgradcheck("vector_norm_keepdim", xs, |xs| xs[0].vector_norm_keepdim(3.0, &axes[..]));
        gradcheck::gradgradcheck("vector_norm", xs, |xs| xs[0].vector_norm(1.5));
        gradcheck::gradgradcheck("prod", xs, |xs| xs[0].prod());
        for axis in 0..dims.len() as isize {
            gradcheck::gradgradcheck("prod_axis", xs, |xs| xs[0].prod_axis(axis));
            gradcheck::gradgradcheck("prod_keepdim", xs, |xs| xs[0].prod_keepdim(axis - dims.len() as isize));
        }
    }
}

/// `prod`'s gradient with zeros on a line: the product of the others
/// (nonzero only at a lone zero), where `prod / x` would divide by 0; and
/// `amax`'s, shared evenly by tied elements across several axes.
fn prod_with_zeros_and_amax_with_ties<D: Device>() {
    let x = Tensor::<D, f64>::from_vec(vec![0.0, 2.0, 3.0, 0.0, 0.0, 5.0, 4.0, -1.0, 2.0], [3, 3]).requires_grad();
    let g = x.prod_axis(1).sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![6.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 8.0, -4.0]);
    let g = x.prod().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0; 9]);
    // Its second derivative, exact at the zeros too: on the line
    // [0, 2, 3] the Hessian's off-diagonal entries are the third
    // elements (3, 2 and 0), so its product with ones is [5, 3, 2].
    let line = Tensor::<D, f64>::from_vec(vec![0.0, 2.0, 3.0], [3]).requires_grad();
    let [first] = grad(&[&line.prod()], [&line], GradOptions::new().create_graph(true));
    assert_eq!(first.to_vec(), vec![6.0, 0.0, 0.0]);
    let [hvp] = grad(&[&first.sum()], [&line], GradOptions::new());
    assert_eq!(hvp.to_vec(), vec![5.0, 3.0, 2.0]);
    let y = Tensor::<D, f64>::from_vec(vec![1.0, 5.0, 5.0, 2.0, 5.0, 0.0, 3.0, 4.0], [2, 2, 2]).requires_grad();
    let g = y.amax([0, 2]).sum().backward();
    // Over axes 0 and 2 the groups are {1, 5, 5, 0} (flat 0, 1, 4, 5)
    // and {5, 2, 3, 4} (flat 2, 3, 6, 7).
    assert_eq!(g.get(&y).unwrap().to_vec(), vec![0.0, 0.5, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0]);
}

/// Axis errors name the operation, the shape and the axes.
fn axis_errors_name_the_axes<D: Device>() {
    let x = Tensor::<D>::zeros([2, 0, 3]);
    let err = x.try_sum_axis([1, -2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("sum_axis on {}: shape [2, 0, 3]: axis 1 appears more than once in the axes [1, -2]", D::name())
    );
    let err = x.try_amax([0, 3]).unwrap_err();
    assert!(matches!(err, Error::Axis { op: "amax", axis: 3, .. }), "{err}");
    let err = x.try_amax([0, 1]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("amax on {}: shape [2, 0, 3]: amax over axis 1 of size 0 is undefined", D::name())
    );
    assert_eq!(x.logsumexp([1]).to_vec(), vec![f32::NEG_INFINITY; 6]);
    assert_eq!(x.prod_axis(1).to_vec(), vec![1.0; 6]);
    assert_eq!(x.all_axis(1).to_vec(), vec![1; 6]);
}

device_tests! {
    prod_gradient_with_zeros_and_amax_ties => prod_with_zeros_and_amax_with_ties,
    reduction_axis_errors => axis_errors_name_the_axes,
}
