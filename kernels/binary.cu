// Elementwise arithmetic with broadcasting: the kernels of the built-in
// `ops::binary` op types (add, sub, mul, div, div_trunc, div_floor,
// maximum, minimum, remainder, fmod; pow, atan2, logaddexp on floats), one
// line each through DT_BINARY_ALL or DT_BINARY_FLOAT (common.cuh).
//
// Semantics (as the CPU backend's `Element` methods): integers wrap; integer
// div and div_trunc truncate toward zero, div_floor floors (Python's //),
// and i64::MIN / -1 == i64::MIN; maximum and
// minimum let a NaN on either side through. A zero integer divisor gives 0
// here, but the host must reject it first with an `integer division by zero`
// error, as the CPU backend does: launch binary_count_zero_<T> on the
// divisors and fail when the count is not 0.
//
// Kernels: the three of each op (binary_<OP>_<T>, binary_<OP>_rows_<T>,
// binary_<OP>_scalar_<T>, T = f32, f64, i64, u8), with the signatures
// DT_BINARY_KERNELS documents in common.cuh, and
//   binary_count_zero_<T>(size_t n, size_t rank, const size_t* dims,
//                         const size_t* strides, size_t offset,
//                         const T* x, unsigned long long* count)     (T = i64, u8)
//       adds the number of zero elements of the strided operand to *count
//       (which the host zeroes first).
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

DT_BINARY_ALL(add, dt_add(a, b))
DT_BINARY_ALL(sub, dt_sub(a, b))
DT_BINARY_ALL(mul, dt_mul(a, b))
DT_BINARY_ALL(div, dt_div(a, b))
DT_BINARY_ALL(div_trunc, dt_div_trunc(a, b))
DT_BINARY_ALL(div_floor, dt_div_floor(a, b))
DT_BINARY_ALL(maximum, dt_max(a, b))
DT_BINARY_ALL(minimum, dt_min(a, b))
DT_BINARY_ALL(remainder, dt_remainder(a, b))
DT_BINARY_ALL(fmod, dt_fmod(a, b))
DT_BINARY_FLOAT(pow, dt_pow(a, b))
DT_BINARY_FLOAT(atan2, dt_atan2(a, b))
DT_BINARY_FLOAT(logaddexp, dt_logaddexp(a, b))

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
