//! The element-wise functions of `torch`'s math library beyond the
//! basics of `ops.rs`: the rest of the trigonometric and hyperbolic
//! functions, logarithms and exponentials in base 2 and 10, and rounding
//! (`floor`, `ceil`, `round`, `trunc`, `frac`, `sign`). Each is one op type,
//! its CUDA kernel one line of `kernels/unary.cu` and its test one row of
//! `tests/ops/unary.rs`.

use super::{KernelSource, UnaryOp};
use crate::element::{DType, Element, FloatElement};
use crate::error::Result;
use crate::tensor::Device;
use crate::tensor::Tensor;

/// Declares a float op without parameters: its doc, type, name, value on
/// one element and gradient (from the input `x`, the result `y` and the
/// incoming `grad`; `_` for those it does not use).
macro_rules! float_op {
    ($(
        $(#[$doc:meta])*
        $Op:ident, $name:literal,
        |$x:ident| $apply:expr,
        |$bx:pat_param, $by:pat_param, $grad:ident| $backward:expr;
    )*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $Op;

        impl<F: FloatElement> UnaryOp<F> for $Op {
            const NAME: &'static str = $name;
            const KERNELS: KernelSource = KernelSource::BUILT_IN;
            apply_in_f32!();

            #[inline(always)]
            fn apply(self, $x: F) -> F {
                $apply
            }

            fn backward<D: Device>(self, $bx: &Tensor<D, F>, $by: &Tensor<D, F>, $grad: &Tensor<D, F>) -> Result<Tensor<D, F>> {
                $backward
            }
        }
    )*};
}

/// Declares an op of every element type without parameters whose
/// gradient is zero wherever it exists (a step function): its doc, type,
/// name and value on one element.
macro_rules! step_op {
    ($($(#[$doc:meta])* $Op:ident, $name:literal, |$x:ident| $apply:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $Op;

        impl<E: Element> UnaryOp<E> for $Op {
            const NAME: &'static str = $name;
            const KERNELS: KernelSource = KernelSource::BUILT_IN;
            apply_in_f32!();

            #[inline(always)]
            fn apply(self, $x: E) -> E {
                $apply
            }

            /// Zero, as in PyTorch (also at the steps, where the function jumps).
            fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>) -> Result<Tensor<D, E>> {
                grad.try_zeros_like()
            }
        }
    )*};
}

/// `x` through `libm`'s `f32` or `f64` function. Rust's own `asinh`,
/// `acosh` and `atanh` are written from `ln` and lose digits (`f32`
/// `atanh(-0.95)` is off by 5 ulp); `libm`'s, a port of musl's, are within
/// an ulp, as PyTorch's (below 1 `libm`'s `acoshf` returns a number, so
/// [`Acosh`] answers NaN there itself).
#[inline(always)]
fn libm_f<F: FloatElement>(x: F, f32_fn: fn(f32) -> f32, f64_fn: fn(f64) -> f64) -> F {
    if F::DTYPE == DType::F64 { F::from_f64(f64_fn(x.to_f64())) } else { F::from_f32(f32_fn(x.to_f64() as f32)) }
}

