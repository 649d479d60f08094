//! Products of a few rows (`m ≤` [`MAX_ROWS`]) by a matrix of half-precision
//! elements: a token's projections while a model generates, one row at a
//! time.
//!
//! There the product is a pass over the weight, with a few multiply-adds
//! per element read. The general paths widen the whole weight to `f32`
//! first (a write and a read of twice its bytes for every token), or pack
//! it into panels for the `bf16` dot-product kernel (a pass of its own, and
//! micro-tiles of six rows of which one is used): `bf16` generation ran at
//! half the speed of `f32`. Here the weight is read once, as it is stored,
//! and widened where it is used (`bf16` in registers, `f16` a block at a
//! time in L1), so that half the bytes of `f32` are read, and the sums are
//! `f32` sums rounded once, as the other paths' are.
//!
//! The right operand is read along whichever of its axes is dense: columns
//! with unit stride along `k` (a `Linear`'s transposed weight) as dot
//! products with each row, rows with unit stride along `n` (a plain
//! row-major matrix) as rows scaled and added.

use super::math::mul_add;
use super::tasks::for_each_chunk;
use super::{Operand, PARALLEL_CHUNK, VectorLoop, output_buffer, split_across_threads, vectorized};
use crate::element::{FloatElement, as_slice_of};
use crate::error::Result;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// The most rows of the left operand a product may have to run here.
/// Each block of the right operand, read once, serves every row; past a few
/// rows the general kernels, which keep tiles of the output in registers,
/// do more with each element they load.
pub(crate) const MAX_ROWS: usize = 4;

/// Elements of `k` (dot products) or of `n` (scaled rows) per block: the
/// widened block and the rows' sums stay in L1. Under Miri 16, so that
/// tests cross blocks at sizes it can run.
const BLOCK: usize = if cfg!(miri) { 16 } else { 512 };

/// Vector lanes of a partial sum: one AVX-512 register, two AVX2 ones.
const LANES: usize = 16;

/// Whether `out = a · b (+ bias)` for `a` of `m × k` and `b` of `k × n` runs
/// here: a half type, few rows, no empty axis, and `b` dense along one axis.
pub(crate) fn applies<E: FloatElement>((m, n, k): (usize, usize, usize), b: &Operand<'_, E>) -> bool {
    E::DTYPE.is_half() && (1..=MAX_ROWS).contains(&m) && n > 0 && k > 0 && (b.row_stride == 1 || b.col_stride == 1)
}

/// `out = a · b (+ bias)`, the product being one that [`applies`]: `a`
/// (`m × k`) from `a_offset`, `b` (`k × n`) from `b_offset`, `bias` one per
/// column, into the dense row-major `out` of `m × n`. The `f32` sums plus
/// the bias are rounded once to `E`.
pub(crate) fn product<E: FloatElement>(
    out: &mut [E],
    (m, n, k): (usize, usize, usize),
    (a, a_offset): (&Operand<'_, E>, usize),
    (b, b_offset): (&Operand<'_, E>, usize),
    bias: Option<&[E]>,
) -> Result<()> {
    // From the pool: a broadcast left operand can have a long `k` without
    // the memory, and running out must be an error.
    let mut rows = output_buffer::<f32>("matmul", m * k)?;
    for (i, row) in rows.chunks_exact_mut(k).enumerate() {
        let first = a_offset + i * a.row_stride;
        for (p, x) in row.iter_mut().enumerate() {
            *x = a.data[first + p * a.col_stride].cast::<f32>();
        }
    }
    // Column by column: each task writes the `m` sums of its columns.
    let mut sums = output_buffer::<f32>("matmul", n * m)?;
    let dots = b.row_stride == 1 && (b.col_stride != 1 || n == 1);
    let columns = |first: usize, sums: &mut [f32]| {
        let pass = Pass { rows: &rows, m, k, b, b_offset, first, sums };
        if dots {
            vectorized(DotColumns(pass));
        } else {
            vectorized(ScaledRows(pass));
        }
    };
    // Tasks of whole blocks of columns, each a pass over its part of `b`.
    let per_task = BLOCK.max(PARALLEL_CHUNK / k);
    if split_across_threads(n.saturating_mul(k)) {
        for_each_chunk(&mut sums, per_task * m, &|t, sums| columns(t * per_task, sums));
    } else {
        columns(0, &mut sums);
    }
    for (j, column) in sums.chunks_exact(m).enumerate() {
        let bias = bias.map_or(0.0, |bias| bias[j].cast::<f32>());
        for (i, &sum) in column.iter().enumerate() {
            out[i * n + j] = E::from_f32(sum + bias);
        }
    }
    Ok(())
}

/// One task's part of [`product`]: the columns from `first` on that
/// `sums` (`m` per column) has room for.
struct Pass<'a, E> {
    /// The left operand in `f32`, dense, `m × k`.
    rows: &'a [f32],
    m: usize,
    k: usize,
    b: &'a Operand<'a, E>,
    b_offset: usize,
    first: usize,
    sums: &'a mut [f32],
}

/// [`Pass`] where `b`'s columns are dense: dot products of each row with
/// each column, a block of `k` at a time; `bf16` widened in registers as
/// the products read it (a shift), `f16` into L1 first (`half`'s
/// conversion of a slice, which uses F16C).
struct DotColumns<'a, E>(Pass<'a, E>);

