//! The comparisons and mask logic, each declared once: its name (which
//! names its CUDA kernels in `kernels/compare.cu`) and its value on a pair
//! of elements. The methods on [`Tensor`](crate::Tensor) that run them are
//! in the parent module; `tests/ops/compare.rs` checks each against a
//! reference.
//!
//! `PartialOrd` on floats is IEEE 754: every comparison with NaN is false,
//! except `!=`, which is true.

use super::CompareOp;
use crate::element::Element;
use crate::ops::KernelSource;

/// Declares a built-in comparison: a unit type, its doc, its name and its
/// predicate on two elements of any type.
macro_rules! comparison_ops {
    ($($(#[$doc:meta])* $op:ident, $name:literal, |$a:ident, $b:ident| $predicate:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $op;

        impl<E: Element> CompareOp<E> for $op {
            const NAME: &'static str = $name;
            const KERNELS: KernelSource = KernelSource::BUILT_IN;

            #[inline(always)]
            fn apply(self, $a: E, $b: E) -> bool {
                $predicate
            }
        }
    )*};
}

comparison_ops! {
    /// `a == b`.
    Equal, "eq", |a, b| a == b;
    /// `a != b` (true when either side is NaN).
    NotEqual, "ne", |a, b| a != b;
    /// `a < b`.
    Less, "lt", |a, b| a < b;
    /// `a <= b`.
    LessEqual, "le", |a, b| a <= b;
    /// `a > b`.
    Greater, "gt", |a, b| a > b;
    /// `a >= b`.
    GreaterEqual, "ge", |a, b| a >= b;
    /// Both non-zero. Non-short-circuit `&`, so the CPU loop has no branch.
    LogicalAnd, "logical_and", |a, b| (a != E::ZERO) & (b != E::ZERO);
    /// Either non-zero.
    LogicalOr, "logical_or", |a, b| (a != E::ZERO) | (b != E::ZERO);
}
