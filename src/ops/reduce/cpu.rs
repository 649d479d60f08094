//! Reduction and softmax kernels on the CPU.
//!
//! Every reduction is phrased as "output element `i` folds the run
//! `base + i * stride + k * step` for `k < len(axis)`", walked with
//! [`for_each_block`] over the output. A run with `step == 1` is a dense
//! slice folded with independent lane accumulators; otherwise whole rows of
//! the input are folded into the output vector at once, which keeps the
//! inner loop dense when the reduced axis is not the innermost one.
//!
//! Float sums are blocked: lanes accumulate at most [`BLOCK`] elements (or
//! [`ROW_BLOCK`] rows) before partial sums are combined pairwise, so the
//! rounding error grows with `BLOCK / LANES + log2(n)` rather than with `n`.
//!
//! Softmax makes strided inputs dense first, then works on dense rows (last
//! axis) or on whole rows of columns (any other axis); in `f32` its `exp` is a
//! polynomial the compiler vectorises rather than a libm call per element.

use super::{AffineAxis, ExtremeOp, Max, ReduceKernel, ReduceOp, around_axis};
use crate::backend::Cpu;
use crate::backend::cpu::{
    BASELINE_FMA, CpuStorage, PARALLEL_CHUNK, VectorLoop, exp_nonpositive, for_each_chunk, for_each_item,
    items_per_task, map_items, map_strided, map_tasks, narrowed, narrowed_all, output_buffer, split_across_threads,
    vectorized, widened,
};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::{Dims, Layout, Shape, count_of, for_each_block};
use std::marker::PhantomData;
use std::ops::Range;

/// Independent accumulators in a dense fold: enough to fill two AVX-512
/// registers of `f32` and to hide the latency of the adds. The compiler does
/// not reassociate float adds by itself, so the lanes have to be explicit.
const LANES: usize = 16;
/// Longest dense run folded lane-wise before halves are combined pairwise.
const BLOCK: usize = 1024;
/// Most rows folded into one partial result when accumulating whole rows.
const ROW_BLOCK: usize = 256;

/// Folds `x` with `LANES` independent accumulators, combined pairwise.
#[inline(always)]
fn fold_lanes<E: Element>(x: &[E], init: E, f: impl Fn(E, E) -> E + Copy) -> E {
    if x.len() < LANES {
        // Short rows (`[batch, 3]` summed over its last axis) would spend
        // more on setting up and combining the lanes than on the elements.
        return x.iter().fold(init, |a, &b| f(a, b));
    }
    let mut acc = [init; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        let chunk: &[E; LANES] = chunk.try_into().expect("chunks_exact yields LANES elements");
        for j in 0..LANES {
            acc[j] = f(acc[j], chunk[j]);
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for j in 0..width {
            acc[j] = f(acc[j], acc[j + width]);
        }
    }
    chunks.remainder().iter().fold(acc[0], |a, &b| f(a, b))
}

/// The elements of `storage` under `layout` in row-major order: the storage
/// itself where the layout is contiguous, else a dense copy, which goes back
/// to the buffer pool when dropped.
enum DenseElements<'a, E: Element> {
    View(&'a [E]),
    Copy(CpuStorage<E>),
}

impl<E: Element> std::ops::Deref for DenseElements<'_, E> {
    type Target = [E];
    fn deref(&self) -> &[E] {
        match self {
            DenseElements::View(view) => view,
            DenseElements::Copy(copy) => copy.as_slice(),
        }
    }
}

/// See [`DenseElements`]; `op` names the operation in an allocation error.
fn dense_elements<'a, E: Element>(
    op: &'static str,
    storage: &'a CpuStorage<E>,
    layout: &Layout,
) -> Result<DenseElements<'a, E>> {
    Ok(match layout.contiguous_range() {
        Some(range) => DenseElements::View(&storage.as_slice()[range]),
        None => DenseElements::Copy(CpuStorage::from_vec(map_strided(op, storage.as_slice(), layout, |v| v)?)),
    })
}

