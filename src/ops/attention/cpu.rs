//! Fused attention on the CPU: each thread takes whole problems of the
//! batch (or, forward, runs of query rows) and holds one row of scores at a
//! time. Keys (and, backward, values) are transposed once per problem so
//! that a row's scores are one vectorised multiply-add per width element
//! across all keys; weighted sums of value rows run along the rows.

use super::kernel::{AttentionDims, AttentionKernel, KernelMask};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, VectorLoop, exp_nonpositive, split_across_threads, vectorized, zeroed_vec};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::{Layout, count_of};
use rayon::prelude::*;

/// The dense elements of a contiguous tensor.
fn dense<'a, E: Element>(storage: &'a CpuStorage<E>, layout: &Layout) -> &'a [E] {
    let range = layout.contiguous_range().expect("the attention kernels are given contiguous tensors");
    &storage.as_slice()[range]
}

/// The mask of one problem of the batch: reads the mask at row `i`, key `j`.
#[derive(Clone, Copy)]
enum RowMask<'a, E> {
    None,
    Causal,
    Keep { data: &'a [u8], base: usize, row: usize, col: usize },
    Add { data: &'a [E], base: usize, row: usize, col: usize },
}

impl<'a, E: FloatElement> RowMask<'a, E> {
    fn of(mask: &KernelMask<'a, CpuStorage<u8>, CpuStorage<E>>, problem: usize) -> Self {
        // The offset of problem `problem`'s [queries, keys] matrix and its two strides.
        fn place(layout: &Layout, problem: usize) -> (usize, usize, usize) {
            let rank = layout.dims().len();
            let (dims, strides) = (&layout.dims()[..rank - 2], &layout.strides()[..rank - 2]);
            let mut rest = problem;
            let mut base = layout.offset();
            for (&d, &s) in dims.iter().zip(strides).rev() {
                base += (rest % d) * s;
                rest /= d;
            }
            (base, layout.strides()[rank - 2], layout.strides()[rank - 1])
        }
        match *mask {
            KernelMask::None => RowMask::None,
            KernelMask::Causal => RowMask::Causal,
            KernelMask::Keep(s, l) => {
                let (base, row, col) = place(l, problem);
                RowMask::Keep { data: s.as_slice(), base, row, col }
            }
            KernelMask::Add(s, l) => {
                let (base, row, col) = place(l, problem);
                RowMask::Add { data: s.as_slice(), base, row, col }
            }
        }
    }

    /// How many keys row `i` can see at all (the causal prefix).
    fn visible(&self, i: usize, keys: usize) -> usize {
        match self {
            RowMask::Causal => keys.min(i + 1),
            _ => keys,
        }
    }

    /// Applies the mask to row `i`'s scaled scores.
    #[inline(always)]
    fn apply(&self, i: usize, scores: &mut [E]) {
        match *self {
            RowMask::None | RowMask::Causal => {}
            RowMask::Keep { data, base, row, col } => {
                for (j, s) in scores.iter_mut().enumerate() {
                    if data[base + i * row + j * col] == 0 {
                        *s = E::MIN;
                    }
                }
            }
            RowMask::Add { data, base, row, col } => {
                for (j, s) in scores.iter_mut().enumerate() {
                    *s = *s + data[base + i * row + j * col];
                }
            }
        }
    }
}

/// `keys` (`[n, width]`) transposed into `out` (`[width, n]`).
fn transpose<E: Element>(keys: &[E], n: usize, width: usize, out: &mut [E]) {
    for (j, key) in keys.chunks_exact(width).enumerate() {
        for (d, &x) in key.iter().enumerate() {
            out[d * n + j] = x;
        }
    }
}

/// `scores[j] = scale · q · keyⱼ` for the first `scores.len()` keys, from
/// the keys transposed (`[width, keys]`).
#[inline(always)]
fn dot_rows<E: FloatElement>(q: &[E], keys_t: &[E], keys: usize, scale: E, scores: &mut [E]) {
    scores.fill(E::ZERO);
    let n = scores.len();
    for (d, &x) in q.iter().enumerate() {
        let x = x * scale;
        for (s, &k) in scores.iter_mut().zip(&keys_t[d * keys..d * keys + n]) {
            *s = *s + x * k;
        }
    }
}

/// `scores` replaced by `exp(score - shift)` (every argument at most 0);
/// returns their sum.
#[inline(always)]
fn exp_shifted<E: FloatElement>(scores: &mut [E], shift: E) -> E {
    let mut sum = E::ZERO;
    for s in scores.iter_mut() {
        *s = exp_nonpositive(Element::min(*s - shift, E::ZERO));
        sum = sum + *s;
    }
    sum
}

/// `acc += w · row`.
#[inline(always)]
fn axpy<E: FloatElement>(acc: &mut [E], w: E, row: &[E]) {
    for (a, &x) in acc.iter_mut().zip(row) {
        *a = *a + w * x;
    }
}

/// The forward pass over query rows `rows` of one problem.
struct Forward<'a, E> {
    q: &'a [E],
    k: &'a [E],
    v: &'a [E],
    keys_t: &'a mut [E],
    scores: &'a mut [E],
    out: &'a mut [E],
    lse: &'a mut [E],
    rows: std::ops::Range<usize>,
    dims: AttentionDims,
    mask: RowMask<'a, E>,
    scale: E,
}

