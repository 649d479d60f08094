//! Fused attention on the CPU, a block of query rows at a time: the block's
//! scores are one product with the keys (only those the block's last row can
//! see, under a causal mask), softmaxed row by row in place, and one product
//! with the values gives the block's output; the backward recomputes the
//! block's weights from the saved log-sum-exps and runs four more products.
//! No thread holds more than two blocks of scores: never `[queries, keys]`
//! for a long sequence. Forward, every block is a task; backward, whole
//! problems are, since their blocks add to the same key and value gradients
//! (under grouped-query attention, a key and value problem with all the
//! query problems that share it).

use super::kernel::{AttentionDims, AttentionKernel, KernelMask};
use crate::backend::Cpu;
use crate::backend::cpu::{
    CpuStorage, Operand, VectorLoop, converted, exp_nonpositive, gemm_scaled, gemm_scaled_rows, narrowed, narrowed_all,
    output_buffer, split_across_threads, vectorized, widened, zeroed_buffer,
};
use crate::backend::cpu::{map_items, map_tasks};
use crate::element::{Element, FloatElement};
use crate::error::Result;
use crate::layout::{Layout, count_of};
use std::marker::PhantomData;
use std::ops::Range;

/// Where problem `problem`'s matrix (the last two axes of `layout`) starts
/// in storage, and its row and column strides.
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

/// One problem's queries, keys or values: rows `stride` elements apart,
/// each row's elements contiguous. A head split (`[B, T, H, D]` read as
/// `[B, H, T, D]`) is read this way where it lies, with no copy.
#[derive(Clone, Copy)]
struct Rows<'a, E> {
    data: &'a [E],
    stride: usize,
}

impl<'a, E: Element> Rows<'a, E> {
    /// Problem `problem` of the tensor `(storage, layout)`, whose matrices
    /// have `rows` rows of `cols` elements, the last axis of stride 1 (the
    /// operation copies any other layout first).
    fn of(storage: &'a CpuStorage<E>, layout: &Layout, problem: usize, rows: usize, cols: usize) -> Self {
        let (base, stride, col) = place(layout, problem);
        assert!(col == 1 || cols == 1, "the attention kernels are given rows of stride-1 elements");
        Rows { data: &storage.as_slice()[base..base + (rows - 1) * stride + cols], stride }
    }

    /// The rows from `row` on.
    fn from(self, row: usize) -> &'a [E] {
        &self.data[row * self.stride..]
    }
}

/// A fresh result that the threads write at once, each to the rows of the
/// problems it was given, in the dense layout the operation asked for. One
/// problem's rows may interleave with another's there (a head's rows among
/// the other heads', `[B, T, H, D]`), so no `&mut` slice can be cut per
/// thread: the rows are reached through a raw pointer instead.
struct SharedResult<'a, E> {
    ptr: *mut E,
    len: usize,
    layout: &'a Layout,
    _buffer: PhantomData<&'a mut [E]>,
}

// SAFETY: the threads reach the buffer only through `rows`, whose callers
// hand each problem's rows to one thread at a time, and the rows of a dense
// layout are disjoint; the elements themselves are `Send`.
unsafe impl<E: Send> Sync for SharedResult<'_, E> {}

impl<'a, E: Element> SharedResult<'a, E> {
    /// `buffer`, borrowed for as long as the threads write it, laid out as
    /// `layout`, which must be dense (every element at its own place).
    fn new(buffer: &'a mut [E], layout: &'a Layout) -> Self {
        assert!(
            layout.is_dense() && layout.elem_count() == buffer.len() && layout.fits_in(buffer.len()),
            "an attention result's layout is dense over its buffer: {layout:?}"
        );
        SharedResult { ptr: buffer.as_mut_ptr(), len: buffer.len(), layout, _buffer: PhantomData }
    }

    /// Problem `problem`'s rows `rows`, each of `cols` elements.
    ///
    /// # Safety
    ///
    /// No rows of this result that overlap these (the same problem, an
    /// overlapping range of rows) are in use at the same time.
    unsafe fn rows(&self, problem: usize, rows: Range<usize>, cols: usize) -> RowsMut<'_, E> {
        let (base, stride, col) = place(self.layout, problem);
        assert!(col == 1 && cols == self.layout.dims()[self.layout.dims().len() - 1], "rows of stride-1 elements");
        let start = base + rows.start * stride;
        assert!(
            !rows.is_empty() && start + (rows.len() - 1) * stride + cols <= self.len,
            "the rows lie inside the result"
        );
        // SAFETY: `start` is inside the buffer (checked just above).
        let ptr = unsafe { self.ptr.add(start) };
        RowsMut { ptr, stride, rows: rows.len(), cols, _rows: PhantomData }
    }
}

