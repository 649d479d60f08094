//! The wall between the typed API and the core: how an operation on a
//! `Tensor<D, E>` reaches code compiled once, inside devtensor.
//!
//! Rust compiles a generic function again in every crate that calls it,
//! unless the call reaches code that is not generic. So every operation is
//! split in two:
//!
//! - the **shell**, a public method generic over `D` and `E`: the checks
//!   that are types (`SameDevice`, `SameDtype`, `FloatElement`), and one
//!   call of the core through [`call`]. This is all a user's program
//!   compiles of an operation.
//! - the **core**, generic code over a [`CoreDevice`] (the CPU, or the
//!   GPU of the running operation) and an element type, instantiated inside
//!   devtensor for each of them and reached through a table of function
//!   pointers in a `static` ([`core_table!`]). A program refers to the
//!   static by name and compiles none of what it points to: the shape
//!   checks, autograd's recording and rules, and the kernels.
//!
//! A `Cuda<N>` tensor is lent to the core as a tensor of
//! [`AnyCuda`](crate::backend::cuda::AnyCuda), with `N` made the thread's
//! current GPU for the length of the call ([`Device::enter`]), so the core
//! is compiled once for every GPU rather than once per ordinal.

use super::{Device, Tensor};
use crate::element::Element;

/// A result of the core, typed back on the shell's device `D`: tensors of
/// `D::Core` become tensors of `D`; other values pass unchanged.
pub(crate) trait FromCore<D: Device> {
    /// The same value as the core returns it.
    type Core;
    /// The value typed on `D`.
    fn from_core(core: Self::Core) -> Self;
}

impl<D: Device, E: Element> FromCore<D> for Tensor<D, E> {
    type Core = Tensor<D::Core, E>;
    #[inline(always)]
    fn from_core(core: Self::Core) -> Self {
        Tensor::from_core(core)
    }
}

impl<D: Device, T: FromCore<D>> FromCore<D> for crate::Result<T> {
    type Core = crate::Result<T::Core>;
    #[inline(always)]
    fn from_core(core: Self::Core) -> Self {
        core.map(T::from_core)
    }
}

impl<D: Device, T: FromCore<D>> FromCore<D> for Option<T> {
    type Core = Option<T::Core>;
    #[inline(always)]
    fn from_core(core: Self::Core) -> Self {
        core.map(T::from_core)
    }
}

impl<D: Device, T: FromCore<D>> FromCore<D> for Vec<T> {
    type Core = Vec<T::Core>;
    #[inline(always)]
    fn from_core(core: Self::Core) -> Self {
        core.into_iter().map(T::from_core).collect()
    }
}

impl<D: Device, A: FromCore<D>, B: FromCore<D>> FromCore<D> for (A, B) {
    type Core = (A::Core, B::Core);
    #[inline(always)]
    fn from_core((a, b): Self::Core) -> Self {
        (A::from_core(a), B::from_core(b))
    }
}

impl<D: Device, A: FromCore<D>, B: FromCore<D>, C: FromCore<D>> FromCore<D> for (A, B, C) {
    type Core = (A::Core, B::Core, C::Core);
    #[inline(always)]
    fn from_core((a, b, c): Self::Core) -> Self {
        (A::from_core(a), B::from_core(b), C::from_core(c))
    }
}

impl<D: Device, T: FromCore<D>, const N: usize> FromCore<D> for [T; N] {
    type Core = [T::Core; N];
    #[inline(always)]
    fn from_core(core: Self::Core) -> Self {
        core.map(T::from_core)
    }
}

/// Values that mean the same on every device.
macro_rules! unchanged {
    ($($T:ty),*) => {$(
        impl<D: Device> FromCore<D> for $T {
            type Core = $T;
            #[inline(always)]
            fn from_core(core: $T) -> $T {
                core
            }
        }
    )*};
}

unchanged!((), bool, usize, f32, f64, half::bf16, half::f16, i64, u8, String, crate::autograd::Gradients);

