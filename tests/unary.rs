//! Unary elementwise functions checked against plain loops written with the
//! standard library's own arithmetic, on random shapes (empty ones included),
//! non-contiguous views, every element type, and IEEE special values.

#[macro_use]
mod common;

use common::*;
use devtensor::{Cpu, Device, Element, FloatElement, Tensor};
use proptest::prelude::*;

/// Reference versions of the all-types operations, written per type with the
/// standard library (independent of the crate's `Element` arithmetic).
trait Reference: Element {
    fn r_neg(self) -> Self;
    fn r_abs(self) -> Self;
    fn r_relu(self) -> Self;
    fn r_square(self) -> Self;
    /// torch.clamp: lower bound first, then upper; NaN propagates.
    fn r_clamp(self, min: Self, max: Self) -> Self;
}

macro_rules! float_reference {
    ($t:ty) => {
        impl Reference for $t {
            fn r_neg(self) -> Self {
                -self
            }
            fn r_abs(self) -> Self {
                self.abs()
            }
            fn r_relu(self) -> Self {
                if self.is_nan() {
                    self
                } else if self < 0.0 {
                    0.0
                } else {
                    self
                }
            }
            fn r_square(self) -> Self {
                self * self
            }
            fn r_clamp(self, min: Self, max: Self) -> Self {
                if self.is_nan() || min.is_nan() || max.is_nan() {
                    return <$t>::NAN;
                }
                let lower = if self < min { min } else { self };
                if lower > max { max } else { lower }
            }
        }
    };
}

macro_rules! int_reference {
    ($t:ty) => {
        impl Reference for $t {
            fn r_neg(self) -> Self {
                self.wrapping_neg()
            }
            fn r_abs(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 { self.wrapping_neg() } else { self }
            }
            fn r_relu(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 { 0 } else { self }
            }
            fn r_square(self) -> Self {
                self.wrapping_mul(self)
            }
            fn r_clamp(self, min: Self, max: Self) -> Self {
                std::cmp::min(std::cmp::max(self, min), max)
            }
        }
    };
}

float_reference!(f32);
float_reference!(f64);
int_reference!(i64);
int_reference!(u8);

/// Compares element by element; NaN equals NaN, and zeros compare by sign
/// too except for `clamp`, whose zero sign PyTorch itself leaves unspecified
/// (its scalar and vectorised paths differ).
#[track_caller]
fn assert_same<E: Element>(name: &str, got: &[E], expected: &[E]) {
    let signed_zero = !name.contains("clamp");
    assert_eq!(got.len(), expected.len(), "{name}: lengths differ");
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let (gf, ef) = (g.to_f64(), e.to_f64());
        let same = (gf.is_nan() && ef.is_nan())
            || (gf == ef && (!signed_zero || gf.is_sign_negative() == ef.is_sign_negative()));
        assert!(same, "{name}: element {i}: got {g}, expected {e}\ngot:      {got:?}\nexpected: {expected:?}");
    }
}

fn check_all_types<D: Device, E: Reference>(dims: &[usize], data: &[E], variant: Variant, min: E, max: E) {
    let t = tensor_with::<D, E>(data, dims, variant);
    let map = |f: &dyn Fn(E) -> E| data.iter().map(|&x| f(x)).collect::<Vec<E>>();
    let cases: [(&str, Tensor<D, E>, Vec<E>); 8] = [
        ("neg", t.neg(), map(&E::r_neg)),
        ("-&t", -&t, map(&E::r_neg)),
        ("-t", -t.clone(), map(&E::r_neg)),
        ("abs", t.try_abs().unwrap(), map(&E::r_abs)),
        ("relu", t.relu(), map(&E::r_relu)),
        ("square", t.square(), map(&E::r_square)),
        ("clamp", t.clamp(min, max), map(&|x| x.r_clamp(min, max))),
        ("try_clamp", t.try_clamp(min, max).unwrap(), map(&|x| x.r_clamp(min, max))),
    ];
    for (name, got, expected) in cases {
        assert_eq!(got.dims(), dims, "{name}");
        assert!(got.is_contiguous(), "{name}");
        assert_same(name, &got.to_vec(), &expected);
    }
    // The input is untouched.
    assert_same("input", &t.to_vec(), data);
}