impl<E: FloatElement> VectorLoop for Forward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let AttentionDims { keys, width, value_width, .. } = self.dims;
        transpose(self.k, keys, width, self.keys_t);
        for (r, i) in self.rows.clone().enumerate() {
            let out = &mut self.out[r * value_width..(r + 1) * value_width];
            out.fill(E::ZERO);
            let n = self.mask.visible(i, keys);
            let scores = &mut self.scores[..n];
            dot_rows(&self.q[i * width..(i + 1) * width], self.keys_t, keys, self.scale, scores);
            self.mask.apply(i, scores);
            let max = scores.iter().fold(E::MIN, |m, &s| Element::max(m, s));
            if max == E::MIN {
                // The row sees no key: output 0, as PyTorch's.
                self.lse[r] = E::MIN;
                continue;
            }
            let sum = exp_shifted(scores, max);
            for (j, &p) in scores.iter().enumerate() {
                axpy(out, p, &self.v[j * value_width..(j + 1) * value_width]);
            }
            let inv = E::ONE / sum;
            out.iter_mut().for_each(|o| *o = *o * inv);
            self.lse[r] = max + sum.ln();
        }
    }
}

/// The backward pass over one problem: every query row's gradient, and the
/// keys' and values' gradients summed over the rows.
struct Backward<'a, E> {
    q: &'a [E],
    k: &'a [E],
    v: &'a [E],
    out: &'a [E],
    lse: &'a [E],
    g: &'a [E],
    dq: &'a mut [E],
    dk: &'a mut [E],
    dv: &'a mut [E],
    scratch: &'a mut [E],
    dims: AttentionDims,
    mask: RowMask<'a, E>,
    scale: E,
}

impl<E: FloatElement> VectorLoop for Backward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let AttentionDims { queries, keys, width, value_width, .. } = self.dims;
        let (keys_t, rest) = self.scratch.split_at_mut(width * keys);
        let (values_t, rest) = rest.split_at_mut(value_width * keys);
        let (weights, dp) = rest.split_at_mut(keys);
        transpose(self.k, keys, width, keys_t);
        transpose(self.v, keys, value_width, values_t);
        for i in 0..queries {
            let dq = &mut self.dq[i * width..(i + 1) * width];
            dq.fill(E::ZERO);
            if self.lse[i] == E::MIN {
                continue; // a row that saw no key: no gradient
            }
            let n = self.mask.visible(i, keys);
            let (weights, dp) = (&mut weights[..n], &mut dp[..n]);
            let q = &self.q[i * width..(i + 1) * width];
            let g = &self.g[i * value_width..(i + 1) * value_width];
            dot_rows(q, keys_t, keys, self.scale, weights);
            self.mask.apply(i, weights);
            exp_shifted(weights, self.lse[i]);
            // dp = g · vⱼ, and D = g · out, the weights' gradient offset.
            dot_rows(g, values_t, keys, E::ONE, dp);
            let offset =
                g.iter().zip(&self.out[i * value_width..(i + 1) * value_width]).fold(E::ZERO, |a, (&x, &y)| a + x * y);
            for j in 0..n {
                let (p, ds) = (weights[j], weights[j] * (dp[j] - offset) * self.scale);
                axpy(dq, ds, &self.k[j * width..(j + 1) * width]);
                axpy(&mut self.dk[j * width..(j + 1) * width], ds, q);
                axpy(&mut self.dv[j * value_width..(j + 1) * value_width], p, g);
            }
        }
    }
}

