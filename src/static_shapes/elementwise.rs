//! Element-wise arithmetic on [`STensor`]s: `+ - * /` between tensors whose
//! shapes agree or broadcast (one a suffix of the other, as a `[10]` bias
//! added to `[B, 10]`), and with a scalar.

use super::dim::Dim;
use super::shape::StaticShape;
use super::tensor::STensor;
use crate::element::{Element, FloatElement, SameDtype};
use crate::error::or_panic;
use crate::tensor::Tensor;
use crate::tensor::{Device, SameDevice, same_device};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// Proof that static shapes `Self` and `Other` broadcast, with the shape of
/// the result. They do when they are the same, or when one is the trailing
/// axes of the other (PyTorch aligns shapes from the right), so `[B, 10]`
/// and `[10]` give `[B, 10]`. Size-1 axes that stretch (`[B, 1]` with
/// `[B, 10]`) are not followed in the types: go through
/// [`dynamic`](STensor::dynamic) for those.
#[diagnostic::on_unimplemented(
    message = "the shapes do not broadcast: `{Self}` and `{Other}`",
    label = "a tensor of shape `{Self}` meets one of shape `{Other}` here",
    note = "element-wise operations on static tensors need the same shape, or one shape the trailing axes of the other; \
            reshape, or go through `.dynamic()`"
)]
pub trait Broadcast<Other: StaticShape>: StaticShape {
    /// The shape of the result.
    type Out: StaticShape;
}

#[diagnostic::do_not_recommend]
impl<S: StaticShape> Broadcast<S> for S {
    type Out = S;
}

/// `Broadcast` both ways between a shape and one of its trailing-axes
/// suffixes.
macro_rules! suffix_broadcast {
    ($(($($long:ident),*) ~ ($($short:ident),*);)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<$($long: Dim),*> Broadcast<($($short,)*)> for ($($long,)*) {
            type Out = ($($long,)*);
        }
        #[diagnostic::do_not_recommend]
        impl<$($long: Dim),*> Broadcast<($($long,)*)> for ($($short,)*) {
            type Out = ($($long,)*);
        }
    )*};
}

suffix_broadcast! {
    (A, B) ~ (B);
    (A, B, C) ~ (C);
    (A, B, C) ~ (B, C);
    (A, B, C, F) ~ (F);
    (A, B, C, F) ~ (C, F);
    (A, B, C, F) ~ (B, C, F);
}

/// `a op b` for static tensors of one device and one dtype whose shapes
/// broadcast, for every owned/borrowed combination. Another device or dtype
/// on the right is a compile error in PyTorch's words, as for [`Tensor`].
macro_rules! tensor_operator {
    ($($Trait:ident, $method:ident, $try:ident, $E:ident => $Out:ty;)*) => {$(
        tensor_operator!(@one $Trait, $method, $try, $E => $Out, &STensor<D1, S1, $E>, &STensor<D2, S2, E2>, |l, r| (l, r));
        tensor_operator!(@one $Trait, $method, $try, $E => $Out, STensor<D1, S1, $E>, &STensor<D2, S2, E2>, |l, r| (&l, r));
        tensor_operator!(@one $Trait, $method, $try, $E => $Out, &STensor<D1, S1, $E>, STensor<D2, S2, E2>, |l, r| (l, &r));
        tensor_operator!(@one $Trait, $method, $try, $E => $Out, STensor<D1, S1, $E>, STensor<D2, S2, E2>, |l, r| (&l, &r));
    )*};
    (@one $Trait:ident, $method:ident, $try:ident, $E:ident => $Out:ty, $Lhs:ty, $Rhs:ty, |$l:ident, $r:ident| $refs:expr) => {
        impl<D1: Device, D2: Device, S1: StaticShape, S2: StaticShape, $E: Element, E2: Element> $Trait<$Rhs> for $Lhs
        where
            D1: SameDevice<D2>,
            $E: SameDtype<E2>,
            S1: Broadcast<S2>,
        {
            type Output = STensor<D1, <S1 as Broadcast<S2>>::Out, $Out>;

            #[track_caller]
            fn $method(self, rhs: $Rhs) -> Self::Output {
                let ($l, $r) = (self, rhs);
                let (lhs, rhs): (&STensor<D1, S1, $E>, &STensor<D2, S2, E2>) = $refs;
                let rhs: &Tensor<D1, $E> = same_device(rhs.dynamic());
                // The static sizes agree; dynamic ones (a batch) are checked here.
                STensor::<D1, S1, $E>::wrap(or_panic(lhs.dynamic().$try::<D1, $E>(rhs)))
            }
        }
    };
}

tensor_operator! {
    Add, add, try_add, E => E;
    Sub, sub, try_sub, E => E;
    Mul, mul, try_mul, E => E;
    Div, div, try_div, E => E::Quotient;
}

/// `tensor op scalar` for owned and borrowed static tensors.
macro_rules! scalar_operator {
    ($($Trait:ident, $method:ident;)*) => {$(
        impl<D: Device, S: StaticShape, E: FloatElement> $Trait<E> for &STensor<D, S, E> {
            type Output = STensor<D, S, E>;

            #[track_caller]
            fn $method(self, rhs: E) -> STensor<D, S, E> {
                STensor::<D, S, E>::wrap($Trait::<E>::$method(self.dynamic(), rhs))
            }
        }
        impl<D: Device, S: StaticShape, E: FloatElement> $Trait<E> for STensor<D, S, E> {
            type Output = STensor<D, S, E>;

            #[track_caller]
            fn $method(self, rhs: E) -> STensor<D, S, E> {
                (&self).$method(rhs)
            }
        }
    )*};
}

scalar_operator! {
    Add, add;
    Sub, sub;
    Mul, mul;
    Div, div;
}

impl<D: Device, S: StaticShape, E: FloatElement> Neg for &STensor<D, S, E> {
    type Output = STensor<D, S, E>;

    #[track_caller]
    fn neg(self) -> STensor<D, S, E> {
        STensor::<D, S, E>::wrap(self.dynamic().neg())
    }
}

impl<D: Device, S: StaticShape, E: FloatElement> Neg for STensor<D, S, E> {
    type Output = STensor<D, S, E>;

    #[track_caller]
    fn neg(self) -> STensor<D, S, E> {
        -&self
    }
}
