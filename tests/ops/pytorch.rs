//! PyTorch as a second reference for the element-wise op tables (issue 35).
//! The tables check each row against a plain `f64` loop and finite
//! differences; these checks hold the same rows to PyTorch 2.15's own
//! results, saved by `tests/fixtures/pytorch/make_op_fixtures.py` in
//! `ops.safetensors`: outputs in `f64` and `f32` on ordinary and IEEE
//! special inputs (signed zeros included), gradients at points that include
//! the kinks and ties where PyTorch's convention is the thing tested, and
//! `i64` results with their wrapping. The unary table and the binary
//! gradient table call [`unary_row`] and [`binary_row`] for every row, so a
//! row without PyTorch's results fails.
//!
//! Deliberate differences are listed in [`DELIBERATE`], each with the reason
//! and the test that pins devtensor's behaviour.

use devtensor::io::Checkpoint;
use devtensor::ops::index::{ScatterReduce, Slice};
use devtensor::ops::reduce::QuantileInterpolation;
use devtensor::{Cpu, Device, Ellipsis, NewAxis, SliceStep, Tensor};

/// Where devtensor differs from PyTorch on purpose: `(row, inputs, why)`.
/// A difference of that row is accepted only at a first input for which
/// `inputs` holds; any other difference still fails.
const DELIBERATE: &[(&str, fn(f64) -> bool, &str)] = &[
    (
        "unary.hardsigmoid",
        |x| x > -3.0 && x < 3.0,
        "PyTorch's hardsigmoid gradient multiplies by 1/6 rounded to f32 (0.1666666716337204) in every \
         dtype, so its f64 gradient is off by 3e-8 relative; devtensor divides by 6 (the table's finite \
         differences check it)",
    ),
    (
        "unary.gelu",
        |x| x <= -2.0 || x.abs() > 1e38,
        "PyTorch computes x/2 (1 + erf(x/sqrt 2)), which cancels for negative x (f32 gelu(-3.5) is off by \
         1.6e-4 relative, f64 by 6e-14); devtensor takes Phi from erfc and keeps the digits (the table's \
         f64 reference checks it). PyTorch's f32 gelu(inf) is NaN; devtensor's is inf, the limit",
    ),
    (
        "unary.gelu_tanh",
        |x| x <= -2.0,
        "PyTorch's 1 + tanh(u) cancels for negative x (f32 gelu_tanh(-3.5) off by 8e-5 relative); \
         devtensor computes it as 2 sigmoid(2u) and keeps the digits",
    ),
    (
        "shape.quantile_nan",
        f64::is_nan,
        "a line with a NaN has the quantile NaN, the last of its sorted values; which NaN that is, and so          which gets the gradient, falls out of PyTorch's unstable sort. devtensor's order is stable: the          last NaN of the line (`order_statistics_match_plain_sorting`)",
    ),
    ("shape.nanquantile", f64::is_nan, "as for quantile_nan, in the line of NaN alone"),
];

fn fixture() -> Checkpoint<Cpu, f64> {
    Checkpoint::load(format!("{}/tests/fixtures/pytorch/ops.safetensors", crate::common::REPO))
}

fn float<D: Device>(file: &Checkpoint<Cpu, f64>, name: &str) -> Tensor<D, f64> {
    let found = file.tensors().iter().find(|(n, _)| n == name);
    found.unwrap_or_else(|| panic!("PyTorch's results have no `{name}` (rerun make_op_fixtures.py)")).1.to::<D>()
}

fn int<D: Device>(file: &Checkpoint<Cpu, f64>, name: &str) -> Tensor<D, i64> {
    let found = file.int_tensors().iter().find(|(n, _)| n == name);
    found.unwrap_or_else(|| panic!("PyTorch's results have no `{name}` (rerun make_op_fixtures.py)")).1.to::<D>()
}