/// Rows of a [`SharedResult`] that one thread writes: `rows` rows of `cols`
/// elements, `stride` apart from `ptr`.
struct RowsMut<'a, E> {
    ptr: *mut E,
    stride: usize,
    rows: usize,
    cols: usize,
    _rows: PhantomData<&'a mut E>,
}

impl<E: FloatElement> RowsMut<'_, E> {
    /// Rows `first..first + m` set to `scale · lhs · rhs` (or added to,
    /// when `accumulate`) on this thread, the operands `(data, row stride,
    /// column stride)` as in [`product`].
    #[inline(always)]
    fn product(
        &mut self,
        first: usize,
        (m, n, k): (usize, usize, usize),
        (lhs, lhs_rows, lhs_cols): (&[E], usize, usize),
        (rhs, rhs_rows, rhs_cols): (&[E], usize, usize),
        scale: E,
        accumulate: bool,
    ) {
        assert!(first + m <= self.rows && n == self.cols, "the product's rows are among these");
        let lhs = Operand { data: lhs, row_stride: lhs_rows, col_stride: lhs_cols };
        let rhs = Operand { data: rhs, row_stride: rhs_rows, col_stride: rhs_cols };
        // SAFETY: rows `first..first + m` of `n` elements lie inside the
        // result (checked when these rows were handed out, and just above),
        // this thread alone uses them (`SharedResult::rows`' contract), and
        // the operands are other tensors' storage or this thread's scratch.
        unsafe {
            let dst = self.ptr.add(first * self.stride);
            gemm_scaled_rows(
                (dst, self.stride),
                (m, n, k),
                &lhs,
                0,
                &rhs,
                0,
                (scale, accumulate),
                gemm::Parallelism::None,
            );
        }
    }
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

/// Query rows per block: each block's scores are one `[rows, keys]`
/// product, a quarter of a megabyte per thread at 1024 keys.
const BLOCK_ROWS: usize = 64;

/// `dst = scale · lhs · rhs` (or `+=` when `accumulate`) on this thread,
/// each operand `(data, row stride, column stride)`.
#[inline(always)]
fn product<E: FloatElement>(
    dst: &mut [E],
    dims: (usize, usize, usize),
    (lhs, lhs_rows, lhs_cols): (&[E], usize, usize),
    (rhs, rhs_rows, rhs_cols): (&[E], usize, usize),
    scale: E,
    accumulate: bool,
) {
    let lhs = Operand { data: lhs, row_stride: lhs_rows, col_stride: lhs_cols };
    let rhs = Operand { data: rhs, row_stride: rhs_rows, col_stride: rhs_cols };
    gemm_scaled(dst, dims, &lhs, 0, &rhs, 0, (scale, accumulate), gemm::Parallelism::None);
}

/// The NaN-propagating maximum of a row, in lanes (a serial fold would not
/// vectorise).
#[inline(always)]
fn row_max<E: FloatElement>(row: &[E]) -> E {
    let mut lanes = [E::MIN; 16];
    let mut chunks = row.chunks_exact(16);
    for chunk in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = if x > *m || Element::is_nan(x) { x } else { *m };
        }
    }
    let tail = chunks.remainder().iter().fold(E::MIN, |m, &x| Element::max(m, x));
    lanes.iter().fold(tail, |m, &x| Element::max(m, x))
}

/// `row` replaced by `exp(x - shift)` (an argument above 0 only by
/// rounding, clamped); returns the sum, in lanes.
#[inline(always)]
fn exp_shifted<E: FloatElement, const FMA: bool>(row: &mut [E], shift: E) -> E {
    for x in row.iter_mut() {
        let d = *x - shift;
        *x = exp_nonpositive::<E, FMA>(if d > E::ZERO { E::ZERO } else { d });
    }
    let mut lanes = [E::ZERO; 16];
    let mut chunks = row.chunks_exact(16);
    for chunk in &mut chunks {
        for (s, &x) in lanes.iter_mut().zip(chunk) {
            *s = *s + x;
        }
    }
    lanes.iter().fold(chunks.remainder().iter().fold(E::ZERO, |s, &x| s + x), |s, &x| s + x)
}

