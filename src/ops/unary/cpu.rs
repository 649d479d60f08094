//! Unary kernels on the CPU: `map_strided` runs the op's `apply`,
//! monomorphised per op and element type, as a vectorisable (and, for large
//! inputs, parallel) loop.

use super::{UnaryKernel, UnaryOp};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, map_strided};
use crate::element::Element;
use crate::error::Result;
use crate::shape::Layout;

impl UnaryKernel for Cpu {
    fn unary<E: Element, Op: UnaryOp<E>>(op: Op, x: &CpuStorage<E>, layout: &Layout) -> Result<CpuStorage<E>> {
        let out = map_strided(Op::NAME, x.as_slice(), layout, move |v: E| op.apply(v))?;
        Ok(CpuStorage::from_vec(out))
    }
}
