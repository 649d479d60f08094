//! One matrix product on the `gemm` crate, with any row and column strides:
//! the primitive behind `matmul` and the fused attention kernels.

use crate::element::FloatElement;

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
    // dst[i, j] at `i * n + j < m * n = dst.len()` (asserted above). Unless
    // `accumulate` (`read_dst`), the stale contents of `dst` are never read. `dst`
    // is a unique borrow, so it aliases neither input. Strides fit `isize`
    // because they address elements of allocated slices.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.data.as_ptr().add(lhs_offset),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr().add(rhs_offset),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            E::one(),
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}