impl<E: FloatElement> VectorLoop for DotColumns<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Pass { rows, m, k, b, b_offset, first, sums } = self.0;
        let mut block = [0f32; BLOCK];
        for (j, sums) in sums.chunks_exact_mut(m).enumerate() {
            let column = b_offset + (first + j) * b.col_stride;
            sums.fill(0.0);
            for start in (0..k).step_by(BLOCK) {
                let len = BLOCK.min(k - start);
                let part = &b.data[column + start..][..len];
                let bf16_part = as_slice_of::<E, bf16>(part);
                if bf16_part.is_none() {
                    widen(part, &mut block[..len]);
                }
                for (sum, row) in sums.iter_mut().zip(rows.chunks_exact(k)) {
                    let row = &row[start..start + len];
                    *sum += match bf16_part {
                        Some(part) => dot::<FMA, _>(row, part, widen_bf16),
                        None => dot::<FMA, _>(row, &block[..len], |y| y),
                    };
                }
            }
        }
    }
}

/// The dot product of `x` and `y` (as long), `y` read as `f32` by `wide`:
/// two sets of [`LANES`] partial sums, so that two chains of vector
/// multiply-adds run at once.
#[inline(always)]
fn dot<const FMA: bool, T: Copy>(x: &[f32], y: &[T], wide: impl Fn(T) -> f32 + Copy) -> f32 {
    let (x_pairs, x_rest) = x.as_chunks::<{ 2 * LANES }>();
    let (y_pairs, y_rest) = y.as_chunks::<{ 2 * LANES }>();
    let mut pairs = [0f32; 2 * LANES];
    for (x, y) in x_pairs.iter().zip(y_pairs) {
        fma_lanes::<FMA, { 2 * LANES }, T>(&mut pairs, x, y, wide);
    }
    let mut lanes: [f32; LANES] = std::array::from_fn(|l| pairs[l] + pairs[l + LANES]);
    let (x_chunks, x_tail) = x_rest.as_chunks::<LANES>();
    let (y_chunks, y_tail) = y_rest.as_chunks::<LANES>();
    for (x, y) in x_chunks.iter().zip(y_chunks) {
        fma_lanes::<FMA, LANES, T>(&mut lanes, x, y, wide);
    }
    sum_of_lanes(lanes) + x_tail.iter().zip(y_tail).map(|(&x, &y)| x * wide(y)).sum::<f32>()
}

/// The sum of `lanes`, halves added as vectors: a few vector additions,
/// where a sum in order is `LANES` dependent scalar ones, which for a `k`
/// of a few hundred cost as much as the products.
#[inline(always)]
fn sum_of_lanes(lanes: [f32; LANES]) -> f32 {
    let mut half = [0f32; LANES / 2];
    for l in 0..LANES / 2 {
        half[l] = lanes[l] + lanes[l + LANES / 2];
    }
    let mut quarter = [0f32; LANES / 4];
    for l in 0..LANES / 4 {
        quarter[l] = half[l] + half[l + LANES / 4];
    }
    (quarter[0] + quarter[2]) + (quarter[1] + quarter[3])
}

/// `sums += x · y`, lane by lane, `y` read as `f32` by `wide`: fixed-size
/// arrays, which the compiler turns into whole vector operations (one to
/// four), the sums kept in registers.
#[inline(always)]
fn fma_lanes<const FMA: bool, const W: usize, T: Copy>(
    sums: &mut [f32; W],
    x: &[f32; W],
    y: &[T; W],
    wide: impl Fn(T) -> f32,
) {
    for l in 0..W {
        sums[l] = mul_add::<FMA>(x[l], wide(y[l]), sums[l]);
    }
}

/// [`Pass`] where `b`'s rows are dense: each row of `b`, a block of
/// columns at a time, scaled by each left row's element and added to that
/// row's sums.
struct ScaledRows<'a, E>(Pass<'a, E>);

impl<E: FloatElement> VectorLoop for ScaledRows<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Pass { rows, m, k, b, b_offset, first, sums } = self.0;
        let mut block = [0f32; BLOCK];
        let mut row_sums = [[0f32; BLOCK]; MAX_ROWS];
        let n = sums.len() / m;
        for start in (0..n).step_by(BLOCK) {
            let len = BLOCK.min(n - start);
            row_sums.iter_mut().for_each(|sums| sums[..len].fill(0.0));
            for p in 0..k {
                let from = b_offset + p * b.row_stride + first + start;
                widen(&b.data[from..from + len], &mut block[..len]);
                for (row, sums) in rows.chunks_exact(k).zip(&mut row_sums) {
                    let x = [row[p]; LANES];
                    let (sum_chunks, sum_tail) = sums[..len].as_chunks_mut::<LANES>();
                    let (y_chunks, y_tail) = block[..len].as_chunks::<LANES>();
                    for (sum, y) in sum_chunks.iter_mut().zip(y_chunks) {
                        fma_lanes::<FMA, LANES, f32>(sum, &x, y, |y| y);
                    }
                    for (sum, &y) in sum_tail.iter_mut().zip(y_tail) {
                        *sum = mul_add::<FMA>(x[0], y, *sum);
                    }
                }
            }
            for (i, row_sums) in row_sums.iter().enumerate().take(m) {
                for (j, &sum) in row_sums[..len].iter().enumerate() {
                    sums[(start + j) * m + i] = sum;
                }
            }
        }
    }
}