/// Where `got` differs from PyTorch's `want`, as (the first input there,
/// a description): NaN only against NaN, infinities exactly, zeros exactly
/// (with their sign when `signed_zeros`: results, not gradients, whose
/// zero's sign is an accident of the formula), other values within `rel`
/// of `want` (and a subnormal's distance of it).
fn differences(got: &[f64], want: &[f64], inputs: &[&[f64]], rel: f64, signed_zeros: bool) -> Vec<(f64, String)> {
    assert_eq!(got.len(), want.len());
    let mut out = Vec::new();
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || w == 0.0 {
            g == w && (!signed_zeros || g.is_sign_negative() == w.is_sign_negative())
        } else {
            (g - w).abs() <= rel * w.abs() + f64::from(f32::from_bits(1)) * rel
        };
        if !same {
            let at: Vec<String> = inputs.iter().map(|c| format!("{:e}", c[i])).collect();
            out.push((inputs[0][i], format!("at {}: {g:e}, PyTorch {w:e}", at.join(", "))));
        }
    }
    out
}

/// `got` with each element within `rel` of the largest of `want` replaced
/// by PyTorch's: an element that is a sum of products (a contraction, a
/// gradient summed over a broadcast axis) is added in another order than
/// PyTorch's, and where its terms cancel its rounding is relative to the
/// largest result, not to itself.
fn within_scale(got: &[f64], want: &[f64], rel: f64) -> Vec<f64> {
    let scale = want.iter().filter(|w| w.is_finite()).fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).map(|(&g, &w)| if (g - w).abs() <= rel * scale { w } else { g }).collect()
}

fn report(row: &str, problems: Vec<(f64, String)>) {
    let allowed = DELIBERATE.iter().find(|(r, _, _)| *r == row).map(|(_, inputs, _)| *inputs);
    let problems: Vec<String> =
        problems.into_iter().filter(|(x, _)| !allowed.is_some_and(|inputs| inputs(*x))).map(|(_, d)| d).collect();
    assert!(problems.is_empty(), "{row} differs from PyTorch 2.15:\n  {}", problems.join("\n  "));
}

/// `problems` with `what` before each description.
fn labelled(what: &str, problems: Vec<(f64, String)>) -> impl Iterator<Item = (f64, String)> + '_ {
    problems.into_iter().map(move |(x, d)| (x, format!("{what}{d}")))
}

/// A row of the unary table (`call`, written for any element type) against
/// PyTorch: its `f64` and `f32` results and its `f64` gradient.
pub fn unary_row<D: Device>(
    row: &str,
    call64: impl Fn(&Tensor<D, f64>) -> Tensor<D, f64>,
    call32: impl Fn(&Tensor<D, f32>) -> Tensor<D, f32>,
) {
    let file = fixture();
    let p = format!("unary.{row}.");
    let x = float::<D>(&file, &format!("{p}x"));
    let xs = x.to_vec();
    let want = float::<D>(&file, &format!("{p}y")).to_vec();
    let mut problems = differences(&call64(&x).to_vec(), &want, &[&xs], 1e-14, true);
    let y32: Vec<f64> = call32(&x.to_dtype::<f32>()).to_vec().iter().map(|&v| f64::from(v)).collect();
    let want32 = float::<D>(&file, &format!("{p}y32")).to_vec();
    problems.extend(labelled("f32 ", differences(&y32, &want32, &[&xs], 4.0 * f64::from(f32::EPSILON), true)));
    let gx_in = float::<D>(&file, &format!("{p}gx_in")).requires_grad();
    let w = float::<D>(&file, &format!("{p}w"));
    let grads = (&call64(&gx_in) * &w).sum().backward();
    let gx = grads.get(&gx_in).map_or_else(|| vec![0.0; w.elem_count()], |g| g.to_vec());
    let want = float::<D>(&file, &format!("{p}gx")).to_vec();
    problems.extend(labelled("gradient ", differences(&gx, &want, &[&gx_in.to_vec()], 1e-13, false)));
    report(&format!("unary.{row}"), problems);
}

