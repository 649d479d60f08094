//! Matrix products on the CPU, on the `gemm` crate.
//!
//! `gemm` takes a row stride and a column stride per operand, so transposed,
//! permuted, narrowed and broadcast (stride 0) views go in as they are:
//! the kernel packs its panels from any strides, and a copy into a dense
//! buffer first would only add a pass over memory.

use super::MatmulKernel;
use crate::backend::Cpu;
use crate::backend::cpu::bf16_gemm::{self, Bf16Matrix};
use crate::backend::cpu::for_each_chunk;
use crate::backend::cpu::skinny_gemm;
use crate::backend::cpu::{
    CpuStorage, Operand, gemm_dense, gemm_scaled, items_per_task, narrowed, output_buffer, pool_threads,
    split_across_threads, widened,
};
use crate::element::{DType, FloatElement, as_slice_of};
use crate::error::Result;
use crate::layout::{Layout, count_of, for_each_block};
use half::bf16;
use std::any::Any;

/// Multiply-adds (`m * n * k`) from which one product is worth splitting
/// across threads: below about 96³, handing panels to other threads costs
/// more than the arithmetic they would take over. Under Miri 8³, a size
/// whose test references it can finish (see `PARALLEL_MIN_ELEMS` in
/// `backend/cpu/loops.rs`).
const PARALLEL_MIN_MACS: usize = if cfg!(miri) { 8 * 8 * 8 } else { 96 * 96 * 96 };

/// Multiply-adds from which a product too short to split by rows is
/// handed to `gemm`'s own split across threads, which wakes the other
/// threads for every product and puts them back to sleep: a recurrent
/// layer's `[16, 256] x [256, 1024]` step (4.2 million) ran faster on one
/// thread (char-LSTM 2x256 inference 10.2 -> 8.2 ms, training 32.2 -> 26.7
/// on a 2-core Intel Xeon), with the GPT, seed 002, ResNet and linear
/// rows of `benches/peers` within their noise; at 32 million GPT inference
/// lost 9%. Under Miri as [`PARALLEL_MIN_MACS`].
const GEMM_SPLIT_MIN_MACS: usize = if cfg!(miri) { PARALLEL_MIN_MACS } else { 200 * 200 * 200 };

/// Rows of the output per thread from which a product is split by rows, one
/// block per thread, each a product of its own, rather than by `gemm`.
/// `gemm` packs panels on one thread while the others wait, and hands work
/// out again for each panel; one block per thread runs with no hand-off,
/// and its rows start as the bias just before the product reads them.
/// Where `gemm` packs the right operand, each thread then packs all of it:
/// at 256 rows or more a few percent of its arithmetic. Smaller blocks were
/// slower (GPT inference 17 ms at 64 rows a block, against 12-13 at 512).
/// Under Miri 8, so that tests reach it.
const MIN_ROWS_PER_THREAD: usize = if cfg!(miri) { 8 } else { 256 };

/// `dst = lhs · rhs` for one `m × k` by `k × n` product into a dense,
/// row-major `dst` of `m * n` elements, or `dst += lhs · rhs` when
/// `accumulate`; `m`, `n` and `k` are all non-zero.
#[allow(clippy::too_many_arguments)]
fn gemm_one<E: FloatElement>(
    dst: &mut [E],
    (m, n, k): (usize, usize, usize),
    lhs: &Operand<'_, E>,
    lhs_offset: usize,
    rhs: &Operand<'_, E>,
    rhs_offset: usize,
    parallelism: gemm::Parallelism,
    accumulate: bool,
) {
    // Where memory is too short for the buffer, the product runs as given.
    let mut transposed = Vec::new();
    if reads_transposed(lhs, rhs, m, n) && transposed.try_reserve_exact(m * n).is_ok() {
        transposed.resize(m * n, E::ZERO);
        gemm_dense(
            &mut transposed,
            (n, m, k),
            &rhs.transposed(),
            rhs_offset,
            &lhs.transposed(),
            lhs_offset,
            parallelism,
        );
        untranspose(dst, &transposed, (m, n), accumulate);
    } else {
        gemm_scaled(dst, (m, n, k), lhs, lhs_offset, rhs, rhs_offset, (E::one(), accumulate), parallelism);
    }
}