impl AttentionKernel for Cpu {
    fn attention_forward<E: FloatElement>(
        q: (&CpuStorage<E>, &Layout),
        k: (&CpuStorage<E>, &Layout),
        v: (&CpuStorage<E>, &Layout),
        dims: AttentionDims,
        mask: KernelMask<'_, CpuStorage<u8>, CpuStorage<E>>,
        scale: f64,
    ) -> Result<Option<[CpuStorage<E>; 2]>> {
        const OP: &str = "scaled_dot_product_attention";
        let AttentionDims { batch, queries, keys, width, value_width } = dims;
        let (q, k, v) = (dense(q.0, q.1), dense(k.0, k.1), dense(v.0, v.1));
        let mut out = zeroed_vec::<E>(OP, count_of(&[batch, queries, value_width]))?;
        let mut lse = zeroed_vec::<E>(OP, batch * queries)?;
        let scale = E::from_f64(scale);
        // Runs of query rows: whole problems, cut further when there are
        // fewer problems than threads could share.
        let work = count_of(&[batch, queries, keys, width.max(value_width)]);
        let parallel = split_across_threads(work);
        let rows_per_task = if parallel && batch < 2 * rayon::current_num_threads() {
            queries.div_ceil(2 * rayon::current_num_threads()).max(1)
        } else {
            queries.max(1)
        };
        let tasks: Vec<(usize, std::ops::Range<usize>)> = (0..batch)
            .flat_map(|b| (0..queries).step_by(rows_per_task).map(move |r| (b, r..queries.min(r + rows_per_task))))
            .collect();
        let out_chunks = out.chunks_mut(rows_per_task * value_width);
        let lse_chunks = lse.chunks_mut(rows_per_task);
        let run = |((b, rows), (out, lse)): ((usize, std::ops::Range<usize>), (&mut [E], &mut [E]))| -> Result<()> {
            let mut scratch = zeroed_vec::<E>(OP, width * keys + keys)?;
            let (keys_t, scores) = scratch.split_at_mut(width * keys);
            vectorized(Forward {
                q: &q[b * queries * width..(b + 1) * queries * width],
                k: &k[b * keys * width..(b + 1) * keys * width],
                v: &v[b * keys * value_width..(b + 1) * keys * value_width],
                keys_t,
                scores,
                out,
                lse,
                rows,
                dims,
                mask: RowMask::of(&mask, b),
                scale,
            });
            Ok(())
        };
        let jobs: Vec<_> = tasks.into_iter().zip(out_chunks.zip(lse_chunks)).collect();
        if parallel {
            jobs.into_par_iter().try_for_each(run)?;
        } else {
            jobs.into_iter().try_for_each(run)?;
        }
        Ok(Some([CpuStorage::from_vec(out), CpuStorage::from_vec(lse)]))
    }

    fn attention_backward<E: FloatElement>(
        q: (&CpuStorage<E>, &Layout),
        k: (&CpuStorage<E>, &Layout),
        v: (&CpuStorage<E>, &Layout),
        out: (&CpuStorage<E>, &Layout),
        lse: &CpuStorage<E>,
        g: (&CpuStorage<E>, &Layout),
        dims: AttentionDims,
        mask: KernelMask<'_, CpuStorage<u8>, CpuStorage<E>>,
        scale: f64,
    ) -> Result<Option<[CpuStorage<E>; 3]>> {
        const OP: &str = "scaled_dot_product_attention_backward";
        let AttentionDims { batch, queries, keys, width, value_width } = dims;
        let (q, k, v) = (dense(q.0, q.1), dense(k.0, k.1), dense(v.0, v.1));
        let (out, g, lse) = (dense(out.0, out.1), dense(g.0, g.1), lse.as_slice());
        let mut dq = zeroed_vec::<E>(OP, count_of(&[batch, queries, width]))?;
        let mut dk = zeroed_vec::<E>(OP, count_of(&[batch, keys, width]))?;
        let mut dv = zeroed_vec::<E>(OP, count_of(&[batch, keys, value_width]))?;
        let scale = E::from_f64(scale);
        let run = |(b, ((dq, dk), dv)): (usize, ((&mut [E], &mut [E]), &mut [E]))| -> Result<()> {
            let mut scratch = zeroed_vec::<E>(OP, (width + value_width + 2) * keys)?;
            vectorized(Backward {
                q: &q[b * queries * width..(b + 1) * queries * width],
                k: &k[b * keys * width..(b + 1) * keys * width],
                v: &v[b * keys * value_width..(b + 1) * keys * value_width],
                out: &out[b * queries * value_width..(b + 1) * queries * value_width],
                lse: &lse[b * queries..(b + 1) * queries],
                g: &g[b * queries * value_width..(b + 1) * queries * value_width],
                dq,
                dk,
                dv,
                scratch: &mut scratch,
                dims,
                mask: RowMask::of(&mask, b),
                scale,
            });
            Ok(())
        };
        let parts =
            dq.chunks_mut(queries * width).zip(dk.chunks_mut(keys * width)).zip(dv.chunks_mut(keys * value_width));
        let jobs: Vec<_> = parts.enumerate().collect();
        if split_across_threads(count_of(&[batch, queries, keys, width.max(value_width)])) && batch > 1 {
            jobs.into_par_iter().try_for_each(run)?;
        } else {
            jobs.into_iter().try_for_each(run)?;
        }
        Ok(Some([CpuStorage::from_vec(dq), CpuStorage::from_vec(dk), CpuStorage::from_vec(dv)]))
    }
}
