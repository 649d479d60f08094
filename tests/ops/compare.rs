//! Comparisons, mask logic and `where_cond` checked against plain loops, on
//! random broadcast shapes, non-contiguous views, every element type, NaN
//! and infinities, empty tensors, and every error path.

use crate::common::*;
use crate::custom_op::IsClose;
use devtensor::{Cpu, Device, Element, Error, Tensor};
use proptest::prelude::*;

/// Values exact in every element type, with ties likely; floats also get
/// NaN, infinities and a negative zero.
fn value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        8 => (0..4u8).prop_map(f64::from),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
    ]
}

/// `values` as `E`, with the non-finite ones replaced for integer types.
fn values_for<E: Element>(values: &[f64]) -> Vec<f64> {
    values.iter().map(|&x| if E::IS_FLOAT || x.is_finite() { x } else { 3.0 }).collect()
}

/// `n` values cycled from a non-empty seed.
fn cycle(seed: &[f64], n: usize) -> Vec<f64> {
    (0..n).map(|i| seed[i % seed.len()]).collect()
}

/// The comparison `name` in plain `f64` (IEEE: NaN is unordered).
fn compare_reference(name: &str, a: f64, b: f64) -> bool {
    match name {
        "eq" => a == b,
        "ne" => a != b,
        "lt" => a < b,
        "le" => a <= b,
        "gt" => a > b,
        "ge" => a >= b,
        _ => unreachable!("{name}"),
    }
}

