// Elementwise functions of one tensor: serves the Rust op family `ops::unary`
// (`UnaryKernel::{unary, unary_float}`).
//
// Semantics follow the CPU backend exactly:
//   neg     floats: x * -1 (so 0.0 gives -0.0); integers: 0 - x, wrapping
//   abs     x <= 0 ? 0 - x : x (so -0.0 gives +0.0, i64::MIN stays, NaN passes)
//   relu    x < 0 ? 0 : x (NaN passes, -0.0 stays)
//   clamp   max(x, lo) then min(., hi) with NaN-propagating max/min, so
//           lo > hi gives hi everywhere and NaN stays NaN
//   square  x * x, wrapping for integers
//   float only: exp, log, sqrt, tanh, sin, cos, recip (1 / x), erf, powf (x^p),
//   sigmoid (1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that the
//   exponential never overflows).
//
// Kernels (see common.cuh for the strided convention; rank 0 = dense):
//   unary_<OP>_<T>(size_t n, size_t rank, const size_t* dims,
//                  const size_t* strides, size_t offset, const T* x, T* out)
//       OP = neg, abs, relu, square for T = f32, f64, i64, u8;
//       OP = exp, log, sqrt, tanh, sigmoid, sin, cos, recip, erf for T = f32, f64.
//   unary_clamp_<T>(size_t n, size_t rank, const size_t* dims, const size_t* strides,
//                   size_t offset, const T* x, T lo, T hi, T* out)        T = all four
//   unary_powf_<T>(size_t n, size_t rank, const size_t* dims, const size_t* strides,
//                  size_t offset, const T* x, T p, T* out)                T = f32, f64
// out is dense: out[i] = OP(x at row-major position i).
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

template <typename T> __device__ inline T dt_neg(T x) { return dt_sub((T)0, x); }
__device__ inline float dt_neg(float x) { return x * -1.0f; }
__device__ inline double dt_neg(double x) { return x * -1.0; }

struct DtNeg {
    template <typename T> __device__ static T apply(T x) { return dt_neg(x); }
};
struct DtAbs {
    template <typename T> __device__ static T apply(T x) { return x <= (T)0 ? dt_sub((T)0, x) : x; }
};
template <typename T> __device__ inline T dt_relu(T x) { return x < (T)0 ? (T)0 : x; }
// Bytes are never negative; the overload keeps NVRTC's "pointless comparison"
// warning away (the kernels test treats warnings as errors).
__device__ inline unsigned char dt_relu(unsigned char x) { return x; }

struct DtRelu {
    template <typename T> __device__ static T apply(T x) { return dt_relu(x); }
};
struct DtSquare {
    template <typename T> __device__ static T apply(T x) { return dt_mul(x, x); }
};
struct DtExp {
    template <typename T> __device__ static T apply(T x) { return dt_exp(x); }
};
struct DtLog {
    template <typename T> __device__ static T apply(T x) { return dt_log(x); }
};
struct DtSqrt {
    template <typename T> __device__ static T apply(T x) { return dt_sqrt(x); }
};
struct DtTanh {
    template <typename T> __device__ static T apply(T x) { return dt_tanh(x); }
};
struct DtSin {
    template <typename T> __device__ static T apply(T x) { return dt_sin(x); }
};
struct DtCos {
    template <typename T> __device__ static T apply(T x) { return dt_cos(x); }
};
struct DtErf {
    template <typename T> __device__ static T apply(T x) { return dt_erf(x); }
};
struct DtRecip {
    template <typename T> __device__ static T apply(T x) { return (T)1 / x; }
};
struct DtSigmoid {
    template <typename T> __device__ static T apply(T x) {
        if (x >= (T)0) return (T)1 / ((T)1 + dt_exp(-x));
        T e = dt_exp(x);
        return e / ((T)1 + e);
    }
};

template <typename Op, typename T>
__device__ void dt_unary(size_t n, size_t rank, const size_t* dims, const size_t* strides, size_t offset,
                         const T* x, T* out) {
    dt_map(n, out, [&](size_t i) { return Op::apply(x[dt_offset(i, rank, dims, strides, offset)]); });
}

#define UNARY_OP(op, Op, name, T)                                                                          \
    extern "C" __global__ void unary_##op##_##name(size_t n, size_t rank, const size_t* dims,             \
                                                   const size_t* strides, size_t offset, const T* x,      \
                                                   T* out) {                                              \
        dt_unary<Op>(n, rank, dims, strides, offset, x, out);                                             \
    }

#define UNARY_ALL(name, T)                                                                                 \
    UNARY_OP(neg, DtNeg, name, T)                                                                          \
    UNARY_OP(abs, DtAbs, name, T)                                                                          \
    UNARY_OP(relu, DtRelu, name, T)                                                                        \
    UNARY_OP(square, DtSquare, name, T)                                                                    \
    extern "C" __global__ void unary_clamp_##name(size_t n, size_t rank, const size_t* dims,              \
                                                  const size_t* strides, size_t offset, const T* x, T lo, \
                                                  T hi, T* out) {                                         \
        dt_map(n, out, [&](size_t i) { return dt_min(dt_max(x[dt_offset(i, rank, dims, strides, offset)], lo), hi); }); \
    }
DT_FOR_EACH_DTYPE(UNARY_ALL)

#define UNARY_FLOAT(name, T)                                                                               \
    UNARY_OP(exp, DtExp, name, T)                                                                          \
    UNARY_OP(log, DtLog, name, T)                                                                          \
    UNARY_OP(sqrt, DtSqrt, name, T)                                                                        \
    UNARY_OP(tanh, DtTanh, name, T)                                                                        \
    UNARY_OP(sigmoid, DtSigmoid, name, T)                                                                  \
    UNARY_OP(sin, DtSin, name, T)                                                                          \
    UNARY_OP(cos, DtCos, name, T)                                                                          \
    UNARY_OP(recip, DtRecip, name, T)                                                                      \
    UNARY_OP(erf, DtErf, name, T)                                                                          \
    extern "C" __global__ void unary_powf_##name(size_t n, size_t rank, const size_t* dims,               \
                                                 const size_t* strides, size_t offset, const T* x, T p,   \
                                                 T* out) {                                                \
        dt_map(n, out, [&](size_t i) { return dt_pow(x[dt_offset(i, rank, dims, strides, offset)], p); }); \
    }
DT_FOR_EACH_FLOAT(UNARY_FLOAT)
