//! The binary operations, each declared once: its name (which names its
//! CUDA kernels in `kernels/binary.cu`), its value on a pair of elements,
//! and its gradients. The methods on [`Tensor`] that run them are in the
//! parent module; `tests/ops/binary.rs` checks each against a reference and
//! central differences.
//!
//! Gradients run only on float tensors (only those track gradients), but
//! are written for any [`Element`], as the ops take every element type.

use super::{BinaryOp, Needs};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::ops::compare::masked;
use crate::ops::unary::KernelSource;
use crate::tensor::Device;
use crate::tensor::Tensor;
use num_traits::Float;

/// `a + b`; integers wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Add;

impl<E: Element> BinaryOp<E> for Add {
    const NAME: &'static str = "add";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.add(b)
    }

    fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| Ok(grad.clone()), || Ok(grad.clone()))
    }
}

/// `a - b`; integers wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sub;

impl<E: Element> BinaryOp<E> for Sub {
    const NAME: &'static str = "sub";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.sub(b)
    }

    fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| Ok(grad.clone()), || grad.try_neg())
    }
}

/// `a * b`; integers wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mul;

impl<E: Element> BinaryOp<E> for Mul {
    const NAME: &'static str = "mul";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.mul(b)
    }

    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| grad.try_mul(b), || grad.try_mul(a))
    }
}

/// `a / b` in the element type: true division for floats; integers
/// truncate, and a zero integer divisor is an error. The public `/` sends
/// integers to floats first, so integers reach this only through
/// `div_trunc`'s kernels and in-place forms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Div;

impl<E: Element> BinaryOp<E> for Div {
    const NAME: &'static str = "div";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    const DIVISION: bool = true;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        // Zero integer divisors were rejected before the loop.
        a.div(b).unwrap_or(E::ZERO)
    }

    /// `grad / b` and `-grad * a / b²`.
    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(
            || grad.try_apply_binary(Div, b),
            || grad.try_mul(a)?.try_apply_binary(Div, &b.try_square()?)?.try_neg(),
        )
    }
}

/// `a / b` rounded toward zero, PyTorch's `rounding_mode="trunc"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DivTrunc;

impl<E: Element> BinaryOp<E> for DivTrunc {
    const NAME: &'static str = "div_trunc";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    const DIVISION: bool = true;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.div_trunc(b).unwrap_or(E::ZERO)
    }

    /// Piecewise constant: zero almost everywhere, as PyTorch defines it.
    fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| grad.try_zeros_like(), || grad.try_zeros_like())
    }
}

/// `a / b` rounded toward negative infinity: Python's `//`, PyTorch's
/// `rounding_mode="floor"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DivFloor;

impl<E: Element> BinaryOp<E> for DivFloor {
    const NAME: &'static str = "div_floor";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    const DIVISION: bool = true;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.div_floor(b).unwrap_or(E::ZERO)
    }

    /// Piecewise constant: zero almost everywhere, as PyTorch defines it.
    fn backward<D: Device>(self, _: &Tensor<D, E>, _: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| grad.try_zeros_like(), || grad.try_zeros_like())
    }
}

/// The larger of `a` and `b`; NaN on either side wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Maximum;

impl<E: Element> BinaryOp<E> for Maximum {
    const NAME: &'static str = "maximum";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.max(b)
    }

    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        winner_grads(a, b, grad, needs, |x, y| x.try_lt(y))
    }
}

/// The smaller of `a` and `b`; NaN on either side wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Minimum;

impl<E: Element> BinaryOp<E> for Minimum {
    const NAME: &'static str = "minimum";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        a.min(b)
    }

    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        winner_grads(a, b, grad, needs, |x, y| x.try_gt(y))
    }
}

/// `a` to the power `b` for floats, as `torch.pow(a, b)` and C's `pow`:
/// `0^0 = 1`, `0^-1 = inf`, and a negative base with a fractional exponent
/// gives NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pow;

impl<F: FloatElement> BinaryOp<F> for Pow {
    const NAME: &'static str = "pow";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: F, b: F) -> F {
        a.powf(b)
    }

    /// PyTorch's rules: `grad * b * a^(b - 1)`, 0 where `b = 0`; and
    /// `grad * a^b * ln(a)`, 0 where `a = 0` and `b >= 0` (where the
    /// product is `0 * -inf`).
    fn backward<D: Device>(self, a: &Tensor<D, F>, b: &Tensor<D, F>, grad: &Tensor<D, F>, needs: Needs) -> Grads<D, F> {
        needs.grads(
            || {
                let slope = b.try_mul(&a.try_apply_binary(Pow, &b.try_sub_scalar(F::ONE)?)?)?;
                masked(&b.try_ne_scalar(F::ZERO)?, &grad.try_mul(&slope)?)
            },
            || {
                let slope = a.try_apply_binary(Pow, b)?.try_mul(&a.try_log()?)?;
                let zero_base = a.try_eq_scalar(F::ZERO)?.try_logical_and(&b.try_ge_scalar(F::ZERO)?)?;
                masked(&zero_base.try_logical_not()?, &grad.try_mul(&slope)?)
            },
        )
    }
}

/// The remainder of `a / b` with the sign of the divisor `b`, Python's
/// `%` and `torch.remainder`: `a - floor(a / b) · b`, computed for floats
/// as PyTorch does (the exact `fmod`, moved by `b` when the signs differ), so
/// `remainder(x, 0)` and `remainder(±inf, b)` are NaN; a zero integer
/// divisor is an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Remainder;