/// `Σ f(a, b)` over two dense runs of one length, in lanes (see
/// [`fold_lanes`]); inlined, so that a caller in [`vectorized`] gets it
/// built for the widest vectors.
#[inline(always)]
fn sum_zip<E: FloatElement>(a: &[E], b: &[E], f: impl Fn(E, E) -> E) -> E {
    let mut acc = [E::ZERO; LANES];
    let (chunks_a, chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail = chunks_a.remainder().iter().zip(chunks_b.remainder()).fold(E::ZERO, |s, (&a, &b)| s + f(a, b));
    for (a, b) in chunks_a.zip(chunks_b) {
        for j in 0..LANES {
            acc[j] = acc[j] + f(a[j], b[j]);
        }
    }
    fold_lanes(&acc, E::ZERO, <E as Element>::add) + tail
}

/// Folds a dense run: lane-wise within blocks of [`BLOCK`], and the blocks'
/// results pairwise, merged as a binary counter does (blocks 0 and 1, 2 and
/// 3, then those pairs, ...), so that rounding grows with the log of the
/// length. Not recursive, so that it inlines into a caller in
/// [`vectorized`] and is built for its vectors: the recursive form ran
/// softmax's row folds with SSE only.
#[inline(always)]
fn fold_dense<E: Element>(x: &[E], init: E, f: impl Fn(E, E) -> E + Copy) -> E {
    if x.len() <= BLOCK {
        return fold_lanes(x, init, f);
    }
    // Pending results, each of `blocks[i]` whole blocks, largest first;
    // the counts halve down the stack, so 64 entries hold any length.
    let (mut pending, mut blocks, mut depth) = ([init; 64], [0usize; 64], 0);
    for block in x.chunks(BLOCK) {
        let (mut value, mut count) = (fold_lanes(block, init, f), 1);
        while depth > 0 && blocks[depth - 1] == count {
            depth -= 1;
            value = f(pending[depth], value);
            count *= 2;
        }
        (pending[depth], blocks[depth]) = (value, count);
        depth += 1;
    }
    pending[..depth - 1].iter().rev().fold(pending[depth - 1], |right, &left| f(left, right))
}

/// [`fold_dense`], split across threads when the run is long. The chunk
/// size is a multiple of [`BLOCK`], so the result has the same blocking.
fn fold_dense_par<E: Element>(x: &[E], init: E, f: impl Fn(E, E) -> E + Copy + Send + Sync) -> E {
    if !split_across_threads(x.len()) {
        return fold_dense(x, init, f);
    }
    let partials: Vec<E> = map_tasks(x.len().div_ceil(PARALLEL_CHUNK), 1, &|i| {
        fold_dense(&x[i * PARALLEL_CHUNK..x.len().min((i + 1) * PARALLEL_CHUNK)], init, f)
    });
    fold_dense(&partials, init, f)
}

/// Where the elements of consecutive outputs sit: output `i` folds
/// `src[base + i * stride + k * step]` for `k < len`.
#[derive(Clone, Copy, Debug)]
struct Run {
    base: usize,
    stride: usize,
    step: usize,
    len: usize,
}

/// `acc[i] = f(acc[i], src[base + k * step + i * stride])` for each `k` in `rows`.
#[inline(always)]
fn fold_rows<E: Element>(acc: &mut [E], src: &[E], run: Run, rows: Range<usize>, f: impl Fn(E, E) -> E + Copy) {
    let Run { base, stride, step, .. } = run;
    let n = acc.len();
    for k in rows {
        let start = base + k * step;
        if stride == 1 {
            for (a, &x) in acc.iter_mut().zip(&src[start..start + n]) {
                *a = f(*a, x);
            }
        } else {
            for (i, a) in acc.iter_mut().enumerate() {
                *a = f(*a, src[start + i * stride]);
            }
        }
    }
}

/// `out[i]` = the fold of `src[base + i * stride + k * step]` over `k < len`.
#[inline(always)]
fn reduce_run<E: Element>(src: &[E], out: &mut [E], run: Run, init: E, f: impl Fn(E, E) -> E + Copy + Send + Sync) {
    let Run { base, stride, step, len } = run;
    if step == 1 && len > 0 {
        if let [single] = out {
            *single = fold_dense_par(&src[base..base + len], init, f);
            return;
        }
        for (i, o) in out.iter_mut().enumerate() {
            let start = base + i * stride;
            *o = fold_dense(&src[start..start + len], init, f);
        }
        return;
    }
    let n = out.len();
    if !split_across_threads(n.saturating_mul(len)) || len <= 2 * ROW_BLOCK {
        fold_row_blocks(out, src, run, 0..len, init, f);
        return;
    }
    // Few outputs over a long axis (`[1_000_000, 4]` summed over axis 0):
    // split the axis across threads, each folding its rows into a partial.
    let span = (PARALLEL_CHUNK / n.max(1)).next_multiple_of(ROW_BLOCK).max(ROW_BLOCK);
    let partials: Vec<Vec<E>> = map_tasks(len.div_ceil(span), 1, &|c| {
        let mut partial = vec![init; n];
        fold_row_blocks(&mut partial, src, run, c * span..len.min((c + 1) * span), init, f);
        partial
    });
    out.fill(init);
    for partial in &partials {
        for (o, &p) in out.iter_mut().zip(partial) {
            *o = f(*o, p);
        }
    }
}

/// `acc[i]` = the fold of the rows in `rows` (see [`fold_rows`]), at most
/// [`ROW_BLOCK`] rows at a time into a partial result, for accuracy.
#[inline(always)]
fn fold_row_blocks<E: Element>(
    acc: &mut [E],
    src: &[E],
    run: Run,
    rows: Range<usize>,
    init: E,
    f: impl Fn(E, E) -> E + Copy,
) {
    acc.fill(init);
    if rows.len() <= ROW_BLOCK {
        fold_rows(acc, src, run, rows, f);
        return;
    }
    let mut partial = vec![init; acc.len()];
    for first in rows.clone().step_by(ROW_BLOCK) {
        partial.fill(init);
        fold_rows(&mut partial, src, run, first..rows.end.min(first + ROW_BLOCK), f);
        for (a, &p) in acc.iter_mut().zip(&partial) {
            *a = f(*a, p);
        }
    }
}

/// Index of the first NaN in `x`, else of the first element equal to the
/// fold `f` picks. `x` is not empty.
fn arg_dense<E: Element>(x: &[E], init: E, f: impl Fn(E, E) -> E + Copy + Send + Sync) -> usize {
    // Two passes, both vectorisable: the extreme value, then where it is.
    let extreme = fold_dense_par(x, init, f);
    let found = if extreme.is_nan() { x.iter().position(|v| v.is_nan()) } else { x.iter().position(|&v| v == extreme) };
    found.unwrap_or(0)
}

/// `out[i]` = the `k < len` picked by `better` among `src[base + i * stride + k * step]`.
#[inline(always)]
fn arg_run<E: Element>(
    src: &[E],
    out: &mut [i64],
    run: Run,
    init: E,
    f: impl Fn(E, E) -> E + Copy + Send + Sync,
    better: impl Fn(E, E) -> bool + Copy,
) {
    let Run { base, stride, step, len } = run;
    if step == 1 {
        if let [single] = out {
            *single = arg_dense(&src[base..base + len], init, f) as i64;
            return;
        }
        for (i, o) in out.iter_mut().enumerate() {
            let start = base + i * stride;
            *o = arg_dense(&src[start..start + len], init, f) as i64;
        }
        return;
    }
    // Whole rows at a time, as `fold_rows` does, with selects instead of
    // branches so that the loop vectorises.
    let n = out.len();
    let mut best: Vec<E> = (0..n).map(|i| src[base + i * stride]).collect();
    out.fill(0);
    for k in 1..len {
        let (start, k) = (base + k * step, k as i64);
        let pick = |o: &mut i64, b: &mut E, v: E| {
            let take = better(v, *b);
            *b = if take { v } else { *b };
            *o = if take { k } else { *o };
        };
        if stride == 1 {
            for ((o, b), &v) in out.iter_mut().zip(best.iter_mut()).zip(&src[start..start + n]) {
                pick(o, b, v);
            }
        } else {
            for (i, (o, b)) in out.iter_mut().zip(best.iter_mut()).enumerate() {
                pick(o, b, src[start + i * stride]);
            }
        }
    }
}

/// [`reduce_run`] as one loop built for the CPU's widest vectors.
struct ReduceRun<'a, E, F> {
    src: &'a [E],
    out: &'a mut [E],
    run: Run,
    init: E,
    f: F,
}

