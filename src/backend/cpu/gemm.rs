//! One matrix product on the `gemm` crate, with any row and column strides:
//! the primitive behind `matmul` and the fused attention kernels.

use super::Cpu;
#[cfg(target_arch = "x86_64")]
use super::CpuIsa;
use crate::element::FloatElement;
#[cfg(target_arch = "x86_64")]
use std::any::TypeId;

/// One matrix operand: where each batch's matrix starts in storage, and
/// its row and column strides.
pub(crate) struct Operand<'a, E> {
    pub(crate) data: &'a [E],
    pub(crate) row_stride: usize,
    pub(crate) col_stride: usize,
}

impl<E> Operand<'_, E> {
    /// The same elements read as the transposed matrix.
    pub(crate) fn transposed(&self) -> Operand<'_, E> {
        Operand { data: self.data, row_stride: self.col_stride, col_stride: self.row_stride }
    }
}

/// `dst = lhs · rhs` for one `m × k` by `k × n` product, as `gemm` computes
/// it, into a dense row-major `dst` of `m * n` elements; `m`, `n` and `k`
/// are all non-zero, and the operands start at the offsets given.
pub(crate) fn gemm_dense<E: FloatElement>(
    dst: &mut [E],
    (m, n, k): (usize, usize, usize),
    lhs: &Operand<'_, E>,
    lhs_offset: usize,
    rhs: &Operand<'_, E>,
    rhs_offset: usize,
    parallelism: gemm::Parallelism,
) {
    gemm_scaled(dst, (m, n, k), lhs, lhs_offset, rhs, rhs_offset, (E::one(), false), parallelism);
}

/// [`gemm_dense`] with a factor and a choice to add to `dst`:
/// `dst = scale · lhs · rhs`, or `dst += scale · lhs · rhs` when
/// `accumulate`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_scaled<E: FloatElement>(
    dst: &mut [E],
    (m, n, k): (usize, usize, usize),
    lhs: &Operand<'_, E>,
    lhs_offset: usize,
    rhs: &Operand<'_, E>,
    rhs_offset: usize,
    (scale, accumulate): (E, bool),
    parallelism: gemm::Parallelism,
) {
    assert_eq!(dst.len(), m * n, "dst holds the m × n product");
    // SAFETY: `dst` is a unique borrow of exactly the m rows of n elements,
    // n apart, that the product writes (asserted above), so no one else
    // reads or writes them during the call and neither operand (shared
    // borrows) overlaps them.
    unsafe {
        gemm_scaled_rows(
            (dst.as_mut_ptr(), n),
            (m, n, k),
            lhs,
            lhs_offset,
            rhs,
            rhs_offset,
            (scale, accumulate),
            parallelism,
        )
    }
}

/// [`gemm_scaled`] into `m` rows of `n` elements that lie `row_stride`
/// elements apart from `dst.0`: rows that interleave with other rows that
/// other threads write at the same time (one head's rows among the
/// others'), where no `&mut` slice could be cut for each thread.
///
/// # Safety
///
/// Every element `dst.0 + i * row_stride + j` (`i < m`, `j < n`) lies in
/// one allocation and may be written; for the length of the call no other
/// thread or reference reads or writes those elements, and neither operand
/// overlaps them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_scaled_rows<E: FloatElement>(
    (dst, row_stride): (*mut E, usize),
    (m, n, k): (usize, usize, usize),
    lhs: &Operand<'_, E>,
    lhs_offset: usize,
    rhs: &Operand<'_, E>,
    rhs_offset: usize,
    (scale, accumulate): (E, bool),
    parallelism: gemm::Parallelism,
) {
    // Checked arithmetic: a wrapped offset would pass the bound below.
    let last = |op: &Operand<'_, E>, offset: usize, rows: usize, cols: usize| {
        let row = (rows - 1).checked_mul(op.row_stride)?;
        let col = (cols - 1).checked_mul(op.col_stride)?;
        offset.checked_add(row)?.checked_add(col)
    };
    // These hold for every layout a tensor can have (`Layout::fits_in`); the
    // check is what makes the raw-pointer call below sound, and costs nothing
    // next to a matrix product.
    assert!(last(lhs, lhs_offset, m, k).is_some_and(|l| l < lhs.data.len()), "lhs matrix lies inside its storage");
    assert!(last(rhs, rhs_offset, k, n).is_some_and(|l| l < rhs.data.len()), "rhs matrix lies inside its storage");
    // SAFETY: `gemm` reads lhs[i, p] at `lhs_ptr + i * row_stride + p * col_stride`
    // for i < m, p < k, and likewise rhs for p < k, j < n: the largest such
    // offsets were checked against the slices' lengths just above, and all
    // strides are non-negative, so every read is in bounds. It writes
    // dst[i, j] at `i * row_stride + j`, which the caller lets it write and
    // which aliases neither input. Unless `accumulate` (`read_dst`), the
    // stale contents of `dst` are never read. Strides fit `isize` because
    // they address elements of allocated slices.
    unsafe {
        product_at_level(
            (m, n, k),
            (dst, 1, row_stride as isize),
            accumulate,
            (lhs.data.as_ptr().add(lhs_offset), lhs.col_stride as isize, lhs.row_stride as isize),
            (rhs.data.as_ptr().add(rhs_offset), rhs.col_stride as isize, rhs.row_stride as isize),
            scale,
            parallelism,
        );
    }
}

