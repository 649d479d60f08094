// Softmax and log-softmax along one axis: serves `ReduceKernel::softmax` of
// the Rust op family `ops::reduce` (`softmax`, `log_softmax`).
//
// Numerically stable, as on the CPU: m = max of the row (NaN wins),
// s = sum of exp(x - m); softmax = exp(x - m) / s, log_softmax =
// x - m - log(s). Entries of -inf give 0 (softmax) / -inf (log_softmax); a
// row that is all -inf, or holds NaN or +inf, gives NaN everywhere, as in
// PyTorch.
//
// The input is dense (the host makes a strided input dense first, as the
// CPU backend does) and viewed as [outer, len, inner], `len` being the
// softmax axis; the last axis is inner == 1. Row r (of n_rows = outer *
// inner) starts at (r / inner) * len * inner + r % inner and its elements
// are `inner` apart. The output has the input's dense layout.
//
// Kernels (T = f32, f64), one block per row (grid-stride over rows); block
// size a multiple of 32, at most 1024:
//   softmax_plain_<T>(size_t n_rows, size_t len, size_t inner, const T* src, T* out)
//   softmax_log_<T>(size_t n_rows, size_t len, size_t inner, const T* src, T* out)
//   softmax_plain_cached_<T>, softmax_log_cached_<T>(same arguments)
//       for rows of at most DT_SOFTMAX_PER_THREAD * blockDim.x elements,
//       which each block keeps in registers: one read of the row, not three.
//
// Their gradients (`ReduceKernel::softmax_backward`), from the forward
// result y and the incoming gradient g, both dense in the same view:
// y * (g - sum(g * y)) for softmax, g - exp(y) * sum(g) for log_softmax.
//   softmax_backward_plain_<T>(size_t n_rows, size_t len, size_t inner, const T* y, const T* g, T* out)
//   softmax_backward_log_<T>(same arguments)
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

template <bool Log, typename T>
__device__ void dt_softmax(size_t n_rows, size_t len, size_t inner, const T* src, T* out, T* scratch) {
    // Uniform per block, so every thread reaches the barriers of the reductions.
    for (size_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
        size_t base = (r / inner) * len * inner + r % inner;
        const T* x = src + base;
        T* y = out + base;
        T m = dt_fold<DtMax, T>(threadIdx.x, len, blockDim.x, [&](size_t k) { return x[k * inner]; });
        m = dt_block_reduce<DtMax>(m, scratch);
        T s = dt_fold<DtSum, T>(threadIdx.x, len, blockDim.x, [&](size_t k) { return dt_exp(x[k * inner] - m); });
        s = dt_block_reduce<DtSum>(s, scratch);
        if (Log) {
            T log_s = dt_log(s);
            for (size_t k = threadIdx.x; k < len; k += blockDim.x) y[k * inner] = x[k * inner] - m - log_s;
        } else {
            // One division per row; multiplying by the reciprocal is what
            // the CPU backend does too.
            T inv = (T)1 / s;
            for (size_t k = threadIdx.x; k < len; k += blockDim.x) y[k * inner] = dt_exp(x[k * inner] - m) * inv;
        }
    }
}

/// Elements of a row each thread keeps in registers in `dt_softmax_cached`.
#define DT_SOFTMAX_PER_THREAD 8