impl<E: Element, F: Fn(E, E) -> E + Copy + Send + Sync> VectorLoop for ReduceRun<'_, E, F> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        reduce_run(self.src, self.out, self.run, self.init, self.f);
    }
}

/// [`arg_run`] as one loop built for the CPU's widest vectors: its selects
/// run a vector of outputs at a time, where baseline x86-64 has no masked
/// store and branches on each lane.
struct ArgRun<'a, E, F, B> {
    src: &'a [E],
    out: &'a mut [i64],
    run: Run,
    init: E,
    f: F,
    better: B,
}

impl<E: Element, F: Fn(E, E) -> E + Copy + Send + Sync, B: Fn(E, E) -> bool + Copy> VectorLoop for ArgRun<'_, E, F, B> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        arg_run(self.src, self.out, self.run, self.init, self.f, self.better);
    }
}

/// Splits `out` (the reduction of `axis` of `layout`) into runs and calls
/// `kernel(out_piece, run)` for each, in parallel when
/// the reduction reads enough elements to pay for it.
fn for_each_run<T: Send>(out: &mut [T], layout: &Layout, axis: usize, kernel: impl Fn(&mut [T], Run) + Sync) {
    let (len, step) = (layout.dims()[axis], layout.strides()[axis]);
    let mut dims: Dims = layout.dims().into();
    let mut strides: Dims = layout.strides().into();
    dims.remove(axis);
    strides.remove(axis);
    if !split_across_threads(out.len().saturating_mul(len.max(1))) {
        let mut next = 0;
        for_each_block(&dims, [&strides], [layout.offset()], |[base], n, [stride]| {
            kernel(&mut out[next..next + n], Run { base, stride, step, len });
            next += n;
        });
        return;
    }
    // Dense runs fold one output each; row accumulation wants pieces long
    // enough to vectorise over.
    let piece = (PARALLEL_CHUNK / len.max(1)).max(if step == 1 { 1 } else { 64 });
    let mut pieces = Vec::new();
    let mut block_len = 1;
    let mut rest = out;
    for_each_block(&dims, [&strides], [layout.offset()], |[base], n, [stride]| {
        block_len = n;
        let mut start = 0;
        while start < n {
            let take = piece.min(n - start);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(take);
            rest = tail;
            pieces.push((head, base + start * stride, stride));
            start += take;
        }
    });
    // Many short blocks (strided inputs) are grouped into tasks of about `piece` outputs.
    let min_len = (piece / block_len.max(1)).max(1);
    for_each_item(pieces, min_len, &|(o, base, stride)| kernel(o, Run { base, stride, step, len }));
}

/// The number of outputs of reducing `axis` of `layout`.
fn reduced_len(layout: &Layout, axis: usize) -> usize {
    count_of(layout.dims().iter().enumerate().filter(|&(i, _)| i != axis).map(|(_, d)| d))
}

/// The fold `f` (identity `init`) of `axis`, into a new output vector.
fn reduce_with<E: Element>(
    op: &'static str,
    src: &[E],
    layout: &Layout,
    axis: usize,
    init: E,
    f: impl Fn(E, E) -> E + Copy + Send + Sync,
) -> Result<Vec<E>> {
    let mut out = output_buffer(op, reduced_len(layout, axis))?;
    for_each_run(&mut out, layout, axis, |out, run| vectorized(ReduceRun { src, out, run, init, f }));
    Ok(out)
}

/// The arg-reduction of `axis`: `f` finds the extreme of a dense run and
/// `better` decides between a candidate and the best so far.
fn arg_reduce_with<E: Element>(
    op: &'static str,
    src: &[E],
    layout: &Layout,
    axis: usize,
    init: E,
    f: impl Fn(E, E) -> E + Copy + Send + Sync,
    better: impl Fn(E, E) -> bool + Copy + Send + Sync,
) -> Result<Vec<i64>> {
    let mut out = output_buffer(op, reduced_len(layout, axis))?;
    for_each_run(&mut out, layout, axis, |out, run| vectorized(ArgRun { src, out, run, init, f, better }));
    Ok(out)
}

/// Softmax of one dense row: `out = exp(x - max) / sum`, or for `log`,
/// `out = x - max - ln(sum)`.
#[inline(always)]
fn softmax_row<E: FloatElement, const FMA: bool>(src: &[E], out: &mut [E], log: bool) {
    let max = fold_dense(src, E::MIN, Max::fold);
    for (o, &x) in out.iter_mut().zip(src) {
        *o = exp_nonpositive::<E, FMA>(x - max);
    }
    let sum = fold_dense(out, E::ZERO, <E as Element>::add);
    if log {
        let log_sum = sum.ln();
        for (o, &x) in out.iter_mut().zip(src) {
            *o = x - max - log_sum;
        }
    } else {
        let inv = sum.recip();
        for o in out.iter_mut() {
            *o = *o * inv;
        }
    }
}