/// A matrix operand as `gemm` takes it: start, column stride, row stride.
type Raw<T> = (T, isize, isize);

/// `dst = scale · lhs · rhs` (or `dst +=` when `read_dst`) with the `gemm`
/// crate's kernels for [`Cpu::isa`]: `gemm::gemm` itself when that is the
/// widest level the CPU has, which `gemm` then picks, and otherwise
/// [`product_below_detected`].
///
/// # Safety
///
/// As `gemm::gemm`: every element the strides address lies in its
/// allocation, and `dst` aliases neither input. All strides are
/// non-negative.
unsafe fn product_at_level<E: FloatElement>(
    (m, n, k): (usize, usize, usize),
    dst: Raw<*mut E>,
    read_dst: bool,
    lhs: Raw<*const E>,
    rhs: Raw<*const E>,
    scale: E,
    parallelism: gemm::Parallelism,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let isa = Cpu::isa();
        if isa < Cpu::detected_isa() {
            // SAFETY: the caller's contract is the callee's.
            return unsafe { product_below_detected(isa, (m, n, k), dst, read_dst, lhs, rhs, scale, parallelism) };
        }
    }
    // SAFETY: the caller's contract is `gemm::gemm`'s.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.0,
            dst.1,
            dst.2,
            read_dst,
            lhs.0,
            lhs.1,
            lhs.2,
            rhs.0,
            rhs.1,
            rhs.2,
            E::one(),
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// [`product_at_level`] at `isa`, below the CPU's widest level: `gemm`'s
/// public kernels of that level (AVX2 with FMA, or scalar), driven by its
/// public driver exactly as `gemm::gemm` drives them on a CPU of that level.
///
/// # Safety
///
/// As [`product_at_level`].
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn product_below_detected<E: FloatElement>(
    isa: CpuIsa,
    (m, n, k): (usize, usize, usize),
    dst: Raw<*mut E>,
    read_dst: bool,
    lhs: Raw<*const E>,
    rhs: Raw<*const E>,
    scale: E,
    parallelism: gemm::Parallelism,
) {
    // `gemm::gemm` transposes the product when `dst` is row-major, since
    // its kernels prefer column-major output; so does this path, so that
    // the lower level sees what it would see on a CPU of that level.
    let (m, n, dst, lhs, rhs) = if dst.1 < dst.2 {
        (n, m, (dst.0, dst.2, dst.1), (rhs.0, rhs.2, rhs.1), (lhs.0, lhs.2, lhs.1))
    } else {
        (m, n, dst, lhs, rhs)
    };
    macro_rules! drive {
        ($t:ty, $kernels:path, $lanes:expr, $simd:expr) => {{
            use $kernels as kernels;
            // SAFETY: `E` is `$t` (the match below checked its `TypeId`),
            // so the pointer casts are identities; the operands are the
            // caller's, transposed as `gemm::gemm` transposes them; and
            // `$simd` is `Scalar` or came from `V3::try_new`, which checks
            // that the CPU has its instructions.
            unsafe {
                gemm_common::gemm::gemm_basic_generic::<
                    _,
                    $t,
                    $lanes,
                    { kernels::MR_DIV_N * $lanes },
                    { kernels::NR },
                    { kernels::MR_DIV_N },
                    { kernels::H_M },
                    { kernels::H_N },
                >(
                    $simd,
                    m,
                    n,
                    k,
                    dst.0.cast::<$t>(),
                    dst.1,
                    dst.2,
                    read_dst,
                    lhs.0.cast::<$t>(),
                    lhs.1,
                    lhs.2,
                    rhs.0.cast::<$t>(),
                    rhs.1,
                    rhs.2,
                    1.0,
                    *(&scale as *const E).cast::<$t>(),
                    false,
                    false,
                    false,
                    |a, b, c| a * b + c,
                    &kernels::UKR,
                    &kernels::H_UKR,
                    false,
                    parallelism,
                )
            }
        }};
    }
    let v3 = if isa >= CpuIsa::Avx2 { gemm_common::simd::V3::try_new() } else { None };
    let is_f32 = TypeId::of::<E>() == TypeId::of::<f32>();
    assert!(is_f32 || TypeId::of::<E>() == TypeId::of::<f64>(), "products are of f32 or f64 elements");
    match (v3, is_f32) {
        (Some(simd), true) => drive!(f32, gemm_f32::microkernel::fma::f32, 8, simd),
        (Some(simd), false) => drive!(f64, gemm_f64::microkernel::fma::f64, 4, simd),
        (None, true) => drive!(f32, gemm_f32::microkernel::scalar::f32, 1, gemm_common::simd::Scalar),
        (None, false) => drive!(f64, gemm_f64::microkernel::scalar::f64, 1, gemm_common::simd::Scalar),
    }
}