/// Reference float functions in `f64`, rounded to the element type at the end.
fn float_reference(name: &str, x: f64, p: f64) -> f64 {
    match name {
        "exp" => x.exp(),
        "log" => x.ln(),
        "sqrt" => x.sqrt(),
        "tanh" => x.tanh(),
        "sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "powf" => x.powf(p),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "recip" => 1.0 / x,
        _ => unreachable!("{name}"),
    }
}

fn check_floats<D: Device, E: FloatElement>(dims: &[usize], data: &[E], variant: Variant, p: E, tol: f64) {
    let t = tensor_with::<D, E>(data, dims, variant);
    let cases: [(&str, Tensor<D, E>); 10] = [
        ("exp", t.exp()),
        ("log", t.log()),
        ("sqrt", t.sqrt()),
        ("tanh", t.tanh()),
        ("sigmoid", t.sigmoid()),
        ("powf", t.powf(p)),
        ("sin", t.sin()),
        ("cos", t.cos()),
        ("recip", t.recip()),
        ("try_sigmoid", t.try_sigmoid().unwrap()),
    ];
    for (name, got) in cases {
        let reference = name.trim_start_matches("try_");
        let expected: Vec<f64> =
            data.iter().map(|&x| E::from_f64(float_reference(reference, x.to_f64(), p.to_f64())).to_f64()).collect();
        assert_eq!(got.dims(), dims, "{name}");
        let got = as_f64(&got.to_vec());
        for (i, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            let ok = (g.is_nan() && e.is_nan()) || g == e || (g - e).abs() <= tol * (1.0 + e.abs());
            assert!(ok, "{name}({}) with p = {p}: got {g}, expected {e}", data[i]);
        }
    }
}

/// A possibly empty shape and `len` elements drawn from `elem`.
fn shaped<S>(elem: S) -> impl Strategy<Value = (Vec<usize>, Vec<S::Value>)>
where
    S: Strategy + Clone + 'static,
{
    shape_maybe_empty(4, 5).prop_flat_map(move |dims| {
        let len: usize = dims.iter().product();
        (Just(dims), prop::collection::vec(elem.clone(), len))
    })
}

/// Ordinary floats, large magnitudes (overflow of `exp`), and special values.
fn float_value() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        10 => -10.0..10.0f64,
        3 => -1000.0..1000.0f64,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
    ]
}

fn exponent() -> impl Strategy<Value = f64> {
    prop_oneof![Just(-2.0), Just(-0.5), Just(0.0), Just(0.5), Just(1.0), Just(2.0), Just(3.0), -3.0..3.0f64]
}

device_proptests! {
    cases = 64;

    fn all_type_ops_match_reference_f32<D>(
        (dims, data) in shaped(float_value()),
        v in variant(),
        a in float_value(),
        b in float_value(),
    ) {
        let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
        check_all_types::<D, f32>(&dims, &data, v, a as f32, b as f32);
    }

    fn all_type_ops_match_reference_f64<D>(
        (dims, data) in shaped(float_value()),
        v in variant(),
        a in -20.0..20.0f64,
        b in -20.0..20.0f64,
    ) {
        // Ordered and reversed bounds both occur.
        check_all_types::<D, f64>(&dims, &data, v, a, b);
    }

    fn all_type_ops_match_reference_i64<D>(
        (dims, data) in shaped(prop_oneof![any::<i64>(), -10..10i64, Just(i64::MIN)]),
        v in variant(),
        a in -20..20i64,
        b in -20..20i64,
    ) {
        check_all_types::<D, i64>(&dims, &data, v, a, b);
    }

    fn all_type_ops_match_reference_u8<D>(
        (dims, data) in shaped(any::<u8>()),
        v in variant(),
        a in any::<u8>(),
        b in any::<u8>(),
    ) {
        check_all_types::<D, u8>(&dims, &data, v, a, b);
    }

    fn float_ops_match_reference_f32<D>((dims, data) in shaped(float_value()), v in variant(), p in exponent()) {
        let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
        check_floats::<D, f32>(&dims, &data, v, p as f32, 1e-5);
    }

    fn float_ops_match_reference_f64<D>((dims, data) in shaped(float_value()), v in variant(), p in exponent()) {
        check_floats::<D, f64>(&dims, &data, v, p, 1e-12);
    }
}