/// Row `i`'s scaled scores masked and split at the keys it can see at
/// all: returns that prefix, with the user's mask applied; the rest (the
/// causal triangle of a block whose last row sees more keys than `i`) is
/// set to its weight, 0, and left out of the softmax, which then
/// exponentiates half as many scores in a causal block.
#[inline(always)]
fn mask_row<'r, E: FloatElement>(mask: &RowMask<'_, E>, i: usize, row: &'r mut [E]) -> &'r mut [E] {
    let (live, hidden) = row.split_at_mut(mask.visible(i, row.len()));
    hidden.fill(E::ZERO);
    mask.apply(i, live);
    live
}

/// The forward pass over one block of query rows of one problem.
struct Forward<'a, E> {
    q: Rows<'a, E>,
    k: Rows<'a, E>,
    v: Rows<'a, E>,
    scores: &'a mut [E],
    out: RowsMut<'a, E>,
    lse: &'a mut [E],
    rows: Range<usize>,
    dims: AttentionDims,
    mask: RowMask<'a, E>,
    scale: E,
}

impl<E: FloatElement> VectorLoop for Forward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let AttentionDims { width, value_width, .. } = self.dims;
        let rows = self.rows.len();
        let n = self.mask.visible(self.rows.end - 1, self.dims.keys);
        let scores = &mut self.scores[..rows * n];
        let (q, k, v) = (self.q.from(self.rows.start), self.k, self.v);
        product(scores, (rows, n, width), (q, self.q.stride, 1), (k.data, 1, k.stride), self.scale, false);
        for (r, row) in scores.chunks_exact_mut(n).enumerate() {
            let i = self.rows.start + r;
            let row = mask_row(&self.mask, i, row);
            let max = row_max(row);
            if max == E::MIN {
                // The row sees no key: weights, and so output, of 0, as PyTorch's.
                row.fill(E::ZERO);
                self.lse[r] = E::MIN;
                continue;
            }
            let sum = exp_shifted::<E, FMA>(row, max);
            let inv = E::ONE / sum;
            row.iter_mut().for_each(|p| *p = *p * inv);
            self.lse[r] = max + sum.ln();
        }
        let mut out = self.out;
        out.product(0, (rows, value_width, n), (scores, n, 1), (v.data, v.stride, 1), E::ONE, false);
    }
}

/// The backward pass over one problem, a block of query rows at a time:
/// each block's weights recomputed from the log-sum-exps, its query rows'
/// gradients, and its share of the keys' and values' gradients.
struct Backward<'a, E> {
    q: Rows<'a, E>,
    k: Rows<'a, E>,
    v: Rows<'a, E>,
    out: Rows<'a, E>,
    lse: &'a [E],
    g: Rows<'a, E>,
    dq: RowsMut<'a, E>,
    dk: RowsMut<'a, E>,
    dv: RowsMut<'a, E>,
    scratch: &'a mut [E],
    dims: AttentionDims,
    mask: RowMask<'a, E>,
    scale: E,
}