/// A comparison's name, its tensor form's result and its scalar form's result.
type Case<D> = (&'static str, Tensor<D, u8>, Tensor<D, u8>);

fn check_compare<D: Device, E: Element>(
    (ad, bd): (Vec<usize>, Vec<usize>),
    seed_a: &[f64],
    seed_b: &[f64],
    scalar: f64,
    (va, vb): (Variant, Variant),
) {
    let a = values_for::<E>(&cycle(seed_a, ad.iter().product()));
    let b = values_for::<E>(&cycle(seed_b, bd.iter().product()));
    let scalar = values_for::<E>(&[scalar])[0];
    let ta = tensor_with::<D, E>(&cast_all(&a), &ad, va);
    let tb = tensor_with::<D, E>(&cast_all(&b), &bd, vb);
    let s = E::from_f64(scalar);
    let cases: [Case<D>; 6] = [
        ("eq", ta.eq(&tb), ta.eq_scalar(s)),
        ("ne", ta.ne(&tb), ta.ne_scalar(s)),
        ("lt", ta.lt(&tb), ta.lt_scalar(s)),
        ("le", ta.try_le(&tb).unwrap(), ta.try_le_scalar(s).unwrap()),
        ("gt", ta.gt(&tb), ta.gt_scalar(s)),
        ("ge", ta.ge(&tb), ta.ge_scalar(s)),
    ];
    let out = broadcast_dims(&ad, &bd).expect("broadcastable");
    for (name, got, got_scalar) in cases {
        let expected: Vec<u8> = indices(&out)
            .map(|i| compare_reference(name, broadcast_read(&a, &ad, &i), broadcast_read(&b, &bd, &i)) as u8)
            .collect();
        assert_eq!(got.dims(), out.as_slice(), "{name}");
        assert_eq!(got.to_vec(), expected, "{name} of {a:?} {ad:?} and {b:?} {bd:?}");
        let expected: Vec<u8> = a.iter().map(|&x| compare_reference(name, x, scalar) as u8).collect();
        assert_eq!(got_scalar.dims(), ad.as_slice(), "{name}_scalar");
        assert_eq!(got_scalar.to_vec(), expected, "{name}_scalar of {a:?} and {scalar}");
    }
}

fn check_logical<D: Device>(
    (ad, bd): (Vec<usize>, Vec<usize>),
    seed_a: &[u8],
    seed_b: &[u8],
    (va, vb): (Variant, Variant),
) {
    let a: Vec<u8> = (0..ad.iter().product()).map(|i| seed_a[i % seed_a.len()]).collect();
    let b: Vec<u8> = (0..bd.iter().product()).map(|i| seed_b[i % seed_b.len()]).collect();
    let ta = tensor_with::<D, u8>(&a, &ad, va);
    let tb = tensor_with::<D, u8>(&b, &bd, vb);
    let out = broadcast_dims(&ad, &bd).expect("broadcastable");
    let reference = |f: fn(bool, bool) -> bool| -> Vec<u8> {
        indices(&out).map(|i| f(broadcast_read(&a, &ad, &i) != 0, broadcast_read(&b, &bd, &i) != 0) as u8).collect()
    };
    let and = ta.logical_and(&tb);
    assert_eq!(and.dims(), out.as_slice());
    assert_eq!(and.to_vec(), reference(|x, y| x && y));
    assert_eq!(ta.try_logical_or(&tb).unwrap().to_vec(), reference(|x, y| x || y));
    let not = ta.logical_not();
    assert_eq!(not.dims(), ad.as_slice());
    assert_eq!(not.to_vec(), a.iter().map(|&x| (x == 0) as u8).collect::<Vec<_>>());
}

/// Three shapes that broadcast together: a base shape, and three copies in
/// which some axes are 1 and some leading axes are dropped.
fn broadcast_triple(max_rank: usize, max_dim: usize) -> impl Strategy<Value = [Vec<usize>; 3]> {
    shape(max_rank, max_dim)
        .prop_flat_map(|dims| {
            let rank = dims.len();
            let derived = (prop::collection::vec(any::<bool>(), rank), 0..=rank);
            (Just(dims), derived.clone(), derived.clone(), derived)
        })
        .prop_map(|(dims, x, y, z)| {
            let derive = |(ones, drop): (Vec<bool>, usize)| -> Vec<usize> {
                dims.iter().zip(&ones).map(|(&d, &one)| if one { 1 } else { d }).skip(drop).collect()
            };
            [derive(x), derive(y), derive(z)]
        })
}

fn check_where<D: Device, E: Element>(
    [cd, td, fd]: [Vec<usize>; 3],
    seed_c: &[u8],
    seed_t: &[f64],
    seed_f: &[f64],
    [vc, vt, vf]: [Variant; 3],
) {
    let c: Vec<u8> = (0..cd.iter().product()).map(|i| seed_c[i % seed_c.len()]).collect();
    let t = values_for::<E>(&cycle(seed_t, td.iter().product()));
    let f: Vec<f64> = values_for::<E>(&cycle(seed_f, fd.iter().product())).iter().map(|x| x + 4.0).collect();
    let tc = tensor_with::<D, u8>(&c, &cd, vc);
    let tt = tensor_with::<D, E>(&cast_all(&t), &td, vt);
    let tf = tensor_with::<D, E>(&cast_all(&f), &fd, vf);
    let out = broadcast_dims(&broadcast_dims(&cd, &td).unwrap(), &fd).expect("broadcastable");
    let expected: Vec<f64> =
        indices(&out)
            .map(|i| {
                if broadcast_read(&c, &cd, &i) != 0 { broadcast_read(&t, &td, &i) } else { broadcast_read(&f, &fd, &i) }
            })
            .collect();
    for got in [tc.where_cond(&tt, &tf), tc.try_where_cond(&tt, &tf).unwrap()] {
        assert_eq!(got.dims(), out.as_slice());
        assert!(got.is_contiguous());
        assert_close(&as_f64(&got.to_vec()), &expected, 0.0, 0.0);
    }
}

fn mask_byte() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(1u8), any::<u8>()]
}