fn special_values<D: Device>() {
    let x = Tensor::<D, f64>::from_vec(vec![0.0, -0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN], [6]);
    let bits = |t: Tensor<D, f64>| t.to_vec().iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" ");
    assert_eq!(bits(x.log()), "-inf -inf NaN inf NaN NaN");
    assert_eq!(bits(x.sqrt()), "0.0 -0.0 NaN inf NaN NaN");
    // The finite, non-zero results of exp, tanh, sigmoid, sin and cos may
    // differ by an ulp or two between the host's libm and CUDA's libdevice,
    // so off the `Cpu` they get the transcendental tolerance; NaN, the
    // infinities and the signs of zeros are exact everywhere.
    let near = |name: &str, t: Tensor<D, f64>, expected: [f64; 6]| {
        let (abs, rel) = if D::name() == "Cpu" { (0.0, 0.0) } else { tolerance::<f64>(Family::Transcendental) };
        for (i, (&g, e)) in t.to_vec().iter().zip(expected).enumerate() {
            let ok = if e.is_finite() && e != 0.0 {
                (g - e).abs() <= abs + rel * e.abs()
            } else {
                format!("{g:?}") == format!("{e:?}")
            };
            assert!(ok, "{name}: element {i}: got {g:?}, expected {e:?}");
        }
    };
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    near("exp", x.exp(), [1.0, 1.0, (-1.0f64).exp(), inf, 0.0, nan]);
    near("tanh", x.tanh(), [0.0, -0.0, (-1.0f64).tanh(), 1.0, -1.0, nan]);
    near("sigmoid", x.sigmoid(), [0.5, 0.5, 1.0 / (1.0 + 1.0f64.exp()), 1.0, 0.0, nan]);
    assert_eq!(bits(x.recip()), "inf -inf -1.0 0.0 -0.0 NaN");
    assert_eq!(bits(x.neg()), "-0.0 0.0 1.0 -inf inf NaN");
    assert_eq!(bits(x.abs()), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.relu()), "0.0 -0.0 0.0 inf 0.0 NaN");
    assert_eq!(bits(x.clamp(-0.5, 0.5)), "0.0 -0.0 -0.5 0.5 -0.5 NaN");
    assert_eq!(bits(x.square()), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.powf(2.0)), "0.0 0.0 1.0 inf inf NaN");
    assert_eq!(bits(x.powf(-1.0)), "inf -inf -1.0 0.0 -0.0 NaN");
    assert_eq!(bits(x.powf(0.0)), "1.0 1.0 1.0 1.0 1.0 1.0");
    near("sin", x.sin(), [0.0, -0.0, -0.8414709848078965, nan, nan, nan]);
    near("cos", x.cos(), [1.0, 1.0, 0.5403023058681398, nan, nan, nan]);

    // Sigmoid stays finite and exact at the extremes of f32, where the naive
    // `e^x / (1 + e^x)` would give inf / inf = NaN.
    let big = Tensor::<D>::from_vec(vec![-200.0, -88.0, 89.0, 200.0, f32::MAX, f32::MIN], [6]);
    let s = big.sigmoid().to_vec();
    assert!(s.iter().all(|v| v.is_finite()), "{s:?}");
    assert_eq!((s[0], s[3], s[4], s[5]), (0.0, 1.0, 1.0, 0.0));

    // Integers wrap, as in PyTorch.
    let i = Tensor::<D, i64>::from_vec(vec![i64::MIN, -3, 0, i64::MAX], [4]);
    assert_eq!(i.neg().to_vec(), vec![i64::MIN, 3, 0, -i64::MAX]);
    assert_eq!(i.abs().to_vec(), vec![i64::MIN, 3, 0, i64::MAX]);
    assert_eq!(i.square().to_vec(), vec![0, 9, 0, 1]);
    assert_eq!(i.relu().to_vec(), vec![0, 0, 0, i64::MAX]);
    let u = Tensor::<D, u8>::from_vec(vec![0, 1, 128, 255], [4]);
    assert_eq!((-&u).to_vec(), vec![0, 255, 128, 1]);
    assert_eq!(u.square().to_vec(), vec![0, 1, 0, 1]);
    assert_eq!(u.abs().to_vec(), vec![0, 1, 128, 255]);
    // min > max: everything becomes max, like torch.clamp.
    assert_eq!(u.clamp(200, 100).to_vec(), vec![100; 4]);
    assert_eq!(i.clamp(5, -5).to_vec(), vec![-5; 4]);
}

