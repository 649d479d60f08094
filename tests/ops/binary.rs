//! Elementwise arithmetic checked against plain loops, on random shapes,
//! broadcast pairs and non-contiguous views, and every differentiable op's
//! gradients against central differences (the gradient table).

use crate::common::gradcheck::{T, Values, gradcheck, gradgradcheck, values};
use crate::common::*;
use crate::custom_op::Hypot;
use devtensor::{Cpu, Device, Element, Error, Tensor};
use proptest::prelude::*;

/// Reference: `out[i] = f(a[bcast(i)], b[bcast(i)])` by explicit indexing.
fn reference(a: &[f64], ad: &[usize], b: &[f64], bd: &[usize], f: impl Fn(f64, f64) -> f64) -> (Vec<usize>, Vec<f64>) {
    let out = broadcast_dims(ad, bd).expect("broadcastable");
    let data = indices(&out).map(|i| f(broadcast_read(a, ad, &i), broadcast_read(b, bd, &i))).collect();
    (out, data)
}

fn check_binary<D: Device, E: Element>(
    (ad, bd): (Vec<usize>, Vec<usize>),
    seed_a: Vec<f64>,
    seed_b: Vec<f64>,
    (va, vb): (Variant, Variant),
) {
    // Values representable in every element type (u8 included).
    let a: Vec<f64> = (0..ad.iter().product()).map(|i| (seed_a[i % seed_a.len()].abs() * 3.0).round()).collect();
    let b: Vec<f64> = (0..bd.iter().product()).map(|i| 1.0 + (seed_b[i % seed_b.len()].abs() * 3.0).round()).collect();
    let ta = tensor_with::<D, E>(&cast_all(&a), &ad, va);
    let tb = tensor_with::<D, E>(&cast_all(&b), &bd, vb);
    // Integer results wrap like the element type's own arithmetic.
    let via = |f: fn(E, E) -> E| move |x: f64, y: f64| f(E::from_f64(x), E::from_f64(y)).to_f64();
    // Rounded divisions in f64, exact for these small values: Python's
    // `int(x / y)` and `x // y`.
    let cases: [(&str, Tensor<D, E>, Box<dyn Fn(f64, f64) -> f64>); 9] = [
        ("add", &ta + &tb, Box::new(via(E::add))),
        ("sub", ta.try_sub(&tb).unwrap(), Box::new(via(E::sub))),
        ("mul", &ta * &tb, Box::new(via(E::mul))),
        ("div_trunc", ta.div_trunc(&tb), Box::new(|x, y| (x / y).trunc())),
        ("div_floor", ta.try_div_floor(&tb).unwrap(), Box::new(|x, y| (x / y).floor())),
        ("maximum", ta.maximum(&tb), Box::new(f64::max)),
        ("minimum", ta.minimum(&tb), Box::new(f64::min)),
        ("remainder", &ta % &tb, Box::new(|x, y| x - (x / y).floor() * y)),
        ("fmod", ta.fmod(&tb), Box::new(|x, y| x - (x / y).trunc() * y)),
    ];
    for (name, got, f) in cases {
        let (dims, expected) = reference(&a, &ad, &b, &bd, f);
        assert_eq!(got.dims(), dims.as_slice(), "{name}");
        assert_close(&as_f64(&got.to_vec()), &expected, 1e-6, 1e-6);
    }
    // `/` is true division into E::Quotient (f32 for integers), as PyTorch's.
    let quotient = &ta / &tb;
    let (dims, expected) = reference(&a, &ad, &b, &bd, |x, y| x / y);
    assert_eq!(quotient.dims(), dims.as_slice(), "div");
    assert_close(&as_f64(&quotient.to_vec()), &expected, 1e-6, 1e-6);
}