/// Softmax of rows of at most DT_SOFTMAX_PER_THREAD * blockDim.x elements:
/// each thread loads its share of the row once into registers, so the row
/// is read from memory once instead of three times.
template <bool Log, typename T>
__device__ void dt_softmax_cached(size_t n_rows, size_t len, size_t inner, const T* src, T* out, T* scratch) {
    for (size_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
        size_t base = (r / inner) * len * inner + r % inner;
        const T* x = src + base;
        T* y = out + base;
        T v[DT_SOFTMAX_PER_THREAD];
        T m = dt_lowest<T>();
        for (int j = 0; j < DT_SOFTMAX_PER_THREAD; ++j) {
            size_t k = threadIdx.x + j * (size_t)blockDim.x;
            v[j] = k < len ? x[k * inner] : dt_lowest<T>();
            m = dt_max(m, v[j]);
        }
        m = dt_block_reduce<DtMax>(m, scratch);
        T s = 0;
        for (int j = 0; j < DT_SOFTMAX_PER_THREAD; ++j) {
            size_t k = threadIdx.x + j * (size_t)blockDim.x;
            if (k < len) s += dt_exp(v[j] - m);
        }
        s = dt_block_reduce<DtSum>(s, scratch);
        T log_s = dt_log(s), inv = (T)1 / s;
        for (int j = 0; j < DT_SOFTMAX_PER_THREAD; ++j) {
            size_t k = threadIdx.x + j * (size_t)blockDim.x;
            if (k < len) y[k * inner] = Log ? v[j] - m - log_s : dt_exp(v[j] - m) * inv;
        }
    }
}

/// The gradient of one softmax (or log_softmax) row per block.
template <bool Log, typename T>
__device__ void dt_softmax_backward(size_t n_rows, size_t len, size_t inner, const T* y, const T* g, T* out,
                                    T* scratch) {
    for (size_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
        size_t base = (r / inner) * len * inner + r % inner;
        const T* yr = y + base;
        const T* gr = g + base;
        T* o = out + base;
        T s = dt_fold<DtSum, T>(threadIdx.x, len, blockDim.x, [&](size_t k) {
            return Log ? gr[k * inner] : gr[k * inner] * yr[k * inner];
        });
        s = dt_block_reduce<DtSum>(s, scratch);
        for (size_t k = threadIdx.x; k < len; k += blockDim.x) {
            size_t i = k * inner;
            o[i] = Log ? gr[i] - dt_exp(yr[i]) * s : yr[i] * (gr[i] - s);
        }
    }
}

#define SOFTMAX_KERNELS(name, T)                                                                           \
    extern "C" __global__ void softmax_plain_##name(size_t n_rows, size_t len, size_t inner, const T* src, \
                                                    T* out) {                                             \
        __shared__ T scratch[32];                                                                          \
        dt_softmax<false>(n_rows, len, inner, src, out, scratch);                                          \
    }                                                                                                      \
    extern "C" __global__ void softmax_log_##name(size_t n_rows, size_t len, size_t inner, const T* src,   \
                                                  T* out) {                                               \
        __shared__ T scratch[32];                                                                          \
        dt_softmax<true>(n_rows, len, inner, src, out, scratch);                                           \
    }                                                                                                      \
    extern "C" __global__ void softmax_plain_cached_##name(size_t n_rows, size_t len, size_t inner,        \
                                                           const T* src, T* out) {                        \
        __shared__ T scratch[32];                                                                          \
        dt_softmax_cached<false>(n_rows, len, inner, src, out, scratch);                                   \
    }                                                                                                      \
    extern "C" __global__ void softmax_log_cached_##name(size_t n_rows, size_t len, size_t inner,          \
                                                         const T* src, T* out) {                          \
        __shared__ T scratch[32];                                                                          \
        dt_softmax_cached<true>(n_rows, len, inner, src, out, scratch);                                    \
    }                                                                                                      \
    extern "C" __global__ void softmax_backward_plain_##name(size_t n_rows, size_t len, size_t inner,      \
                                                             const T* y, const T* g, T* out) {            \
        __shared__ T scratch[32];                                                                          \
        dt_softmax_backward<false>(n_rows, len, inner, y, g, out, scratch);                                \
    }                                                                                                      \
    extern "C" __global__ void softmax_backward_log_##name(size_t n_rows, size_t len, size_t inner,        \
                                                           const T* y, const T* g, T* out) {              \
        __shared__ T scratch[32];                                                                          \
        dt_softmax_backward<true>(n_rows, len, inner, y, g, out, scratch);                                 \
    }
DT_FOR_EACH_FLOAT(SOFTMAX_KERNELS)
