//! Comparison, mask and selection kernels on the CPU.

use super::{CompareKernel, CompareOp};
use crate::backend::Cpu;
use crate::backend::cpu::for_each_chunk;
use crate::backend::cpu::{CpuStorage, PARALLEL_CHUNK, map_strided, output_buffer, split_across_threads, zip_into};
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, for_each_block};

/// `f(a[i], b[i])` over two operands laid out with one shape, into a new
/// row-major vector.
fn zip_map<A: Element, B: Element, T: Element>(
    op: &'static str,
    a: &[A],
    al: &Layout,
    b: &[B],
    bl: &Layout,
    f: impl Fn(A, B) -> T + Send + Sync,
) -> Result<Vec<T>> {
    let mut out = output_buffer(op, al.elem_count())?;
    zip_into(&mut out, a, al, b, bl, f);
    Ok(out)
}

/// `if c != 0 { t } else { f }`, written as a select the compiler can vectorise.
#[inline(always)]
fn select<E: Element>(c: u8, t: E, f: E) -> E {
    if c != 0 { t } else { f }
}

impl CompareKernel for Cpu {
    fn compare<E: Element, Op: CompareOp<E>>(
        op: Op,
        lhs: &CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage<u8>> {
        let (a, b) = (lhs.as_slice(), rhs.as_slice());
        let out = zip_map(Op::NAME, a, lhs_layout, b, rhs_layout, move |a, b| op.apply(a, b) as u8)?;
        Ok(CpuStorage::from_vec(out))
    }

    fn compare_scalar<E: Element, Op: CompareOp<E>>(
        op: Op,
        x: &CpuStorage<E>,
        layout: &Layout,
        scalar: E,
    ) -> Result<CpuStorage<u8>> {
        let out = map_strided(Op::NAME, x.as_slice(), layout, move |v| op.apply(v, scalar) as u8)?;
        Ok(CpuStorage::from_vec(out))
    }

    fn logical_not(x: &CpuStorage<u8>, layout: &Layout) -> Result<CpuStorage<u8>> {
        Ok(CpuStorage::from_vec(map_strided("logical_not", x.as_slice(), layout, |v: u8| (v == 0) as u8)?))
    }

    fn where_cond<E: Element>(
        cond: &CpuStorage<u8>,
        cond_layout: &Layout,
        on_true: &CpuStorage<E>,
        on_true_layout: &Layout,
        on_false: &CpuStorage<E>,
        on_false_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        let (c, t, f) = (cond.as_slice(), on_true.as_slice(), on_false.as_slice());
        let mut out = output_buffer::<E>("where_cond", cond_layout.elem_count())?;
        let dense =
            (cond_layout.contiguous_range(), on_true_layout.contiguous_range(), on_false_layout.contiguous_range());
        if let (Some(rc), Some(rt), Some(rf)) = dense {
            let (c, t, f) = (&c[rc], &t[rt], &f[rf]);
            let run = |out: &mut [E], c: &[u8], t: &[E], f: &[E]| {
                for (((o, &c), &t), &f) in out.iter_mut().zip(c).zip(t).zip(f) {
                    *o = select(c, t, f);
                }
            };
            if split_across_threads(out.len()) {
                for_each_chunk(&mut out, PARALLEL_CHUNK, &|i, o| {
                    let start = i * PARALLEL_CHUNK;
                    run(o, &c[start..][..o.len()], &t[start..][..o.len()], &f[start..][..o.len()])
                });
            } else {
                run(&mut out, c, t, f);
            }
            return Ok(CpuStorage::from_vec(out));
        }
        let strides = [cond_layout.strides(), on_true_layout.strides(), on_false_layout.strides()];
        let offsets = [cond_layout.offset(), on_true_layout.offset(), on_false_layout.offset()];
        let mut next = 0;
        for_each_block(cond_layout.dims(), strides, offsets, |[x, y, z], len, [sx, sy, sz]| {
            let out = &mut out[next..next + len];
            match (sx, sy, sz) {
                (1, 1, 1) => {
                    for (((o, &c), &t), &f) in
                        out.iter_mut().zip(&c[x..x + len]).zip(&t[y..y + len]).zip(&f[z..z + len])
                    {
                        *o = select(c, t, f);
                    }
                }
                // `where(mask, 1.0, 0.0)`: a choice between two constants.
                (1, 0, 0) => {
                    let (t, f) = (t[y], f[z]);
                    for (o, &c) in out.iter_mut().zip(&c[x..x + len]) {
                        *o = select(c, t, f);
                    }
                }
                // A mask constant along the block (e.g. one flag per row):
                // the whole block comes from one side.
                (0, 1, 1) => {
                    let src = if c[x] != 0 { &t[y..y + len] } else { &f[z..z + len] };
                    out.copy_from_slice(src);
                }
                // The common `where(mask, x, scalar)` shape: a fixed fallback.
                (1, 1, 0) => {
                    let f = f[z];
                    for ((o, &c), &t) in out.iter_mut().zip(&c[x..x + len]).zip(&t[y..y + len]) {
                        *o = select(c, t, f);
                    }
                }
                _ => {
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = select(c[x + i * sx], t[y + i * sy], f[z + i * sz]);
                    }
                }
            }
            next += len;
        });
        Ok(CpuStorage::from_vec(out))
    }
}