/// Writes to the row-major `m × n` matrix `dst` its transpose `t`
/// (`n × m`, row-major), added to what `dst` holds when `accumulate`.
///
/// By square tiles, each read a line of `t` at a time and written a line
/// of `dst` at a time. A column of `dst` at a time wrote each element `n`
/// away from the last: with `n` a multiple of 1024 those rows share one L1
/// set and evict each other, and the copy of a 64 × 16,384 input gradient
/// (seed 002's classifier under `autocast` at AVX2, whose weight arrives
/// transposed) cost 4 ms a step.
fn untranspose<E: FloatElement>(dst: &mut [E], t: &[E], (m, n): (usize, usize), accumulate: bool) {
    const TILE: usize = 16;
    let mut tile = [[E::ZERO; TILE]; TILE];
    for first_column in (0..n).step_by(TILE) {
        let columns = TILE.min(n - first_column);
        for first_row in (0..m).step_by(TILE) {
            let rows = TILE.min(m - first_row);
            for c in 0..columns {
                let line = &t[(first_column + c) * m + first_row..][..rows];
                for (tile_row, &v) in tile.iter_mut().zip(line) {
                    tile_row[c] = v;
                }
            }
            for (r, tile_row) in tile.iter().enumerate().take(rows) {
                let line = &mut dst[(first_row + r) * n + first_column..][..columns];
                for (d, &v) in line.iter_mut().zip(tile_row) {
                    *d = if accumulate { *d + v } else { v };
                }
            }
        }
    }
}

/// Whether [`gemm_one`] computes the `m × n` product `lhs · rhs` as its
/// transpose. `gemm` packs the right operand a row of `n` elements at a
/// time: when those lie a column stride apart (a transposed operand, as the
/// weight gradient's `g · colsᵀ` has), each is a cache miss, and a product
/// of large k ran 6x slower than its transpose. Then the transposed product
/// `dstᵀ = rhsᵀ · lhsᵀ` is computed where it reads fewer scattered elements
/// per packed row, into a dense buffer (`gemm` is as slow when told to
/// write a transposed destination), and copied over: m·n elements against
/// m·n·k multiply-adds.
fn reads_transposed<E>(lhs: &Operand<'_, E>, rhs: &Operand<'_, E>, m: usize, n: usize) -> bool {
    // The scattered reads per packed row of a right operand of `n` columns.
    let scattered = |rhs: &Operand<'_, E>, n: usize| if rhs.col_stride > rhs.row_stride { n } else { 0 };
    scattered(&lhs.transposed(), m) < scattered(rhs, n)
}

/// `dst = lhs · rhs`, or `dst = bias + lhs · rhs` with `bias` a row of `n`
/// added to every row, for one `m × k` by `k × n` product with non-zero
/// sizes into a dense row-major `dst`: on every thread when it is large
/// enough, split by rows where each thread gets [`MIN_ROWS_PER_THREAD`].
#[allow(clippy::too_many_arguments)]
fn product<E: FloatElement>(
    dst: &mut [E],
    (m, n, k): (usize, usize, usize),
    lhs: &Operand<'_, E>,
    lhs_offset: usize,
    rhs: &Operand<'_, E>,
    rhs_offset: usize,
    bias: Option<&[E]>,
) {
    let fill = |rows: &mut [E]| {
        if let Some(bias) = bias {
            rows.chunks_exact_mut(n).for_each(|row| row.copy_from_slice(bias));
        }
    };
    // Saturating: broadcast views can be logically huge without memory.
    let macs = m.saturating_mul(n).saturating_mul(k);
    let threads = pool_threads();
    if threads > 1
        && macs >= PARALLEL_MIN_MACS
        && m / threads >= MIN_ROWS_PER_THREAD
        && !reads_transposed(lhs, rhs, m, n)
    {
        // A GPT's inference: medians of 150 runs 3-10% lower than with
        // `gemm`'s own split, in each of six alternating pairs.
        let rows = m.div_ceil(threads).next_multiple_of(16);
        for_each_chunk(dst, rows * n, &|block, dst| {
            fill(dst);
            // No overflow: the block's first row lies inside the operand.
            let offset = lhs_offset + block * rows * lhs.row_stride;
            let one = (E::one(), bias.is_some());
            gemm_scaled(dst, (dst.len() / n, n, k), lhs, offset, rhs, rhs_offset, one, gemm::Parallelism::None);
        });
        return;
    }
    // Rows of the bias, the product then added on top: on both threads when
    // large (4% of a GPT's inference on one, in perf).
    if bias.is_some() && split_across_threads(dst.len()) {
        for_each_chunk(dst, items_per_task(n) * n, &|_, dst| fill(dst));
    } else {
        fill(dst);
    }
    gemm_one(dst, (m, n, k), lhs, lhs_offset, rhs, rhs_offset, parallelism_for(macs), bias.is_some());
}