/// A `bf16` as an `f32`: its bits are the `f32`'s upper half.
#[inline(always)]
fn widen_bf16(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

/// `src` as `f32` into `dst` (as long): `bf16` by a shift of its bits,
/// which vectorises, `f16` by `half`'s slice conversion (F16C where the CPU
/// has it), exact either way.
#[inline(always)]
fn widen<E: FloatElement>(src: &[E], dst: &mut [f32]) {
    if let Some(src) = as_slice_of::<E, bf16>(src) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = widen_bf16(s);
        }
    } else if let Some(src) = as_slice_of::<E, f16>(src) {
        src.convert_to_f32_slice(dst);
    } else {
        unreachable!("products run here only in the half types");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DType;
    use proptest::prelude::*;

    /// Every product shape that runs here against a plain loop in `f64`
    /// over the same half values: both orientations of `b`, strided and
    /// offset operands, a bias or none, `k` and `n` across several blocks
    /// and, where large, split across threads. The kernel's `f32` sum is
    /// rounded once: within half a step of `E` of the exact value, plus
    /// `f32`'s rounding over the `k` terms.
    fn check<E: FloatElement>(
        (m, n, k): (usize, usize, usize),
        dense_columns: bool,
        a_transposed: bool,
        with_bias: bool,
        seed: u64,
    ) {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            E::from_f32((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        };
        let a_data: Vec<E> = (0..3 + m * k).map(|_| next()).collect();
        let b_data: Vec<E> = (0..5 + k * n).map(|_| next()).collect();
        let bias: Vec<E> = (0..n).map(|_| next()).collect();
        let a = if a_transposed {
            Operand { data: &a_data[..], row_stride: 1, col_stride: m }
        } else {
            Operand { data: &a_data[..], row_stride: k, col_stride: 1 }
        };
        let b = if dense_columns {
            Operand { data: &b_data[..], row_stride: 1, col_stride: k }
        } else {
            Operand { data: &b_data[..], row_stride: n, col_stride: 1 }
        };
        assert!(applies((m, n, k), &b));
        let mut out = vec![E::ZERO; m * n];
        let bias = with_bias.then_some(&bias[..]);
        product(&mut out, (m, n, k), (&a, 3), (&b, 5), bias).unwrap();
        for i in 0..m {
            for j in 0..n {
                let terms = (0..k).map(|p| {
                    a_data[3 + i * a.row_stride + p * a.col_stride].to_f64()
                        * b_data[5 + p * b.row_stride + j * b.col_stride].to_f64()
                });
                let (exact, magnitude) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
                let exact = exact + bias.map_or(0.0, |b| b[j].to_f64());
                let step = if E::DTYPE == DType::BF16 { 2f64.powi(-8) } else { 2f64.powi(-11) };
                let bound = step * exact.abs() + 2.0 * f64::from(f32::EPSILON) * magnitude + 1e-30;
                let got = out[i * n + j].to_f64();
                assert!(
                    (got - exact).abs() <= bound,
                    "{} at ({i}, {j}) of {m}x{n}x{k}: {got} against {exact}",
                    E::DTYPE.name()
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 64 }))]
        #[test]
        fn few_rows_match_a_plain_loop(
            m in 1..=MAX_ROWS,
            n in 1usize..3 * BLOCK,
            k in 1usize..3 * BLOCK,
            dense_columns: bool,
            a_transposed: bool,
            with_bias: bool,
            seed: u64,
        ) {
            check::<bf16>((m, n, k), dense_columns, a_transposed, with_bias, seed);
            check::<f16>((m, n, k), dense_columns, a_transposed, with_bias, seed);
        }
    }

    /// Products that do not run here: more rows, an empty axis, `f32`, or
    /// a right operand dense along neither axis.
    #[test]
    fn other_products_do_not_apply() {
        let data = [bf16::ZERO; 64];
        let dense = Operand { data: &data[..], row_stride: 8, col_stride: 1 };
        assert!(applies((MAX_ROWS, 8, 8), &dense));
        assert!(!applies((MAX_ROWS + 1, 8, 8), &dense));
        assert!(!applies((1, 0, 8), &dense) && !applies((1, 8, 0), &dense) && !applies((0, 8, 8), &dense));
        assert!(!applies((2, 4, 4), &Operand { data: &data[..], row_stride: 8, col_stride: 2 }));
        assert!(!applies((1, 8, 8), &Operand { data: &[0f32; 64][..], row_stride: 8, col_stride: 1 }));
    }
}