device_proptests! {
    cases = 48;

    /// tril and triu keep `column <= row + diagonal` (or `>=`) of every
    /// matrix of a batch and zero the rest, for every element type; masked
    /// gradients reach only the kept elements.
    fn triangles_match_index_arithmetic<D>(
        dims in prop::collection::vec(1usize..=5, 2..=4),
        diagonal in -5i64..=5,
        v in variant(),
    ) {
        let rank = dims.len();
        let data: Vec<f64> = (0..dims.iter().product()).map(|i| (i % 7) as f64 + 1.0).collect();
        let expected = |upper: bool| -> Vec<f64> {
            indices(&dims).zip(&data).map(|(i, &x)| {
                let offset = i[rank - 1] as i64 - i[rank - 2] as i64;
                let keep = if upper { offset >= diagonal } else { offset <= diagonal };
                if keep { x } else { 0.0 }
            }).collect()
        };
        let t = tensor_with::<D, f64>(&data, &dims, v);
        prop_assert_eq!(t.tril(diagonal).to_vec(), expected(false));
        prop_assert_eq!(t.triu(diagonal).to_vec(), expected(true));
        let bytes = tensor_with::<D, u8>(&cast_all::<u8>(&data), &dims, v);
        prop_assert_eq!(as_f64(&bytes.tril(diagonal).to_vec()), expected(false));
        let longs = tensor_with::<D, i64>(&cast_all::<i64>(&data), &dims, v);
        prop_assert_eq!(as_f64(&longs.triu(diagonal).to_vec()), expected(true));
        let x = Tensor::<D, f64>::from_vec(data.clone(), dims.clone());
        gradcheck::gradcheck("tril", std::slice::from_ref(&x), |xs| xs[0].tril(diagonal));
        gradcheck::gradcheck("triu", std::slice::from_ref(&x), |xs| xs[0].triu(diagonal));
        // Second derivatives (`create_graph`), squared: the ops are linear.
        gradcheck::gradgradcheck("tril", std::slice::from_ref(&x), |xs| xs[0].tril(diagonal).square());
    }

    /// masked_fill puts the value where the broadcast mask is set and keeps
    /// the rest; the gradient reaches only the kept elements.
    fn masked_fill_matches_a_loop<D>((big, small) in broadcast_pair(4, 4), bits in prop::collection::vec(any::<bool>(), 1..8), v in variant()) {
        prop_assume!(broadcast_dims(&big, &small).as_deref() == Some(big.as_slice()));
        let data: Vec<f64> = (0..big.iter().product()).map(|i| i as f64 * 0.5 - 3.0).collect();
        let mask: Vec<u8> = (0..small.iter().product()).map(|i| u8::from(bits[i % bits.len()])).collect();
        let expected: Vec<f64> = indices(&big).zip(&data).map(|(i, &x)| {
            if broadcast_read(&mask, &small, &i) != 0 { -7.5 } else { x }
        }).collect();
        let t = tensor_with::<D, f64>(&data, &big, v);
        let m = tensor_with::<D, u8>(&mask, &small, v);
        prop_assert_eq!(t.masked_fill(&m, -7.5).to_vec(), expected);
        let x = Tensor::<D, f64>::from_vec(data.clone(), big.clone());
        gradcheck::gradcheck("masked_fill", std::slice::from_ref(&x), |xs| xs[0].masked_fill(&m, -7.5));
        gradcheck::gradgradcheck("masked_fill", std::slice::from_ref(&x), |xs| xs[0].masked_fill(&m, -7.5).square());
        if small != big {
            // The mask does not take the tensor's shape the other way round.
            let err = Tensor::<D, f64>::from_vec(vec![0.0; mask.len()], small.clone()).try_masked_fill(&Tensor::<D, u8>::ones(big.clone()), 1.0);
            prop_assert!(matches!(err, Err(Error::Shape { op: "masked_fill", .. })), "{:?}", err);
        }
    }
}