impl MatmulKernel for Cpu {
    fn matmul<E: FloatElement>(
        lhs: &CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage<E>> {
        if let Some(out) = skinny_product((lhs, lhs_layout), (rhs, rhs_layout), None)? {
            return Ok(out);
        }
        if on_bf16_kernel::<E>() {
            return bf16_product((lhs, lhs_layout), (rhs, rhs_layout), None);
        }
        if E::DTYPE.is_half() {
            let (lhs, rhs) = (widened("matmul", lhs)?, widened("matmul", rhs)?);
            return narrowed("matmul", &Self::matmul(&lhs, lhs_layout, &rhs, rhs_layout)?);
        }
        let (batch_dims, [m, k]) = split_matrix(lhs_layout.dims());
        let (_, [_, n]) = split_matrix(rhs_layout.dims());
        let batch = count_of(batch_dims);
        // The API checked that the output's element count fits.
        let mut out = output_buffer::<E>("matmul", count_of(&[batch, m, n]))?;
        if out.is_empty() {
            return Ok(CpuStorage::from_vec(out));
        }
        if k == 0 {
            // An empty sum: torch gives zeros, and so must the stale buffer.
            out.fill(E::ZERO);
            return Ok(CpuStorage::from_vec(out));
        }
        if batch == 1 {
            one_product(&mut out, (lhs, lhs_layout), (rhs, rhs_layout), None);
            return Ok(CpuStorage::from_vec(out));
        }
        let (a, b) = (operand(lhs, lhs_layout), operand(rhs, rhs_layout));
        let starts = batch_starts(lhs_layout, rhs_layout);

        // Saturating: broadcast views can be logically huge without memory.
        let macs = m.saturating_mul(n).saturating_mul(k);
        // A batch of at least four products per thread runs whole products
        // on each thread even when each could be split: split products
        // synchronise their threads several times each, and a thread's
        // packed panels stay in its own cache (a convolution's weight
        // gradient, 32 products of [32x1024]·[1024x288], went 4.1 -> 2.3 ms).
        let split_each = macs >= PARALLEL_MIN_MACS && batch < 4 * pool_threads();
        if split_each || batch.saturating_mul(macs) < PARALLEL_MIN_MACS || pool_threads() == 1 {
            // Few large matrices: each product uses every thread. Tiny
            // problems: all on this thread.
            for (dst, &(x, y)) in out.chunks_exact_mut(m * n).zip(&starts) {
                product(dst, (m, n, k), &a, x, &b, y, None);
            }
        } else {
            // Many matrices: whole products go to different threads, small
            // ones in runs long enough to amortise each hand-off.
            let per_task = PARALLEL_MIN_MACS.div_ceil(macs).max(1);
            for_each_chunk(&mut out, m * n * per_task, &|t, dst| {
                let starts = &starts[t * per_task..];
                for (dst, &(x, y)) in dst.chunks_exact_mut(m * n).zip(starts) {
                    gemm_one(dst, (m, n, k), &a, x, &b, y, gemm::Parallelism::None, false);
                }
            });
        }
        Ok(CpuStorage::from_vec(out))
    }

    /// Every row of the output starts as the bias, and `gemm` adds the
    /// product to it: the bias costs a write of the output instead of a
    /// broadcast pass that reads it and writes it again.
    fn matmul_bias<E: FloatElement>(
        lhs: &CpuStorage<E>,
        lhs_layout: &Layout,
        rhs: &CpuStorage<E>,
        rhs_layout: &Layout,
        bias: &CpuStorage<E>,
        bias_layout: &Layout,
    ) -> Result<Option<CpuStorage<E>>> {
        let ([], [m, k]) = split_matrix(lhs_layout.dims()) else { return Ok(None) };
        let (_, [_, n]) = split_matrix(rhs_layout.dims());
        let Some(bias_row) = bias.as_slice().get(bias_layout.offset()..).and_then(|b| b.get(..n)) else {
            return Ok(None);
        };
        if let Some(out) = skinny_product((lhs, lhs_layout), (rhs, rhs_layout), Some(bias_row))? {
            return Ok(Some(out));
        }
        if E::DTYPE.is_half() && !on_bf16_kernel::<E>() {
            let (lhs, rhs, bias) = (widened("matmul", lhs)?, widened("matmul", rhs)?, widened("matmul", bias)?);
            let out = Self::matmul_bias(&lhs, lhs_layout, &rhs, rhs_layout, &bias, bias_layout)?;
            return out.map(|out| narrowed("matmul", &out)).transpose();
        }
        if on_bf16_kernel::<E>() {
            return bf16_product((lhs, lhs_layout), (rhs, rhs_layout), Some(bias_row)).map(Some);
        }
        // The API checked that the output's element count fits.
        let mut out = output_buffer::<E>("matmul", count_of(&[m, n]))?;
        if n == 0 {
            return Ok(Some(CpuStorage::from_vec(out)));
        }
        if m > 0 && k == 0 {
            // An empty sum: each row is the bias.
            out.chunks_exact_mut(n).for_each(|row| row.copy_from_slice(bias_row));
        } else if m > 0 {
            one_product(&mut out, (lhs, lhs_layout), (rhs, rhs_layout), Some(bias_row));
        }
        Ok(Some(CpuStorage::from_vec(out)))
    }
}

/// Where each batch's two matrices start, in row-major batch order.
fn batch_starts(lhs_layout: &Layout, rhs_layout: &Layout) -> Vec<(usize, usize)> {
    let rank = lhs_layout.dims().len();
    let (batch_dims, _) = split_matrix(lhs_layout.dims());
    let mut starts = Vec::with_capacity(count_of(batch_dims));
    for_each_block(
        batch_dims,
        [&lhs_layout.strides()[..rank - 2], &rhs_layout.strides()[..rank - 2]],
        [lhs_layout.offset(), rhs_layout.offset()],
        |[x, y], len, [sx, sy]| starts.extend((0..len).map(|i| (x + i * sx, y + i * sy))),
    );
    starts
}

/// Whether products of `E` run on [`bf16_product`]: `bf16` elements on a
/// CPU with `bf16` dot products. Other half types widen to `f32`.
fn on_bf16_kernel<E: FloatElement>() -> bool {
    E::DTYPE == DType::BF16 && bf16_gemm::available()
}

/// The product of `bf16` operands on the CPU's `bf16` dot products
/// (`backend/cpu/bf16_gemm.rs`): each batch's `f32` sums plus the bias (one
/// per column) rounded once to `bf16`. `E` is `bf16`.
fn bf16_product<E: FloatElement>(
    (lhs, lhs_layout): (&CpuStorage<E>, &Layout),
    (rhs, rhs_layout): (&CpuStorage<E>, &Layout),
    bias: Option<&[E]>,
) -> Result<CpuStorage<E>> {
    fn bf16s<E: FloatElement>(x: &[E]) -> &[bf16] {
        as_slice_of(x).expect("the caller checked that E is bf16")
    }
    fn matrix<'a, E: FloatElement>(x: &'a CpuStorage<E>, layout: &Layout, offset: usize) -> Bf16Matrix<'a> {
        let (s, r) = (layout.strides(), layout.strides().len());
        Bf16Matrix { data: bf16s(x.as_slice()), offset, row_stride: s[r - 2], col_stride: s[r - 1] }
    }
    let (_, [m, k]) = split_matrix(lhs_layout.dims());
    let (_, [_, n]) = split_matrix(rhs_layout.dims());
    let starts = batch_starts(lhs_layout, rhs_layout);
    // The API checked that the output's element count fits.
    let mut out = output_buffer::<bf16>("matmul", count_of(&[starts.len(), m, n]))?;
    for (dst, &(x, y)) in out.chunks_exact_mut((m * n).max(1)).zip(&starts) {
        let (a, b) = (matrix(lhs, lhs_layout, x), matrix(rhs, rhs_layout, y));
        bf16_gemm::product(dst, (m, n, k), a, b, bias.map(bf16s));
    }
    let out: Box<dyn Any> = Box::new(CpuStorage::from_vec(out));
    Ok(*out.downcast::<CpuStorage<E>>().expect("E is bf16"))
}

