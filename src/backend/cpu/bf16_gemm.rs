//! `bf16` matrix products on AVX512-BF16's dot-product instruction
//! (`vdpbf16ps`: in each 32-bit lane, two `bf16` products added to an `f32`
//! sum, exactly rounded once), twice the rate of `f32` FMAs on the same
//! vectors. The `gemm` crate has no `bf16` kernels, and widening to `f32`
//! first runs at the `f32` rate, so this is the product's own kernel.
//!
//! Layout: the right operand is packed in panels of [`COLS`] columns, each
//! column's `k` values in pairs (`k`, `k + 1`) in one 32-bit word, so that a
//! vector load gives 16 columns' pairs; the left operand is read [`ROWS`]
//! rows at a time, each row's pair a 32-bit word that is broadcast to every
//! lane (in place where its rows are dense, as a row-major `bf16` matrix
//! already holds those words). A micro-tile of `ROWS × COLS` keeps its 24 accumulators in
//! registers over the whole of `k`, and rounds once at the end: the sums
//! are `f32` sums of exact products, as the `f32` product's are.
//!
//! Threads take column panels (each packs its own, which stays in L2 while
//! every row block passes over it), and split the rows too when there are
//! fewer panels than threads.
//!
//! A product with few columns and more rows (a classifier's `Linear`: 64
//! rows of 16,384 into 10 columns) is computed transposed, `bᵀ · aᵀ`, so
//! that the 64-wide panels are not mostly padding: 6.4 times less work
//! for that shape.
//!
//! `vdpbf16ps` treats `bf16` subnormal inputs (below 1.2e-38) as zero and
//! flushes subnormal sums, as oneDNN's `bf16` products (PyTorch's) do.

use super::tasks::{for_each_chunk, for_each_item};
use super::{Cpu, CpuIsa, pool_threads};
use half::bf16;
use std::cell::Cell;
use std::thread::LocalKey;

/// Rows of a micro-tile.
const ROWS: usize = 6;
/// Columns of a micro-tile and of a packed panel: four vectors of 16 lanes.
/// 6 × 4 accumulators, 4 right-hand vectors and one broadcast use 29 of
/// the 32 vector registers.
const COLS: usize = 64;

/// One operand of a product: `data[offset + i * row_stride + j * col_stride]`
/// is element `(i, j)`.
#[derive(Clone, Copy)]
pub(crate) struct Bf16Matrix<'a> {
    pub data: &'a [bf16],
    pub offset: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl Bf16Matrix<'_> {
    /// The transpose, a view of the same elements.
    fn transposed(self) -> Self {
        Bf16Matrix { row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }

    fn bits(&self, i: usize, j: usize) -> u32 {
        self.data[self.offset + i * self.row_stride + j * self.col_stride].to_bits() as u32
    }

    /// Row `i` from column `j` on, `len` values, where the columns are
    /// dense (`col_stride == 1`).
    fn dense_row(&self, i: usize, j: usize, len: usize) -> &[bf16] {
        let start = self.offset + i * self.row_stride + j;
        &self.data[start..start + len]
    }
}

/// Two `bf16` values as the word `vdpbf16ps` reads: `low` in bits 0..16.
fn pair(low: bf16, high: bf16) -> u32 {
    low.to_bits() as u32 | (high.to_bits() as u32) << 16
}

