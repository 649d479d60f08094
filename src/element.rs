//! Element types a tensor can hold.
//!
//! [`Element`] is sealed: `f32`, `f64`, the half-precision [`bf16`] and
//! [`f16`](struct@f16), `i64` (labels and indices) and `u8` (masks, as produced by
//! comparisons). [`FloatElement`] narrows to the four float types for
//! operations that only make sense on real numbers (`exp`, `softmax`).
//!
//! The half types store 16 bits and compute in `f32`, as PyTorch does on
//! the CPU: each element-wise operation widens its inputs, computes, and
//! rounds its result once to the nearest half value; sums, means, softmax,
//! norms, products, convolutions and attention accumulate in `f32` and
//! round only their results.

use half::{bf16, f16};
use std::fmt::{Debug, Display};

mod sealed {
    /// Sealing supertrait. It also requires `DeviceRepr`, so that every
    /// element type can be passed to a CUDA kernel as a scalar argument
    /// without widening the public trait.
    pub trait Sealed: cudarc::driver::DeviceRepr {}
}

/// What the integer arms of a `match` on a [`FloatElement`]'s [`DType`]
/// say when reached, which they cannot be. Those arms are spelled out
/// rather than `_`, so that a new element type is a compile error at each
/// such `match` instead of running the wrong arm.
pub(crate) const NOT_FLOAT: &str = "a FloatElement is f32, f64, bf16 or f16";

/// `x` as a slice of `T`, when `E` is `T`: how a kernel generic over its
/// element reaches a path written for one type. `None` for any other `E`.
#[inline(always)]
pub(crate) fn as_slice_of<E: 'static, T: 'static>(x: &[E]) -> Option<&[T]> {
    // SAFETY: `E` is `T` (their `TypeId`s are equal), so the slice is one
    // of `T` values, with their layout and lifetime.
    (std::any::TypeId::of::<E>() == std::any::TypeId::of::<T>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<T>(), x.len()) })
}

/// The run-time tag of an element type, for messages and kernel selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float, the default.
    F32,
    /// 64-bit float.
    F64,
    /// 16-bit brain float ([`bf16`]), PyTorch's `torch.bfloat16`: `f32`'s
    /// range with 8 bits of precision.
    BF16,
    /// 16-bit IEEE 754 half ([`f16`](struct@f16)), PyTorch's `torch.float16`
    /// (`Half`): 11 bits of precision, finite up to 65504.
    F16,
    /// 64-bit signed integer, PyTorch's `long`: class labels and indices.
    I64,
    /// 8-bit unsigned integer: boolean masks (0 or 1) and bytes.
    U8,
}

impl DType {
    /// The Rust name of the type, as written in a program (`"f32"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I64 => "i64",
            DType::U8 => "u8",
        }
    }

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
            DType::BF16 | DType::F16 => 2,
            DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    /// Whether this is one of the 16-bit floats, which compute in `f32`.
    pub const fn is_half(self) -> bool {
        matches!(self, DType::BF16 | DType::F16)
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::BF16 | DType::F16)
    }
}