/// The product on [`skinny_gemm`] where it applies (half types, a few
/// rows): each batch's `f32` sums plus the bias (one per column) rounded
/// once to `E`; `None` where it does not apply.
fn skinny_product<E: FloatElement>(
    (lhs, lhs_layout): (&CpuStorage<E>, &Layout),
    (rhs, rhs_layout): (&CpuStorage<E>, &Layout),
    bias: Option<&[E]>,
) -> Result<Option<CpuStorage<E>>> {
    let (_, [m, k]) = split_matrix(lhs_layout.dims());
    let (_, [_, n]) = split_matrix(rhs_layout.dims());
    let (a, b) = (operand(lhs, lhs_layout), operand(rhs, rhs_layout));
    if !skinny_gemm::applies((m, n, k), &b) {
        return Ok(None);
    }
    let starts = batch_starts(lhs_layout, rhs_layout);
    // The API checked that the output's element count fits.
    let mut out = output_buffer::<E>("matmul", count_of(&[starts.len(), m, n]))?;
    for (dst, &(x, y)) in out.chunks_exact_mut(m * n).zip(&starts) {
        skinny_gemm::product(dst, (m, n, k), (&a, x), (&b, y), bias)?;
    }
    Ok(Some(CpuStorage::from_vec(out)))
}