device_proptests! {
    cases = 64;

    fn comparisons_match_reference_f32<D>(
        pair in broadcast_pair(4, 5),
        a in prop::collection::vec(value(), 1..8),
        b in prop::collection::vec(value(), 1..8),
        s in value(), va in variant(), vb in variant(),
    ) {
        check_compare::<D, f32>(pair, &a, &b, s, (va, vb));
    }

    fn comparisons_match_reference_other_dtypes<D>(
        pair in broadcast_pair(3, 4),
        a in prop::collection::vec(value(), 1..8),
        b in prop::collection::vec(value(), 1..8),
        s in value(), va in variant(), vb in variant(),
    ) {
        check_compare::<D, f64>(pair.clone(), &a, &b, s, (va, vb));
        check_compare::<D, i64>(pair.clone(), &a, &b, s, (va, vb));
        check_compare::<D, u8>(pair, &a, &b, s, (va, vb));
    }

    fn mask_logic_matches_reference<D>(
        pair in broadcast_pair(4, 5),
        a in prop::collection::vec(mask_byte(), 1..8),
        b in prop::collection::vec(mask_byte(), 1..8),
        va in variant(), vb in variant(),
    ) {
        check_logical::<D>(pair, &a, &b, (va, vb));
    }

    fn where_cond_matches_reference<D>(
        shapes in broadcast_triple(4, 4),
        c in prop::collection::vec(mask_byte(), 1..8),
        t in prop::collection::vec(value(), 1..8),
        f in prop::collection::vec(value(), 1..8),
        vc in variant(), vt in variant(), vf in variant(),
    ) {
        check_where::<D, f32>(shapes.clone(), &c, &t, &f, [vc, vt, vf]);
        check_where::<D, f64>(shapes.clone(), &c, &t, &f, [vc, vt, vf]);
        check_where::<D, i64>(shapes.clone(), &c, &t, &f, [vc, vt, vf]);
        check_where::<D, u8>(shapes, &c, &t, &f, [vc, vt, vf]);
    }
}

fn nan_compares_false_except_ne<D: Device>() {
    let a = Tensor::<D>::from_vec(vec![f32::NAN, f32::NAN, 1.0, f32::INFINITY, -0.0], [5]);
    let b = Tensor::<D>::from_vec(vec![f32::NAN, 1.0, f32::NAN, f32::INFINITY, 0.0], [5]);
    assert_eq!(a.eq(&b).to_vec(), vec![0, 0, 0, 1, 1]);
    assert_eq!(a.ne(&b).to_vec(), vec![1, 1, 1, 0, 0]);
    assert_eq!(a.lt(&b).to_vec(), vec![0, 0, 0, 0, 0]);
    assert_eq!(a.le(&b).to_vec(), vec![0, 0, 0, 1, 1]);
    assert_eq!(a.gt(&b).to_vec(), vec![0, 0, 0, 0, 0]);
    assert_eq!(a.ge(&b).to_vec(), vec![0, 0, 0, 1, 1]);
    assert_eq!(a.eq_scalar(f32::NAN).to_vec(), vec![0; 5]);
    assert_eq!(a.ne_scalar(f32::NAN).to_vec(), vec![1; 5]);
    assert_eq!(a.ge_scalar(f32::NEG_INFINITY).to_vec(), vec![0, 0, 1, 1, 1]);
}