fn scalar_and_empty<D: Device>() {
    let s = Tensor::<D, f64>::scalar(4.0);
    assert_eq!(s.sqrt().dims(), &[] as &[usize]);
    assert_eq!(s.sqrt().item(), 2.0);
    let e = Tensor::<D>::zeros([2, 0, 3]);
    for t in [e.neg(), e.abs(), e.relu(), e.clamp(0.0, 1.0), e.square(), e.exp(), e.log(), e.powf(2.0), e.sigmoid()] {
        assert_eq!(t.dims(), &[2, 0, 3]);
        assert!(t.to_vec().is_empty());
    }
    // An empty view cut from a non-empty tensor.
    let v = Tensor::<D, i64>::arange(0, 6).reshape([2, 3]).narrow(1, 1, 0);
    assert_eq!(v.neg().dims(), &[2, 0]);
}

fn large_inputs<D: Device>() {
    // Past the parallel threshold, with a length that is not a chunk multiple,
    // contiguous and transposed; a multiple of 5, for the reshape below.
    let n = sized((1 << 17) + 3, (1 << 10) + 6);
    let data: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) / 1000.0).collect();
    let x = Tensor::<D>::from_vec(data.clone(), [n]);
    let got = x.sigmoid().to_vec();
    assert!(got.iter().zip(&data).all(|(&g, &x)| (g as f64 - 1.0 / (1.0 + (-(x as f64)).exp())).abs() < 1e-6));
    let got = x.neg().to_vec();
    assert!(got.iter().zip(&data).all(|(&g, &x)| g == -x));
    let m = x.reshape([5, n / 5]).t();
    let got = m.abs();
    assert_eq!(got.dims(), &[n / 5, 5]);
    assert_eq!(got.to_vec(), m.contiguous().to_vec().iter().map(|v| v.abs()).collect::<Vec<_>>());
}

/// The float functions at [`LARGE_SIZES`] on a strided view (every other
/// element of a `[n, 2]` tensor), against `f64` references; returns the
/// results, which the CUDA instances also compare with the `Cpu` ones.
fn large_float_functions<D: Device>() -> Vec<f32> {
    let mut all = Vec::new();
    for n in LARGE_SIZES {
        let data: Vec<f32> = (0..2 * n).map(|i| (i as f32 - n as f32) / 50_000.0).collect();
        let x = Tensor::<D>::from_vec(data.clone(), [n, 2]).select(1, 0);
        assert!(!x.is_contiguous());
        let cases: [(&str, Tensor<D>, fn(f64) -> f64); 5] = [
            ("exp", x.exp(), f64::exp),
            ("tanh", x.tanh(), f64::tanh),
            ("sigmoid", x.sigmoid(), |v| 1.0 / (1.0 + (-v).exp())),
            ("sqrt of abs", x.abs().sqrt(), |v| v.abs().sqrt()),
            ("sin", x.sin(), f64::sin),
        ];
        for (name, got, f) in cases {
            assert_eq!(got.dims(), &[n], "{name}");
            let got = got.to_vec();
            for (i, &g) in got.iter().enumerate() {
                let e = f(data[2 * i] as f64);
                assert!(
                    (g as f64 - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "{name} of {n}: element {i}: got {g}, expected {e}"
                );
            }
            all.extend(got);
        }
    }
    all
}

device_tests! {
    special_values_follow_ieee_and_pytorch => special_values,
    scalars_and_empty_tensors => scalar_and_empty,
    large_inputs_on_two_layouts => large_inputs,
}

device_tests_vs_cpu! {
    large_float_functions_on_a_strided_view => large_float_functions, Family::Transcendental;
}

#[test]
fn unary_ops_cannot_fail_on_the_cpu() {
    // Unary ops have no shape, axis or index arguments: their `try_` forms
    // fail only when a device cannot run the kernel, which never happens on
    // the CPU.
    let x = Tensor::<Cpu>::from_vec(vec![-1.0, 2.0], [2]);
    assert!(x.try_neg().is_ok() && x.try_relu().is_ok() && x.try_square().is_ok());
    assert!(x.try_exp().is_ok() && x.try_log().is_ok() && x.try_sqrt().is_ok() && x.try_tanh().is_ok());
    assert!(x.try_powf(0.5).is_ok() && x.try_sin().is_ok() && x.try_cos().is_ok() && x.try_recip().is_ok());
}
