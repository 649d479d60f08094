//! [`StaticShape`]: a tuple of dimensions.

use super::dim::Dim;
use std::fmt::Debug;

/// The shape of an [`STensor`](super::STensor): a tuple of [`Dim`]s,
/// e.g. `(usize, Const<3>, Const<64>, Const<64>)` for a batch of any size
/// of 3x64x64 images.
pub trait StaticShape: Copy + Debug + Send + Sync + 'static {
    /// The number of axes.
    const RANK: usize;

    /// The element count, when every size is static.
    const STATIC_COUNT: Option<usize>;

    /// The sizes.
    fn dims(&self) -> Vec<usize>;

    /// The shape with sizes `dims`, or `None` when their count differs from
    /// the rank or a size differs from one the type fixes.
    fn from_dims(dims: &[usize]) -> Option<Self>;

    /// The sizes the type fixes, `None` for dynamic ones.
    fn static_dims() -> Vec<Option<usize>>;
}

macro_rules! tuple_shape {
    ($rank:literal: $($d:ident $i:tt),*) => {
        impl<$($d: Dim),*> StaticShape for ($($d,)*) {
            const RANK: usize = $rank;

            const STATIC_COUNT: Option<usize> = {
                let mut count = Some(1usize);
                $(count = match (count, $d::STATIC) {
                    (Some(c), Some(n)) => Some(c * n),
                    _ => None,
                };)*
                count
            };

            fn dims(&self) -> Vec<usize> {
                vec![$(self.$i.size()),*]
            }

            fn from_dims(dims: &[usize]) -> Option<Self> {
                if dims.len() != $rank {
                    return None;
                }
                Some(($($d::from_size(dims[$i])?,)*))
            }

            fn static_dims() -> Vec<Option<usize>> {
                vec![$($d::STATIC),*]
            }
        }
    };
}

tuple_shape!(1: A 0);
tuple_shape!(2: A 0, B 1);
tuple_shape!(3: A 0, B 1, C 2);
tuple_shape!(4: A 0, B 1, C 2, F 3);

/// `Self` without axis `A`: the shape of a reduction along that axis.
pub trait RemoveAxis<const A: usize>: StaticShape {
    /// The remaining axes, in order.
    type Out: StaticShape;
}

macro_rules! remove_axis {
    ($axis:literal: ($($d:ident),*) -> ($($kept:ident),*)) => {
        impl<$($d: Dim),*> RemoveAxis<$axis> for ($($d,)*) {
            type Out = ($($kept,)*);
        }
    };
}

remove_axis!(1: (A, B) -> (A));
remove_axis!(0: (A, B) -> (B));
remove_axis!(0: (A, B, C) -> (B, C));
remove_axis!(1: (A, B, C) -> (A, C));
remove_axis!(2: (A, B, C) -> (A, B));
remove_axis!(0: (A, B, C, F) -> (B, C, F));
remove_axis!(1: (A, B, C, F) -> (A, C, F));
remove_axis!(2: (A, B, C, F) -> (A, B, F));
remove_axis!(3: (A, B, C, F) -> (A, B, C));

/// `Self` with axes `A` and `B` exchanged: the shape of a transpose.
pub trait SwapAxes<const A: usize, const B: usize>: StaticShape {
    /// The shape with the two axes exchanged.
    type Out: StaticShape;
}

/// `SwapAxes` for one pair of axes, both ways round.
macro_rules! swap_axes {
    ($($a:literal, $b:literal: ($($d:ident),*) -> ($($swapped:ident),*);)*) => {$(
        impl<$($d: Dim),*> SwapAxes<$a, $b> for ($($d,)*) {
            type Out = ($($swapped,)*);
        }
        impl<$($d: Dim),*> SwapAxes<$b, $a> for ($($d,)*) {
            type Out = ($($swapped,)*);
        }
    )*};
}

swap_axes! {
    0, 1: (A, B) -> (B, A);
    0, 1: (A, B, C) -> (B, A, C);
    0, 2: (A, B, C) -> (C, B, A);
    1, 2: (A, B, C) -> (A, C, B);
    0, 1: (A, B, C, F) -> (B, A, C, F);
    0, 2: (A, B, C, F) -> (C, B, A, F);
    0, 3: (A, B, C, F) -> (F, B, C, A);
    1, 2: (A, B, C, F) -> (A, C, B, F);
    1, 3: (A, B, C, F) -> (A, F, C, B);
    2, 3: (A, B, C, F) -> (A, B, F, C);
}