fn errors_name_op_shapes_and_device<D: Device>() {
    let device = D::name();
    let a = Tensor::<D>::zeros([2, 3]);
    let b = Tensor::<D>::zeros([4]);
    let err = a.try_lt(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("lt on {device}: shapes [2, 3] and [4]: the shapes cannot be broadcast together")
    );
    for (op, err) in
        [("eq", a.try_eq(&b)), ("ne", a.try_ne(&b)), ("le", a.try_le(&b)), ("gt", a.try_gt(&b)), ("ge", a.try_ge(&b))]
    {
        match err.unwrap_err() {
            Error::Shape { op: got, device: d, shapes, .. } => {
                assert_eq!((got, d), (op, device.clone()));
                assert_eq!(shapes, vec![a.shape().clone(), b.shape().clone()]);
            }
            other => panic!("{op}: unexpected {other}"),
        }
    }

    let m = Tensor::<D, u8>::ones([2]);
    let n = Tensor::<D, u8>::ones([3]);
    let err = m.try_logical_and(&n).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("logical_and on {device}: shapes [2] and [3]: the shapes cannot be broadcast together")
    );
    let err = m.try_logical_or(&n).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("logical_or on {device}: shapes [2] and [3]: the shapes cannot be broadcast together")
    );

    // The mask and `on_true` fit, `on_false` does not.
    let cond = Tensor::<D, u8>::ones([2, 1]);
    let err = cond.try_where_cond(&Tensor::<D, i64>::zeros([3]), &Tensor::<D, i64>::zeros([4])).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("where_cond on {device}: shapes [2, 1], [3] and [4]: the shapes cannot be broadcast together")
    );
    // The mask and `on_true` already clash.
    let err = cond.try_where_cond(&Tensor::<D>::zeros([3, 3]), &Tensor::<D>::zeros([1])).unwrap_err();
    assert!(matches!(&err, Error::Shape { op: "where_cond", shapes, .. } if shapes.len() == 3), "{err}");
}

#[test]
#[should_panic(expected = "gt on Cpu: shapes [2, 3] and [4]: the shapes cannot be broadcast together")]
fn plain_comparison_panics_with_the_try_message() {
    let _ = Tensor::<Cpu>::zeros([2, 3]).gt(&Tensor::<Cpu>::zeros([4]));
}

#[test]
#[should_panic(expected = "logical_or on Cpu: shapes [2] and [3]: the shapes cannot be broadcast together")]
fn plain_logical_panics_with_the_try_message() {
    let _ = Tensor::<Cpu, u8>::ones([2]).logical_or(&Tensor::<Cpu, u8>::ones([3]));
}

#[test]
#[should_panic(expected = "where_cond on Cpu: shapes [2, 1], [3] and [4]: the shapes cannot be broadcast together")]
fn plain_where_cond_panics_with_the_try_message() {
    let cond = Tensor::<Cpu, u8>::ones([2, 1]);
    let _ = cond.where_cond(&Tensor::<Cpu>::zeros([3]), &Tensor::<Cpu>::zeros([4]));
}

fn empty_tensors<D: Device>() {
    let a = Tensor::<D, i64>::zeros([0, 3]);
    let b = Tensor::<D, i64>::ones([3]);
    let m = a.le(&b);
    assert_eq!(m.dims(), &[0, 3]);
    assert!(m.to_vec().is_empty());
    assert_eq!(a.gt_scalar(0).dims(), &[0, 3]);
    assert_eq!(m.logical_not().dims(), &[0, 3]);
    assert_eq!(m.logical_and(&Tensor::<D, u8>::ones([1])).dims(), &[0, 3]);
    let w = m.where_cond(&b, &Tensor::<D, i64>::scalar(7));
    assert_eq!(w.dims(), &[0, 3]);
    assert!(w.to_vec().is_empty());
    // An empty mask broadcast against a non-empty tensor stays empty.
    let w = Tensor::<D, u8>::zeros([2, 0, 1]).where_cond(&Tensor::<D>::ones([4]), &Tensor::<D>::zeros([1, 4]));
    assert_eq!(w.dims(), &[2, 0, 4]);
}

fn large_inputs<D: Device>() {
    // Past the parallel threshold, with a length that is not a chunk multiple.
    let n = sized((1 << 17) + 3, (1 << 10) + 3);
    let x = Tensor::<D, i64>::arange(0, n as i64);
    let odd = x.gt(&Tensor::<D, i64>::scalar(n as i64 / 2));
    let got = odd.to_vec();
    assert!(got.iter().enumerate().all(|(i, &m)| m == (i as i64 > n as i64 / 2) as u8));
    let neg = -&x;
    let w = odd.where_cond(&x, &neg).to_vec();
    assert!(w.iter().enumerate().all(|(i, &v)| v == if i as i64 > n as i64 / 2 { i as i64 } else { -(i as i64) }));
    let both = odd.logical_and(&x.lt_scalar(n as i64 - 1)).to_vec();
    assert!(both.iter().enumerate().all(|(i, &m)| m == (i as i64 > n as i64 / 2 && (i as i64) < n as i64 - 1) as u8));
}