/// A type a tensor can hold. Sealed: implemented for `f32`, `f64`, [`bf16`],
/// [`f16`](struct@f16), `i64` and `u8`.
///
/// Integer arithmetic wraps on overflow, as in PyTorch; integer division by
/// zero is an [`Error`](crate::Error), not a panic.
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + PartialOrd + Debug + Display + Send + Sync + 'static
{
    /// The run-time tag of this type.
    const DTYPE: DType;
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// The smallest value (`-inf` for floats), identity of `max`.
    const MIN: Self;
    /// The largest value (`+inf` for floats), identity of `min`.
    const MAX: Self;
    /// Whether this is a float type (`f32`, `f64`, `bf16`, `f16`).
    const IS_FLOAT: bool;

    /// The element type of a sum: `i64` for the integer types, so that the
    /// sum of a `u8` mask counts past 255 (PyTorch sums `bool` and integer
    /// tensors into `int64`); the type itself for floats.
    type Sum: Element;
    /// The element type of true division `/`: `f32` for the integer types
    /// (PyTorch's `/` on integer tensors gives its default float type), the
    /// type itself for floats. Integer quotients are
    /// [`div_trunc`](crate::Tensor::div_trunc) and
    /// [`div_floor`](crate::Tensor::div_floor).
    type Quotient: FloatElement;
    /// A plain number of this kind, as Python's numbers are for PyTorch:
    /// `f64` for floats, `i64` for integers. `arange` takes its bounds in
    /// it, so that they are exact.
    type Number: Number;
    /// The dtype under PyTorch's name ([`dtype::float32`] for `f32`,
    /// [`dtype::bfloat16`] for `bf16`, ...): what a dtype mismatch is
    /// reported in (see [`SameDtype`]).
    type Torch: dtype::TorchDtype;

    /// `a + b`, wrapping for integers.
    fn add(self, rhs: Self) -> Self;
    /// `a - b`, wrapping for integers.
    fn sub(self, rhs: Self) -> Self;
    /// `a * b`, wrapping for integers.
    fn mul(self, rhs: Self) -> Self;
    /// `a / b`; `None` only for an integer division by zero. Integers
    /// truncate (this is [`div_trunc`](Self::div_trunc) for them).
    fn div(self, rhs: Self) -> Option<Self>;
    /// `a / b` rounded toward zero (PyTorch's `rounding_mode="trunc"`);
    /// `None` only for an integer division by zero.
    fn div_trunc(self, rhs: Self) -> Option<Self>;
    /// `a / b` rounded toward negative infinity (PyTorch's `//` and
    /// `rounding_mode="floor"`); `None` only for an integer division by zero.
    fn div_floor(self, rhs: Self) -> Option<Self>;
    /// The larger of two values; NaN wins, as in `torch.maximum`.
    fn max(self, rhs: Self) -> Self;
    /// The smaller of two values; NaN wins, as in `torch.minimum`.
    fn min(self, rhs: Self) -> Self;
    /// Whether the value is NaN (always false for integers).
    fn is_nan(self) -> bool;

    /// `self as T`, with Rust's `as` semantics (floats to integers saturate).
    fn cast<T: Element>(self) -> T;
    /// `v as Self`.
    fn from_f32(v: f32) -> Self;
    /// `v as Self`.
    fn from_f64(v: f64) -> Self;
    /// `v as Self`.
    fn from_i64(v: i64) -> Self;
    /// `v as Self`.
    fn from_u8(v: u8) -> Self;
    /// `self as f64`, for printing and statistics.
    fn to_f64(self) -> f64;
}

/// Marks the element types `/=` is defined for: the float types.
///
/// In PyTorch, `int_tensor /= x` fails at run time ("result type Float
/// can't be cast to the desired output type Long"); here it does not compile,
/// and the message names the explicit forms.
#[diagnostic::on_unimplemented(
    message = "`/=` on `{Self}` tensors: `/` is true division, and its float result cannot be written into a `{Self}` tensor",
    label = "in-place true division of `{Self}` tensors",
    note = "as in PyTorch: keep integers with `x = x.div_trunc(&y)` (rounds toward zero) or `x = x.div_floor(&y)` (Python's `//`), \
            or divide a float copy: `x.to_dtype::<f32>() / &y.to_dtype::<f32>()`"
)]
pub trait InPlaceDivision<Rhs>: Element {}
// Whatever the right-hand type: a right-hand dtype of its own is
// `SameDtype`'s error, in its own words.
impl<Rhs: Element> InPlaceDivision<Rhs> for f32 {}
impl<Rhs: Element> InPlaceDivision<Rhs> for f64 {}
impl<Rhs: Element> InPlaceDivision<Rhs> for bf16 {}
impl<Rhs: Element> InPlaceDivision<Rhs> for f16 {}

/// The second, never-matching impl of [`InPlaceDivision`]: with a single
/// impl rustc would settle the bound at once and print a bare E0368 instead
/// of the message above (the same trick as `SameDevice`'s).
#[allow(dead_code)] // Never constructed, by design.
pub enum NotAnElement {}
#[diagnostic::do_not_recommend]
impl<E: Element> InPlaceDivision<NotAnElement> for E {}