/// Runs `f`, a call of the core's table, inside `D`'s scope ([`Device::enter`]),
/// and types its result back on `D`: the body of every shell.
#[inline(always)]
pub(crate) fn call<D: Device, T: FromCore<D>>(f: impl FnOnce() -> T::Core) -> T {
    T::from_core(D::enter(f))
}

/// Declares a table of the core's entry points: a struct of function
/// pointers, generic over the core device `C` and the element type `E`,
/// each field set by `= value` to the core function it points to, and
/// `get()`, which returns the table of `C` and `E` from one of the statics
/// the macro defines, one per core device and element type of the bound
/// (`Element`: six; `FloatElement`: four). The statics are what a user's
/// crate refers to; their functions are compiled here, once.
macro_rules! core_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $Name:ident<$C:ident, $E:ident: $Bound:ident> {
            $( $(#[$fmeta:meta])* $field:ident: $fty:ty = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $Name<$C: $crate::tensor::CoreDevice, $E: $Bound> {
            $( $(#[$fmeta])* pub(crate) $field: $fty, )*
        }

        impl<$C: $crate::tensor::CoreDevice, $E: $Bound> $Name<$C, $E> {
            const NEW: Self = Self { $( $field: $value, )* };

            /// The table of `C` and `E`, compiled into devtensor.
            #[cfg(not(any(test, trybuild)))]
            #[inline]
            pub(crate) fn get() -> &'static Self {
                $crate::tensor::shell::core_table!(@select $Bound, $Name, $C, $E)
            }

            /// In the library's own unit tests, and in the compile-fail
            /// cases (trybuild builds every crate with `--cfg trybuild`),
            /// the table of `C` and `E` alone: their builds compile only
            /// the tables they use, not all twelve (or eight) of every
            /// family, which nothing there would run.
            #[cfg(any(test, trybuild))]
            #[inline]
            pub(crate) fn get() -> &'static Self {
                const { &Self::NEW }
            }
        }
    };
    (@select Element, $Name:ident, $C:ident, $E:ident) => {
        $crate::tensor::shell::core_table!(@statics $Name, $C, $E;
            F32 f32, F64 f64, BF16 half::bf16, F16 half::f16, I64 i64, U8 u8)
    };
    (@select FloatElement, $Name:ident, $C:ident, $E:ident) => {
        $crate::tensor::shell::core_table!(@statics $Name, $C, $E; F32 f32, F64 f64, BF16 half::bf16, F16 half::f16)
    };
    (@statics $Name:ident, $C:ident, $E:ident; $($tag:ident $T:ty),*) => {{
        use $crate::backend::{Cpu, cuda::AnyCuda};
        use $crate::element::DType;
        use $crate::tensor::CoreDevice;
        let table: &'static dyn std::any::Any = match (<$C as CoreDevice>::IS_CPU, <$E as $crate::element::Element>::DTYPE) {
            $((true, DType::$tag) => {
                static TABLE: $Name<Cpu, $T> = <$Name<Cpu, $T>>::NEW;
                &TABLE
            })*
            $((false, DType::$tag) => {
                static TABLE: $Name<AnyCuda, $T> = <$Name<AnyCuda, $T>>::NEW;
                &TABLE
            })*
            // The integer types, for a table of the float types.
            #[allow(unreachable_patterns)]
            _ => unreachable!("{}", $crate::element::NOT_FLOAT),
        };
        table.downcast_ref().expect("a core device and an element type have one table")
    }};
}
pub(crate) use core_table;

/// The body of a shell: `core_call!(D, Table<E>.entry(args))` calls `entry` of
/// `Table`'s table for `D`'s core device and `E` inside `D`'s scope, and
/// types the result back on `D`. Tensor arguments are passed as
/// `x.core()`.
macro_rules! core_call {
    ($D:ident, $Table:ident<$E:ty>.$entry:ident($($arg:expr),* $(,)?)) => {
        $crate::tensor::shell::call::<$D, _>(|| {
            ($Table::<<$D as $crate::tensor::Device>::Core, $E>::get().$entry)($($arg),*)
        })
    };
}
pub(crate) use core_call;