/// Whether [`product`] can run: the CPU has AVX512-BF16 and the instruction
/// set in use (`DEVTENSOR_CPU_ISA`) is AVX-512.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        Cpu::isa() >= CpuIsa::Avx512 && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out = a · b (+ bias)` for `a` of `m × k`, `b` of `k × n` and `bias` of
/// `n` (one per column), into the dense row-major `out` of `m × n`: `f32`
/// sums, plus the bias, rounded once to `bf16`. Only where [`available`]
/// says so.
pub(crate) fn product(
    out: &mut [bf16],
    (m, n, k): (usize, usize, usize),
    a: Bf16Matrix<'_>,
    b: Bf16Matrix<'_>,
    bias: Option<&[bf16]>,
) {
    assert!(available(), "the bf16 product needs AVX512-BF16");
    assert_eq!(out.len(), m * n, "the output holds m × n sums");
    assert!(bias.is_none_or(|bias| bias.len() >= n), "one bias per column");
    if m == 0 || n == 0 {
        return;
    }
    // An empty sum: every output is its column's bias. The kernel reads
    // at least one pair per row, which an empty `k` does not have.
    if k == 0 {
        for row in out.chunks_exact_mut(n) {
            match bias {
                Some(bias) => row.copy_from_slice(&bias[..n]),
                None => row.fill(bf16::ZERO),
            }
        }
        return;
    }
    // Multiply-adds computed, padding included, each way round. A
    // transposed product writes its tiles down the output's columns, which
    // costs more than a little padding: only where it halves the work.
    let padded = |rows: usize, columns: usize| rows.div_ceil(ROWS) * ROWS * columns.div_ceil(COLS) * COLS;
    let transposed = 2 * padded(n, m) <= padded(m, n);
    let out = SharedOut { ptr: out.as_mut_ptr(), n, transposed };
    let (m, n, a, b) = if transposed { (n, m, b.transposed(), a.transposed()) } else { (m, n, a, b) };
    let pairs = k.div_ceil(2);
    let blocks = m.div_ceil(ROWS);
    // Rows of dense pairs are read where they lie, as oneDNN's brgemm
    // reads them: each pair of a row is the 32-bit word the kernel
    // broadcasts. Packing them first cost 2.5% of a product at 1024. Other
    // left operands (strided, or an odd `k`, whose last pair has one value)
    // are packed.
    let packed_a = (a.col_stride != 1 || !k.is_multiple_of(2)).then(|| {
        let mut packed = Scratch::take(&PACKED_ROWS, blocks * ROWS * pairs);
        pack_rows(a, m, k, &mut packed);
        packed
    });
    let panels = n.div_ceil(COLS);
    // Enough tasks for every thread: each panel's rows in `parts` runs.
    let parts = (pool_threads() * 2).div_ceil(panels).clamp(1, blocks);
    let per_part = blocks.div_ceil(parts);
    let run = |(panel, part): (usize, usize)| {
        let columns = panel * COLS..(n.min((panel + 1) * COLS));
        let mut packed_b = Scratch::take(&PACKED_PANEL, pairs * COLS);
        pack_panel(b, k, columns.clone(), &mut packed_b);
        // The bias is per output column: per row of a transposed product.
        let (mut column_bias, mut row_bias) = ([0f32; COLS], [0f32; ROWS]);
        // Every block's sums overwrite the whole tile.
        let mut tile = [[bf16::ZERO; COLS]; ROWS];
        for block in part * per_part..blocks.min((part + 1) * per_part) {
            let rows = block * ROWS..m.min((block + 1) * ROWS);
            if let Some(bias) = bias {
                let (to, from) = if transposed {
                    (&mut row_bias[..rows.len()], &bias[rows.clone()])
                } else {
                    (&mut column_bias[..columns.len()], &bias[columns.clone()])
                };
                to.iter_mut().zip(from).for_each(|(to, b)| *to = b.to_f32());
            }
            let left = match &packed_a {
                Some(packed) => {
                    let block = &packed[block * ROWS * pairs..(block + 1) * ROWS * pairs];
                    LeftRows { starts: std::array::from_fn(|r| block[r..].as_ptr()), step: ROWS }
                }
                // In place. Rows past `m` (a last, short block) read the
                // last row again; their sums are not written.
                None => {
                    let starts = std::array::from_fn(|r| {
                        a.dense_row((rows.start + r).min(rows.end - 1), 0, k).as_ptr().cast::<u32>()
                    });
                    LeftRows { starts, step: 1 }
                }
            };
            // SAFETY: `available` checked the CPU's features (asserted
            // above). Each row of `left` holds `pairs` words at `step`: a
            // row of `a` holds `k = 2 pairs` values, and a packed block
            // holds `ROWS · pairs` words, row `r`'s from word `r` on.
            unsafe { micro_tile(left, &packed_b, pairs, (&column_bias, &row_bias), &mut tile) };
            for (r, row) in rows.clone().zip(&tile) {
                // SAFETY: tasks write disjoint tiles: each (panel, part)
                // owns its columns of its own row blocks.
                unsafe { out.write(r, columns.start, &row[..columns.len()]) };
            }
        }
    };
    let tasks: Vec<(usize, usize)> = (0..panels).flat_map(|p| (0..parts).map(move |q| (p, q))).collect();
    if tasks.len() > 1 && pool_threads() > 1 && m * n * k >= 1 << 18 {
        for_each_item(tasks, 1, &run);
    } else {
        tasks.into_iter().for_each(run);
    }
}