impl<E: FloatElement> VectorLoop for Backward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(mut self) {
        let AttentionDims { queries, keys, width, value_width, .. } = self.dims;
        let (weights, dp) = self.scratch.split_at_mut(BLOCK_ROWS.min(queries) * keys);
        for start in (0..queries).step_by(BLOCK_ROWS) {
            let end = queries.min(start + BLOCK_ROWS);
            let rows = end - start;
            let n = self.mask.visible(end - 1, keys);
            let (p, dp) = (&mut weights[..rows * n], &mut dp[..rows * n]);
            let (q, k, v) = ((self.q.from(start), self.q.stride), self.k, self.v);
            let (g, gs) = (self.g.from(start), self.g.stride);
            product(p, (rows, n, width), (q.0, q.1, 1), (k.data, 1, k.stride), self.scale, false);
            // dp = g · vᵀ: each weight's gradient.
            product(dp, (rows, n, value_width), (g, gs, 1), (v.data, 1, v.stride), E::ONE, false);
            for (r, (p, dp)) in p.chunks_exact_mut(n).zip(dp.chunks_exact_mut(n)).enumerate() {
                let i = start + r;
                let lse = self.lse[i];
                if lse == E::MIN {
                    // A row that saw no key: no gradient.
                    p.fill(E::ZERO);
                    dp.fill(E::ZERO);
                    continue;
                }
                let p = mask_row(&self.mask, i, p);
                exp_shifted::<E, FMA>(p, lse);
                // The softmax's gradient: p · (dp - g · out), scaled for q and
                // k; 0 for the keys the row cannot see.
                let (dp, hidden) = dp.split_at_mut(p.len());
                hidden.fill(E::ZERO);
                let out = &self.out.from(i)[..value_width];
                let offset = g[r * gs..r * gs + value_width].iter().zip(out).fold(E::ZERO, |a, (&x, &y)| a + x * y);
                for (d, &w) in dp.iter_mut().zip(p.iter()) {
                    *d = w * (*d - offset) * self.scale;
                }
            }
            self.dq.product(start, (rows, width, n), (dp, n, 1), (k.data, k.stride, 1), E::ONE, false);
            self.dk.product(0, (n, width, rows), (dp, 1, n), (q.0, q.1, 1), E::ONE, true);
            self.dv.product(0, (n, value_width, rows), (p, 1, n), (g, gs, 1), E::ONE, true);
        }
    }
}

impl AttentionKernel for Cpu {
    const STRIDED_ROWS: bool = true;

    fn attention_forward<E: FloatElement>(
        q: (&CpuStorage<E>, &Layout),
        k: (&CpuStorage<E>, &Layout),
        v: (&CpuStorage<E>, &Layout),
        out_layout: &Layout,
        dims: AttentionDims,
        mask: KernelMask<'_, CpuStorage<u8>, CpuStorage<E>>,
        scale: f64,
    ) -> Result<Option<(CpuStorage<E>, CpuStorage<E::Accumulator>)>> {
        const OP: &str = "scaled_dot_product_attention";
        if E::DTYPE.is_half() {
            let [q32, k32, v32] = [widened(OP, q.0)?, widened(OP, k.0)?, widened(OP, v.0)?];
            let additive = mask.additive().map(|values| widened(OP, values)).transpose()?;
            let (q, k, v) = ((&q32, q.1), (&k32, k.1), (&v32, v.1));
            let mask = mask.with_additive(additive.as_ref());
            let Some((out, lse)) = Self::attention_forward(q, k, v, out_layout, dims, mask, scale)? else {
                return Ok(None);
            };
            return Ok(Some((narrowed(OP, &out)?, converted(OP, &lse)?)));
        }
        let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
        // Written in full by the blocks: no zeroing.
        let mut out = output_buffer::<E>(OP, count_of(&[batch, queries, value_width]))?;
        let mut lse = output_buffer::<E>(OP, batch * queries)?;
        let scale = E::from_f64(scale);
        // Blocks of query rows, each a task.
        let tasks: Vec<(usize, Range<usize>)> = (0..batch)
            .flat_map(|b| (0..queries).step_by(BLOCK_ROWS).map(move |r| (b, r..queries.min(r + BLOCK_ROWS))))
            .collect();
        let lses = lse.chunks_mut(queries).flat_map(|l| l.chunks_mut(BLOCK_ROWS));
        let result = SharedResult::new(&mut out, out_layout);
        let run = |((b, rows), lse): ((usize, Range<usize>), &mut [E])| -> Result<()> {
            let mut scores = CpuStorage::from_vec(zeroed_buffer::<E>(OP, rows.len() * keys)?);
            // SAFETY: each task is its own block of one problem's rows.
            let out = unsafe { result.rows(b, rows.clone(), value_width) };
            vectorized(Forward {
                q: Rows::of(q.0, q.1, b, queries, width),
                k: Rows::of(k.0, k.1, b / group, keys, width),
                v: Rows::of(v.0, v.1, b / group, keys, value_width),
                scores: scores.as_mut_slice(),
                out,
                lse,
                rows,
                dims,
                mask: RowMask::of(&mask, b),
                scale,
            });
            Ok(())
        };
        let jobs: Vec<_> = tasks.into_iter().zip(lses).collect();
        if split_across_threads(count_of(&[batch, queries, keys, width.max(value_width)])) && jobs.len() > 1 {
            map_items(jobs, &run).into_iter().collect::<Result<()>>()?;
        } else {
            jobs.into_iter().try_for_each(run)?;
        }
        Ok(Some((CpuStorage::from_vec(out), converted(OP, &CpuStorage::from_vec(lse))?)))
    }