/// Softmax along axis 0 of the dense `[len, inner]` block `src`, for the
/// columns `cols` only; `out_rows[k]` receives row `k` of those columns.
/// Works row by row so the inner loops run over contiguous columns.
fn softmax_columns<E: FloatElement>(src: &[E], inner: usize, cols: Range<usize>, out_rows: &mut [&mut [E]], log: bool) {
    let row = |k: usize| &src[k * inner + cols.start..k * inner + cols.end];
    let mut max = vec![E::MIN; cols.len()];
    for k in 0..out_rows.len() {
        for (m, &x) in max.iter_mut().zip(row(k)) {
            *m = Max::fold(*m, x);
        }
    }
    let mut sum = vec![E::ZERO; cols.len()];
    for (k, orow) in out_rows.iter_mut().enumerate() {
        for (((o, &x), &m), acc) in orow.iter_mut().zip(row(k)).zip(&max).zip(sum.iter_mut()) {
            let e = exp_nonpositive::<E, BASELINE_FMA>(x - m);
            *o = e;
            *acc = *acc + e;
        }
    }
    if log {
        for acc in sum.iter_mut() {
            *acc = acc.ln();
        }
        for (k, orow) in out_rows.iter_mut().enumerate() {
            for (((o, &x), &m), &log_sum) in orow.iter_mut().zip(row(k)).zip(&max).zip(&sum) {
                *o = x - m - log_sum;
            }
        }
    } else {
        for acc in sum.iter_mut() {
            *acc = acc.recip();
        }
        for orow in out_rows.iter_mut() {
            for (o, &inv) in orow.iter_mut().zip(&sum) {
                *o = *o * inv;
            }
        }
    }
}

/// Softmax along the middle axis of dense `[groups, len, inner]` data, by
/// whole groups.
fn softmax_groups<E: FloatElement>(src: &[E], out: &mut [E], len: usize, inner: usize, log: bool) {
    for (s, o) in src.chunks_exact(len * inner).zip(out.chunks_exact_mut(len * inner)) {
        let mut rows: Vec<&mut [E]> = o.chunks_exact_mut(inner).collect();
        softmax_columns(s, inner, 0..inner, &mut rows, log);
    }
}

/// [`softmax_groups`] for few, large groups: each group's columns are
/// split across threads, each thread owning its slice of every output row.
fn softmax_groups_par<E: FloatElement>(src: &[E], out: &mut [E], len: usize, inner: usize, log: bool) {
    let width = (PARALLEL_CHUNK / len).max(LANES);
    for (s, o) in src.chunks_exact(len * inner).zip(out.chunks_exact_mut(len * inner)) {
        let ranges: Vec<Range<usize>> = (0..inner).step_by(width).map(|c| c..inner.min(c + width)).collect();
        let mut tasks: Vec<Vec<&mut [E]>> = ranges.iter().map(|_| Vec::with_capacity(len)).collect();
        for row in o.chunks_exact_mut(inner) {
            let mut rest = row;
            for (task, cols) in tasks.iter_mut().zip(&ranges) {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(cols.len());
                task.push(head);
                rest = tail;
            }
        }
        let tasks: Vec<_> = tasks.into_iter().zip(ranges).collect();
        for_each_item(tasks, 1, &|(mut rows, cols)| softmax_columns(s, inner, cols, &mut rows, log));
    }
}