/// A row of the binary gradient table (`call`, on `f64` and `f32`) against
/// PyTorch: results on every pair of ordinary and special values, and both
/// gradients of a broadcast pair, `a` `[2, 3]` with `b` `[3]`.
pub fn binary_row<D: Device>(
    row: &str,
    call64: impl Fn(&Tensor<D, f64>, &Tensor<D, f64>) -> Tensor<D, f64>,
    call32: impl Fn(&Tensor<D, f32>, &Tensor<D, f32>) -> Tensor<D, f32>,
) {
    let file = fixture();
    let p = format!("binary.{row}.");
    let (a, b) = (float::<D>(&file, &format!("{p}a")), float::<D>(&file, &format!("{p}b")));
    let (av, bv) = (a.to_vec(), b.to_vec());
    let want = float::<D>(&file, &format!("{p}y")).to_vec();
    let mut problems = differences(&call64(&a, &b).to_vec(), &want, &[&av, &bv], 1e-14, true);
    let y32: Vec<f64> =
        call32(&a.to_dtype::<f32>(), &b.to_dtype::<f32>()).to_vec().iter().map(|&v| f64::from(v)).collect();
    let want32 = float::<D>(&file, &format!("{p}y32")).to_vec();
    problems.extend(labelled("f32 ", differences(&y32, &want32, &[&av, &bv], 4.0 * f64::from(f32::EPSILON), true)));
    let ga_in = float::<D>(&file, &format!("{p}ga_in")).requires_grad();
    let gb_in = float::<D>(&file, &format!("{p}gb_in")).requires_grad();
    let w = float::<D>(&file, &format!("{p}w"));
    let grads = (&call64(&ga_in, &gb_in) * &w).sum().backward();
    for (name, input, len) in [("a ", &ga_in, 6), ("b ", &gb_in, 3)] {
        let got = grads.get(input).map_or_else(|| vec![0.0; len], |g| g.to_vec());
        let want = float::<D>(&file, &format!("{p}g{}", name.trim())).to_vec();
        let found = differences(&got, &want, &[&input.to_vec()], 1e-13, false);
        problems.extend(labelled(&format!("gradient of {name}"), found));
    }
    report(&format!("binary.{row}"), problems);
}

