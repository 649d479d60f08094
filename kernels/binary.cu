// Elementwise arithmetic with broadcasting: serves the Rust op family
// `ops::binary` (`BinaryKernel::{binary, binary_scalar, binary_assign}`):
// add, sub, mul, div, div_trunc, div_floor, maximum, minimum.
//
// Semantics (as the CPU backend's `Element` methods): integers wrap; integer
// div and div_trunc truncate toward zero, div_floor floors (Python's //),
// and i64::MIN / -1 == i64::MIN; maximum and
// minimum let a NaN on either side through. A zero integer divisor gives 0
// here, but the host must reject it first with an `integer division by zero`
// error, as the CPU backend does: launch binary_count_zero_<T> on the
// divisors and fail when the count is not 0.
//
// Kernels (OP = add, sub, mul, div, div_trunc, div_floor, maximum, minimum;
// T = f32, f64, i64, u8):
//   binary_<OP>_<T>(size_t n, size_t rank, const size_t* dims,
//                   const size_t* lhs_strides, size_t lhs_offset,
//                   const size_t* rhs_strides, size_t rhs_offset,
//                   const T* lhs, const T* rhs, T* out)
//       out[i] = lhs[..] OP rhs[..] for every row-major position i of the
//       broadcast output shape `dims` (n elements). Both operands' layouts
//       are already broadcast to `dims` (stride 0 on broadcast axes).
//       rank == 0 is the dense fast path: both operands dense from their
//       offsets. `out` may be the same buffer as a dense `lhs` with
//       lhs_offset 0 (in-place `+=` and friends): each element is read
//       before it is written, by the same thread.
//   binary_<OP>_rows_<T>(size_t rows, size_t cols,
//                        size_t lhs_row, size_t lhs_col, size_t lhs_offset,
//                        size_t rhs_row, size_t rhs_col, size_t rhs_offset,
//                        const T* lhs, const T* rhs, T* out)
//       the same for an output of shape [rows, cols] whose operands have
//       the strides (row, col): a block per row (grid-stride), no index
//       division. The same in-place rule holds. Block size: any.
//   binary_<OP>_scalar_<T>(size_t n, size_t rank, const size_t* dims,
//                          const size_t* strides, size_t offset,
//                          const T* x, T scalar, int scalar_first, T* out)
//       out[i] = x[..] OP scalar, or scalar OP x[..] when scalar_first != 0.
//   binary_count_zero_<T>(size_t n, size_t rank, const size_t* dims,
//                         const size_t* strides, size_t offset,
//                         const T* x, unsigned long long* count)     (T = i64, u8)
//       adds the number of zero elements of the strided operand to *count
//       (which the host zeroes first).
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

struct DtAdd {
    template <typename T> __device__ static T apply(T a, T b) { return dt_add(a, b); }
};
struct DtSub {
    template <typename T> __device__ static T apply(T a, T b) { return dt_sub(a, b); }
};
struct DtMul {
    template <typename T> __device__ static T apply(T a, T b) { return dt_mul(a, b); }
};
struct DtDiv {
    template <typename T> __device__ static T apply(T a, T b) { return dt_div(a, b); }
};
struct DtDivTrunc {
    template <typename T> __device__ static T apply(T a, T b) { return dt_div_trunc(a, b); }
};
struct DtDivFloor {
    template <typename T> __device__ static T apply(T a, T b) { return dt_div_floor(a, b); }
};
struct DtMaximum {
    template <typename T> __device__ static T apply(T a, T b) { return dt_max(a, b); }
};
struct DtMinimum {
    template <typename T> __device__ static T apply(T a, T b) { return dt_min(a, b); }
};

template <typename Op, typename T>
__device__ void dt_binary(size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides,
                          size_t lhs_offset, const size_t* rhs_strides, size_t rhs_offset, const T* lhs,
                          const T* rhs, T* out) {
    if (rank == 0) {
        dt_map(n, out, [&](size_t i) { return Op::apply(lhs[lhs_offset + i], rhs[rhs_offset + i]); });
        return;
    }
    dt_map(n, out, [&](size_t i) {
        size_t a = lhs_offset, b = rhs_offset;
        dt_offset2(i, rank, dims, lhs_strides, &a, rhs_strides, &b);
        return Op::apply(lhs[a], rhs[b]);
    });
}

