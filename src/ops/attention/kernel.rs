//! The attention family's kernel trait: fused forward and backward passes
//! that never hold more than one row of scores per thread. A device
//! without them (the trait's defaults) runs the composed form, one
//! `[queries, keys]` score matrix per batch.

use crate::backend::Backend;
use crate::element::FloatElement;
use crate::error::Result;
use crate::layout::Layout;

/// The sizes of a fused attention call: `batch` independent problems (the
/// product of the batch axes) of `queries` rows of width `width` attending
/// over `keys` rows, whose values have width `value_width`. Under
/// grouped-query attention `group` consecutive problems share one problem's
/// keys and values: problem `b` reads key and value problem `b / group` of
/// `batch / group`, and a key's gradient sums over its group's queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Independent problems: batch times heads.
    pub batch: usize,
    /// Query positions, `L`.
    pub queries: usize,
    /// Key and value positions, `S`.
    pub keys: usize,
    /// Width of queries and keys, `E`.
    pub width: usize,
    /// Width of values and of the result, `Ev`.
    pub value_width: usize,
    /// Query problems (heads) per key and value problem: 1 but under
    /// grouped-query attention. Divides `batch`.
    pub group: usize,
}

/// The mask as a fused kernel reads it. The layouts of `Keep` and `Add`
/// have the scores' shape `[batch.., queries, keys]`, broadcast axes with
/// stride 0.
#[derive(Clone, Copy, Debug)]
pub enum KernelMask<'a, K, A> {
    /// Every query sees every key.
    None,
    /// Query `i` sees keys `0..=i`.
    Causal,
    /// Query `i` sees key `j` where the byte is non-zero.
    Keep(&'a K, &'a Layout),
    /// Added to the scaled scores.
    Add(&'a A, &'a Layout),
}

impl<'a, K, A> KernelMask<'a, K, A> {
    /// The additive values, if the mask has them.
    pub(crate) fn additive(&self) -> Option<&'a A> {
        match *self {
            KernelMask::Add(values, _) => Some(values),
            KernelMask::None | KernelMask::Causal | KernelMask::Keep(..) => None,
        }
    }

    /// The same mask with its additive values read from `values` instead:
    /// their `f32` copy, for a half-precision kernel that widens.
    pub(crate) fn with_additive<'b, B>(self, values: Option<&'b B>) -> KernelMask<'b, K, B>
    where
        'a: 'b,
    {
        match (self, values) {
            (KernelMask::Add(_, layout), Some(values)) => KernelMask::Add(values, layout),
            (KernelMask::Keep(keep, layout), _) => KernelMask::Keep(keep, layout),
            (KernelMask::Causal, _) => KernelMask::Causal,
            (KernelMask::None | KernelMask::Add(..), _) => KernelMask::None,
        }
    }
}

/// A mask of device `B` with elements `E`, as the kernels take it.
pub type MaskOf<'a, B, E> = KernelMask<'a, <B as Backend>::Storage<u8>, <B as Backend>::Storage<E>>;

/// Device kernels for [`Tensor::scaled_dot_product_attention`](crate::Tensor::scaled_dot_product_attention).
/// Implemented by the core devices ([`CoreDevice`](crate::tensor::CoreDevice)); the default methods
/// return `None`, which runs the composed form.
///
/// Every tensor argument is a storage with a contiguous layout: queries
/// `[batch, queries, width]`, keys `[batch / group, keys, width]`, values
/// `[batch / group, keys, value_width]`, and so are the results' layouts; but see
/// [`STRIDED_ROWS`](Self::STRIDED_ROWS).
/// Every size in [`AttentionDims`] is at least 1 (the operation handles
/// empty tensors itself).
pub trait AttentionKernel: Backend {
    /// Whether the kernels take queries, keys, values, and the backward's
    /// result and gradient, in any layout whose last axis has stride 1
    /// (each problem's matrix anywhere in storage, its rows at any stride),
    /// such as the heads split off one projection (`[B, T, H, D]` viewed
    /// as `[B, H, T, D]`), and write their results in any dense layout the
    /// operation gives (the operands' memory order). Without it, the
    /// operation copies the operands contiguous first, and asks for
    /// contiguous results.
    const STRIDED_ROWS: bool = false;

    /// `softmax(q · kᵀ · scale + mask) · v`, in a fresh storage of
    /// `batch * queries * value_width` elements laid out as `out` (dense,
    /// `[batch.., queries, value_width]`), and each query row's log-sum-exp
    /// of its masked, scaled scores (minus infinity for a row that sees no
    /// key, whose output is 0), `[batch, queries]`, in `E`'s accumulator
    /// type (`f32` for the half types: rounded to 8 bits, it would scale
    /// the backward's weights by up to a few percent); or `None` without a
    /// fused kernel for `E`.
    fn attention_forward<E: FloatElement>(
        q: (&Self::Storage<E>, &Layout),
        k: (&Self::Storage<E>, &Layout),
        v: (&Self::Storage<E>, &Layout),
        out: &Layout,
        dims: AttentionDims,
        mask: MaskOf<'_, Self, E>,
        scale: f64,
    ) -> Result<Option<(Self::Storage<E>, Self::Storage<E::Accumulator>)>> {
        let _ = (q, k, v, out, dims, mask, scale);
        Ok(None)
    }

    /// The gradients of queries, keys and values, given the forward's
    /// result `out`, its row log-sum-exps `lse` (`[batch, queries]`) and the
    /// result's gradient `g`, recomputing the weights row by row, each in a
    /// fresh storage laid out as its entry of `grads` (dense, the shapes of
    /// `q`, `k` and `v`); `None` without a fused kernel for `E`.
    #[allow(clippy::too_many_arguments)]
    fn attention_backward<E: FloatElement>(
        q: (&Self::Storage<E>, &Layout),
        k: (&Self::Storage<E>, &Layout),
        v: (&Self::Storage<E>, &Layout),
        out: (&Self::Storage<E>, &Layout),
        lse: &Self::Storage<E::Accumulator>,
        g: (&Self::Storage<E>, &Layout),
        grads: [&Layout; 3],
        dims: AttentionDims,
        mask: MaskOf<'_, Self, E>,
        scale: f64,
    ) -> Result<Option<[Self::Storage<E>; 3]>> {
        let _ = (q, k, v, out, lse, g, grads, dims, mask, scale);
        Ok(None)
    }
}