/// A reduction row's call in `f64` and in `f32`.
type ReductionRow<D> = (&'static str, fn(&Tensor<D, f64>) -> Tensor<D, f64>, fn(&Tensor<D, f32>) -> Tensor<D, f32>);

macro_rules! reduction_rows {
    ($($name:ident: $call:expr;)*) => {
        [$((stringify!($name), { let c: fn(&Tensor<D, f64>) -> Tensor<D, f64> = $call; c }, {
            let c: fn(&Tensor<D, f32>) -> Tensor<D, f32> = $call;
            c
        })),*]
    };
}

/// The reductions along axis 1 of `[4, 5]` rows (NaN, infinities, ties)
/// against PyTorch, results and gradients: `max_axis` as `x.max(1).values`
/// (the gradient to the first of tied elements; `amax` would split it).
fn reductions<D: Device>() {
    check_reduction_rows::<D>(&reduction_rows! {
        sum_axis: |x| x.sum_axis(1);
        mean_axis: |x| x.mean_axis(1);
        max_axis: |x| x.max_axis(1);
        min_axis: |x| x.min_axis(1);
        var_axis: |x| x.var_axis(1, 1);
        std_axis: |x| x.std_axis(1, 1);
        softmax: |x| x.softmax(1);
        log_softmax: |x| x.log_softmax(1);
        cumsum: |x| x.cumsum(1);
        sum: |x| x.sum();
        max: |x| x.max();
    });
}

/// The reductions over several axes of `[2, 2, 5]` (the rows above,
/// stacked) against PyTorch: `amax` shares the gradient between ties,
/// `prod`'s gradient meets a zero; the counts and masks compared as floats
/// (their gradient is none, PyTorch's zeros).
fn reductions_over_axes<D: Device>() {
    check_reduction_rows::<D>(&reduction_rows! {
        sum_axes: |x| x.sum_axis([0, 2]);
        mean_keepdim_axes: |x| x.mean_keepdim([1, 2]);
        var_axes: |x| x.var_axis([0, 2], 1);
        std_keepdim_axes: |x| x.std_keepdim([-1, 0], 0);
        amax: |x| x.amax([0, 2]);
        amin_keepdim: |x| x.amin_keepdim(-1);
        logsumexp: |x| x.logsumexp([1, 2]);
        logsumexp_keepdim: |x| x.logsumexp_keepdim(0);
        prod_axis: |x| x.prod_axis(2);
        prod_all: |x| x.prod();
        count_nonzero: |x| x.count_nonzero_axis([0, 2]).to_dtype();
        all_axis: |x| x.all_axis(2).to_dtype();
        any_keepdim: |x| x.gt_scalar(1.0).any_keepdim([0, 1]).to_dtype();
        vector_norm_2_axes: |x| x.vector_norm_axis(2.0, [0, 2]);
        vector_norm_1_keepdim: |x| x.vector_norm_keepdim(1.0, -1);
        vector_norm_inf: |x| x.vector_norm_axis(f64::INFINITY, [1, 2]);
        vector_norm_neg_inf: |x| x.vector_norm_axis(f64::NEG_INFINITY, 0);
        vector_norm_0: |x| x.vector_norm_axis(0.0, 2);
        vector_norm_3_all: |x| x.vector_norm(3.0);
        cumprod: |x| x.cumprod(2);
        cumprod_first: |x| x.cumprod(0);
    });
}

fn check_reduction_rows<D: Device>(rows: &[ReductionRow<D>]) {
    let file = fixture();
    for &(row, call64, call32) in rows {
        let p = format!("reduce.{row}.");
        let x = float::<D>(&file, &format!("{p}x"));
        // The first input of each output is its row's first element.
        let firsts: Vec<f64> = x.to_vec().chunks(5).map(|r| r[0]).collect();
        let want = float::<D>(&file, &format!("{p}y")).to_vec();
        let at = |n: usize| -> Vec<f64> { (0..n).map(|i| firsts[(i * firsts.len() / n.max(1)).min(3)]).collect() };
        let inputs = at(want.len());
        let y = call64(&x);
        assert_eq!(y.dims(), float::<D>(&file, &format!("{p}y")).dims(), "reduce.{row}: shape");
        let mut problems = differences(&y.to_vec(), &want, &[&inputs], 1e-14, true);
        let y32: Vec<f64> = call32(&x.to_dtype::<f32>()).to_vec().iter().map(|&v| f64::from(v)).collect();
        let want32 = float::<D>(&file, &format!("{p}y32")).to_vec();
        problems.extend(labelled("f32 ", differences(&y32, &want32, &[&inputs], 8.0 * f64::from(f32::EPSILON), true)));
        let gx_in = float::<D>(&file, &format!("{p}gx_in")).requires_grad();
        let w = float::<D>(&file, &format!("{p}w"));
        let out = &call64(&gx_in) * &w;
        let gx = match out.tracks_grad() {
            true => out.sum().backward().get(&gx_in).map_or_else(|| vec![0.0; gx_in.elem_count()], |g| g.to_vec()),
            false => vec![0.0; gx_in.elem_count()],
        };
        let want = float::<D>(&file, &format!("{p}gx")).to_vec();
        problems.extend(labelled("gradient ", differences(&gx, &want, &[&gx_in.to_vec()], 1e-13, false)));
        report(&format!("reduce.{row}"), problems);
    }
}

/// An `i64` index tensor on `D`.
fn picks<D: Device>(values: &[i64], dims: &[usize]) -> Tensor<D, i64> {
    Tensor::from_slice(values, dims)
}

/// The probabilities of the quantile rows.
const PROBABILITIES: [f64; 5] = [0.0, 0.1, 0.5, 0.9, 1.0];

/// The `[4, 5]` mask of the subscript rows: `i * 7 % 3 == 0` in row-major order.
fn grid_mask<D: Device>() -> Tensor<D, u8> {
    Tensor::from_vec((0..20).map(|i| u8::from(i * 7 % 3 == 0)).collect(), [4, 5])
}

/// The scatter rows' index, `[2, 2, 3]`, with no repeat along axis 2.
fn scatter_line<D: Device>() -> Tensor<D, i64> {
    picks::<D>(&[4, 0, 2, 1, 3, 0, 0, 1, 2, 2, 4, 3], &[2, 2, 3])
}

/// The scatter_reduce rows' index, `[2, 5]`, with repeats along axis 1.
fn scatter_groups<D: Device>() -> Tensor<D, i64> {
    picks::<D>(&[0, 2, 0, 0, 3, 1, 1, 1, 4, 1], &[2, 5])
}

/// `(row, op)` pairs of the index, order and product rows: each op takes
/// the row's inputs `a`, `b`, `c` (as many as it has).
macro_rules! shape_rows {
    ($($name:ident: $call:expr;)*) => {
        [$((stringify!($name), { let c: fn(&[Tensor<D, f64>]) -> Tensor<D, f64> = $call; c })),*]
    };
}

/// The index, order and product ops (issue 60) against PyTorch on
/// `[2, 3, 4]` (and the products' own shapes): values, and the gradient of
/// `sum(y * w)` toward each input (an input that is not read, `addmm`'s
/// with `beta = 0`, has PyTorch's zeros). The NaN in `addmm_beta0`'s input
/// must not reach its result.
fn index_order_and_product_rows<D: Device>() {
    let rows = shape_rows! {
        flip: |x| x[0].flip([0, 2]);
        flip_last: |x| x[0].flip(-1);
        roll: |x| x[0].roll([1, -2], [1, 2]);
        roll_flat: |x| x[0].roll([5], ());
        roll_long: |x| x[0].roll([-7], 2);
        repeat_interleave: |x| x[0].repeat_interleave(2, 1);
        repeat_interleave_tensor: |x| x[0].repeat_interleave_tensor(&picks::<D>(&[1, 0, 3], &[3]), 1);
        unflatten: |x| x[0].unflatten(2, [2, -1]);
        take_along_dim: |x| x[0].take_along_dim(&picks::<D>(&[3, 0, 1, 1, 2, 0], &[1, 3, 2]), 2);
        take_along_dim_broadcast: |x| x[0].take_along_dim(&picks::<D>(&[1, 0], &[2, 1, 1]), 1);
        outer: |x| x[0].outer(&x[1]);
        dot: |x| x[0].dot(&x[1]);
        addmm: |x| x[0].addmm(&x[1], &x[2], 0.5, 2.0);
        addmm_plain: |x| x[0].addmm(&x[1], &x[2], 1.0, 1.0);
        addmm_beta0: |x| x[0].addmm(&x[1], &x[2], 0.0, -1.5);
        addmv: |x| x[0].addmv(&x[1], &x[2], -1.0, 0.5);
        baddbmm: |x| x[0].baddbmm(&x[1], &x[2], 0.25, 3.0);
        addbmm: |x| x[0].addbmm(&x[1], &x[2], 2.0, 0.5);
        normalize: |x| devtensor::nn::normalize(&x[0], 2.0, 1, 1e-12);
        normalize_l1_zero_row: |x| devtensor::nn::normalize(&x[0], 1.0, -1, 1e-12);
        cdist: |x| devtensor::nn::cdist(&x[0], &x[1], 2.0);
        cdist_l1: |x| devtensor::nn::cdist(&x[0], &x[1], 1.0);
        cdist_inf: |x| devtensor::nn::cdist(&x[0], &x[1], f64::INFINITY);
        cdist_3: |x| devtensor::nn::cdist(&x[0], &x[1], 3.0);
        masked_select: |x| x[0].masked_select(&Tensor::<D, u8>::from_vec((0..12).map(|i| u8::from(i * 7 % 3 == 0)).collect(), [3, 4]));
        i_last: |x| x[0].i((.., -1, ..));
        i_step: |x| x[0].i((.., (..).step(2)));
        i_slices: |x| x[0].i((-2.., Slice::new(1, -1).step(2), (..).step(3)));
        i_clipped: |x| x[0].i((-100..2, 3..100, Slice::new(4, 1)));
        i_ellipsis_newaxis: |x| x[0].i((NewAxis, Ellipsis, 0, NewAxis));
        i_tensor: |x| x[0].i(&picks::<D>(&[2, -1, 0, 2], &[4]));
        i_tensors_adjacent: |x| x[0].i((.., &picks::<D>(&[0, 3], &[2, 1]), &picks::<D>(&[1, -1, 2], &[3])));
        i_tensors_apart: |x| x[0].i((&picks::<D>(&[0, 2], &[2]), .., &picks::<D>(&[4, 1], &[2])));
        i_int_and_tensor: |x| x[0].i((1, .., &picks::<D>(&[0, 0, 3], &[3])));
        i_mask: |x| x[0].i((.., &grid_mask::<D>()));
        i_mask_and_tensor: |x| x[0].i((&picks::<D>(&[2, 0], &[2]), &grid_mask::<D>().i((.., 0))));
        i_empty: |x| x[0].i((.., &picks::<D>(&[], &[0])));
        put_slice: |x| x[0].index_put((.., 1..3), &x[1], false);
        put_step_broadcast: |x| x[0].index_put((.., .., (..).step(2)), &x[1], false);
        put_mask_scalar: |x| x[0].index_put(&grid_mask::<D>().expand([3, 4, 5]), &x[1], false);
        put_mask_values: |x| x[0].index_put((1, &grid_mask::<D>()), &x[1], false);
        put_tensors: |x| x[0].index_put((&picks::<D>(&[0, 2], &[2]), .., &picks::<D>(&[4, -4], &[2])), &x[1], false);
        put_accumulate: |x| x[0].index_put(&picks::<D>(&[2, 0, 2], &[3]), &x[1], true);
        put_accumulate_pairs: |x| x[0].index_put((&picks::<D>(&[1, 1, 0], &[3]), &picks::<D>(&[3, 3, 3], &[3])), &x[1], true);
        scatter: |x| x[0].scatter(2, &scatter_line::<D>(), &x[1]);
        scatter_scalar: |x| x[0].scatter_scalar(2, &scatter_line::<D>(), -1.5);
        scatter_reduce_sum: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Sum, true);
        scatter_reduce_sum_alone: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Sum, false);
        scatter_reduce_prod: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Product, true);
        scatter_reduce_prod_alone: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Product, false);
        scatter_reduce_mean: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Mean, true);
        scatter_reduce_mean_alone: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Mean, false);
        scatter_reduce_amax: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Amax, true);
        scatter_reduce_amax_alone: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Amax, false);
        scatter_reduce_amin: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Amin, true);
        einsum_bmm: |x| Tensor::einsum("bij,bjk->bik", &[&x[0], &x[1]]);
        einsum_attention: |x| Tensor::einsum("b h q d, b h k d -> b h q k", &[&x[0], &x[1]]);
        einsum_trace: |x| Tensor::einsum("ii", &[&x[0]]);
        einsum_diagonal: |x| Tensor::einsum("bii->bi", &[&x[0]]);
        einsum_transpose: |x| Tensor::einsum("ij->ji", &[&x[0]]);
        einsum_outer: |x| Tensor::einsum("i,j->ij", &[&x[0], &x[1]]);
        einsum_ellipsis: |x| Tensor::einsum("...ij,...jk->...ik", &[&x[0], &x[1]]);
        einsum_three: |x| Tensor::einsum("ijk,jl,lk->i", &[&x[0], &x[1], &x[2]]);
        einsum_bilinear: |x| Tensor::einsum("bn,anm,bm->ba", &[&x[0], &x[1], &x[2]]);
        einsum_implicit: |x| Tensor::einsum("kj,ji", &[&x[0], &x[1]]);
        einsum_broadcast_one: |x| Tensor::einsum("ij,jk", &[&x[0], &x[1]]);
        einsum_sum_ellipsis: |x| Tensor::einsum("...ij->ij", &[&x[0]]);
        median_all: |x| x[0].median();
        median_axis: |x| x[0].median_axis(1).0;
        median_keepdim: |x| x[0].median_keepdim(-1).0;
        median_nan: |x| x[0].median_axis(2).0;
        nanmedian_axis: |x| x[0].nanmedian_axis(2, false).0;
        nanmedian_all: |x| x[0].nanmedian();
        quantile_linear: |x| x[0].quantile(PROBABILITIES, Some(1), false, QuantileInterpolation::Lerp);
        quantile_all: |x| x[0].quantile(0.3, None, false, QuantileInterpolation::Lerp);
        quantile_lower: |x| x[0].quantile(PROBABILITIES, Some(-1), true, QuantileInterpolation::Lower);
        quantile_higher: |x| x[0].quantile(PROBABILITIES, Some(-1), true, QuantileInterpolation::Higher);
        quantile_midpoint: |x| x[0].quantile(PROBABILITIES, Some(-1), true, QuantileInterpolation::Midpoint);
        quantile_nearest: |x| x[0].quantile(PROBABILITIES, Some(-1), true, QuantileInterpolation::Nearest);
        quantile_nan: |x| x[0].quantile(0.25, Some(2), false, QuantileInterpolation::Lerp);
        nanquantile: |x| x[0].nanquantile(PROBABILITIES, Some(2), false, QuantileInterpolation::Lerp);
        scatter_reduce_amin_alone: |x| x[0].scatter_reduce(1, &scatter_groups::<D>(), &x[1], ScatterReduce::Amin, false);
    };
    let file = fixture();
    let has = |name: &str| file.tensors().iter().any(|(n, _)| n == name);
    for (row, call) in rows {
        let p = format!("shape.{row}.");
        let names: Vec<&str> = ["a", "b", "c"].into_iter().filter(|k| has(&format!("{p}{k}"))).collect();
        let inputs: Vec<Tensor<D, f64>> =
            names.iter().map(|k| float::<D>(&file, &format!("{p}{k}")).requires_grad()).collect();
        let y = call(&inputs);
        let want = float::<D>(&file, &format!("{p}y"));
        assert_eq!(y.dims(), want.dims(), "shape.{row}: shape");
        let firsts = vec![0.0; want.elem_count()];
        // Only a contraction's result is a sum of products added in another order.
        let got = if row.starts_with("einsum") { within_scale(&y.to_vec(), &want.to_vec(), 1e-14) } else { y.to_vec() };
        let mut problems = differences(&got, &want.to_vec(), &[&firsts], 1e-14, false);
        let grads = (&y * &float::<D>(&file, &format!("{p}w"))).sum().backward();
        for (k, x) in names.iter().zip(&inputs) {
            let got = grads.get(x).map_or_else(|| vec![0.0; x.elem_count()], |g| g.to_vec());
            let want = float::<D>(&file, &format!("{p}g{k}")).to_vec();
            let got = within_scale(&got, &want, 1e-13);
            problems
                .extend(labelled(&format!("gradient of {k} "), differences(&got, &want, &[&x.to_vec()], 1e-13, false)));
        }
        report(&format!("shape.{row}"), problems);
    }
}

