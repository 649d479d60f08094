//! Transcendental functions in plain `f32` arithmetic, which the compiler
//! vectorises inside the CPU loops, where a call to libm would run one
//! element at a time. `f64` keeps libm (its polynomials would need twice
//! the terms); the choice is on a constant and vanishes once the element
//! type is known.

use crate::element::{DType, FloatElement};

/// Whether code built for the crate's baseline target has fused
/// multiply-add as one instruction: on AArch64 always, on x86-64 only when
/// built for a CPU with FMA (`-C target-cpu=native`). The loops built for
/// AVX2 and AVX-512 have it whatever the baseline ([`VectorLoop`](super::VectorLoop)).
pub(crate) const BASELINE_FMA: bool = cfg!(any(target_arch = "aarch64", target_feature = "fma"));

/// `a · b + c`, rounded once where `FMA` says the instruction is there
/// (half the instructions of a polynomial, and no worse), and as a product
/// and a sum elsewhere, where `mul_add` would call libm for each element.
#[inline(always)]
pub(crate) fn mul_add<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `exp(x)` for `x <= 0`, -inf or NaN (softmax exponentiates `x - max`,
/// the sigmoid and the normal density only non-positive values).
/// Plain `f32` arithmetic, which the compiler vectorises, where a call to
/// libm's `expf` would run one element at a time.
///
/// Reduces `x = n ln2 + r` with `|r| <= ln2 / 2` (ln2 split in two so `n ln2`
/// is exact) and evaluates Cephes' degree-7 polynomial for `exp(r)`; scaling
/// by `2^n` is done on the exponent bits. Within 1 ulp of the exact value
/// for every `f32` in `[-87.33, 0]` (checked exhaustively against `f64::exp`
/// while writing it; the unit test below samples the range), and within one
/// step of the subnormals below, down to `2^-150`, under which it is 0.
///
/// `FMA`: whether the loop it is inlined into has fused multiply-add
/// ([`mul_add`]).
#[inline(always)]
pub(crate) fn exp_nonpositive_f32<const FMA: bool>(x: f32) -> f32 {
    exp_of_sum::<FMA>(x, None)
}

/// [`exp_nonpositive_f32`] of `hi + lo` (`hi + lo <= 0`), with `lo` added
/// only after the reduction by `n ln2`, so that its low bits are not lost
/// to rounding the sum: one exp where `erfc` took two, at the same error.
#[inline(always)]
fn exp_of_sum<const FMA: bool>(hi: f32, lo: Option<f32>) -> f32 {
    let x = lo.map_or(hi, |lo| hi + lo);
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 * 2^23 rounds to an integer (no `round`, a libm call
    // without SSE4.1) and leaves that integer in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    // Below this, exp(x) rounds to 0 even as a subnormal.
    const MIN_X: f32 = -103.972_08;
    let fma = mul_add::<FMA>;
    let k = fma(x, std::f32::consts::LOG2_E, ROUND);
    let n = k - ROUND;
    let r = fma(n, -LN2_LO, fma(n, -LN2_HI, hi));
    let r = lo.map_or(r, |lo| r + lo);
    let p = fma(
        fma(fma(fma(fma(1.987_569_1e-4, r, 1.398_199_9e-3), r, 8.333_452e-3), r, 4.166_579_6e-2), r, 1.666_666_5e-1),
        r,
        0.5,
    );
    let p = fma(p, r * r, r) + 1.0;
    // 2^n from n's bits, in integer arithmetic: no float-to-int conversion,
    // whose saturation checks would slow the vector loop. n is in -150..=0
    // whenever the result is used; for NaN, p is NaN already. Below -126,
    // 2^n is subnormal and has no exponent bits of its own: scale by
    // 2^(n + 64), then by 2^-64, which rounds once, to the subnormal.
    let deep = n < -126.0;
    let bias: u32 = if deep { 127 + 64 } else { 127 };
    let scale = f32::from_bits(k.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(bias) << 23);
    let value = p * scale;
    let value = if deep { value * f32::from_bits((127 - 64) << 23) } else { value };
    if x < MIN_X { 0.0 } else { value }
}

/// `exp(x)` for `x <= 0`: the vectorisable kernel for `f32` (and the half
/// types, which compute in `f32`), libm for `f64` (whose polynomial would
/// need twice the terms). The branch is on a
/// constant and vanishes once `E` is known.
#[inline(always)]
pub(crate) fn exp_nonpositive<E: FloatElement, const FMA: bool>(x: E) -> E {
    match E::DTYPE {
        DType::F32 | DType::BF16 | DType::F16 => E::from_f32(exp_nonpositive_f32::<FMA>(x.cast::<f32>())),
        DType::F64 => x.exp(),
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

/// The logistic function `1 / (1 + e^-x)` through `e^-|x|`, which never
/// overflows ([`exp_nonpositive`]); a select and one division, no branch,
/// so that the loop around it vectorises (NaN takes the second arm).
/// `FMA` as in [`exp_nonpositive_f32`].
#[inline(always)]
pub(crate) fn sigmoid<E: FloatElement, const FMA: bool>(x: E) -> E {
    let e = exp_nonpositive::<E, FMA>(-x.abs());
    let numerator = if x >= E::ZERO { E::ONE } else { e };
    numerator / (E::ONE + e)
}

/// `tanh(x)` in `f32`, vectorisable: an odd polynomial near 0, where
/// `(1 - e) / (1 + e)` would cancel, and that quotient of
/// `e = exp(-2|x|)` ([`exp_nonpositive_f32`]) elsewhere, with `x`'s sign.
/// Both are computed and one is selected, with no branch, so that the loop
/// around it vectorises. Within 2 ulp of the exact value for every `f32`
/// (the unit test below walks the range); `tanh(±0) = ±0`, `tanh(±inf) =
/// ±1`, NaN stays NaN. `FMA` as in [`exp_nonpositive_f32`].
#[inline(always)]
pub(crate) fn tanh_f32<const FMA: bool>(x: f32) -> f32 {
    let fma = mul_add::<FMA>;
    let a = x.abs();
    // `tanh(x) = x + x³ P(x²)` on `|x| < 0.625`, `P` fitted here (weighted
    // least squares on Chebyshev nodes, refined towards equal ripple) to a
    // relative error of 5e-9 in exact arithmetic.
    let z = x * x;
    let p =
        fma(fma(fma(fma(-5.692_012_6e-3, z, 2.062_632e-2), z, -5.373_532_7e-2), z, 1.333_138_2e-1), z, -3.333_328e-1);
    let near_zero = fma(x * z, p, x);
    let e = exp_nonpositive_f32::<FMA>(-2.0 * a);
    let far = (1.0 - e) / (1.0 + e);
    // The sign again on both: the polynomial gives +0 for -0.
    (if a < 0.625 { near_zero } else { far }).copysign(x)
}

/// `tanh(x)`: [`tanh_f32`] for `f32` and the half types, libm for `f64`.
#[inline(always)]
pub(crate) fn tanh<E: FloatElement, const FMA: bool>(x: E) -> E {
    match E::DTYPE {
        DType::F32 | DType::BF16 | DType::F16 => E::from_f32(tanh_f32::<FMA>(x.cast::<f32>())),
        DType::F64 => x.tanh(),
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

/// `erfc(z) = 1 - erf(z)` in `f32`, vectorisable: the Chebyshev fit of
/// Numerical Recipes' `erfcc`, `t · exp(-z² + P(t))` with `t = 1/(1 + z/2)`
/// for `z >= 0` and `2 - erfc(-z)` below, whose relative error is below
/// `1.2e-7` everywhere: within 6 ulp in `f32` arithmetic (the test below).
/// Relative, so that `erfc` of large arguments keeps its digits.
/// `FMA` as in [`exp_nonpositive_f32`].
#[inline(always)]
pub(crate) fn erfc_f32<const FMA: bool>(z: f32) -> f32 {
    let fma = mul_add::<FMA>;
    let za = z.abs();
    let t = 1.0 / fma(0.5, za, 1.0);
    let p =
        [-0.822_152_2, 1.488_515_9, -1.135_204, 0.278_868_07, -0.186_288_06, 0.096_784_18, 0.374_091_96, 1.000_023_7]
            .into_iter()
            .fold(0.170_872_77, |p, c| fma(p, t, c))
            * t;
    // `e^(-z²)` as `e^(-h² - (z - h)(z + h))`, with `h` the leading 12
    // bits of `z`: `h²` is exact, where rounding `z²` to `f32` would cost
    // up to 100 ulp at `z = 8`, and the rest joins after the reduction. The
    // rest exceeds 0 by about 3e-8 at `z = 0`, where its exp is 1 to `f32`.
    let head = f32::from_bits(za.to_bits() & 0xffff_f000);
    let rest = (fma(-(za - head), za + head, -1.265_512_2) + p).min(0.0);
    let tail = t * exp_of_sum::<FMA>(-head * head, Some(rest));
    if z >= 0.0 { tail } else { 2.0 - tail }
}

/// `erfc(z)`: [`erfc_f32`] for `f32` and the half types, libm for `f64`.
#[inline(always)]
pub(crate) fn erfc<E: FloatElement, const FMA: bool>(z: E) -> E {
    match E::DTYPE {
        DType::F32 | DType::BF16 | DType::F16 => E::from_f32(erfc_f32::<FMA>(z.cast::<f32>())),
        DType::F64 => E::from_f64(libm::erfc(z.cast::<f64>())),
        DType::I64 | DType::U8 => unreachable!("{}", crate::element::NOT_FLOAT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both builds of each function: with fused multiply-add (the AVX2 and
    /// AVX-512 loops) and without (baseline x86-64).
    #[test]
    fn fast_exp_is_within_one_ulp() {
        exp_within_one_ulp::<false>();
        exp_within_one_ulp::<true>();
    }

    #[test]
    fn fast_erfc_is_within_six_ulp() {
        erfc_within_six_ulp::<false>();
        erfc_within_six_ulp::<true>();
    }

    #[test]
    fn fast_tanh_is_within_two_ulp() {
        tanh_within_two_ulp::<false>();
        tanh_within_two_ulp::<true>();
    }

    fn tanh_within_two_ulp<const FMA: bool>() {
        let tanh_f32 = tanh_f32::<FMA>;
        let mut worst = 0.0f64;
        // Every magnitude from the subnormals to 10, where tanh is 1 in
        // f32, on a grid a few ulp wide near 0.625 (the switch) and
        // geometric elsewhere, both signs.
        let mut a = 1.0e-40f32;
        while a <= 10.0 {
            for x in [a, -a] {
                let exact = (x as f64).tanh();
                let got = tanh_f32(x) as f64;
                let rounded = exact as f32;
                let ulp = (f32::from_bits(rounded.abs().to_bits() + 1) - rounded.abs()) as f64;
                worst = worst.max((got - exact).abs() / ulp);
            }
            let step = if (0.6..0.65).contains(&a) { 1.0e-7 } else { a * 1.0e-4 };
            a += step.max(1.0e-45);
        }
        assert!(worst <= 2.0, "worst error {worst} ulp (FMA: {FMA})");
        assert_eq!(tanh_f32(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!((tanh_f32(f32::INFINITY), tanh_f32(f32::NEG_INFINITY)), (1.0, -1.0));
        assert_eq!((tanh_f32(1e30), tanh_f32(-1e30)), (1.0, -1.0));
        assert!(tanh_f32(f32::NAN).is_nan());
    }

    fn exp_within_one_ulp<const FMA: bool>() {
        let exp_nonpositive_f32 = exp_nonpositive_f32::<FMA>;
        let mut worst = 0.0f64;
        let mut x = -88.0f32;
        while x <= 0.0 {
            let exact = (x as f64).exp();
            let got = exp_nonpositive_f32(x) as f64;
            if exact >= f32::MIN_POSITIVE as f64 {
                let rounded = exact as f32;
                let ulp = (f32::from_bits(rounded.to_bits() + 1) - rounded) as f64;
                worst = worst.max((got - exact).abs() / ulp);
            } else {
                // One step of the subnormals is 2^-149.
                assert!((got - exact).abs() <= 2f64.powi(-149), "exp({x}) = {got}, exactly {exact}");
            }
            x += 1.0e-3 * (1.0 + x.abs() / 8.0);
        }
        x = -110.0;
        while x < -87.0 {
            let (exact, got) = ((x as f64).exp(), exp_nonpositive_f32(x) as f64);
            assert!((got - exact).abs() <= 2f64.powi(-149), "exp({x}) = {got}, exactly {exact}");
            x += 1.0e-3;
        }
        assert!(worst <= 1.0, "worst error {worst} ulp (FMA: {FMA})");
        assert_eq!(exp_nonpositive_f32(0.0), 1.0);
        assert_eq!(exp_nonpositive_f32(-0.0), 1.0);
        assert_eq!(exp_nonpositive_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive_f32(-1e30), 0.0);
        assert!(exp_nonpositive_f32(f32::NAN).is_nan());
    }

    fn erfc_within_six_ulp<const FMA: bool>() {
        let erfc_f32 = erfc_f32::<FMA>;
        let mut worst = 0.0f64;
        let mut z = -10.0f32;
        while z <= 10.0 {
            let exact = libm::erfc(z as f64);
            let got = erfc_f32(z) as f64;
            if exact >= f32::MIN_POSITIVE as f64 {
                let rounded = exact as f32;
                let ulp = (f32::from_bits(rounded.to_bits() + 1) - rounded) as f64;
                worst = worst.max((got - exact).abs() / ulp);
            } else {
                assert!(got <= f32::MIN_POSITIVE as f64 * 1.01, "erfc({z}) = {got}");
            }
            z += 1.0e-3;
        }
        // The worst on this grid: 5.6 ulp, at z = 7.69, with FMA and without.
        assert!(worst <= 6.0, "worst error {worst} ulp (FMA: {FMA})");
        assert_eq!((erfc_f32(f32::INFINITY), erfc_f32(f32::NEG_INFINITY)), (0.0, 2.0));
        assert!(erfc_f32(f32::NAN).is_nan());
    }
}
