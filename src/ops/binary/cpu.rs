//! Binary kernels on the CPU: the op's `apply`, monomorphised per op and
//! element type, in vectorisable (and, for large inputs, parallel) loops.

use super::{BinaryKernel, BinaryOp};
use crate::backend::cpu::{CpuStorage, is_small_output, map_strided, output_buffer, vectorized, zip_into};
use crate::backend::{Backend, Cpu};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, for_each_block};

/// Rejects an integer division whose divisors include a zero.
fn check_divisors<E: Element, Op: BinaryOp<E>>(data: &[E], layout: &Layout) -> Result<()> {
    if !Op::DIVISION || E::IS_FLOAT {
        return Ok(());
    }
    let mut zero = false;
    for_each_block(layout.dims(), [layout.strides()], [layout.offset()], |[base], len, [stride]| {
        zero |= (0..len).any(|i| data[base + i * stride] == E::ZERO);
    });
    match zero {
        false => Ok(()),
        true => Err(Error::Argument { op: Op::NAME, device: Cpu::name(), reason: "integer division by zero".into() }),
    }
}

impl BinaryKernel for Cpu {
    fn binary<E: Element, Op: BinaryOp<E>>(
        op: Op,
        lhs: &CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        check_divisors::<E, Op>(rhs.as_slice(), rhs_layout)?;
        let (a, b) = (lhs.as_slice(), rhs.as_slice());
        let len = lhs_layout.elem_count();
        if let (true, Some(ra), Some(rb)) =
            (is_small_output::<E>(len), lhs_layout.contiguous_range(), rhs_layout.contiguous_range())
        {
            // Small and dense, the common case in a model's inner loops:
            // fixed costs dominate, so write a fresh vector once, in place
            // of zero-filling one and then overwriting it.
            let (a, b) = (&a[ra], &b[rb]);
            let out = vectorized(|| a.iter().zip(b).map(|(&x, &y)| op.apply(x, y)).collect());
            return Ok(CpuStorage::from_vec(out));
        }
        let mut out = output_buffer(Op::NAME, len)?;
        zip_into(&mut out, a, lhs_layout, b, rhs_layout, move |x, y| op.apply(x, y));
        Ok(CpuStorage::from_vec(out))
    }

    fn binary_scalar<E: Element, Op: BinaryOp<E>>(
        op: Op,
        x: &CpuStorage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<CpuStorage<E>> {
        let src = x.as_slice();
        let out = if scalar_first {
            check_divisors::<E, Op>(src, layout)?;
            map_strided(Op::NAME, src, layout, move |v| op.apply(scalar, v))?
        } else {
            check_divisors::<E, Op>(&[scalar], &Layout::contiguous(crate::Shape::from(())))?;
            map_strided(Op::NAME, src, layout, move |v| op.apply(v, scalar))?
        };
        Ok(CpuStorage::from_vec(out))
    }

    fn binary_assign<E: Element, Op: BinaryOp<E>>(
        op: Op,
        lhs: &mut CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<()> {
        check_divisors::<E, Op>(rhs.as_slice(), rhs_layout)?;
        let range = lhs_layout.contiguous_range().expect("binary_assign needs a contiguous destination");
        let dense = Layout::contiguous(lhs_layout.shape().clone());
        let out = &mut lhs.as_mut_slice()[range];
        // The destination is read and written element by element, in step.
        let b = rhs.as_slice();
        let mut next = 0;
        for_each_block(dense.dims(), [rhs_layout.strides()], [rhs_layout.offset()], |[y], len, [sy]| {
            for (i, o) in out[next..next + len].iter_mut().enumerate() {
                *o = op.apply(*o, b[y + i * sy]);
            }
            next += len;
        });
        Ok(())
    }
}