/// The ops whose positions depend on the values (issue 60) against
/// PyTorch: `unique` with a NaN (its own value, last), its inverse and
/// counts; `bincount` with `minlength` and weights; `searchsorted` on rows
/// with ties, either side, and with one shared sequence; `nonzero` with
/// signed zeros, a NaN and a subnormal.
fn value_rows<D: Device>() {
    let file = fixture();
    let f = |name: &str| float::<D>(&file, &format!("value.{name}"));
    let i = |name: &str| int::<D>(&file, &format!("value.{name}")).to_vec();
    let same = |got: &[f64], want: &[f64]| {
        got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
    };
    let (values, inverse, counts) = f("unique.x").unique(true, true);
    assert!(same(&values.to_vec(), &f("unique.values").to_vec()), "unique: {:?}", values.to_vec());
    assert_eq!(inverse.unwrap().to_vec(), i("unique.inverse"), "unique's inverse");
    assert_eq!(counts.unwrap().to_vec(), i("unique.counts"), "unique's counts");
    let labels = int::<D>(&file, "value.bincount.x");
    assert_eq!(labels.bincount(7).to_vec(), i("bincount.y"), "bincount");
    assert_eq!(labels.bincount_weighted(&f("bincount.w"), 3).to_vec(), f("bincount.yw").to_vec(), "bincount (weights)");
    let (edges, queries) = (f("searchsorted.edges"), f("searchsorted.x"));
    assert_eq!(edges.searchsorted(&queries, false).to_vec(), i("searchsorted.left"), "searchsorted");
    assert_eq!(edges.searchsorted(&queries, true).to_vec(), i("searchsorted.right"), "searchsorted (right)");
    assert_eq!(
        edges.select(0, 0).searchsorted(&queries, false).to_vec(),
        i("searchsorted.left_1d"),
        "searchsorted (1-D)"
    );
    assert_eq!(f("nonzero.x").nonzero().to_vec(), i("nonzero.y"), "nonzero");
}

