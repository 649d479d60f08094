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
//   clamp   x < lo ? lo : x, then x > hi ? hi : x, NaN bounds giving NaN,
//           so lo > hi gives hi everywhere, NaN stays NaN and an element
//           equal to a bound is kept (clamp(-0.0, 0, 6) is -0.0)
//   clamp_min, clamp_max   one of clamp's two steps
//   sigmoid 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that the
//           exponential never overflows
//   sign    (0 < x) - (x < 0) as PyTorch: both zeros give +0, NaN gives 0
//   floor, ceil, round (halves to even), trunc   integers unchanged
//   the activations (src/ops/unary/activation.rs) as PyTorch's kernels
//   write them: elu, selu and celu through expm1, softplus with its
//   threshold, hardswish and hardsigmoid through a NaN-propagating clamp
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

template <typename T> __device__ inline T dt_sign(T x) { return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (T)0); }
__device__ inline unsigned char dt_sign(unsigned char x) { return x != 0 ? 1 : 0; }
// ELU, SELU and CELU: scale * x above 0, alpha * scale * (e^(x * input_scale) - 1) at and below.
template <typename T> __device__ inline T dt_elu(T x, T alpha, T scale, T input_scale) {
    return x > (T)0 ? x * scale : dt_expm1(x * input_scale) * (alpha * scale);
}
template <typename T> __device__ inline T dt_relu6_of_x_plus_3(T x) { return dt_min(dt_max(x + (T)3, (T)0), (T)6); }

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
DT_UNARY_ALL_2(clamp, dt_clamp_above(dt_clamp_below(x, a), b))
DT_UNARY_ALL_1(clamp_min, dt_clamp_below(x, a))
DT_UNARY_ALL_1(clamp_max, dt_clamp_above(x, a))
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
DT_UNARY_ALL(floor, dt_floor(x))
DT_UNARY_ALL(ceil, dt_ceil(x))
DT_UNARY_ALL(round, dt_round(x))
DT_UNARY_ALL(trunc, dt_trunc(x))
DT_UNARY_ALL(sign, dt_sign(x))
DT_UNARY_FLOAT(tan, dt_tan(x))
DT_UNARY_FLOAT(asin, dt_asin(x))
DT_UNARY_FLOAT(acos, dt_acos(x))
DT_UNARY_FLOAT(atan, dt_atan(x))
DT_UNARY_FLOAT(sinh, dt_sinh(x))
DT_UNARY_FLOAT(cosh, dt_cosh(x))
DT_UNARY_FLOAT(asinh, dt_asinh(x))
DT_UNARY_FLOAT(acosh, dt_acosh(x))
DT_UNARY_FLOAT(atanh, dt_atanh(x))
DT_UNARY_FLOAT(log2, dt_log2(x))
DT_UNARY_FLOAT(log10, dt_log10(x))
DT_UNARY_FLOAT(exp2, dt_exp2(x))
DT_UNARY_FLOAT(frac, x - dt_trunc(x))
DT_UNARY_FLOAT_1(leaky_relu, x > (T)0 ? x : x * a)
DT_UNARY_FLOAT_1(elu, dt_elu(x, a, (T)1, (T)1))
DT_UNARY_FLOAT(selu, dt_elu(x, (T)1.6732632423543772, (T)1.0507009873554805, (T)1))
DT_UNARY_FLOAT_1(celu, dt_elu(x, a, (T)1, (T)1 / a))
DT_UNARY_FLOAT_2(softplus, x * a > b ? x : dt_log1p(dt_exp(x * a)) / a)
DT_UNARY_FLOAT(mish, x * dt_tanh(dt_log1p(dt_exp(x))))
DT_UNARY_FLOAT(hardswish, x * dt_relu6_of_x_plus_3(x) / (T)6)
DT_UNARY_FLOAT(hardsigmoid, dt_relu6_of_x_plus_3(x) / (T)6)
DT_UNARY_FLOAT(logsigmoid, dt_min(x, (T)0) - dt_log1p(dt_exp(x <= (T)0 ? x : -x)))
DT_UNARY_FLOAT(softsign, x / ((T)1 + (x < (T)0 ? -x : x)))