device_proptests! {
    cases = 64;

    fn binary_ops_match_reference_f32<D>(
        pair in broadcast_pair(4, 5),
        a in prop::collection::vec(-10.0..10.0f64, 1..8),
        b in prop::collection::vec(-10.0..10.0f64, 1..8),
        va in variant(), vb in variant(),
    ) {
        check_binary::<D, f32>(pair, a, b, (va, vb));
    }

    fn binary_ops_match_reference_other_dtypes<D>(
        pair in broadcast_pair(3, 4),
        a in prop::collection::vec(-10.0..10.0f64, 1..8),
        b in prop::collection::vec(-10.0..10.0f64, 1..8),
        va in variant(), vb in variant(),
    ) {
        check_binary::<D, f64>(pair.clone(), a.clone(), b.clone(), (va, vb));
        check_binary::<D, i64>(pair.clone(), a.clone(), b.clone(), (va, vb));
        check_binary::<D, u8>(pair, a, b, (va, vb));
    }

    fn scalar_ops_match_reference<D>((dims, data) in shaped_data(4, 5), s in -5.0..5.0f64, v in variant()) {
        let t = tensor_with::<D, f64>(&data, &dims, v);
        let cases: [(Tensor<D, f64>, Box<dyn Fn(f64) -> f64>); 6] = [
            (&t + s, Box::new(|x| x + s)),
            (&t - s, Box::new(|x| x - s)),
            (s - &t, Box::new(|x| s - x)),
            (&t * s, Box::new(|x| x * s)),
            (&t / s, Box::new(|x| x / s)),
            (s / t.clone(), Box::new(|x| s / x)),
        ];
        for (got, f) in cases {
            let expected: Vec<f64> = data.iter().map(|&x| f(x)).collect();
            prop_assert_eq!(got.dims(), dims.as_slice());
            assert_close(&got.to_vec(), &expected, 1e-12, 1e-12);
        }
    }

    fn in_place_ops_match_out_of_place<D>((big, small) in broadcast_pair(4, 4), seed in prop::collection::vec(-10.0..10.0f64, 1..8), shared in any::<bool>(), v in variant()) {
        // `+=` needs the right side to broadcast to the left side's shape.
        let (ld, rd) = match broadcast_dims(&big, &small) {
            Some(out) if out == big => (big, small),
            _ => (small, big),
        };
        prop_assume!(broadcast_dims(&ld, &rd).as_deref() == Some(ld.as_slice()));
        let l: Vec<f64> = (0..ld.iter().product()).map(|i| seed[i % seed.len()]).collect();
        let r: Vec<f64> = (0..rd.iter().product()).map(|i| 1.0 + seed[(i + 1) % seed.len()].abs()).collect();
        let rhs = tensor_with::<D, f64>(&r, &rd, v);
        for op in 0..4 {
            let mut lhs = tensor_with::<D, f64>(&l, &ld, v);
            let keep = lhs.clone();
            let alias = shared.then(|| lhs.clone());
            let expected = match op {
                0 => { lhs += &rhs; &keep + &rhs }
                1 => { lhs -= &rhs; &keep - &rhs }
                2 => { lhs *= rhs.clone(); &keep * &rhs }
                _ => { lhs /= &rhs; &keep / &rhs }
            };
            prop_assert_eq!(lhs.to_vec(), expected.to_vec());
            // Value semantics: the other handle to the old storage is unchanged.
            prop_assert_eq!(keep.to_vec(), l.clone());
            if let Some(alias) = alias {
                prop_assert_eq!(alias.to_vec(), l.clone());
            }
        }
    }
}

fn large_contiguous_add_uses_every_element<D: Device>() {
    // Past the parallel threshold, with a length that is not a chunk multiple.
    let n = sized((1 << 17) + 3, (1 << 10) + 3);
    let a = Tensor::<D>::arange(0.0, n as f32);
    let b = Tensor::<D>::full([n], 2.0);
    let sum = (&a + &b).to_vec();
    assert!(sum.iter().enumerate().all(|(i, &x)| x == i as f32 + 2.0));
}