float_op! {
    /// The tangent (radians), `torch.tan`.
    Tan, "tan", |x| x.tan(), |_, y, grad| grad.try_mul(&y.try_square()?.try_add_scalar(F::ONE)?);
    /// The inverse sine, `torch.asin` (`arcsin`): NaN outside `[-1, 1]`.
    Asin, "asin", |x| x.asin(), |x, _, grad| grad.try_mul(&x.try_square()?.try_rsub_scalar(F::ONE)?.try_rsqrt()?);
    /// The inverse cosine, `torch.acos` (`arccos`): NaN outside `[-1, 1]`.
    Acos, "acos", |x| x.acos(),
        |x, _, grad| grad.try_mul(&x.try_square()?.try_rsub_scalar(F::ONE)?.try_rsqrt()?)?.try_neg();
    /// The inverse tangent, `torch.atan` (`arctan`).
    Atan, "atan", |x| x.atan(), |x, _, grad| grad.try_div(&x.try_square()?.try_add_scalar(F::ONE)?);
    /// The hyperbolic sine, `torch.sinh`.
    Sinh, "sinh", |x| x.sinh(), |x, _, grad| grad.try_mul(&x.try_cosh()?);
    /// The hyperbolic cosine, `torch.cosh`.
    Cosh, "cosh", |x| x.cosh(), |x, _, grad| grad.try_mul(&x.try_sinh()?);
    /// The inverse hyperbolic sine, `torch.asinh` (`arcsinh`).
    Asinh, "asinh", |x| libm_f(x, libm::asinhf, libm::asinh), |x, _, grad| grad.try_mul(&x.try_square()?.try_add_scalar(F::ONE)?.try_rsqrt()?);
    /// The inverse hyperbolic cosine, `torch.acosh` (`arccosh`): NaN below 1.
    Acosh, "acosh", |x| if x < F::ONE { F::nan() } else { libm_f(x, libm::acoshf, libm::acosh) }, |x, _, grad| grad.try_mul(&x.try_square()?.try_sub_scalar(F::ONE)?.try_rsqrt()?);
    /// The inverse hyperbolic tangent, `torch.atanh` (`arctanh`): `±inf` at
    /// `±1`, NaN beyond.
    Atanh, "atanh", |x| libm_f(x, libm::atanhf, libm::atanh), |x, _, grad| grad.try_div(&x.try_square()?.try_rsub_scalar(F::ONE)?);
    /// The base-2 logarithm, `torch.log2`.
    Log2, "log2", |x| x.log2(),
        |x, _, grad| grad.try_div(&x.try_mul_scalar(F::from_f64(std::f64::consts::LN_2))?);
    /// The base-10 logarithm, `torch.log10`.
    Log10, "log10", |x| x.log10(),
        |x, _, grad| grad.try_div(&x.try_mul_scalar(F::from_f64(std::f64::consts::LN_10))?);
    /// `2^x`, `torch.exp2`.
    Exp2, "exp2", |x| x.exp2(), |_, y, grad| grad.try_mul(&y.try_mul_scalar(F::from_f64(std::f64::consts::LN_2))?);
    /// The fractional part `x - trunc(x)`, with `x`'s sign, `torch.frac`:
    /// NaN for infinities.
    Frac, "frac", |x| x - x.trunc(), |_, _, grad| Ok(grad.clone());
}

step_op! {
    /// The largest integer not above `x`, `torch.floor`; integers are unchanged.
    Floor, "floor", |x| if E::IS_FLOAT { E::from_f64(x.to_f64().floor()) } else { x };
    /// The smallest integer not below `x`, `torch.ceil`; integers are unchanged.
    Ceil, "ceil", |x| if E::IS_FLOAT { E::from_f64(x.to_f64().ceil()) } else { x };
    /// The nearest integer, halves to the even one (`round(2.5) = 2`,
    /// `round(-0.5) = -0.0`), `torch.round`; integers are unchanged.
    Round, "round", |x| if E::IS_FLOAT { E::from_f64(x.to_f64().round_ties_even()) } else { x };
    /// `x` rounded toward zero, `torch.trunc` (`fix`); integers are unchanged.
    Trunc, "trunc", |x| if E::IS_FLOAT { E::from_f64(x.to_f64().trunc()) } else { x };
    /// `1` for positive `x`, `-1` for negative, `0` otherwise, `torch.sign`:
    /// as PyTorch 2.15 computes it (`(0 < x) - (x < 0)`), both zeros give
    /// `+0.0` and NaN gives `0`; a byte is `0` or `1`.
    Sign, "sign", |x| if x > E::ZERO { E::ONE } else if x < E::ZERO { E::ZERO.sub(E::ONE) } else { E::ZERO };
}