impl ReduceKernel for Cpu {
    fn reduce<E: Element, Op: ReduceOp>(
        op: Op,
        x: &CpuStorage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<CpuStorage<E>> {
        if E::DTYPE.is_half() {
            let out = Self::reduce(op, &widened(Op::NAME, x)?, layout, axis)?;
            return narrowed(Op::NAME, &out);
        }
        let out = reduce_with(Op::NAME, x.as_slice(), layout, axis, Op::init(), Op::fold)?;
        Ok(CpuStorage::from_vec(out))
    }

    fn arg_reduce<E: Element, Op: ExtremeOp>(
        _: Op,
        x: &CpuStorage<E>,
        layout: &Layout,
        axis: usize,
    ) -> Result<CpuStorage<i64>> {
        let out = arg_reduce_with(Op::ARG_NAME, x.as_slice(), layout, axis, Op::init(), Op::fold, Op::displaces)?;
        Ok(CpuStorage::from_vec(out))
    }

    fn scan<E: Element, Op: ReduceOp>(
        op: Op,
        x: &CpuStorage<E>,
        layout: &Layout,
        axis: usize,
        reverse: bool,
    ) -> Result<CpuStorage<E>> {
        if E::DTYPE.is_half() {
            let out = Self::scan(op, &widened(Op::NAME, x)?, layout, axis, reverse)?;
            return narrowed(Op::NAME, &out);
        }
        let src = dense_elements(Op::NAME, x, layout)?;
        let src: &[E] = &src;
        let mut out = output_buffer(Op::NAME, src.len())?;
        let [_, len, inner] = around_axis(layout.dims(), axis);
        let group = len * inner;
        if group == 0 {
            return Ok(CpuStorage::from_vec(out));
        }
        let run = |out: &mut [E], src: &[E]| {
            vectorized(ScanGroups::<E, Op> { out, src, len, inner, reverse, op: PhantomData })
        };
        if split_across_threads(src.len()) && src.len() > group {
            let chunk = group * items_per_task(group);
            for_each_chunk(&mut out, chunk, &|i, o| run(o, &src[i * chunk..][..o.len()]));
        } else {
            run(&mut out, src);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn softmax<E: FloatElement>(x: &CpuStorage<E>, layout: &Layout, axis: usize, log: bool) -> Result<CpuStorage<E>> {
        if E::DTYPE.is_half() {
            let out = Self::softmax(&widened("softmax", x)?, layout, axis, log)?;
            return narrowed("softmax", &out);
        }
        let n = layout.elem_count();
        let src = dense_elements("softmax", x, layout)?;
        let src: &[E] = &src;
        let mut out = output_buffer("softmax", n)?;
        if n == 0 {
            return Ok(CpuStorage::from_vec(out));
        }
        let [_, len, inner] = around_axis(layout.dims(), axis);
        let group = len * inner;
        let groups = n / group;
        let parallel = split_across_threads(n);
        if inner > 1 && parallel && groups < rayon::current_num_threads() && inner >= 2 * LANES {
            // Too few groups to keep every thread busy: split columns instead.
            softmax_groups_par(src, &mut out, len, inner, log);
            return Ok(CpuStorage::from_vec(out));
        }
        let run = |o: &mut [E], s: &[E]| {
            if inner == 1 {
                vectorized(SoftmaxRows { out: o, src: s, len, log });
            } else {
                softmax_groups(s, o, len, inner, log);
            }
        };
        if parallel && groups > 1 {
            let chunk = group * items_per_task(group);
            for_each_chunk(&mut out, chunk, &|i, o| run(o, &src[i * chunk..][..o.len()]));
        } else {
            run(&mut out, src);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn softmax_backward<E: FloatElement>(
        (y, y_layout): (&CpuStorage<E>, &Layout),
        (g, g_layout): (&CpuStorage<E>, &Layout),
        axis: usize,
        log: bool,
    ) -> Result<CpuStorage<E>> {
        let op = if log { "log_softmax_backward" } else { "softmax_backward" };
        if E::DTYPE.is_half() {
            let (y, g) = (widened(op, y)?, widened(op, g)?);
            return narrowed(op, &Self::softmax_backward((&y, y_layout), (&g, g_layout), axis, log)?);
        }
        let (y, g) = (dense_elements(op, y, y_layout)?, dense_elements(op, g, g_layout)?);
        let (y, g): (&[E], &[E]) = (&y, &g);
        let n = y_layout.elem_count();
        let mut out = output_buffer(op, n)?;
        if n == 0 {
            return Ok(CpuStorage::from_vec(out));
        }
        let [_, len, inner] = around_axis(y_layout.dims(), axis);
        let group = len * inner;
        let run = |out: &mut [E], y: &[E], g: &[E]| vectorized(SoftmaxBackward { out, y, g, len, inner, log });
        if split_across_threads(n) && n > group {
            let chunk = group * items_per_task(group);
            for_each_chunk(&mut out, chunk, &|i, out| {
                let start = i * chunk;
                run(out, &y[start..][..out.len()], &g[start..][..out.len()])
            });
        } else {
            run(&mut out, y, g);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn standardize<E: FloatElement>(
        (x, layout): (&CpuStorage<E>, &Layout),
        dims: [usize; 3],
        eps: f64,
        affine: Option<(&CpuStorage<E>, &CpuStorage<E>, AffineAxis)>,
    ) -> Result<[CpuStorage<E>; 3]> {
        const OP: &str = "standardize";
        if E::DTYPE.is_half() {
            let affine = match affine {
                Some((w, b, axis)) => Some((widened(OP, w)?, widened(OP, b)?, axis)),
                None => None,
            };
            let affine = affine.as_ref().map(|(w, b, axis)| (w, b, *axis));
            return narrowed_all(OP, Self::standardize((&widened(OP, x)?, layout), dims, eps, affine)?);
        }
        let x = dense_elements(OP, x, layout)?;
        let x: &[E] = &x;
        let [outer, groups, inner] = dims;
        let count = E::from_f64((outer * inner) as f64);
        let eps = E::from_f64(eps);
        if outer == 1 && inner > 0 && affine.is_none_or(|a| a.2 == AffineAxis::Inner) {
            // Every group is one row (layer norm): one pass over rows, each
            // row's statistics and output while it is in cache, where the
            // general path below takes a pass for the statistics and another
            // for the output, each handed to the threads.
            let mut out = output_buffer(OP, x.len())?;
            let (mut means, mut vars) = (output_buffer(OP, groups)?, output_buffer(OP, groups)?);
            let columns = affine.map(|(w, b, _)| (w.as_slice(), b.as_slice()));
            let run = |out: &mut [E], x: &[E], means: &mut [E], vars: &mut [E]| {
                vectorized(NormRows { out, x, means, vars, inner, count, eps, columns })
            };
            if split_across_threads(x.len()) {
                let rows = items_per_task(inner);
                let stats = means.chunks_mut(rows).zip(vars.chunks_mut(rows));
                let parts: Vec<_> = out.chunks_mut(rows * inner).zip(x.chunks(rows * inner)).zip(stats).collect();
                for_each_item(parts, 1, &|((out, x), (means, vars))| run(out, x, means, vars));
            } else {
                run(&mut out, x, &mut means, &mut vars);
            }
            return Ok([CpuStorage::from_vec(out), CpuStorage::from_vec(means), CpuStorage::from_vec(vars)]);
        }
        let stats = per_group(groups, outer * inner, |c| {
            // Two passes, as PyTorch's CPU kernel: the variance of
            // deviations from the mean, not E[x²] − mean², which cancels.
            let runs = group_runs(x, dims, c);
            let mean = vectorized(|| runs.clone().fold(E::ZERO, |s, run| s + sum_zip(run, run, |v, _| v))) / count;
            let var = vectorized(|| runs.fold(E::ZERO, |s, run| s + sum_zip(run, run, |v, _| (v - mean) * (v - mean))));
            (mean, var / count)
        });
        // y = (x − mean) · weight / sqrt(var + eps) + bias, the weight and
        // bias in the coefficients where they are per group.
        let group_affine = affine.filter(|a| a.2 == AffineAxis::Group).map(|(w, b, _)| (w.as_slice(), b.as_slice()));
        let coefficients: Vec<[E; 4]> = (stats.iter().enumerate())
            .map(|(c, &(mean, var))| {
                let (weight, bias) = group_affine.map_or((E::ONE, E::ZERO), |(w, b)| (w[c], b[c]));
                [mean, weight / (var + eps).sqrt(), E::ZERO, bias]
            })
            .collect();
        // An affine step along `inner` comes with `outer == 1` (checked by
        // the operation), which the row pass above took unless the rows are
        // empty: here it writes nothing.
        let mut out = output_buffer(OP, x.len())?;
        by_rows::<E, false>(&mut out, x, x, dims, &coefficients);
        let (means, vars) = stats.into_iter().unzip();
        Ok([CpuStorage::from_vec(out), CpuStorage::from_vec(means), CpuStorage::from_vec(vars)])
    }

    fn standardize_backward<E: FloatElement>(
        x: &CpuStorage<E>,
        [mean, var]: [&CpuStorage<E>; 2],
        weight: Option<(&CpuStorage<E>, AffineAxis)>,
        (g, g_layout): (&CpuStorage<E>, &Layout),
        dims: [usize; 3],
        eps: f64,
    ) -> Result<[CpuStorage<E>; 3]> {
        const OP: &str = "standardize_backward";
        if E::DTYPE.is_half() {
            let weight = match weight {
                Some((w, axis)) => Some((widened(OP, w)?, axis)),
                None => None,
            };
            // The statistics again, in f32: the forward pass returned them
            // rounded to the half type, and a mean rounded to 8 bits
            // would shift every deviation from it.
            let (x, g) = (widened(OP, x)?, widened(OP, g)?);
            let dense = Layout::contiguous(Shape::from(dims));
            let [_, mean, var] = Self::standardize((&x, &dense), dims, eps, None)?;
            let weight = weight.as_ref().map(|(w, axis)| (w, *axis));
            let grads = Self::standardize_backward(&x, [&mean, &var], weight, (&g, g_layout), dims, eps)?;
            return narrowed_all(OP, grads);
        }
        let g = dense_elements(OP, g, g_layout)?;
        let g: &[E] = &g;
        let x = x.as_slice();
        let [outer, groups, inner] = dims;
        let (mean, var) = (mean.as_slice(), var.as_slice());
        let eps = E::from_f64(eps);
        let scale = |c: usize| E::ONE / (var[c] + eps).sqrt();
        if let Some((weight, AffineAxis::Inner)) = weight {
            let scales: Vec<E> = (0..groups).map(scale).collect();
            return inner_affine_backward(x, g, [mean, &scales], weight.as_slice(), inner);
        }
        let weight = weight.map(|(w, _)| w);
        // Per group: Σ g and Σ g · x̂, with x̂ = (x − mean) · scale.
        let sums = per_group(groups, outer * inner, |c| {
            let (runs_g, runs_x, m) = (group_runs(g, dims, c), group_runs(x, dims, c), mean[c]);
            let sum_g = vectorized(|| runs_g.clone().fold(E::ZERO, |s, run| s + sum_zip(run, run, |v, _| v)));
            let sum_gx =
                vectorized(|| runs_g.zip(runs_x).fold(E::ZERO, |s, (g, x)| s + sum_zip(g, x, |g, x| g * (x - m))));
            (sum_g, sum_gx * scale(c))
        });
        // With a = weight · scale and M the group's size,
        // dx = a · (g − Σg / M − x̂ · Σgx̂ / M)
        //    = (x − mean) · (−a · scale · Σgx̂ / M) + g · a − a · Σg / M.
        let count = E::from_f64((outer * inner) as f64);
        let coefficients: Vec<[E; 4]> = (sums.iter().enumerate())
            .map(|(c, &(sum_g, sum_gx))| {
                let a = weight.map_or(E::ONE, |w| w.as_slice()[c]) * scale(c);
                [mean[c], E::ZERO - a * scale(c) * sum_gx / count, a, E::ZERO - a * sum_g / count]
            })
            .collect();
        let mut out = output_buffer(OP, x.len())?;
        by_rows::<E, true>(&mut out, x, g, dims, &coefficients);
        let (sum_g, sum_gx) = sums.into_iter().unzip();
        Ok([CpuStorage::from_vec(out), CpuStorage::from_vec(sum_g), CpuStorage::from_vec(sum_gx)])
    }
}

/// The runs of `inner` elements of group `c` of dense `x` viewed as
/// `dims = [outer, groups, inner]`, one per outer index.
fn group_runs<E>(x: &[E], [outer, groups, inner]: [usize; 3], c: usize) -> impl Iterator<Item = &[E]> + Clone {
    (0..outer).map(move |a| &x[(a * groups + c) * inner..][..inner])
}

/// `f(group)` for every group, split across threads by groups when the
/// tensor (`groups` of `len` elements) is large.
fn per_group<T: Send>(groups: usize, len: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if split_across_threads(groups * len) {
        map_tasks(groups, items_per_task(len), &f)
    } else {
        (0..groups).map(f).collect()
    }
}

/// [`GroupRows`] over all of `out`, `a` and `b` (viewed as `dims`).
fn by_rows<E: FloatElement, const WITH_B: bool>(
    out: &mut [E],
    a: &[E],
    b: &[E],
    [_, groups, inner]: [usize; 3],
    coefficients: &[[E; 4]],
) {
    for_row_chunks(out, a, b, inner, |first_row, out, a, b| {
        vectorized(GroupRows::<E, WITH_B> { out, a, b, first_row, groups, inner, coefficients });
    });
}

/// Runs `write(first_row, out, a, b)` over runs of whole rows of `inner`
/// elements of `out` and the inputs `a` and `b`, split across threads when
/// the tensor is large.
fn for_row_chunks<E: FloatElement>(
    out: &mut [E],
    a: &[E],
    b: &[E],
    inner: usize,
    write: impl Fn(usize, &mut [E], &[E], &[E]) + Sync + Send,
) {
    if inner == 0 {
        return;
    }
    if split_across_threads(out.len()) {
        let chunk = inner * items_per_task(inner);
        for_each_chunk(out, chunk, &|i, out| {
            let start = i * chunk;
            write(start / inner, out, &a[start..][..out.len()], &b[start..][..out.len()])
        });
    } else {
        write(0, out, a, b);
    }
}

/// The forward of standardisation where every group is one row of `inner`
/// elements (layer norm), one row at a time: its mean and variance (of the
/// deviations from the mean, as PyTorch's CPU kernel: `E[x²] − mean²`
/// cancels), then `out = (x − mean) / sqrt(var + eps) · weight + bias`
/// with the weight and bias indexed by the position in the row, when given.
struct NormRows<'a, E> {
    out: &'a mut [E],
    x: &'a [E],
    means: &'a mut [E],
    vars: &'a mut [E],
    inner: usize,
    count: E,
    eps: E,
    columns: Option<(&'a [E], &'a [E])>,
}

impl<E: FloatElement> VectorLoop for NormRows<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let rows = self.out.chunks_mut(self.inner).zip(self.x.chunks(self.inner));
        for ((out, x), (mean_of, var_of)) in rows.zip(self.means.iter_mut().zip(self.vars.iter_mut())) {
            let mean = sum_zip(x, x, |v, _| v) / self.count;
            let var = sum_zip(x, x, |v, _| (v - mean) * (v - mean)) / self.count;
            let scale = E::ONE / (var + self.eps).sqrt();
            match self.columns {
                Some((weight, bias)) => {
                    for (((o, &x), &w), &b) in out.iter_mut().zip(x).zip(weight).zip(bias) {
                        *o = (x - mean) * scale * w + b;
                    }
                }
                None => {
                    for (o, &x) in out.iter_mut().zip(x) {
                        *o = (x - mean) * scale;
                    }
                }
            }
            (*mean_of, *var_of) = (mean, var);
        }
    }
}

/// The gradients of standardisation with an affine step along `inner`
/// (layer norm: every group is one row, `outer` is 1): per row, with
/// `ĝ = g · weight`, `dx = scale · (ĝ − Σĝ / M − x̂ · Σ(ĝ x̂) / M)`; and per
/// column `Σ g` and `Σ g · x̂` over the rows, the bias's and weight's
/// gradients. One pass: a row's sums and its gradient read it from cache.
fn inner_affine_backward<E: FloatElement>(
    x: &[E],
    g: &[E],
    [mean, scale]: [&[E]; 2],
    weight: &[E],
    inner: usize,
) -> Result<[CpuStorage<E>; 3]> {
    const OP: &str = "standardize_backward";
    let mut out = output_buffer(OP, x.len())?;
    let zeros = || vec![E::ZERO; inner];
    if inner == 0 {
        return Ok([CpuStorage::from_vec(out), CpuStorage::from_vec(zeros()), CpuStorage::from_vec(zeros())]);
    }
    let run = |first_row: usize, out: &mut [E], x: &[E], g: &[E]| {
        let (mut sum_g, mut sum_gx) = (zeros(), zeros());
        let rows = RowGradients { out, x, g, first_row, mean, scale, weight, sum_g: &mut sum_g, sum_gx: &mut sum_gx };
        vectorized(rows);
        (sum_g, sum_gx)
    };
    let (sum_g, sum_gx) = if split_across_threads(x.len()) {
        let chunk = inner * items_per_task(inner);
        let parts: Vec<_> = out.chunks_mut(chunk).zip(x.chunks(chunk)).zip(g.chunks(chunk)).enumerate().collect();
        let partials: Vec<(Vec<E>, Vec<E>)> = map_items(parts, &|(i, ((out, x), g))| run(i * chunk / inner, out, x, g));
        let add = |a: Vec<E>, b: &Vec<E>| a.into_iter().zip(b).map(|(a, &b)| a + b).collect::<Vec<E>>();
        partials.iter().fold((zeros(), zeros()), |(sg, sgx), (g, gx)| (add(sg, g), add(sgx, gx)))
    } else {
        run(0, &mut out, x, g)
    };
    Ok([CpuStorage::from_vec(out), CpuStorage::from_vec(sum_g), CpuStorage::from_vec(sum_gx)])
}

/// The loop of [`inner_affine_backward`] over a run of whole rows.
struct RowGradients<'a, E> {
    out: &'a mut [E],
    x: &'a [E],
    g: &'a [E],
    first_row: usize,
    mean: &'a [E],
    scale: &'a [E],
    weight: &'a [E],
    sum_g: &'a mut [E],
    sum_gx: &'a mut [E],
}

impl<E: FloatElement> VectorLoop for RowGradients<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let inner = self.weight.len();
        let count = E::from_f64(inner as f64);
        let rows = self.out.chunks_mut(inner).zip(self.x.chunks(inner)).zip(self.g.chunks(inner));
        for (row, ((out, x), g)) in rows.enumerate() {
            let (mean, scale) = (self.mean[self.first_row + row], self.scale[self.first_row + row]);
            // Σĝ and Σ ĝ (x − mean), in lanes.
            let (mut lanes_g, mut lanes_gx) = ([E::ZERO; LANES], [E::ZERO; LANES]);
            let (mut tail_g, mut tail_gx) = (E::ZERO, E::ZERO);
            for ((x, g), w) in x.chunks(LANES).zip(g.chunks(LANES)).zip(self.weight.chunks(LANES)) {
                if x.len() == LANES {
                    for j in 0..LANES {
                        let gw = g[j] * w[j];
                        lanes_g[j] = lanes_g[j] + gw;
                        lanes_gx[j] = lanes_gx[j] + gw * (x[j] - mean);
                    }
                } else {
                    for ((&x, &g), &w) in x.iter().zip(g).zip(w) {
                        tail_g = tail_g + g * w;
                        tail_gx = tail_gx + g * w * (x - mean);
                    }
                }
            }
            let sum_g = fold_lanes(&lanes_g, E::ZERO, <E as Element>::add) + tail_g;
            let sum_gx = (fold_lanes(&lanes_gx, E::ZERO, <E as Element>::add) + tail_gx) * scale;
            let (shift, slope) = (sum_g / count, sum_gx / count);
            for (j, ((o, &x), &g)) in out.iter_mut().zip(x).zip(g).enumerate() {
                let xhat = (x - mean) * scale;
                *o = scale * (g * self.weight[j] - shift - xhat * slope);
                self.sum_g[j] = self.sum_g[j] + g;
                self.sum_gx[j] = self.sum_gx[j] + g * xhat;
            }
        }
    }
}

/// The element-wise step of standardisation and of its gradient, per row
/// of `inner` elements with the coefficients `[c0, c1, c2, c3]` of the
/// row's group: `out = (a − c0) · c1 + b · c2 + c3`, the `b` term only
/// `WITH_B`. Rows are numbered from `first_row`.
struct GroupRows<'a, E, const WITH_B: bool> {
    out: &'a mut [E],
    a: &'a [E],
    b: &'a [E],
    first_row: usize,
    groups: usize,
    inner: usize,
    coefficients: &'a [[E; 4]],
}