/// Every op at [`LARGE_SIZES`]: contiguous, strided (every other element of
/// a `[n, 2]` tensor), broadcast from one element, and in place. Values stay
/// below 2^24, so every result is exact in `f32`. Returns all results, which
/// the CUDA instances also compare with the `Cpu` ones.
fn large_inputs<D: Device>() -> Vec<f32> {
    let mut all = Vec::new();
    for n in LARGE_SIZES {
        let a = Tensor::<D>::arange(0.0, n as f32);
        // Odd numbers 1, 3, 5, ..., read with stride 2.
        let odd = Tensor::<D>::arange(0.0, 2.0 * n as f32).reshape([n, 2]).select(1, 1);
        assert!(!odd.is_contiguous());
        let two = Tensor::<D>::from_vec(vec![2.0], [1]);
        let cases: [(&str, Tensor<D>, fn(f32, f32) -> f32); 6] = [
            ("add", &a + &odd, |i, o| i + o),
            ("sub", &odd - &a, |i, o| o - i),
            ("mul", &a * &two, |i, _| i * 2.0),
            ("div", &odd / &two, |_, o| o / 2.0),
            ("maximum", a.maximum(&odd), f32::max),
            ("minimum", two.minimum(&a), |i, _| i.min(2.0)),
        ];
        for (name, got, f) in cases {
            assert_eq!(got.dims(), &[n], "{name} of {n}");
            let got = got.to_vec();
            for (i, &g) in got.iter().enumerate() {
                let expected = f(i as f32, (2 * i + 1) as f32);
                assert_eq!(g, expected, "{name} of {n} elements: element {i}");
            }
            all.extend(got);
        }
        let mut acc = odd.clone();
        acc += &a;
        acc *= &two;
        let got = acc.to_vec();
        assert!(got.iter().enumerate().all(|(i, &g)| g == (6 * i + 2) as f32), "in place, {n} elements");
        all.extend(got);
    }
    all
}

fn mismatched_shapes_are_reported_with_op_shapes_and_device<D: Device>() {
    let a = Tensor::<D>::zeros([2, 3]);
    let b = Tensor::<D>::zeros([4]);
    let err = a.try_add(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("add on {}: shapes [2, 3] and [4]: the shapes cannot be broadcast together", D::name())
    );
    let mut c = Tensor::<D>::zeros([3]);
    let err = c.try_add_assign(&a).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "add", .. }), "{err}");
}

#[test]
#[should_panic(expected = "mul on Cpu: shapes [2] and [3]: the shapes cannot be broadcast together")]
fn plain_operator_panics_with_the_try_message() {
    let _ = Tensor::<Cpu>::zeros([2]) * Tensor::<Cpu>::zeros([3]);
}

fn integer_division_by_zero_is_an_error_not_a_panic<D: Device>() {
    let a = Tensor::<D, i64>::from_vec(vec![1, 2], [2]);
    let zero = Tensor::<D, i64>::zeros([1]);
    let message = |op: &str| format!("{op} on {}: integer division by zero", D::name());
    assert_eq!(a.try_div_trunc(&zero).unwrap_err().to_string(), message("div_trunc"));
    assert_eq!(a.try_div_floor(&zero).unwrap_err().to_string(), message("div_floor"));
    assert!(a.try_div_trunc_scalar(0).is_err() && a.try_div_floor_scalar(0).is_err());
    // `/` is true division, as in PyTorch: torch.tensor([1, 2]) / 0 == [inf, inf].
    assert_eq!(a.try_div(&zero).unwrap().to_vec(), vec![f32::INFINITY; 2]);
    // Float division by zero follows IEEE 754, as in PyTorch.
    let f = Tensor::<D>::from_vec(vec![1.0, -1.0, 0.0], [3]) / 0.0;
    let v = f.to_vec();
    assert_eq!((v[0], v[1]), (f32::INFINITY, f32::NEG_INFINITY));
    assert!(v[2].is_nan());
}

fn empty_tensors_combine_to_empty_results<D: Device>() {
    let a = Tensor::<D>::zeros([0, 3]);
    let b = Tensor::<D>::ones([3]);
    let c = &a + &b;
    assert_eq!(c.dims(), &[0, 3]);
    assert!(c.to_vec().is_empty());
    // An empty view cut from a non-empty tensor, against a strided one, and in place.
    let v = Tensor::<D, i64>::arange(0, 6).reshape([2, 3]).narrow(1, 1, 0);
    let w = Tensor::<D, i64>::arange(0, 6).reshape([3, 2]).t().narrow(1, 0, 0);
    assert_eq!((&v * &w).dims(), &[2, 0]);
    let mut e = Tensor::<D, i64>::zeros([0]);
    e += &Tensor::<D, i64>::ones([1]);
    assert!(e.to_vec().is_empty());
}

