//! Dimensions known to the compiler, dynamic ones, and the dimensions that
//! layers compute from them.

use std::fmt::Debug;

/// One dimension of a [`StaticShape`](super::StaticShape): a size fixed in
/// the type ([`Const`], or a size computed from others such as
/// [`ConvOut`]), or `usize`, a size known only at run time (the batch).
pub trait Dim: Copy + Debug + Send + Sync + 'static {
    /// The size, `Some` when the compiler knows it.
    const STATIC: Option<usize>;

    /// This dimension with `size` elements, or `None` when the type fixes
    /// another size.
    fn from_size(size: usize) -> Option<Self>;

    /// The size.
    fn size(&self) -> usize;
}

/// A dimension whose size the compiler knows, `N`.
pub trait StaticDim: Dim + Default {
    /// The size.
    const N: usize;
}

/// A dimension of `N` elements, fixed in the type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Const<const N: usize>;

impl<const N: usize> Dim for Const<N> {
    const STATIC: Option<usize> = Some(N);

    fn from_size(size: usize) -> Option<Self> {
        (size == N).then_some(Const)
    }

    fn size(&self) -> usize {
        N
    }
}

impl<const N: usize> StaticDim for Const<N> {
    const N: usize = N;
}

impl Dim for usize {
    const STATIC: Option<usize> = None;

    fn from_size(size: usize) -> Option<Self> {
        Some(size)
    }

    fn size(&self) -> usize {
        *self
    }
}

/// Implements [`Dim`] for a zero-sized dimension type whose size `N` is a
/// constant expression of its parameters.
macro_rules! computed_dim {
    ($name:ident<$($p:ident: $bound:path),*; $(const $c:ident),*>) => {
        impl<$($p: $bound,)* $(const $c: usize),*> Dim for $name<$($p,)* $($c),*> {
            const STATIC: Option<usize> = Some(<Self as StaticDim>::N);

            fn from_size(size: usize) -> Option<Self> {
                (size == <Self as StaticDim>::N).then(Self::default)
            }

            fn size(&self) -> usize {
                <Self as StaticDim>::N
            }
        }
    };
}

/// The output size along one axis of a convolution or pooling window over
/// an input of size `I`: kernel `K`, stride `S`, padding `P`, dilation
/// `DL`, PyTorch's `(I + 2P - DL(K - 1) - 1) / S + 1`. The compiler
/// computes it, so a model's intermediate sizes need no annotation; a
/// window larger than its padded input fails to build with a message
/// giving the sizes.
pub struct ConvOut<I, const K: usize, const S: usize, const P: usize, const DL: usize>(std::marker::PhantomData<I>);

impl<I, const K: usize, const S: usize, const P: usize, const DL: usize> Clone for ConvOut<I, K, S, P, DL> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, const K: usize, const S: usize, const P: usize, const DL: usize> Copy for ConvOut<I, K, S, P, DL> {}
impl<I, const K: usize, const S: usize, const P: usize, const DL: usize> Default for ConvOut<I, K, S, P, DL> {
    fn default() -> Self {
        ConvOut(std::marker::PhantomData)
    }
}
impl<I: StaticDim, const K: usize, const S: usize, const P: usize, const DL: usize> Debug for ConvOut<I, K, S, P, DL> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", <Self as StaticDim>::N)
    }
}

impl<I: StaticDim, const K: usize, const S: usize, const P: usize, const DL: usize> StaticDim
    for ConvOut<I, K, S, P, DL>
{
    const N: usize = {
        let span = DL * (K - 1) + 1;
        let padded = I::N + 2 * P;
        if S == 0 || padded < span {
            super::message::Message::new()
                .text("a window of kernel ")
                .num(K)
                .text(", dilation ")
                .num(DL)
                .text(" and padding ")
                .num(P)
                .text(" does not fit an input of size ")
                .num(I::N)
                .fail()
        }
        (padded - span) / S + 1
    };
}
computed_dim!(ConvOut<I: StaticDim; const K, const S, const P, const DL>);

/// The product of two dimensions, `A::N * B::N`: what `flatten` makes of
/// the axes it merges.
pub struct Prod<A, B>(std::marker::PhantomData<(A, B)>);

impl<A, B> Clone for Prod<A, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, B> Copy for Prod<A, B> {}
impl<A, B> Default for Prod<A, B> {
    fn default() -> Self {
        Prod(std::marker::PhantomData)
    }
}
impl<A: StaticDim, B: StaticDim> Debug for Prod<A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", <Self as StaticDim>::N)
    }
}

impl<A: StaticDim, B: StaticDim> StaticDim for Prod<A, B> {
    const N: usize = A::N * B::N;
}
computed_dim!(Prod<A: StaticDim, B: StaticDim;>);