fn where_cond_block_shapes<D: Device>() {
    // One flag per row: the mask is constant along each inner block.
    let rows = Tensor::<D, u8>::from_vec(vec![1, 0, 3], [3, 1]);
    let a = Tensor::<D, i64>::arange(0, 12).reshape([3, 4]);
    let b = Tensor::<D, i64>::arange(100, 112).reshape([3, 4]);
    let expected = vec![vec![0, 1, 2, 3], vec![104, 105, 106, 107], vec![8, 9, 10, 11]];
    assert_eq!(rows.where_cond(&a, &b).to_vec2(), expected);
    // A transposed mask choosing between two scalars.
    let mask = Tensor::<D, u8>::from_vec(vec![1, 0, 0, 1, 1, 0], [3, 2]).t();
    let got = mask.where_cond(&Tensor::<D>::scalar(1.0), &Tensor::<D>::scalar(-1.0));
    assert_eq!(got.to_vec2(), vec![vec![1.0, -1.0, 1.0], vec![-1.0, 1.0, -1.0]]);
    // A strided mask against a tensor and a scalar fallback.
    let got =
        mask.where_cond(&Tensor::<D>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]), &Tensor::<D>::scalar(0.0));
    assert_eq!(got.to_vec2(), vec![vec![1.0, 0.0, 3.0], vec![0.0, 5.0, 0.0]]);
}

/// Comparisons, mask logic and `where_cond` at [`LARGE_SIZES`], on a
/// strided view (every other element of a `[n, 2]` tensor) against a
/// broadcast scalar; returns every result as `f32`, which the CUDA
/// instances also compare with the `Cpu` ones.
fn large_strided_inputs<D: Device>() -> Vec<f32> {
    let mut all = Vec::new();
    for n in LARGE_SIZES {
        // Column 1 of [n, 2]: 1, 3, 5, ... (2i + 1), strided.
        let x = Tensor::<D, i64>::arange(0, 2 * n as i64).reshape([n, 2]).select(1, 1);
        assert!(!x.is_contiguous());
        let mid = Tensor::<D, i64>::scalar(n as i64);
        let above = x.gt(&mid);
        let got = above.to_vec();
        assert!(got.iter().enumerate().all(|(i, &m)| m == (2 * i + 1 > n) as u8), "gt of {n}");
        let eq = x.eq_scalar(n as i64 + 1).to_vec();
        assert_eq!(eq.iter().map(|&m| m as usize).sum::<usize>(), (n % 2 == 0) as usize, "eq_scalar of {n}");
        let low = x.le_scalar(10).logical_or(&above).logical_not().to_vec();
        assert!(low.iter().enumerate().all(|(i, &m)| m == (2 * i + 1 > 10 && 2 * i < n) as u8), "or/not of {n}");
        let w = above.where_cond(&x.to_dtype::<f32>(), &Tensor::<D>::scalar(-1.0)).to_vec();
        assert!(
            w.iter().enumerate().all(|(i, &v)| v == if 2 * i + 1 > n { (2 * i + 1) as f32 } else { -1.0 }),
            "where_cond of {n}"
        );
        all.extend(got.iter().chain(&eq).chain(&low).map(|&m| m as f32));
        all.extend(w);
    }
    all
}

