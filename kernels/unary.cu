// Elementwise functions of one tensor: the kernels of the Rust op family
// `ops::unary`, one line per op (see "Element-wise functions of one tensor
// in one line" in common.cuh for the kernel signature). Each line's name is
// its op's `UnaryOp::NAME`; tests/ops/unary.rs runs every op on every element
// type it takes, so a missing kernel fails there.
//
// Semantics follow the CPU backend (src/ops/unary/ops.rs) exactly:
//   neg     floats: x * -1 (so 0.0 gives -0.0); integers: 0 - x, wrapping
//   abs     x <= 0 ? 0 - x : x (so -0.0 gives +0.0, i64::MIN stays, NaN passes)
//   relu    x < 0 ? 0 : x (NaN passes, -0.0 stays)
//   clamp   max(x, lo) then min(., hi) with NaN-propagating max/min, so
//           lo > hi gives hi everywhere and NaN stays NaN
//   clamp_min, clamp_max   one of clamp's two steps
//   sigmoid 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that the
//           exponential never overflows
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

template <typename T> __device__ inline T dt_neg(T x) { return dt_sub((T)0, x); }
__device__ inline float dt_neg(float x) { return x * -1.0f; }
__device__ inline double dt_neg(double x) { return x * -1.0; }
template <typename T> __device__ inline T dt_relu(T x) { return x < (T)0 ? (T)0 : x; }
// Bytes are never negative; the overload keeps NVRTC's "pointless comparison"
// warning away (the kernels test treats warnings as errors).
__device__ inline unsigned char dt_relu(unsigned char x) { return x; }
template <typename T> __device__ inline T dt_sigmoid(T x) {
    if (x >= (T)0) return (T)1 / ((T)1 + dt_exp(-x));
    T e = dt_exp(x);
    return e / ((T)1 + e);
}

// GELU and its derivatives, written as in src/ops/unary/ops.rs: the exact
// form x * Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, and PyTorch's tanh
// approximation through 1 + tanh(u) = 2 sigmoid(2u); neither cancels for
// negative x, where 1 + erf and 1 + tanh lose every digit.
template <typename T> __device__ inline T dt_normal_cdf(T x) { return (T)0.5 * dt_erfc(x * (T)-0.70710678118654752); }
template <typename T> __device__ inline T dt_gelu_tanh_s(T x) {
    return dt_sigmoid((T)1.5957691216057308 * (x + (T)0.044715 * x * x * x));
}
template <typename T> __device__ inline T dt_gelu_slope(T x) {
    return dt_normal_cdf(x) + x * (dt_exp(x * x * (T)-0.5) * (T)0.3989422804014327);
}
template <typename T> __device__ inline T dt_gelu_tanh_slope(T x) {
    T s = dt_gelu_tanh_s(x);
    return s + (T)2 * x * s * ((T)1 - s) * (T)0.7978845608028654 * ((T)1 + (T)3 * (T)0.044715 * x * x);
}

DT_UNARY_ALL(neg, dt_neg(x))
DT_UNARY_ALL(abs, x <= (T)0 ? dt_sub((T)0, x) : x)
DT_UNARY_ALL(relu, dt_relu(x))
DT_UNARY_ALL(square, dt_mul(x, x))
DT_UNARY_ALL_2(clamp, dt_min(dt_max(x, a), b))
DT_UNARY_ALL_1(clamp_min, dt_max(x, a))
DT_UNARY_ALL_1(clamp_max, dt_min(x, a))
DT_UNARY_FLOAT(exp, dt_exp(x))
DT_UNARY_FLOAT(log, dt_log(x))
DT_UNARY_FLOAT(sqrt, dt_sqrt(x))
DT_UNARY_FLOAT(rsqrt, (T)1 / dt_sqrt(x))
DT_UNARY_FLOAT(tanh, dt_tanh(x))
DT_UNARY_FLOAT(sigmoid, dt_sigmoid(x))
DT_UNARY_FLOAT(sin, dt_sin(x))
DT_UNARY_FLOAT(cos, dt_cos(x))
DT_UNARY_FLOAT(recip, (T)1 / x)
DT_UNARY_FLOAT(erf, dt_erf(x))
DT_UNARY_FLOAT_1(powf, dt_pow(x, a))
DT_UNARY_FLOAT(log1p, dt_log1p(x))
DT_UNARY_FLOAT(expm1, dt_expm1(x))
DT_UNARY_FLOAT(silu, x * dt_sigmoid(x))
DT_UNARY_FLOAT(gelu, x * dt_normal_cdf(x))
DT_UNARY_FLOAT(gelu_slope, dt_gelu_slope(x))
DT_UNARY_FLOAT(gelu_tanh, x * dt_gelu_tanh_s(x))
DT_UNARY_FLOAT(gelu_tanh_slope, dt_gelu_tanh_slope(x))