/// A plain number, as Python's numbers are for PyTorch: `f64` or `i64`
/// (see [`Element::Number`]). Sealed.
pub trait Number:
    number_sealed::Sealed + Copy + Debug + Display + PartialOrd + From<u8> + Send + Sync + 'static
{
    /// `self as f64`.
    fn as_f64(self) -> f64;
    /// `self as i64` (floats truncate and saturate).
    fn as_i64(self) -> i64;
}

mod number_sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for i64 {}
}

impl Number for f64 {
    fn as_f64(self) -> f64 {
        self
    }
    fn as_i64(self) -> i64 {
        self as i64
    }
}

impl Number for i64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
    fn as_i64(self) -> i64 {
        self
    }
}

/// `f32`, `f64`, [`bf16`] or [`f16`](struct@f16): the element types of operations on
/// real numbers. Their sums and quotients stay in the type itself (the half
/// types accumulate in `f32` and round the result, as PyTorch does).
#[diagnostic::on_unimplemented(
    message = "this operation needs a float tensor (`f32`, `f64`, `bf16` or `f16`), but the elements are `{Self}`",
    label = "not defined for `{Self}` elements",
    note = "convert first, e.g. `.to_dtype::<f32>()`, as PyTorch requires a float dtype here too"
)]
pub trait FloatElement:
    Element<Sum = Self, Quotient = Self, Number = f64> + InPlaceDivision<Self> + num_traits::Float
{
    /// The type a kernel accumulates in and keeps its statistics in (an
    /// attention row's log-sum-exp, say): `f32` for the half types, as
    /// PyTorch's kernels keep them, the type itself otherwise.
    type Accumulator: FloatElement;
}

macro_rules! from_as {
    ($t:ty) => {
        fn from_f32(v: f32) -> Self {
            v as $t
        }
        fn from_f64(v: f64) -> Self {
            v as $t
        }
        fn from_i64(v: i64) -> Self {
            v as $t
        }
        fn from_u8(v: u8) -> Self {
            v as $t
        }
        fn to_f64(self) -> f64 {
            self as f64
        }
    };
}

macro_rules! cast_via {
    ($from:ident) => {
        fn cast<T: Element>(self) -> T {
            T::$from(self)
        }
    };
}

/// `max`, `min` and `is_nan` of a float element type: NaN wins, as in
/// `torch.maximum`.
macro_rules! nan_propagating_order {
    ($t:ident) => {
        #[inline(always)]
        fn max(self, rhs: Self) -> Self {
            if self.is_nan() || self > rhs { self } else { rhs }
        }
        #[inline(always)]
        fn min(self, rhs: Self) -> Self {
            if self.is_nan() || self < rhs { self } else { rhs }
        }
        #[inline(always)]
        fn is_nan(self) -> bool {
            $t::is_nan(self)
        }
    };
}

macro_rules! float_element {
    ($t:ident, $dtype:ident, $torch:ident, $from:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const MIN: Self = $t::NEG_INFINITY;
            const MAX: Self = $t::INFINITY;
            const IS_FLOAT: bool = true;
            type Sum = $t;
            type Quotient = $t;
            type Number = f64;
            type Torch = dtype::$torch;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self + rhs
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self - rhs
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self * rhs
            }
            #[inline(always)]
            fn div(self, rhs: Self) -> Option<Self> {
                Some(self / rhs)
            }
            #[inline(always)]
            fn div_trunc(self, rhs: Self) -> Option<Self> {
                Some((self / rhs).trunc())
            }
            #[inline(always)]
            fn div_floor(self, rhs: Self) -> Option<Self> {
                // PyTorch's `div_floor_floating` (Python's float `//`): the
                // quotient of the exact remainder's complement, not
                // `floor(a / b)`, which rounds wrongly near integers.
                if rhs == 0.0 {
                    return Some(self / rhs);
                }
                let rem = self % rhs;
                let mut div = (self - rem) / rhs;
                if rem != 0.0 && (rhs < 0.0) != (rem < 0.0) {
                    div -= 1.0;
                }
                Some(if div == 0.0 {
                    (0.0 as $t).copysign(self / rhs)
                } else {
                    let floor = div.floor();
                    if div - floor > 0.5 { floor + 1.0 } else { floor }
                })
            }
            nan_propagating_order!($t);
            cast_via!($from);
            from_as!($t);
        }
        impl FloatElement for $t {
            type Accumulator = $t;
        }
    };
}