/// The integer rows: PyTorch's `i64` results, wrapping included (and its
/// `torch.div(.., rounding_mode=..)` for the two divisions).
fn integer_rows<D: Device>() {
    type I<D> = Tensor<D, i64>;
    let file = fixture();
    let unary: [(&str, fn(&I<D>) -> I<D>); 12] = [
        ("neg", |a| a.neg()),
        ("abs", |a| a.abs()),
        ("relu", |a| a.relu()),
        ("square", |a| a.square()),
        ("clamp", |a| a.clamp(-1, 1)),
        ("clamp_min", |a| a.clamp_min(-1)),
        ("clamp_max", |a| a.clamp_max(1)),
        ("floor", |a| a.floor()),
        ("ceil", |a| a.ceil()),
        ("round", |a| a.round()),
        ("trunc", |a| a.trunc()),
        ("sign", |a| a.sign()),
    ];
    let binary: [(&str, fn(&I<D>, &I<D>) -> I<D>); 9] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div_trunc", |a, b| a.div_trunc(b)),
        ("div_floor", |a, b| a.div_floor(b)),
        ("maximum", |a, b| a.maximum(b)),
        ("minimum", |a, b| a.minimum(b)),
        ("remainder", |a, b| a.remainder(b)),
        ("fmod", |a, b| a.fmod(b)),
    ];
    let mut problems = Vec::new();
    let check = |row: &str, got: Tensor<D, i64>, problems: &mut Vec<String>| {
        let want = int::<D>(&file, &format!("int.{row}.y")).to_vec();
        for (i, (g, w)) in got.to_vec().iter().zip(&want).enumerate() {
            if g != w {
                problems.push(format!("int.{row} at {i}: {g}, PyTorch {w}"));
            }
        }
    };
    for (row, call) in unary {
        let a = int::<D>(&file, &format!("int.{row}.a"));
        check(row, call(&a), &mut problems);
    }
    for (row, call) in binary {
        let (a, b) = (int::<D>(&file, &format!("int.{row}.a")), int::<D>(&file, &format!("int.{row}.b")));
        check(row, call(&a, &b), &mut problems);
    }
    assert!(problems.is_empty(), "the integer rows differ from PyTorch 2.15:\n  {}", problems.join("\n  "));
}