/// Two operands whose layouts merge to two axes (a row broadcast, a column
/// broadcast, a transposed matrix): a block per row, its threads across the
/// row, so no element needs an index division.
template <typename Op, typename T>
__device__ void dt_binary_rows(size_t rows, size_t cols, size_t lhs_row, size_t lhs_col, size_t lhs_offset,
                               size_t rhs_row, size_t rhs_col, size_t rhs_offset, const T* lhs, const T* rhs,
                               T* out) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* a = lhs + lhs_offset + r * lhs_row;
        const T* b = rhs + rhs_offset + r * rhs_row;
        dt_map_from(threadIdx.x, blockDim.x, cols, out + r * cols,
                    [&](size_t c) { return Op::apply(a[c * lhs_col], b[c * rhs_col]); });
    }
}

template <typename Op, typename T>
__device__ void dt_binary_scalar(size_t n, size_t rank, const size_t* dims, const size_t* strides,
                                 size_t offset, const T* x, T scalar, int scalar_first, T* out) {
    // Two loops, so the operand order is not re-tested per element.
    if (scalar_first) {
        dt_map(n, out, [&](size_t i) { return Op::apply(scalar, x[dt_offset(i, rank, dims, strides, offset)]); });
    } else {
        dt_map(n, out, [&](size_t i) { return Op::apply(x[dt_offset(i, rank, dims, strides, offset)], scalar); });
    }
}

#define BINARY_OP(op, Op, name, T)                                                                         \
    extern "C" __global__ void binary_##op##_##name(                                                       \
        size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides, size_t lhs_offset,          \
        const size_t* rhs_strides, size_t rhs_offset, const T* lhs, const T* rhs, T* out) {               \
        dt_binary<Op>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides, rhs_offset, lhs, rhs, out);    \
    }                                                                                                      \
    extern "C" __global__ void binary_##op##_rows_##name(                                                  \
        size_t rows, size_t cols, size_t lhs_row, size_t lhs_col, size_t lhs_offset, size_t rhs_row,      \
        size_t rhs_col, size_t rhs_offset, const T* lhs, const T* rhs, T* out) {                          \
        dt_binary_rows<Op>(rows, cols, lhs_row, lhs_col, lhs_offset, rhs_row, rhs_col, rhs_offset, lhs,    \
                           rhs, out);                                                                      \
    }                                                                                                      \
    extern "C" __global__ void binary_##op##_scalar_##name(size_t n, size_t rank, const size_t* dims,     \
                                                           const size_t* strides, size_t offset,          \
                                                           const T* x, T scalar, int scalar_first,        \
                                                           T* out) {                                      \
        dt_binary_scalar<Op>(n, rank, dims, strides, offset, x, scalar, scalar_first, out);               \
    }

#define BINARY_KERNELS(name, T)             \
    BINARY_OP(add, DtAdd, name, T)          \
    BINARY_OP(sub, DtSub, name, T)          \
    BINARY_OP(mul, DtMul, name, T)          \
    BINARY_OP(div, DtDiv, name, T)          \
    BINARY_OP(div_trunc, DtDivTrunc, name, T) \
    BINARY_OP(div_floor, DtDivFloor, name, T) \
    BINARY_OP(maximum, DtMaximum, name, T)  \
    BINARY_OP(minimum, DtMinimum, name, T)
DT_FOR_EACH_DTYPE(BINARY_KERNELS)

template <typename T>
__device__ void dt_count_zero(size_t n, size_t rank, const size_t* dims, const size_t* strides, size_t offset,
                              const T* x, unsigned long long* count) {
    // Counted per thread first: one atomic per thread that saw a zero, not
    // one per zero.
    unsigned long long zeros = 0;
    DT_GRID_STRIDE(i, n) zeros += x[dt_offset(i, rank, dims, strides, offset)] == (T)0;
    if (zeros != 0) atomicAdd(count, zeros);
}

#define COUNT_ZERO_KERNEL(name, T)                                                                         \
    extern "C" __global__ void binary_count_zero_##name(size_t n, size_t rank, const size_t* dims,        \
                                                        const size_t* strides, size_t offset, const T* x, \
                                                        unsigned long long* count) {                      \
        dt_count_zero(n, rank, dims, strides, offset, x, count);                                          \
    }
DT_FOR_EACH_INT(COUNT_ZERO_KERNEL)