device_tests! {
    large_contiguous_add => large_contiguous_add_uses_every_element,
    mismatched_shapes_are_reported => mismatched_shapes_are_reported_with_op_shapes_and_device,
    integer_division_by_zero => integer_division_by_zero_is_an_error_not_a_panic,
    empty_tensors => empty_tensors_combine_to_empty_results,
    pow_against_reference => pow_matches_reference,
    custom_op_against_reference => custom_op_matches_reference,
}

device_tests_vs_cpu! {
    large_inputs_on_every_layout => large_inputs, Family::Exact;
}

/// Operands of a gradient check: a broadcast pair of shapes, with values
/// of the kinds the op needs on each side.
fn pair_inputs(a: Values, b: Values) -> impl Strategy<Value = ((Vec<usize>, Vec<f64>), (Vec<usize>, Vec<f64>))> {
    broadcast_pair(3, 3).prop_flat_map(move |(ad, bd)| {
        let (na, nb) = (ad.iter().product(), bd.iter().product());
        ((Just(ad), values(na, a)), (Just(bd), values(nb, b)))
    })
}

/// The gradient table: each differentiable binary op on broadcast operands
/// of any layout, against central differences. A row reads
/// `name: call, a: values, b: values;`. Ties of `maximum` and `minimum`
/// (`Distinct` values repeat across the two sides) check PyTorch's even
/// split, which central differences also give.
macro_rules! gradient_table {
    ($($name:ident: $call:expr, a: $a:expr, b: $b:expr;)*) => {
        mod gradients {
            use super::*;

            device_proptests! {
                cases = 16;
                $(
                    fn $name<D>(((ad, a), (bd, b)) in pair_inputs($a, $b), va in variant(), vb in variant()) {
                        let call: fn(&T<D>, &T<D>) -> T<D> = $call;
                        let x = [tensor_with::<D, f64>(&a, &ad, va), tensor_with::<D, f64>(&b, &bd, vb)];
                        gradcheck(stringify!($name), &x, |x| call(&x[0], &x[1]));
                        // The first derivatives of `maximum` and `minimum` jump
                        // at the ties these rows draw on purpose.
                        if !["maximum", "minimum"].contains(&stringify!($name)) {
                            gradgradcheck(stringify!($name), &x, |x| call(&x[0], &x[1]));
                        }
                    }
                )*
            }
        }

        /// Each row against PyTorch's own results (`tests/ops/pytorch.rs`).
        mod pytorch {
            use super::*;

            $(
                fn $name<D: Device>() {
                    let call64: fn(&Tensor<D, f64>, &Tensor<D, f64>) -> Tensor<D, f64> = $call;
                    let call32: fn(&Tensor<D, f32>, &Tensor<D, f32>) -> Tensor<D, f32> = $call;
                    crate::pytorch::binary_row::<D>(stringify!($name), call64, call32);
                }
            )*

            device_tests! {
                $($name => $name,)*
            }
        }
    };
}

gradient_table! {
    add: |a, b| a + b, a: Values::AwayFromZero, b: Values::AwayFromZero;
    sub: |a, b| a - b, a: Values::AwayFromZero, b: Values::AwayFromZero;
    mul: |a, b| a * b, a: Values::AwayFromZero, b: Values::AwayFromZero;
    div: |a, b| a / b, a: Values::AwayFromZero, b: Values::AwayFromZero;
    maximum: |a, b| a.maximum(b), a: Values::Distinct, b: Values::Distinct;
    minimum: |a, b| a.minimum(b), a: Values::Distinct, b: Values::Distinct;
    pow: |a, b| a.pow(b), a: Values::Positive, b: Values::AwayFromZero;
    // |a / b| < 1 and a != 0: away from the steps of floor(a / b) and trunc(a / b).
    remainder: |a, b| a.remainder(b), a: Values::InsideUnit, b: Values::AboveOne;
    fmod: |a, b| a.fmod(b), a: Values::InsideUnit, b: Values::AboveOne;
    atan2: |a, b| a.atan2(b), a: Values::AwayFromZero, b: Values::AwayFromZero;
    logaddexp: |a, b| a.logaddexp(b), a: Values::AwayFromZero, b: Values::AwayFromZero;
    lerp_quarter: |a, b| a.lerp(b, 0.25), a: Values::AwayFromZero, b: Values::AwayFromZero;
    lerp_three_quarters: |a, b| a.lerp(b, 0.75), a: Values::AwayFromZero, b: Values::AwayFromZero;
    custom_op_hypot: |a, b| a.apply_binary(Hypot, b), a: Values::AwayFromZero, b: Values::AwayFromZero;
    scalar_forms: |a, _| &(&(&(2.0 - a) * 3.0) / 4.0) + &(1.5 / a), a: Values::AwayFromZero, b: Values::AwayFromZero;
}