impl<E: FloatElement, const WITH_B: bool> VectorLoop for GroupRows<'_, E, WITH_B> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let rows = self.out.chunks_mut(self.inner).zip(self.a.chunks(self.inner)).zip(self.b.chunks(self.inner));
        for (row, ((out, a), b)) in rows.enumerate() {
            let [c0, c1, c2, c3] = self.coefficients[(self.first_row + row) % self.groups];
            if WITH_B {
                for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
                    *o = (a - c0) * c1 + b * c2 + c3;
                }
            } else {
                for (o, &a) in out.iter_mut().zip(a) {
                    *o = (a - c0) * c1 + c3;
                }
            }
        }
    }
}

/// The running fold of whole `[len, inner]` groups along `len`: row `k`
/// of the output is the fold of the row before it (in scan order) with row
/// `k` of the input, so the inner loop runs along dense rows.
struct ScanGroups<'a, E, Op> {
    out: &'a mut [E],
    src: &'a [E],
    len: usize,
    inner: usize,
    reverse: bool,
    op: PhantomData<Op>,
}

impl<E: Element, Op: ReduceOp> VectorLoop for ScanGroups<'_, E, Op> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let (len, inner) = (self.len, self.inner);
        for (out, src) in self.out.chunks_exact_mut(len * inner).zip(self.src.chunks_exact(len * inner)) {
            let mut previous: Option<usize> = None;
            for j in 0..len {
                let k = if self.reverse { len - 1 - j } else { j };
                let (row, x) = (k * inner, &src[k * inner..(k + 1) * inner]);
                match previous {
                    None => out[row..row + inner].iter_mut().zip(x).for_each(|(o, &x)| *o = Op::fold(Op::init(), x)),
                    Some(before) => {
                        for (i, &x) in x.iter().enumerate() {
                            out[row + i] = Op::fold(out[before + i], x);
                        }
                    }
                }
                previous = Some(row);
            }
        }
    }
}