/// Every row in PyTorch's file is a row of a table here: a renamed row
/// would leave its PyTorch results unread.
#[test]
fn every_fixture_row_has_its_table_row() {
    let file = fixture();
    let read = |path: &str| std::fs::read_to_string(format!("{}/tests/ops/{path}", crate::common::REPO)).unwrap();
    let (unary, binary, own) = (read("unary.rs"), read("binary.rs"), read("pytorch.rs").replace("        ", "\n    "));
    // Rows that a table cannot hold call `unary_row` themselves (in
    // compare.rs: `nan_to_num`, whose `f32` result is `f32::MAX`, not the
    // `f64` reference rounded); the activation layers' and the losses' rows
    // are read by tests/training/nn.rs.
    let (compare, layers) = (read("compare.rs"), read("../training/nn.rs"));
    for (name, _) in file.tensors() {
        let mut parts = name.split('.');
        let (table, row) = (parts.next().unwrap(), parts.next().unwrap());
        let found = match table {
            "unary" => {
                unary.contains(&format!("\n    {row}: |")) || compare.contains(&format!("unary_row::<D>(\"{row}\""))
            }
            "binary" => binary.contains(&format!("\n    {row}: |")),
            "reduce" | "shape" => own.contains(&format!("\n    {row}: |")),
            "layer" | "loss" => layers.contains(&format!("\"{row}\",")),
            "value" => own.contains(&format!("\"{row}.")),
            _ => continue,
        };
        assert!(found, "`{name}`: no test reads the row `{row}` ({table})");
    }
}

device_tests! {
    integer_rows_match_pytorch => integer_rows,
    reductions_match_pytorch => reductions,
    reductions_over_axes_match_pytorch => reductions_over_axes,
    index_order_and_product_rows_match_pytorch => index_order_and_product_rows,
    value_rows_match_pytorch => value_rows,
}