impl<E: Element> BinaryOp<E> for Remainder {
    const NAME: &'static str = "remainder";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    const DIVISION: bool = true;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        if E::IS_FLOAT {
            let m = Fmod.apply(a, b);
            if m != E::ZERO && ((b < E::ZERO) != (m < E::ZERO)) { m.add(b) } else { m }
        } else {
            // Zero integer divisors were rejected before the loop; wrapping
            // gives `i64::MIN % -1 == 0`.
            a.sub(a.div_floor(b).unwrap_or(E::ZERO).mul(b))
        }
    }

    /// `grad` and `-grad · floor(a / b)`, PyTorch's.
    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| Ok(grad.clone()), || grad.try_mul(&a.try_div_floor(b)?)?.try_neg())
    }
}

/// The remainder of `a / b` with the sign of the dividend `a`, C's `fmod`
/// and `torch.fmod`: `a - trunc(a / b) · b`, exact for floats;
/// `fmod(x, 0)` and `fmod(±inf, b)` are NaN; a zero integer divisor is an
/// error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fmod;

impl<E: Element> BinaryOp<E> for Fmod {
    const NAME: &'static str = "fmod";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;
    const DIVISION: bool = true;

    #[inline(always)]
    fn apply(self, a: E, b: E) -> E {
        if E::IS_FLOAT {
            // Exact in f64 for every float type, so one conversion back.
            E::from_f64(a.to_f64() % b.to_f64())
        } else {
            a.sub(a.div_trunc(b).unwrap_or(E::ZERO).mul(b))
        }
    }

    /// `grad` and `-grad · trunc(a / b)`, PyTorch's.
    fn backward<D: Device>(self, a: &Tensor<D, E>, b: &Tensor<D, E>, grad: &Tensor<D, E>, needs: Needs) -> Grads<D, E> {
        needs.grads(|| Ok(grad.clone()), || grad.try_mul(&a.try_div_trunc(b)?)?.try_neg())
    }
}

/// The angle of the point `(b, a)`, in `[-π, π]`, `torch.atan2(a, b)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Atan2;

impl<F: FloatElement> BinaryOp<F> for Atan2 {
    const NAME: &'static str = "atan2";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    #[inline(always)]
    fn apply(self, a: F, b: F) -> F {
        a.atan2(b)
    }

    /// `grad · b / (a² + b²)` and `-grad · a / (a² + b²)`.
    fn backward<D: Device>(self, a: &Tensor<D, F>, b: &Tensor<D, F>, grad: &Tensor<D, F>, needs: Needs) -> Grads<D, F> {
        let scale = grad.try_mul(&a.try_square()?.try_add(&b.try_square()?)?.try_recip()?)?;
        needs.grads(|| scale.try_mul(b), || scale.try_mul(a)?.try_neg())
    }
}

/// `log(e^a + e^b)` without overflow, `torch.logaddexp`: the larger plus
/// `log1p(e^-|a - b|)`, and `a` itself when both are the same infinity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Logaddexp;

impl<F: FloatElement> BinaryOp<F> for Logaddexp {
    const NAME: &'static str = "logaddexp";
    const KERNELS: KernelSource = KernelSource::BUILT_IN;

    /// In `F::Accumulator` (`f32` for the half types), so that a half
    /// result rounds once, as the CUDA kernel's.
    #[inline(always)]
    fn apply(self, a: F, b: F) -> F {
        let (a, b) = (a.cast::<F::Accumulator>(), b.cast::<F::Accumulator>());
        let sum = if a.is_infinite() && a == b { a } else { Element::max(a, b) + (-(a - b).abs()).exp().ln_1p() };
        sum.cast::<F>()
    }

    /// `grad / (1 + e^(b - a))` and `grad / (1 + e^(a - b))`, PyTorch's.
    fn backward<D: Device>(self, a: &Tensor<D, F>, b: &Tensor<D, F>, grad: &Tensor<D, F>, needs: Needs) -> Grads<D, F> {
        let share =
            |x: &Tensor<D, F>, y: &Tensor<D, F>| grad.try_div(&y.try_sub(x)?.try_exp()?.try_add_scalar(F::ONE)?);
        needs.grads(|| share(a, b), || share(b, a))
    }
}

/// The gradients a [`BinaryOp::backward`] returns: for `a` and for `b`.
type Grads<D, E> = Result<[Option<Tensor<D, E>>; 2]>;

/// The gradients of `maximum` (a side loses where it is `<` the other) or
/// `minimum` (where it is `>`): each side gets its [`winner_share`]; the
/// tie mask is computed once for both.
fn winner_grads<D: Device, E: Element>(
    a: &Tensor<D, E>,
    b: &Tensor<D, E>,
    grad: &Tensor<D, E>,
    needs: Needs,
    loses: impl Fn(&Tensor<D, E>, &Tensor<D, E>) -> Result<Tensor<D, u8>>,
) -> Grads<D, E> {
    let tie = a.try_eq(b)?;
    needs.grads(|| winner_share(grad, loses(a, b)?, tie.clone()), || winner_share(grad, loses(b, a)?, tie.clone()))
}

/// The share of `grad` that `maximum(a, b)` (or `minimum`) passes to one
/// side: all of it where that side won, none where the other won
/// (`other_wins`), half on a tie, PyTorch's rule. NaN propagates from
/// either side, and fails every comparison, so both sides get all of it.
fn winner_share<D: Device, E: Element>(
    grad: &Tensor<D, E>,
    other_wins: Tensor<D, u8>,
    tie: Tensor<D, u8>,
) -> Result<Tensor<D, E>> {
    let half = tie.try_where_cond(&grad.try_mul_scalar(E::from_f64(0.5))?, grad)?;
    masked(&other_wins.try_logical_not()?, &half)
}
