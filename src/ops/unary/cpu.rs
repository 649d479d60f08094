//! Unary kernels on the CPU: `map_strided` runs the op's `apply`,
//! monomorphised per op and element type, as a vectorisable (and, for large
//! inputs, parallel) loop; for the half types, its `apply_f32` on each
//! element widened to `f32`, rounded once.

use super::{UnaryKernel, UnaryOp};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, ElementFn, map_elements};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;

impl UnaryKernel for Cpu {
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        let out = match E::DTYPE.is_half() {
            true => map_elements(Op::NAME, x.as_slice(), layout, ApplyInF32(op))?,
            false => map_elements(Op::NAME, x.as_slice(), layout, Apply(op))?,
        };
        Ok(CpuStorage::from_vec(out))
    }
}

/// An op's `apply` as the map's element function: unlike a closure, it is
/// always inlined into the loop built for the CPU's widest vectors, so that
/// ops with long bodies (GELU, sigmoid) vectorise at full width too.
struct Apply<Op>(Op);

impl<E: Element, Op: UnaryOp<E>> ElementFn<E, E> for Apply<Op> {
    #[inline(always)]
    fn call<const FMA: bool>(&self, x: E) -> E {
        self.0.apply_in_loop::<FMA>(x)
    }
}

/// [`Apply`] for the half types: the op's `f32` function on the widened
/// element, rounded once.
struct ApplyInF32<Op>(Op);

impl<E: Element, Op: UnaryOp<E>> ElementFn<E, E> for ApplyInF32<Op> {
    #[inline(always)]
    fn call<const FMA: bool>(&self, x: E) -> E {
        E::from_f32(self.0.apply_f32::<FMA>(x.cast::<f32>()))
    }
}