/// The 16-bit floats: stored as themselves, computed in `f32`. Each
/// operation rounds once, from the exact `f32` result of `+ - * /`: `f32`
/// carries more than twice a half type's precision plus two bits, so that
/// rounding twice (to `f32`, then to 16 bits) gives the correctly rounded
/// half result.
macro_rules! half_element {
    ($t:ident, $dtype:ident, $torch:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const ZERO: Self = $t::ZERO;
            const ONE: Self = $t::ONE;
            const MIN: Self = $t::NEG_INFINITY;
            const MAX: Self = $t::INFINITY;
            const IS_FLOAT: bool = true;
            type Sum = $t;
            type Quotient = $t;
            type Number = f64;
            type Torch = dtype::$torch;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                $t::from_f32(self.to_f32() + rhs.to_f32())
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                $t::from_f32(self.to_f32() - rhs.to_f32())
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                $t::from_f32(self.to_f32() * rhs.to_f32())
            }
            #[inline(always)]
            fn div(self, rhs: Self) -> Option<Self> {
                Some($t::from_f32(self.to_f32() / rhs.to_f32()))
            }
            #[inline(always)]
            fn div_trunc(self, rhs: Self) -> Option<Self> {
                Element::div_trunc(self.to_f32(), rhs.to_f32()).map($t::from_f32)
            }
            #[inline(always)]
            fn div_floor(self, rhs: Self) -> Option<Self> {
                Element::div_floor(self.to_f32(), rhs.to_f32()).map($t::from_f32)
            }
            nan_propagating_order!($t);
            #[inline(always)]
            fn cast<T: Element>(self) -> T {
                // Exact: every half value is an f32.
                T::from_f32(self.to_f32())
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                $t::from_f32(v)
            }
            /// Through `f32`, as PyTorch converts (its half types are made
            /// from a `float`) and as this crate's CUDA kernels do: an
            /// `f64` just off a tie between two half values may round
            /// twice, the same way on every device. (`half`'s own
            /// `from_f64` is not that either: its software path ignores the
            /// low 32 bits of the `f64`'s significand, half-rs issue 151.)
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                $t::from_f32(v as f32)
            }
            /// Through `f32`, as PyTorch converts integers to half types.
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                $t::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_u8(v: u8) -> Self {
                $t::from_f32(v as f32)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $t::to_f64(self)
            }
        }
        impl FloatElement for $t {
            type Accumulator = f32;
        }
    };
}

macro_rules! int_element {
    ($t:ident, $dtype:ident, $torch:ident, $from:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const MIN: Self = $t::MIN;
            const MAX: Self = $t::MAX;
            const IS_FLOAT: bool = false;
            type Sum = i64;
            type Quotient = f32;
            type Number = i64;
            type Torch = dtype::$torch;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self.wrapping_sub(rhs)
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }
            #[inline(always)]
            fn div(self, rhs: Self) -> Option<Self> {
                self.div_trunc(rhs)
            }
            #[inline(always)]
            fn div_trunc(self, rhs: Self) -> Option<Self> {
                // Wrapping: i64::MIN / -1 is i64::MIN, as in PyTorch.
                if rhs == 0 { None } else { Some(self.wrapping_div(rhs)) }
            }
            #[inline(always)]
            #[allow(unused_comparisons)] // `< 0` is always false for u8
            fn div_floor(self, rhs: Self) -> Option<Self> {
                let q = self.div_trunc(rhs)?;
                let inexact = self.wrapping_rem(rhs) != 0;
                Some(if inexact && ((self < 0) != (rhs < 0)) { q.wrapping_sub(1) } else { q })
            }
            #[inline(always)]
            fn max(self, rhs: Self) -> Self {
                Ord::max(self, rhs)
            }
            #[inline(always)]
            fn min(self, rhs: Self) -> Self {
                Ord::min(self, rhs)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
            cast_via!($from);
            from_as!($t);
        }
    };
}

float_element!(f32, F32, float32, from_f32);
float_element!(f64, F64, float64, from_f64);
half_element!(bf16, BF16, bfloat16);
half_element!(f16, F16, float16);
int_element!(i64, I64, int64, from_i64);
int_element!(u8, U8, uint8, from_u8);