/// Softmax of dense rows of `len` elements, as one loop built for the CPU's
/// widest vectors (the exponentials dominate; see [`VectorLoop`]).
struct SoftmaxRows<'a, E> {
    out: &'a mut [E],
    src: &'a [E],
    len: usize,
    log: bool,
}

impl<E: FloatElement> VectorLoop for SoftmaxRows<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        for (out, src) in self.out.chunks_exact_mut(self.len).zip(self.src.chunks_exact(self.len)) {
            softmax_row::<E, FMA>(src, out, self.log);
        }
    }
}

/// The gradient of softmax (or log_softmax) over whole `[len, inner]`
/// groups of the dense forward result `y` and incoming gradient `g`:
/// `y · (g − Σ g·y)`, or `g − exp(y) · Σ g`, the sums along `len`.
struct SoftmaxBackward<'a, E> {
    out: &'a mut [E],
    y: &'a [E],
    g: &'a [E],
    len: usize,
    inner: usize,
    log: bool,
}

impl<E: FloatElement> VectorLoop for SoftmaxBackward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Self { out, y, g, len, inner, log } = self;
        let group = len * inner;
        if inner == 1 {
            for ((out, y), g) in out.chunks_exact_mut(len).zip(y.chunks_exact(len)).zip(g.chunks_exact(len)) {
                softmax_backward_row::<E, FMA>(y, g, out, log);
            }
            return;
        }
        // Sums per column, accumulated row by row so every loop runs over
        // contiguous memory.
        let mut sums = vec![E::ZERO; inner];
        for ((out, y), g) in out.chunks_exact_mut(group).zip(y.chunks_exact(group)).zip(g.chunks_exact(group)) {
            sums.fill(E::ZERO);
            for (y, g) in y.chunks_exact(inner).zip(g.chunks_exact(inner)) {
                for ((s, &y), &g) in sums.iter_mut().zip(y).zip(g) {
                    *s = *s + if log { g } else { g * y };
                }
            }
            for ((out, y), g) in out.chunks_exact_mut(inner).zip(y.chunks_exact(inner)).zip(g.chunks_exact(inner)) {
                for (((o, &y), &g), &s) in out.iter_mut().zip(y).zip(g).zip(&sums) {
                    *o = if log { g - exp_nonpositive::<E, FMA>(y) * s } else { y * (g - s) };
                }
            }
        }
    }
}

