//! Binary kernels on the CPU.

use super::{BinaryKernel, BinaryOp};
use crate::device::cpu::{CpuStorage, is_small_output, map_strided, output_buffer, vectorized, zip_into};
use crate::device::{Backend, Cpu};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::shape::{Layout, for_each_block};

/// Calls `$body` with `$f` bound to the element function of `$op`, so each
/// operation gets its own monomorphised, vectorisable loop.
macro_rules! with_op {
    ($op:expr, $E:ty, |$f:ident| $body:expr) => {
        match $op {
            BinaryOp::Add => {
                let $f = <$E as Element>::add;
                $body
            }
            BinaryOp::Sub => {
                let $f = <$E as Element>::sub;
                $body
            }
            BinaryOp::Mul => {
                let $f = <$E as Element>::mul;
                $body
            }
            // Zero divisors of integers were rejected before the loop.
            BinaryOp::Div => {
                let $f = |a: $E, b: $E| a.div(b).unwrap_or(<$E>::ZERO);
                $body
            }
            BinaryOp::DivTrunc => {
                let $f = |a: $E, b: $E| a.div_trunc(b).unwrap_or(<$E>::ZERO);
                $body
            }
            BinaryOp::DivFloor => {
                let $f = |a: $E, b: $E| a.div_floor(b).unwrap_or(<$E>::ZERO);
                $body
            }
            BinaryOp::Maximum => {
                let $f = <$E as Element>::max;
                $body
            }
            BinaryOp::Minimum => {
                let $f = <$E as Element>::min;
                $body
            }
        }
    };
}

/// Rejects an integer division whose divisors include a zero.
fn check_divisors<E: Element>(op: BinaryOp, data: &[E], layout: &Layout) -> Result<()> {
    if !op.is_division() || E::IS_FLOAT {
        return Ok(());
    }
    let mut zero = false;
    for_each_block(layout.dims(), [layout.strides()], [layout.offset()], |[base], len, [stride]| {
        zero |= (0..len).any(|i| data[base + i * stride] == E::ZERO);
    });
    match zero {
        false => Ok(()),
        true => Err(Error::Argument { op: op.name(), device: Cpu::name(), reason: "integer division by zero".into() }),
    }
}

impl BinaryKernel for Cpu {
    fn binary<E: Element>(
        op: BinaryOp,
        lhs: &CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        check_divisors(op, rhs.as_slice(), rhs_layout)?;
        let (a, b) = (lhs.as_slice(), rhs.as_slice());
        let len = lhs_layout.elem_count();
        if let (true, Some(ra), Some(rb)) =
            (is_small_output::<E>(len), lhs_layout.contiguous_range(), rhs_layout.contiguous_range())
        {
            // Small and dense, the common case in a model's inner loops:
            // fixed costs dominate, so write a fresh vector once, in place
            // of zero-filling one and then overwriting it.
            let (a, b) = (&a[ra], &b[rb]);
            let out = with_op!(op, E, |f| vectorized(|| a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()));
            return Ok(CpuStorage::from_vec(out));
        }
        let mut out = output_buffer(op.name(), len)?;
        with_op!(op, E, |f| zip_into(&mut out, a, lhs_layout, b, rhs_layout, f));
        Ok(CpuStorage::from_vec(out))
    }

    fn binary_scalar<E: Element>(
        op: BinaryOp,
        x: &CpuStorage<E>,
        layout: &Layout,
        scalar: E,
        scalar_first: bool,
    ) -> Result<CpuStorage<E>> {
        let src = x.as_slice();
        let out = if scalar_first {
            check_divisors(op, src, layout)?;
            with_op!(op, E, |f| map_strided(op.name(), src, layout, move |v| f(scalar, v)))?
        } else {
            check_divisors(op, &[scalar], &Layout::contiguous(crate::Shape::from(())))?;
            with_op!(op, E, |f| map_strided(op.name(), src, layout, move |v| f(v, scalar)))?
        };
        Ok(CpuStorage::from_vec(out))
    }

    fn binary_assign<E: Element>(
        op: BinaryOp,
        lhs: &mut CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<()> {
        check_divisors(op, rhs.as_slice(), rhs_layout)?;
        let range = lhs_layout.contiguous_range().expect("binary_assign needs a contiguous destination");
        let dense = Layout::contiguous(lhs_layout.shape().clone());
        let out = &mut lhs.as_mut_slice()[range];
        // The destination is read and written element by element, in step.
        let b = rhs.as_slice();
        with_op!(op, E, |f| {
            let mut next = 0;
            for_each_block(dense.dims(), [rhs_layout.strides()], [rhs_layout.offset()], |[y], len, [sy]| {
                for (i, o) in out[next..next + len].iter_mut().enumerate() {
                    *o = f(*o, b[y + i * sy]);
                }
                next += len;
            });
        });
        Ok(())
    }
}