/// `pow` against `f64::powf`, with PyTorch's edge cases: `0^0 = 1`,
/// `0^-1 = inf`, a negative base with a fractional exponent is NaN.
fn pow_matches_reference<D: Device>() {
    let a = Tensor::<D, f64>::from_vec(vec![2.0, 0.0, 0.0, -8.0, -8.0, 1.5, f64::NAN], [7]);
    let b = Tensor::<D, f64>::from_vec(vec![10.0, 0.0, -1.0, 1.0 / 3.0, 3.0, -2.5, 0.0], [7]);
    let got = a.pow(&b).to_vec();
    let expected: Vec<f64> = a.to_vec().iter().zip(b.to_vec()).map(|(x, y)| x.powf(y)).collect();
    assert_eq!(format!("{got:?}"), format!("{expected:?}"));
    assert_eq!(&got[..3], &[1024.0, 1.0, f64::INFINITY]);
    assert!(got[3].is_nan() && got[4] == -512.0 && got[6] == 1.0);
    // Broadcast, in f32.
    let base = Tensor::<D>::from_vec(vec![1.0, 2.0, 3.0], [3, 1]);
    let exponent = Tensor::<D>::from_vec(vec![0.5, 2.0], [2]);
    let expected: Vec<f32> = [1.0f32, 2.0, 3.0].iter().flat_map(|x| [x.powf(0.5), x.powf(2.0)]).collect();
    assert_close(&as_f64(&base.pow(&exponent).to_vec()), &as_f64(&expected), 1e-6, 1e-6);
    // The gradient of the exponent at a zero base is 0, as in PyTorch.
    let (zero, e) = (Tensor::<D, f64>::scalar(0.0).requires_grad(), Tensor::<D, f64>::scalar(2.0).requires_grad());
    let grads = zero.pow(&e).backward();
    assert_eq!(grads.get(&e).unwrap().item(), 0.0);
    assert_eq!(grads.get(&zero).unwrap().item(), 0.0);
}

/// The example's own op `Hypot` (its CUDA kernel from
/// `examples/kernels/hypot.cu`) against `f64::hypot`, on a broadcast pair
/// and on rows long enough for the row kernel.
fn custom_op_matches_reference<D: Device>() {
    let (a, b) = ([3.0, -5.0, 0.0, f64::INFINITY, 1e-3], [4.0, 12.0, -0.0]);
    let got = Tensor::<D, f64>::from_slice(&a, [5, 1]).apply_binary(Hypot, &Tensor::<D, f64>::from_slice(&b, [3]));
    let expected: Vec<f64> = a.iter().flat_map(|x| b.iter().map(move |y| x.hypot(*y))).collect();
    assert_eq!(got.dims(), &[5, 3]);
    assert_close(&got.to_vec(), &expected, 1e-15, 1e-15);
    assert_eq!(got.to_vec()[0], 5.0);

    let cols = 200;
    let a: Vec<f32> = (0..2 * cols).map(|i| i as f32 / 7.0 - 20.0).collect();
    let b: Vec<f32> = (0..cols).map(|i| 3.0 - i as f32 / 11.0).collect();
    let got = Tensor::<D>::from_slice(&a, [2, cols]).apply_binary(Hypot, &Tensor::<D>::from_slice(&b, [cols]));
    let expected: Vec<f64> = (0..2 * cols).map(|i| f64::from(a[i]).hypot(f64::from(b[i % cols]))).collect();
    assert_close(&as_f64(&got.to_vec()), &expected, 1e-6, 1e-6);
}