#[cfg(all(test, target_arch = "x86_64", not(miri)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `scale · lhs · rhs (+ dst)` as a plain loop in f64.
    fn reference(
        (m, n, k): (usize, usize, usize),
        lhs: &[f64],
        (lrs, lcs): (usize, usize),
        rhs: &[f64],
        (rrs, rcs): (usize, usize),
        dst: &[f64],
        (scale, accumulate): (f64, bool),
    ) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| lhs[i * lrs + p * lcs] * rhs[p * rrs + j * rcs]).sum();
                out[i * n + j] = scale * dot + if accumulate { dst[i * n + j] } else { 0.0 };
            }
        }
        out
    }

    /// `product_below_detected` at `isa` on dense operands of the row and
    /// column strides given.
    fn run<E: FloatElement>(
        isa: CpuIsa,
        (m, n, k): (usize, usize, usize),
        (lhs, (lrs, lcs)): (&[E], (usize, usize)),
        (rhs, (rrs, rcs)): (&[E], (usize, usize)),
        dst: &mut [E],
        (scale, accumulate): (E, bool),
    ) {
        assert!(lhs.len() == m * k && rhs.len() == k * n && dst.len() == m * n);
        // SAFETY: the operands are `m × k` and `k × n` matrices that fill
        // their slices with the strides given, and `dst` is `m × n`.
        unsafe {
            product_below_detected(
                isa,
                (m, n, k),
                (dst.as_mut_ptr(), 1, n as isize),
                accumulate,
                (lhs.as_ptr(), lcs as isize, lrs as isize),
                (rhs.as_ptr(), rcs as isize, rrs as isize),
                scale,
                gemm::Parallelism::None,
            )
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every level below the CPU's own (the ones `DEVTENSOR_CPU_ISA`
        /// selects), on random sizes, either operand transposed, scaled or
        /// accumulating, in f32 and f64, against a plain loop.
        #[test]
        fn products_below_the_cpus_level_match_a_loop(
            m in 1usize..40, n in 1usize..40, k in 1usize..70,
            lhs_t: bool, rhs_t: bool, accumulate: bool, scale in -2.0f64..2.0,
            seed: u64,
        ) {
            let mut state = seed | 1;
            let mut draw = |len: usize| -> Vec<f64> {
                (0..len).map(|_| {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                    (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
                }).collect()
            };
            let (lhs, rhs, dst0) = (draw(m * k), draw(k * n), draw(m * n));
            // Row and column strides of each operand as stored.
            let lhs_strides = if lhs_t { (1, m) } else { (k, 1) };
            let rhs_strides = if rhs_t { (1, k) } else { (n, 1) };
            let expected = reference((m, n, k), &lhs, lhs_strides, &rhs, rhs_strides, &dst0, (scale, accumulate));
            for isa in [CpuIsa::Scalar, CpuIsa::Avx2] {
                if isa >= Cpu::detected_isa() {
                    continue;
                }
                let mut dst = dst0.clone();
                run(isa, (m, n, k), (&lhs, lhs_strides), (&rhs, rhs_strides), &mut dst, (scale, accumulate));
                let as32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                let mut dst32 = as32(&dst0);
                let (lhs32, rhs32) = (as32(&lhs), as32(&rhs));
                run(isa, (m, n, k), (&lhs32, lhs_strides), (&rhs32, rhs_strides), &mut dst32, (scale as f32, accumulate));
                for (i, &e) in expected.iter().enumerate() {
                    // k products of terms below 2 in magnitude, plus dst.
                    let bound = (k as f64 + 2.0) * 2.0;
                    prop_assert!((dst[i] - e).abs() <= bound * f64::EPSILON, "{isa} f64 [{i}]: {} vs {e}", dst[i]);
                    prop_assert!((dst32[i] as f64 - e).abs() <= bound * 4.0 * f32::EPSILON as f64,
                        "{isa} f32 [{i}]: {} vs {e}", dst32[i]);
                }
            }
        }
    }
}