    fn attention_backward<E: FloatElement>(
        q: (&CpuStorage<E>, &Layout),
        k: (&CpuStorage<E>, &Layout),
        v: (&CpuStorage<E>, &Layout),
        out: (&CpuStorage<E>, &Layout),
        lse: &CpuStorage<E::Accumulator>,
        g: (&CpuStorage<E>, &Layout),
        [dq_layout, dk_layout, dv_layout]: [&Layout; 3],
        dims: AttentionDims,
        mask: KernelMask<'_, CpuStorage<u8>, CpuStorage<E>>,
        scale: f64,
    ) -> Result<Option<[CpuStorage<E>; 3]>> {
        const OP: &str = "scaled_dot_product_attention_backward";
        if E::DTYPE.is_half() {
            let [q32, k32, v32] = [widened(OP, q.0)?, widened(OP, k.0)?, widened(OP, v.0)?];
            let [out32, lse32, g32] = [widened(OP, out.0)?, converted(OP, lse)?, widened(OP, g.0)?];
            let additive = mask.additive().map(|values| widened(OP, values)).transpose()?;
            let (q, k, v) = ((&q32, q.1), (&k32, k.1), (&v32, v.1));
            let (out, g) = ((&out32, out.1), (&g32, g.1));
            let mask = mask.with_additive(additive.as_ref());
            let layouts = [dq_layout, dk_layout, dv_layout];
            let grads = Self::attention_backward(q, k, v, out, &lse32, g, layouts, dims, mask, scale)?;
            return grads.map(|grads| narrowed_all(OP, grads)).transpose();
        }
        let AttentionDims { batch, queries, keys, width, value_width, group } = dims;
        // `E` itself for the types that get here.
        let lse = converted::<E::Accumulator, E>(OP, lse)?;
        let lse = lse.as_slice();
        let shared = batch / group;
        // dq is written in full; dk and dv are sums, so they start at 0.
        let mut dq = output_buffer::<E>(OP, count_of(&[batch, queries, width]))?;
        let mut dk = zeroed_buffer::<E>(OP, count_of(&[shared, keys, width]))?;
        let mut dv = zeroed_buffer::<E>(OP, count_of(&[shared, keys, value_width]))?;
        let scale = E::from_f64(scale);
        let results = [
            SharedResult::new(&mut dq, dq_layout),
            SharedResult::new(&mut dk, dk_layout),
            SharedResult::new(&mut dv, dv_layout),
        ];
        // A task per key and value problem, running its group's query
        // problems one after the other, which add to its gradients.
        let run = |kv: usize| -> Result<()> {
            let mut scratch = CpuStorage::from_vec(zeroed_buffer::<E>(OP, 2 * BLOCK_ROWS.min(queries) * keys)?);
            for b in kv * group..(kv + 1) * group {
                // SAFETY: each task has a key and value problem of its own
                // and the query problems of its group, with all their rows,
                // and hands them to one `Backward` at a time.
                let [dq, dk, dv] = unsafe {
                    [
                        results[0].rows(b, 0..queries, width),
                        results[1].rows(kv, 0..keys, width),
                        results[2].rows(kv, 0..keys, value_width),
                    ]
                };
                vectorized(Backward {
                    q: Rows::of(q.0, q.1, b, queries, width),
                    k: Rows::of(k.0, k.1, kv, keys, width),
                    v: Rows::of(v.0, v.1, kv, keys, value_width),
                    out: Rows::of(out.0, out.1, b, queries, value_width),
                    lse: &lse[b * queries..(b + 1) * queries],
                    g: Rows::of(g.0, g.1, b, queries, value_width),
                    dq,
                    dk,
                    dv,
                    scratch: scratch.as_mut_slice(),
                    dims,
                    mask: RowMask::of(&mask, b),
                    scale,
                });
            }
            Ok(())
        };
        if split_across_threads(count_of(&[batch, queries, keys, width.max(value_width)])) && shared > 1 {
            map_tasks(shared, 1, &run).into_iter().collect::<Result<()>>()?;
        } else {
            (0..shared).try_for_each(run)?;
        }
        Ok(Some([CpuStorage::from_vec(dq), CpuStorage::from_vec(dk), CpuStorage::from_vec(dv)]))
    }
}