thread_local! {
    /// The left operand packed by the last product this thread ran.
    static PACKED_ROWS: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
    /// The right operand's panel packed by the last task this thread ran.
    static PACKED_PANEL: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
}

/// Packed operands larger than this are freed after the product, so that a
/// thread holds at most this much between products.
const SCRATCH_KEEP_BYTES: usize = 8 << 20;

/// A buffer for a packed operand, kept per thread from one product to the
/// next: allocating and zero-filling fresh ones (the packing writes every
/// word anyway), with a zeroed tile per block, cost about 5% of a product
/// at 1024. Its words are stale until the packing overwrites them all. It leaves the thread's slot empty while
/// in use, so that a product which runs inside another (a task stolen while
/// waiting) allocates its own instead of sharing it.
struct Scratch {
    words: Vec<u32>,
    len: usize,
    slot: &'static LocalKey<Cell<Vec<u32>>>,
}

impl Scratch {
    fn take(slot: &'static LocalKey<Cell<Vec<u32>>>, len: usize) -> Self {
        let mut words = slot.take();
        if words.len() < len {
            words.resize(len, 0);
        }
        Scratch { words, len, slot }
    }
}

impl std::ops::Deref for Scratch {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.words[..self.len]
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u32] {
        &mut self.words[..self.len]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.words.capacity() * size_of::<u32>() <= SCRATCH_KEEP_BYTES {
            self.slot.set(std::mem::take(&mut self.words));
        }
    }
}

/// The output, written by several tasks at disjoint places.
struct SharedOut {
    ptr: *mut bf16,
    /// Columns of the output.
    n: usize,
    /// Whether the tiles are of the transposed product.
    transposed: bool,
}

// SAFETY: the tasks that share it write disjoint elements (see `product`).
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Writes `values` to row `r` from column `col` of the product
    /// computed (down column `r` from row `col` when it is transposed).
    ///
    /// # Safety
    /// The elements lie inside the output, and no other task touches them.
    unsafe fn write(&self, r: usize, col: usize, values: &[bf16]) {
        // SAFETY (both): as the caller promises.
        if self.transposed {
            for (j, &v) in values.iter().enumerate() {
                unsafe { *self.ptr.add((col + j) * self.n + r) = v };
            }
        } else {
            unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(r * self.n + col), values.len()) };
        }
    }
}

/// `a` in blocks of `ROWS` rows, each block pair by pair, into `packed`
/// (every word written): row `i` of block `b`, pair `p` at
/// `(b * pairs + p) * ROWS + i`, the word of `a[b ROWS + i][2p]` and
/// `a[b ROWS + i][2p + 1]`; zeros past `m` and `k`. For left operands the
/// micro-kernel cannot read in place.
fn pack_rows(a: Bf16Matrix<'_>, m: usize, k: usize, packed: &mut [u32]) {
    let pairs = k.div_ceil(2);
    for_each_chunk(packed, (ROWS * pairs).max(1), &|block, words| {
        for r in 0..ROWS {
            let i = block * ROWS + r;
            let mut put = |p: usize, word: u32| words[p * ROWS + r] = word;
            if i >= m {
                (0..pairs).for_each(|p| put(p, 0));
            } else if a.col_stride == 1 {
                let row = a.dense_row(i, 0, k);
                for (p, two) in row.chunks_exact(2).enumerate() {
                    put(p, pair(two[0], two[1]));
                }
                if k % 2 == 1 {
                    put(pairs - 1, pair(row[k - 1], bf16::ZERO));
                }
            } else {
                for p in 0..pairs {
                    let high = if 2 * p + 1 < k { a.bits(i, 2 * p + 1) } else { 0 };
                    put(p, a.bits(i, 2 * p) | high << 16);
                }
            }
        }
    });
}