/// The matrix of a layout's last two axes, as `gemm` reads it.
fn operand<'a, E: FloatElement>(storage: &'a CpuStorage<E>, layout: &Layout) -> Operand<'a, E> {
    let (s, r) = (layout.strides(), layout.strides().len());
    Operand { data: storage.as_slice(), row_stride: s[r - 2], col_stride: s[r - 1] }
}

/// [`product`] for layouts of one matrix each (batch axes of size 1) with
/// non-zero sizes.
fn one_product<E: FloatElement>(
    out: &mut [E],
    (lhs, lhs_layout): (&CpuStorage<E>, &Layout),
    (rhs, rhs_layout): (&CpuStorage<E>, &Layout),
    bias: Option<&[E]>,
) {
    let (_, [m, k]) = split_matrix(lhs_layout.dims());
    let (_, [_, n]) = split_matrix(rhs_layout.dims());
    let (a, b) = (operand(lhs, lhs_layout), operand(rhs, rhs_layout));
    product(out, (m, n, k), &a, lhs_layout.offset(), &b, rhs_layout.offset(), bias);
}

/// How `gemm` should run a product of `macs` multiply-adds.
fn parallelism_for(macs: usize) -> gemm::Parallelism {
    match pool_threads() {
        n if n > 1 && macs >= GEMM_SPLIT_MIN_MACS => gemm::Parallelism::Rayon(n),
        _ => gemm::Parallelism::None,
    }
}

/// The batch axes and the trailing `[rows, cols]` of a layout of rank >= 2.
fn split_matrix(dims: &[usize]) -> (&[usize], [usize; 2]) {
    let r = dims.len();
    (&dims[..r - 2], [dims[r - 2], dims[r - 1]])
}
