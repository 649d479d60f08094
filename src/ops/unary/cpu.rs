//! Unary kernels on the CPU: `map_strided` runs the op's `apply`,
//! monomorphised per op and element type, as a vectorisable (and, for large
//! inputs, parallel) loop.

use super::{UnaryKernel, UnaryOp};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, ElementFn, map_elements};
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;

impl UnaryKernel for Cpu {
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        Ok(CpuStorage::from_vec(map_elements(Op::NAME, x.as_slice(), layout, Apply(op))?))
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