/// `isnan`, `isinf`, `isposinf`, `isneginf` and `isfinite` on every kind of
/// value, strided; `nan_to_num` with PyTorch's defaults and given values
/// against PyTorch's results and gradients (`tests/ops/pytorch.rs`).
fn special_value_masks_and_nan_to_num<D: Device>() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let x = Tensor::<D, f64>::from_vec(vec![0.0, -0.0, 1.5, inf, -inf, nan, f64::MAX, -1e-300], [2, 4]).t();
    // The transpose reads [0, -inf, -0, nan, 1.5, MAX, inf, -1e-300].
    assert_eq!(x.isnan().to_vec(), vec![0, 0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(x.isinf().to_vec(), vec![0, 1, 0, 0, 0, 0, 1, 0]);
    assert_eq!(x.isposinf().to_vec(), vec![0, 0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(x.isneginf().to_vec(), vec![0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(x.isfinite().to_vec(), vec![1, 0, 1, 0, 1, 1, 0, 1]);
    let x32 = x.to_dtype::<f32>();
    assert_eq!(x32.isfinite().to_vec(), vec![1, 0, 1, 0, 1, 0, 0, 1], "f64::MAX is inf in f32");
    let got = x32.nan_to_num(0.0, None, None).to_vec();
    assert_eq!(got, vec![0.0, f32::MIN, -0.0, 0.0, 1.5, f32::MAX, f32::MAX, -0.0]);
    let call64 = |t: &Tensor<D, f64>| t.nan_to_num(0.0, None, None);
    let call32 = |t: &Tensor<D, f32>| t.nan_to_num(0.0, None, None);
    crate::pytorch::unary_row::<D>("nan_to_num", call64, call32);
    let call64 = |t: &Tensor<D, f64>| t.nan_to_num(1.5, Some(100.0), Some(-100.0));
    let call32 = |t: &Tensor<D, f32>| t.nan_to_num(1.5, Some(100.0), Some(-100.0));
    crate::pytorch::unary_row::<D>("nan_to_num_given", call64, call32);
}

device_tests! {
    special_value_masks_and_nan_to_num => special_value_masks_and_nan_to_num,
    nan_compares_false_except_ne => nan_compares_false_except_ne,
    errors_name_op_shapes_and_device => errors_name_op_shapes_and_device,
    empty_tensors => empty_tensors,
    large_inputs => large_inputs,
    where_cond_block_shapes => where_cond_block_shapes,
    custom_op_against_reference => custom_op_matches_reference,
}

device_tests_vs_cpu! {
    large_strided_inputs => large_strided_inputs, Family::Exact;
}

/// The example's own comparison `IsClose` (its CUDA kernel from
/// `examples/kernels/is_close.cu`) against PyTorch's `isclose` at its
/// default tolerances, written out per case, broadcast and in both float
/// types.
fn custom_op_matches_reference<D: Device>() {
    let inf = f64::INFINITY;
    let cases: [(f64, f64, u8); 10] = [
        (1.0, 1.0 + 1e-6, 1),
        (1.0, 1.0 + 1e-4, 0),
        (0.0, 1e-9, 1),
        (0.0, 1e-7, 0),
        (100.0, 100.0009, 1),
        (f64::NAN, f64::NAN, 0),
        (inf, inf, 1),
        (inf, -inf, 0),
        (1.0, inf, 0),
        (inf, 1.0, 0),
    ];
    let a: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let b: Vec<f64> = cases.iter().map(|c| c.1).collect();
    let expected: Vec<u8> = cases.iter().map(|c| c.2).collect();
    let got = Tensor::<D, f64>::from_slice(&a, [10]).apply_compare(IsClose, &Tensor::<D, f64>::from_slice(&b, [10]));
    assert_eq!(got.to_vec(), expected);
    let got = Tensor::<D>::from_vec(cast_all(&a), [10])
        .try_apply_compare(IsClose, &Tensor::<D>::from_vec(cast_all(&b), [10]));
    assert_eq!(got.unwrap().to_vec(), expected);
    // Broadcast: a column against a row.
    let column = Tensor::<D, f64>::from_vec(vec![1.0, 2.0], [2, 1]);
    let row = Tensor::<D, f64>::from_vec(vec![1.0, 2.000001, 2.0], [3]);
    assert_eq!(column.apply_compare(IsClose, &row).to_vec2(), vec![vec![1, 0, 0], vec![0, 1, 1]]);
}