/// Columns `columns` of `b` as one panel, into `packed` (every word
/// written): pair `p`, column `j` at `p * COLS + j`, the word
/// `b[2p][j] | b[2p + 1][j] << 16`; zeros past the columns and `k`.
fn pack_panel(b: Bf16Matrix<'_>, k: usize, columns: std::ops::Range<usize>, packed: &mut [u32]) {
    let width = columns.len();
    if b.col_stride == 1 {
        // Dense rows: two rows' runs, interleaved.
        for (p, words) in packed.chunks_mut(COLS).enumerate() {
            let low = b.dense_row(2 * p, columns.start, width);
            if 2 * p + 1 < k {
                let high = b.dense_row(2 * p + 1, columns.start, width);
                words.iter_mut().zip(low.iter().zip(high)).for_each(|(w, (&l, &h))| *w = pair(l, h));
            } else {
                words.iter_mut().zip(low).for_each(|(w, &l)| *w = pair(l, bf16::ZERO));
            }
            words[width..].fill(0);
        }
    } else if b.row_stride == 1 {
        // Dense columns (a transposed operand, as `Linear`'s weight): each
        // column's pairs are adjacent. By blocks of pairs, so that the
        // words written (a column's land COLS words apart) stay in L1: one
        // column at a time over a long `k` missed the cache at every word.
        const BLOCK: usize = 64;
        let transposed = b.transposed();
        for (block, words) in packed.chunks_mut(BLOCK * COLS).enumerate() {
            let first = 2 * BLOCK * block;
            let len = (k - first).min(2 * BLOCK);
            for (c, j) in columns.clone().enumerate() {
                let column = transposed.dense_row(j, first, len);
                for (p, two) in column.chunks_exact(2).enumerate() {
                    words[p * COLS + c] = pair(two[0], two[1]);
                }
                if len % 2 == 1 {
                    words[len / 2 * COLS + c] = pair(column[len - 1], bf16::ZERO);
                }
            }
            words.chunks_mut(COLS).for_each(|pair_words| pair_words[width..].fill(0));
        }
    } else {
        for (p, words) in packed.chunks_mut(COLS).enumerate() {
            for (word, j) in words.iter_mut().zip(columns.clone()) {
                let high = if 2 * p + 1 < k { b.bits(2 * p + 1, j) } else { 0 };
                *word = b.bits(2 * p, j) | high << 16;
            }
            words[width..].fill(0);
        }
    }
}

/// Where [`micro_tile`] reads a block's left operand: row `r`'s pair `p` is
/// the (possibly unaligned) word at `starts[r] + p · step`. In place, six
/// rows of `a`; packed, one block of [`pack_rows`].
#[derive(Clone, Copy)]
struct LeftRows {
    starts: [*const u32; ROWS],
    step: usize,
}