/// Python's `%` (the divisor's sign) and C's `fmod` (the dividend's) in
/// `i128`, independent of the kernels' wrapping `i64` arithmetic.
fn python_mod(x: i128, y: i128) -> i128 {
    if y > 0 { x.rem_euclid(y) } else { -(-x).rem_euclid(-y) }
}

device_proptests! {
    cases = 32;

    /// `remainder` and `fmod` on signed operands of every size, both signs
    /// of divisor, against `i128` references; `i64::MIN` by `-1` is 0, as
    /// PyTorch gives (the true 2^63 wraps to 0 mod 2^64).
    fn remainder_and_fmod_follow_the_divisor_and_dividend_signs_i64<D>(
        a in prop::collection::vec(prop_oneof![any::<i64>(), -50..50i64, Just(i64::MIN)], 1..20),
        b in prop_oneof![-7..=-1i64, 1..=7i64, Just(i64::MIN), Just(i64::MAX), Just(-1i64)],
        v in variant(),
    ) {
        let ta = tensor_with::<D, i64>(&a, &[a.len()], v);
        let tb = Tensor::<D, i64>::scalar(b);
        let remainder: Vec<i64> = a.iter().map(|&x| python_mod(x.into(), b.into()) as i64).collect();
        let fmod: Vec<i64> = a.iter().map(|&x| (i128::from(x) % i128::from(b)) as i64).collect();
        prop_assert_eq!(ta.remainder(&tb).to_vec(), remainder.clone());
        prop_assert_eq!(ta.remainder_scalar(b).to_vec(), remainder);
        prop_assert_eq!(ta.fmod(&tb).to_vec(), fmod.clone());
        prop_assert_eq!(ta.fmod_scalar(b).to_vec(), fmod);
    }

    /// The same for floats: multiples of 0.25, whose quotients' floors and
    /// truncations are exact, so `x - floor(x / y) · y` is an exact
    /// reference; a zero divisor and infinite dividends give NaN.
    fn remainder_and_fmod_follow_the_divisor_and_dividend_signs_f64<D>(
        a in prop::collection::vec((-80..80i32).prop_map(|q| f64::from(q) / 4.0), 1..20),
        b in prop_oneof![(-12..=-1i32), (1..=12i32)].prop_map(|q| f64::from(q) / 4.0),
        v in variant(),
    ) {
        let ta = tensor_with::<D, f64>(&a, &[a.len()], v);
        let remainder: Vec<f64> = a.iter().map(|&x| x - (x / b).floor() * b).collect();
        let fmod: Vec<f64> = a.iter().map(|&x| x - (x / b).trunc() * b).collect();
        let same = |got: Vec<f64>, want: &[f64]| got.iter().zip(want).all(|(g, w)| g == w);
        prop_assert!(same(ta.remainder_scalar(b).to_vec(), &remainder), "remainder by {}", b);
        prop_assert!(same((&ta % b).to_vec(), &remainder), "% {}", b);
        prop_assert!(same(ta.fmod_scalar(b).to_vec(), &fmod), "fmod by {}", b);
        let special = Tensor::<D, f64>::from_vec(vec![1.0, f64::INFINITY, f64::NEG_INFINITY], [3]);
        prop_assert!(special.remainder_scalar(0.0).to_vec().iter().all(|x| x.is_nan()));
        prop_assert!(special.fmod_scalar(0.0).to_vec().iter().all(|x| x.is_nan()));
    }
}

/// An integer `remainder` or `fmod` by zero fails in words, as PyTorch's
/// `ZeroDivisionError`, on every device.
fn integer_remainder_by_zero_fails<D: Device>() {
    let a = Tensor::<D, i64>::from_vec(vec![5, 6], [2]);
    let zero = Tensor::<D, i64>::from_vec(vec![1, 0], [2]);
    for err in
        [a.try_remainder(&zero).unwrap_err(), a.try_fmod(&zero).unwrap_err(), a.try_remainder_scalar(0).unwrap_err()]
    {
        assert!(err.to_string().contains("division by zero"), "{err}");
    }
}

device_tests! {
    integer_remainder_by_zero_fails => integer_remainder_by_zero_fails,
}