/// The gradient of softmax (or log_softmax) along one dense row; see
/// [`SoftmaxBackward`]. A log-probability is never positive, so its `exp`
/// takes the vectorised path.
#[inline(always)]
fn softmax_backward_row<E: FloatElement, const FMA: bool>(y: &[E], g: &[E], out: &mut [E], log: bool) {
    if log {
        let s = fold_dense(g, E::ZERO, <E as Element>::add);
        for ((o, &y), &g) in out.iter_mut().zip(y).zip(g) {
            *o = g - exp_nonpositive::<E, FMA>(y) * s;
        }
    } else {
        // g·y is staged in `out`, so the sum is a lane-wise fold.
        for ((o, &y), &g) in out.iter_mut().zip(y).zip(g) {
            *o = g * y;
        }
        let s = fold_dense(out, E::ZERO, <E as Element>::add);
        for ((o, &y), &g) in out.iter_mut().zip(y).zip(g) {
            *o = y * (g - s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_folds_cover_every_element() {
        for n in [
            0,
            1,
            15,
            16,
            17,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK + 5,
            7 * BLOCK,
            crate::backend::cpu::PARALLEL_MIN_ELEMS + 7,
        ] {
            let x: Vec<i64> = (1..=n as i64).collect();
            assert_eq!(fold_dense_par(&x, 0, Element::add), (n * (n + 1) / 2) as i64, "n = {n}");
            if n > 0 {
                assert_eq!(arg_dense(&x, i64::MIN, Max::fold), n - 1);
                // Associative but not commutative: the blocks keep their order.
                assert_eq!(fold_dense_par(&x, 0, |a, b| if a != 0 { a } else { b }), 1, "first, n = {n}");
                assert_eq!(fold_dense_par(&x, 0, |a, b| if b != 0 { b } else { a }), n as i64, "last, n = {n}");
            }
        }
    }
}