/// `tile = left · panel + bias` over `pairs` pairs of `k`, the `f32`
/// sums rounded once to `bf16` (to nearest even, `vcvtneps2bf16`); the
/// bias is a column's plus a row's (one of them zeros).
///
/// # Safety
/// The CPU has AVX-512F and AVX512-BF16, and `left` can be read at every
/// pair `p < pairs` of every row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn micro_tile(
    left: LeftRows,
    panel: &[u32],
    pairs: usize,
    (bias, row_bias): (&[f32; COLS], &[f32; ROWS]),
    tile: &mut [[bf16; COLS]; ROWS],
) {
    use std::arch::x86_64::*;
    assert!(panel.len() >= pairs * COLS);
    let LeftRows { starts, step } = left;
    let mut acc = [[_mm512_setzero_ps(); COLS / 16]; ROWS];
    for (p, words) in panel.chunks_exact(COLS).take(pairs).enumerate() {
        // SAFETY: `words` holds COLS = 4 × 16 words, so the four unaligned
        // loads of 16 are in bounds; 16 words are 32 bf16 values, which
        // is what the instruction reads.
        let b: [__m512bh; COLS / 16] = std::array::from_fn(|c| unsafe {
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(words.as_ptr().add(c * 16).cast()))
        });
        for (acc, &start) in acc.iter_mut().zip(&starts) {
            // SAFETY: pair `p < pairs` of each row is readable (the
            // caller's promise), one word broadcast to 16 lanes.
            let a = unsafe {
                let word = start.add(p * step).read_unaligned();
                std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(word as i32))
            };
            for (sum, &b) in acc.iter_mut().zip(&b) {
                *sum = _mm512_dpbf16_ps(*sum, a, b);
            }
        }
    }
    for ((row, acc), &row_bias) in tile.iter_mut().zip(&acc).zip(row_bias) {
        for (c, &sum) in acc.iter().enumerate() {
            // SAFETY: `bias` and each row of the tile hold COLS = 4 × 16
            // values, so the loads and stores of 16 at `c * 16` are in
            // bounds; 16 bf16 values are the 256 bits stored.
            unsafe {
                let sum = _mm512_add_ps(sum, _mm512_loadu_ps(bias.as_ptr().add(c * 16)));
                let sum = _mm512_add_ps(sum, _mm512_set1_ps(row_bias));
                let rounded: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(sum));
                _mm256_storeu_si256(row.as_mut_ptr().add(c * 16).cast(), rounded);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn micro_tile(_: LeftRows, _: &[u32], _: usize, _: (&[f32; COLS], &[f32; ROWS]), _: &mut [[bf16; COLS]; ROWS]) {
    unreachable!("`available` is false off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel against a plain loop of `f64` sums of the same `bf16`
    /// values plus a bias, on shapes that leave partial tiles and panels
    /// and an odd `k`, with a transposed (column-major) right operand and
    /// a left operand of each layout; the last two have few columns, and
    /// are computed transposed.
    #[test]
    fn products_match_a_plain_loop() {
        if !available() {
            return;
        }
        let value = |i: usize| bf16::from_f32(((i * 7919 % 211) as f32 - 105.0) / 37.0);
        let shapes = [
            (1, 1, 1),
            (6, 64, 2),
            (7, 65, 3),
            (13, 130, 31),
            (13, 130, 32),
            (40, 200, 257),
            (64, 10, 301),
            (131, 7, 4),
            // Empty sums: the bias alone, each way round.
            (10, 2, 0),
            (3, 70, 0),
        ];
        for (m, n, k) in shapes {
            let a: Vec<bf16> = (0..m * k).map(value).collect();
            let b: Vec<bf16> = (0..k * n).map(|i| value(i + 5)).collect();
            // b stored transposed: element (i, j) at j * k + i.
            let b_matrix = Bf16Matrix { data: &b, offset: 0, row_stride: 1, col_stride: k };
            let bias: Vec<bf16> = (0..n).map(|j| value(j + 11)).collect();
            // a row-major (read in place where k is even), and a copy
            // stored column-major (always packed).
            let a_columns: Vec<bf16> = (0..m * k).map(|x| a[x % m * k + x / m]).collect();
            for a_matrix in [
                Bf16Matrix { data: &a, offset: 0, row_stride: k, col_stride: 1 },
                Bf16Matrix { data: &a_columns, offset: 0, row_stride: 1, col_stride: m },
            ] {
                let mut out = vec![bf16::ZERO; m * n];
                product(&mut out, (m, n, k), a_matrix, b_matrix, Some(&bias));
                for i in 0..m {
                    for j in 0..n {
                        let terms = (0..k).map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64());
                        let exact = terms.clone().sum::<f64>() + bias[j].to_f64();
                        let scale = terms.map(f64::abs).sum::<f64>() + bias[j].to_f64().abs();
                        // The f32 sum within 1e-6 of the terms' scale, then
                        // rounded once to bf16 (the unit roundoff, 2^-8 relative).
                        let got = out[i * n + j].to_f64();
                        let bound = 1e-6 * scale + exact.abs() * 2f64.powi(-8) * (1.0 + 1e-6);
                        assert!((got - exact).abs() <= bound, "({m}, {n}, {k}) at ({i}, {j}): {got} vs {exact}");
                    }
                }
            }
        }
    }
}