/// Proof that two element types are the same dtype, required (as
/// `E: SameDtype<E2>`) by every operation that takes tensors of more than
/// one element type parameter: `f32 + bf16`, a `Linear<D, f32>` fed a `bf16`
/// batch, a loss between two dtypes.
///
/// Only `E: SameDtype<E>` holds, so mixing dtypes is a compile error that
/// reads like PyTorch's run-time one, in PyTorch's names, with the
/// conversion in the note:
/// ```compile_fail,E0277
/// use devtensor::{Cpu, Tensor, bf16};
/// fn mix(a: Tensor<Cpu, f32>, b: Tensor<Cpu, bf16>) -> Tensor<Cpu> {
///     a + b // error: expected all tensors to have the same dtype, but found `float32` and `bfloat16`
/// }
/// ```
///
/// The fix is an explicit conversion, which PyTorch's autocast would have
/// made behind your back:
/// ```
/// use devtensor::{Cpu, Tensor, bf16};
/// fn mix(a: Tensor<Cpu, f32>, b: Tensor<Cpu, bf16>) -> Tensor<Cpu> {
///     a + b.to_dtype::<f32>()
/// }
/// ```
pub trait SameDtype<Other: Element>: Element {}
impl<E: Element, Other: Element> SameDtype<Other> for E where E::Torch: dtype::SameTorchDtype<Other::Torch> {}

/// The dtypes under PyTorch's names, as types: what a dtype mismatch names
/// ([`SameDtype`]). Each is [`Element::Torch`] of one element type, named
/// as `torch.float32` is (PyTorch's C++ messages say `Float`; the Python
/// names are the ones a PyTorch user writes, and they do not collide with
/// a Rust name such as `num_traits::Float`, which would make rustc print
/// the type's whole path).
pub mod dtype {
    /// A dtype under PyTorch's name. Sealed.
    pub trait TorchDtype: sealed::Sealed + 'static {}

    mod sealed {
        pub trait Sealed {}
    }

    macro_rules! torch_dtype {
        ($($name:ident: $rust:literal, $torch:literal;)*) => {$(
            #[doc = concat!("`", $rust, "`: PyTorch's `torch.", stringify!($name), "` (`", $torch, "` in its messages).")]
            #[derive(Debug)]
            #[allow(non_camel_case_types)] // PyTorch's spelling
            pub enum $name {}
            impl sealed::Sealed for $name {}
            impl TorchDtype for $name {}
        )*};
    }

    torch_dtype! {
        float32: "f32", "Float";
        float64: "f64", "Double";
        bfloat16: "bf16", "BFloat16";
        float16: "f16", "Half";
        int64: "i64", "Long";
        uint8: "u8", "Byte";
    }

