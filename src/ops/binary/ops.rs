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