    /// The dtype proof on PyTorch's names, behind [`SameDtype`](super::SameDtype):
    /// only `T: SameTorchDtype<T>` holds.
    #[diagnostic::on_unimplemented(
        message = "expected all tensors to have the same dtype, but found `{Self}` and `{Other}`",
        label = "a `{Self}` tensor meets a `{Other}` tensor here",
        note = "devtensor never converts a dtype behind your back: convert one side first, with \
                `.to_dtype::<f32>()` to float32 (PyTorch's Float), `.to_dtype::<bf16>()` to bfloat16 (BFloat16), \
                `.to_dtype::<f16>()` to float16 (Half), `.to_dtype::<f64>()` to float64 (Double), \
                `.to_dtype::<i64>()` to int64 (Long) or `.to_dtype::<u8>()` to uint8 (Byte)"
    )]
    pub trait SameTorchDtype<Other>: TorchDtype {}
    impl<T: TorchDtype> SameTorchDtype<T> for T {}

    /// Not a dtype: the type of the second, hidden impl of
    /// [`SameTorchDtype`], whose name is what rustc shows when an
    /// operand's element type cannot be inferred. With a single impl rustc
    /// would unify the two dtypes of every bound and report a bare
    /// `mismatched types` instead of the message above (the same trick as
    /// [`SameDevice`](crate::SameDevice)'s hidden impl).
    #[allow(dead_code)] // Never constructed, by design.
    #[derive(Debug)]
    pub enum NameTheDtypeOfEachTensor {}
    #[diagnostic::do_not_recommend]
    impl<T: TorchDtype> SameTorchDtype<NameTheDtypeOfEachTensor> for T {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_as_semantics() {
        assert_eq!(2.7f32.cast::<i64>(), 2);
        assert_eq!((-1.5f64).cast::<u8>(), 0);
        assert_eq!(300i64.cast::<u8>(), 44);
        assert_eq!(7u8.cast::<f64>(), 7.0);
        assert_eq!(i64::MAX.cast::<i64>(), i64::MAX);
    }

    #[test]
    fn integer_arithmetic_wraps_and_division_by_zero_is_none() {
        assert_eq!(Element::add(250u8, 10), 4);
        assert_eq!(Element::div(7i64, 0), None);
        assert_eq!(Element::div(-7i64, 2), Some(-3));
        assert_eq!(Element::div(i64::MIN, -1), Some(i64::MIN));
    }

    #[test]
    fn rounded_divisions_match_python() {
        // Python: 7 // -2 == -4, -7 // 2 == -4, int(-7 / 2) == -3.
        assert_eq!(Element::div_floor(7i64, -2), Some(-4));
        assert_eq!(Element::div_floor(-7i64, 2), Some(-4));
        assert_eq!(Element::div_floor(-8i64, 2), Some(-4));
        assert_eq!(Element::div_trunc(-7i64, 2), Some(-3));
        assert_eq!(Element::div_floor(i64::MIN, -1), Some(i64::MIN));
        assert_eq!(Element::div_floor(7u8, 2), Some(3));
        assert_eq!(Element::div_floor(7u8, 0), None);
        // Python: 7.5 // -2 == -4.0, -0.5 // 1 == -1.0, 0.0 // -1 == -0.0, 1 // 0.1 == 9.0.
        assert_eq!(Element::div_floor(7.5f64, -2.0), Some(-4.0));
        assert_eq!(Element::div_floor(-0.5f64, 1.0), Some(-1.0));
        let zero = Element::div_floor(0.0f64, -1.0).unwrap();
        assert!(zero == 0.0 && zero.is_sign_negative());
        assert_eq!(Element::div_floor(1.0f64, 0.1), Some(9.0));
        assert_eq!(Element::div_floor(1.0f32, 0.0), Some(f32::INFINITY));
        assert_eq!(Element::div_trunc(-7.5f32, 2.0), Some(-3.0));
    }

    /// An `f64` just above a tie between two half values, where the bits
    /// that break the tie fit in an `f32`: converted through `f32`, it
    /// rounds up, as PyTorch's conversion does. And one whose tie-breaking
    /// bits do not fit in an `f32`: PyTorch's conversion rounds twice and
    /// lands on the even value; so does ours.
    #[test]
    fn half_types_convert_from_f64_as_pytorch() {
        // f16: 1 + 2^-11 is the tie between 1.0 (0x3c00) and 1 + 2^-10 (0x3c01).
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-22);
        assert_eq!(<f16 as Element>::from_f64(x).to_bits(), 0x3c01);
        assert_eq!(x.cast::<f16>().to_bits(), 0x3c01);
        // bf16: 1 + 2^-8 is the tie between 1.0 (0x3f80) and 1 + 2^-7 (0x3f81).
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-22);
        assert_eq!(<bf16 as Element>::from_f64(x).to_bits(), 0x3f81);
        assert_eq!(x.cast::<bf16>().to_bits(), 0x3f81);
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(<bf16 as Element>::from_f64(x).to_bits(), 0x3f80);
        assert_eq!(<f16 as Element>::from_f64(1.0 + 2f64.powi(-11) + 2f64.powi(-40)).to_bits(), 0x3c00);
        assert_eq!(<f16 as Element>::from_f64(-70000.0), f16::NEG_INFINITY);
        assert!(<bf16 as Element>::from_f64(f64::NAN).is_nan());
    }

    #[test]
    fn float_max_min_propagate_nan() {
        assert!(Element::max(f32::NAN, 1.0).is_nan());
        assert!(Element::max(1.0, f32::NAN).is_nan());
        assert!(Element::min(f64::NAN, 1.0).is_nan());
        assert!(Element::min(1.0, f64::NAN).is_nan());
    }
}
