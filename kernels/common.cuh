// Shared helpers for every kernel file in kernels/.
//
// This header is compiled two ways:
//   * by NVRTC for the GPU (the CUDA backend embeds each .cu file and
//     compiles it once per device; tests/kernels_compile.rs compiles and
//     assembles every file in CI);
//   * as host C++ by the emulated GPU, which force-includes its shim header
//     first. The shim defines __global__, __device__, __shared__, threadIdx,
//     blockIdx, blockDim, gridDim, __syncthreads, the warp shuffles and the
//     atomics, and the macro DEVTENSOR_EMULATED.
// The .cu files include this header behind `#ifndef DEVTENSOR_COMMON_CUH`,
// so the CUDA backend can prepend its text (embedded with include_str!) to
// each file and compile without any include path: NVRTC has no file system
// at run time. Nothing here needs a CUDA header either.
// So everything below keeps to the kernel contract: plain C++ templates and
// inline __device__ functions, static __shared__ arrays only at the top of
// kernel bodies, full-mask warp shuffles, <cmath> math functions, and one
// inline PTX instruction, the tensor cores' product (dt_mma_16816), which
// the emulator implements in its shim.
//
// Conventions shared by every family (the host side relies on them):
//   * Element types and their names in kernel names:
//       f32 = float, f64 = double, i64 = long long, u8 = unsigned char,
//       bf16 = dt_bf16, f16 = dt_f16 (the half types, below: stored in 16
//       bits, computed in float). A kernel's scalar parameters have the
//       element's compute type, dt_compute<T>::type: float for the half
//       types, the element type itself otherwise.
//   * Sizes, strides and offsets are size_t and count elements, not bytes.
//   * A strided operand is described by (rank, dims, strides, offset): the
//     element at row-major position i of `dims` lives at
//     offset + sum_d coord_d(i) * strides[d]. dims/strides are arrays in
//     device memory of `rank` entries, rank <= DT_MAX_RANK (the host merges
//     contiguous axes first). Broadcast axes have stride 0.
//   * rank == 0 is the dense fast path: element i lives at offset + i. (A
//     true rank-0 tensor has one element at `offset`, which is the same
//     thing.) Where a kernel takes several operands sharing one `rank`,
//     rank 0 means every one of them is dense.
//   * Outputs are dense (contiguous from index 0) unless stated otherwise.
//   * Every loop over elements is a grid-stride loop, so any grid size is
//     correct; the launch size only changes speed.
//   * Kernels that reduce within a block (reduce.cu, softmax.cu) need
//     blockDim.x to be a multiple of 32 and at most 1024, with
//     blockDim.y == blockDim.z == 1; element-wise kernels accept any 1-D block.
//   * Integer arithmetic wraps (two's complement for i64, modulo 256 for u8),
//     as Rust's wrapping_* and PyTorch do. It is computed in unsigned types,
//     since signed overflow is undefined behaviour in C++ and the emulator
//     runs this code as host C++.
#ifndef DEVTENSOR_COMMON_CUH
#define DEVTENSOR_COMMON_CUH

#ifndef DEVTENSOR_EMULATED
// NVRTC has no <cmath>, and a user's machine has a driver but usually no
// CUDA headers (math_constants.h), so the special values are spelled with
// NVRTC's built-in bit casts, as math_constants.h itself does.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#else
#include <cmath>
#include <cstddef>
#include <cstring>
#endif

/// Largest rank the host passes for a strided operand (it merges contiguous
/// axes first). The kernels loop over `rank` and need no fixed bound; this
/// is the contract, which an emulator may check at launch.
#define DT_MAX_RANK 8

/// X(name, type) for every element type, in the order of the Rust DType enum.
#define DT_FOR_EACH_DTYPE(X) DT_FOR_EACH_WIDE(X) DT_FOR_EACH_HALF(X)
/// X(name, type) for the element types that kernels compute in directly.
/// The families that sum (reduce.cu, softmax.cu, conv.cu, attention.cu)
/// have kernels for these only: the host widens half inputs to f32 for
/// them and rounds the outputs once, as the CPU backend does.
#define DT_FOR_EACH_WIDE(X) X(f32, float) X(f64, double) X(i64, long long) X(u8, unsigned char)
/// X(name, type) for the half types.
#define DT_FOR_EACH_HALF(X) X(bf16, dt_bf16) X(f16, dt_f16)
/// X(name, type) for the float element types the summing families compute
/// in (see DT_FOR_EACH_WIDE).
#define DT_FOR_EACH_FLOAT(X) X(f32, float) X(f64, double)
/// X(name, type) for the integer element types, which can divide by zero.
#define DT_FOR_EACH_INT(X) X(i64, long long) X(u8, unsigned char)

/// `for (size_t i = global thread index; i < n; i += total threads)`.
/// The index is computed in size_t so tensors above 2^32 elements work.
#define DT_GRID_STRIDE(i, n)                                                    \
    for (size_t i = (size_t)blockIdx.x * (size_t)blockDim.x + (size_t)threadIdx.x; \
         i < (n); i += (size_t)blockDim.x * (size_t)gridDim.x)

/// `out[i] = f(i)` for `i = first, first + stride, ... < n`, computing four
/// elements before storing any (see `dt_map`, which runs it over the grid;
/// a block runs it over one row).
template <typename T, typename F>
__device__ inline void dt_map_from(size_t first, size_t stride, size_t n, T* out, F f) {
    size_t i = first;
    for (; i + 3 * stride < n; i += 4 * stride) {
        T v0 = f(i), v1 = f(i + stride), v2 = f(i + 2 * stride), v3 = f(i + 3 * stride);
        out[i] = v0;
        out[i + stride] = v1;
        out[i + 2 * stride] = v2;
        out[i + 3 * stride] = v3;
    }
    for (; i < n; i += stride) out[i] = f(i);
}

/// `out[i] = f(i)` for every `i < n`, grid-stride. Each thread computes four
/// elements before it stores any, so it has several loads in flight at once:
/// a memory-bound kernel needs that to approach a large GPU's bandwidth,
/// since one load per thread leaves the memory system mostly idle. The
/// elements a warp handles together stay adjacent, so accesses coalesce.
template <typename T, typename F> __device__ inline void dt_map(size_t n, T* out, F f) {
    dt_map_from((size_t)blockIdx.x * (size_t)blockDim.x + (size_t)threadIdx.x,
                (size_t)blockDim.x * (size_t)gridDim.x, n, out, f);
}

/// Folds `load(k)` for `k = first, first + step, ... < end` with `Op`, in
/// four independent accumulators combined at the end, so a thread keeps
/// four loads in flight instead of waiting for each before the next fold.
/// (Floating-point sums are reassociated, as every parallel reduction is.)
template <typename Op, typename T, typename L>
__device__ inline T dt_fold(size_t first, size_t end, size_t step, L load) {
    T a0 = Op::template identity<T>(), a1 = a0, a2 = a0, a3 = a0;
    size_t k = first;
    for (; k + 3 * step < end; k += 4 * step) {
        a0 = Op::apply(a0, load(k));
        a1 = Op::apply(a1, load(k + step));
        a2 = Op::apply(a2, load(k + 2 * step));
        a3 = Op::apply(a3, load(k + 3 * step));
    }
    for (; k < end; k += step) a0 = Op::apply(a0, load(k));
    return Op::apply(Op::apply(a0, a1), Op::apply(a2, a3));
}

// ---------------------------------------------------------------------------
// The half types
//
// bf16 and f16 elements are stored as their 16 bits and computed in float: a
// kernel widens each element it loads (exact), computes in float, and rounds
// its result once to the nearest half value, ties to even, as the CPU
// backend's half arithmetic does. The conversions are plain bit arithmetic
// rather than the GPU's cvt instructions, so that the emulated GPU runs the
// very code the real one does; the kernels they sit in are memory-bound.

/// The float whose bits are `b`, and back.
__device__ inline float dt_bits_as_float(unsigned int b) {
#ifdef DEVTENSOR_EMULATED
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
#else
    return __uint_as_float(b);
#endif
}
__device__ inline unsigned int dt_float_as_bits(float f) {
#ifdef DEVTENSOR_EMULATED
    unsigned int b;
    memcpy(&b, &f, sizeof b);
    return b;
#else
    return __float_as_uint(f);
#endif
}

/// `f` rounded to bf16 (the top 16 bits of a float), nearest, ties to even;
/// a NaN stays a quiet NaN of the same sign.
__device__ inline unsigned short dt_float_to_bf16_bits(float f) {
    unsigned int x = dt_float_as_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
    // Adding 0x7fff plus the kept part's lowest bit rounds to nearest with
    // ties to even; a carry into the exponent is the right result (up to inf).
    return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// `f` rounded to IEEE half, nearest, ties to even: overflow gives inf,
/// small values become subnormal or signed zero, a NaN stays a quiet NaN.
__device__ inline unsigned short dt_float_to_f16_bits(float f) {
    unsigned int x = dt_float_as_bits(f);
    unsigned int sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xffu) return (unsigned short)(sign | 0x7c00u | (man != 0 ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 112;  // half's biased exponent
    if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
    unsigned int bits, rem, half;
    if (e >= 1) {
        bits = ((unsigned int)e << 10) | (man >> 13);
        rem = man & 0x1fffu;
        half = 0x1000u;
    } else {
        unsigned int shift = 126u - exp;  // at least 14
        if (shift > 24u) return (unsigned short)sign;
        unsigned int m = man | 0x800000u;
        bits = m >> shift;
        rem = m & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    }
    // A carry out of the mantissa moves to the next binade (or to inf).
    bits += (rem > half || (rem == half && (bits & 1u))) ? 1u : 0u;
    return (unsigned short)(sign | bits);
}

__device__ inline float dt_f16_bits_to_float(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16, exp = ((unsigned int)h >> 10) & 0x1fu,
                 man = (unsigned int)h & 0x3ffu;
    if (exp == 0) {
        float m = (float)man * 5.9604644775390625e-8f;  // man * 2^-24, exact
        return sign ? -m : m;
    }
    if (exp == 0x1fu) return dt_bits_as_float(sign | 0x7f800000u | (man != 0 ? 0x400000u : 0u) | (man << 13));
    return dt_bits_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

/// A bf16 element: converts to float exactly and implicitly, from float
/// only explicitly (a rounding).
struct dt_bf16 {
    unsigned short bits;
    dt_bf16() = default;
    __device__ explicit dt_bf16(float f) : bits(dt_float_to_bf16_bits(f)) {}
    __device__ operator float() const { return dt_bits_as_float((unsigned int)bits << 16); }
};

/// An IEEE half (f16) element, as dt_bf16.
struct dt_f16 {
    unsigned short bits;
    dt_f16() = default;
    __device__ explicit dt_f16(float f) : bits(dt_float_to_f16_bits(f)) {}
    __device__ operator float() const { return dt_f16_bits_to_float(bits); }
};

/// The type an element computes in, and its kernels' scalar parameters.
template <typename T> struct dt_compute { typedef T type; };
template <> struct dt_compute<dt_bf16> { typedef float type; };
template <> struct dt_compute<dt_f16> { typedef float type; };

// ---------------------------------------------------------------------------
// Strided addressing

/// `*i % dim`, leaving `*i / dim` in `*i`. (NVCC's 64-bit division already
/// takes a 32-bit path when the operands fit: a hand-written one measured
/// slower on an H100.)
__device__ inline size_t dt_divmod(size_t* i, size_t dim) {
    size_t rem = *i % dim;
    *i /= dim;
    return rem;
}

/// Storage position of row-major element `i` of one strided operand.
__device__ inline size_t dt_offset(size_t i, size_t rank, const size_t* dims, const size_t* strides,
                                   size_t offset) {
    if (rank == 0) return offset + i;
    for (size_t d = rank; d > 0; --d) offset += dt_divmod(&i, dims[d - 1]) * strides[d - 1];
    return offset;
}

/// Storage positions of row-major element `i` in two operands of one shape,
/// sharing the divisions (the expensive part on a GPU).
__device__ inline void dt_offset2(size_t i, size_t rank, const size_t* dims, const size_t* a_strides,
                                  size_t* a_off, const size_t* b_strides, size_t* b_off) {
    if (rank == 0) {
        *a_off += i;
        *b_off += i;
        return;
    }
    size_t a = *a_off, b = *b_off;
    for (size_t d = rank; d > 0; --d) {
        size_t c = dt_divmod(&i, dims[d - 1]);
        a += c * a_strides[d - 1];
        b += c * b_strides[d - 1];
    }
    *a_off = a;
    *b_off = b;
}

/// Storage positions of row-major element `i` in three operands of one shape.
__device__ inline void dt_offset3(size_t i, size_t rank, const size_t* dims, const size_t* a_strides,
                                  size_t* a_off, const size_t* b_strides, size_t* b_off,
                                  const size_t* c_strides, size_t* c_off) {
    if (rank == 0) {
        *a_off += i;
        *b_off += i;
        *c_off += i;
        return;
    }
    size_t a = *a_off, b = *b_off, c = *c_off;
    for (size_t d = rank; d > 0; --d) {
        size_t k = dt_divmod(&i, dims[d - 1]);
        a += k * a_strides[d - 1];
        b += k * b_strides[d - 1];
        c += k * c_strides[d - 1];
    }
    *a_off = a;
    *b_off = b;
    *c_off = c;
}

// ---------------------------------------------------------------------------
// Element arithmetic, with the semantics of Rust's `Element` trait

/// NaN test without <cmath>'s isnan, which NVRTC lacks; false for integers.
template <typename T> __device__ inline bool dt_is_nan(T x) { return x != x; }

__device__ inline float dt_add(float a, float b) { return a + b; }
__device__ inline double dt_add(double a, double b) { return a + b; }
__device__ inline long long dt_add(long long a, long long b) {
    return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ inline unsigned char dt_add(unsigned char a, unsigned char b) { return (unsigned char)(a + b); }

__device__ inline float dt_sub(float a, float b) { return a - b; }
__device__ inline double dt_sub(double a, double b) { return a - b; }
__device__ inline long long dt_sub(long long a, long long b) {
    return (long long)((unsigned long long)a - (unsigned long long)b);
}
__device__ inline unsigned char dt_sub(unsigned char a, unsigned char b) { return (unsigned char)(a - b); }

__device__ inline float dt_mul(float a, float b) { return a * b; }
__device__ inline double dt_mul(double a, double b) { return a * b; }
__device__ inline long long dt_mul(long long a, long long b) {
    return (long long)((unsigned long long)a * (unsigned long long)b);
}
// unsigned char operands promote to int; 255 * 255 fits, and the cast wraps.
__device__ inline unsigned char dt_mul(unsigned char a, unsigned char b) { return (unsigned char)(a * b); }
// The half types' sums (index_add, scatter_add) round each step, as the
// CPU backend's half arithmetic does.
__device__ inline dt_bf16 dt_add(dt_bf16 a, dt_bf16 b) { return dt_bf16((float)a + (float)b); }
__device__ inline dt_f16 dt_add(dt_f16 a, dt_f16 b) { return dt_f16((float)a + (float)b); }

/// Division. Integer division truncates toward zero like Rust's
/// wrapping_div (i64::MIN / -1 == i64::MIN). A zero integer divisor gives 0:
/// the host rejects it before launching (binary_count_zero_*), exactly as the
/// CPU backend does, and 0 keeps the kernel free of undefined behaviour.
__device__ inline float dt_div(float a, float b) { return a / b; }
__device__ inline double dt_div(double a, double b) { return a / b; }
__device__ inline long long dt_div(long long a, long long b) {
    if (b == 0) return 0;
    // i64::MIN / -1 overflows (and traps on x86, where the emulator runs).
    if (b == -1) return dt_sub((long long)0, a);
    return a / b;
}
__device__ inline unsigned char dt_div(unsigned char a, unsigned char b) {
    return b == 0 ? (unsigned char)0 : (unsigned char)(a / b);
}

/// Division rounded toward zero (rounding_mode="trunc"); integers as dt_div.
__device__ inline float dt_div_trunc(float a, float b) { return truncf(a / b); }
__device__ inline double dt_div_trunc(double a, double b) { return trunc(a / b); }
__device__ inline long long dt_div_trunc(long long a, long long b) { return dt_div(a, b); }
__device__ inline unsigned char dt_div_trunc(unsigned char a, unsigned char b) { return dt_div(a, b); }

/// Division rounded toward negative infinity (Python's `//`, PyTorch's
/// rounding_mode="floor"), with the semantics of the CPU backend's
/// Element::div_floor: for floats PyTorch's div_floor_floating, which
/// works from the exact remainder instead of rounding a / b.
template <typename T> __device__ inline T dt_div_floor_float(T a, T b) {
    if (b == (T)0) return a / b;
    T rem = fmod(a, b);
    T div = (a - rem) / b;
    if (rem != (T)0 && ((b < (T)0) != (rem < (T)0))) div -= (T)1;
    if (div == (T)0) return copysign((T)0, a / b);
    T fl = floor(div);
    return (div - fl > (T)0.5) ? fl + (T)1 : fl;
}
__device__ inline float dt_div_floor(float a, float b) { return dt_div_floor_float(a, b); }
__device__ inline double dt_div_floor(double a, double b) { return dt_div_floor_float(a, b); }
__device__ inline long long dt_div_floor(long long a, long long b) {
    if (b == 0) return 0;
    long long q = dt_div(a, b);
    // The remainder is exact whenever the quotient did not wrap; for
    // i64::MIN / -1 it is 0.
    long long r = (b == -1) ? 0 : a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
__device__ inline unsigned char dt_div_floor(unsigned char a, unsigned char b) { return dt_div(a, b); }

/// The larger value; a NaN on either side wins (torch.maximum).
template <typename T> __device__ inline T dt_max(T a, T b) { return (dt_is_nan(a) || a > b) ? a : b; }
/// The smaller value; a NaN on either side wins (torch.minimum).
template <typename T> __device__ inline T dt_min(T a, T b) { return (dt_is_nan(a) || a < b) ? a : b; }
/// torch.clamp's steps: `x` unless it is beyond the bound (so an element
/// equal to the bound keeps its own sign of zero); a NaN bound gives NaN.
template <typename T> __device__ inline T dt_clamp_below(T x, T lo) { return (x < lo || dt_is_nan(lo)) ? lo : x; }
template <typename T> __device__ inline T dt_clamp_above(T x, T hi) { return (x > hi || dt_is_nan(hi)) ? hi : x; }

/// Identity of max: -inf for floats, the minimum for integers.
template <typename T> __device__ inline T dt_lowest();
template <> __device__ inline float dt_lowest<float>() { return -INFINITY; }
template <> __device__ inline double dt_lowest<double>() { return -(double)INFINITY; }
template <> __device__ inline long long dt_lowest<long long>() { return (long long)(1ULL << 63); }
template <> __device__ inline unsigned char dt_lowest<unsigned char>() { return 0; }

/// Identity of min: +inf for floats, the maximum for integers.
template <typename T> __device__ inline T dt_highest();
template <> __device__ inline float dt_highest<float>() { return INFINITY; }
template <> __device__ inline double dt_highest<double>() { return (double)INFINITY; }
template <> __device__ inline long long dt_highest<long long>() { return (long long)((1ULL << 63) - 1); }
template <> __device__ inline unsigned char dt_highest<unsigned char>() { return 255; }

// Math functions picked by type, so templates can call one name. Only
// functions that exist in both CUDA and <cmath>.
__device__ inline float dt_exp(float x) { return expf(x); }
__device__ inline double dt_exp(double x) { return exp(x); }
__device__ inline float dt_log(float x) { return logf(x); }
__device__ inline double dt_log(double x) { return log(x); }
__device__ inline float dt_sqrt(float x) { return sqrtf(x); }
__device__ inline double dt_sqrt(double x) { return sqrt(x); }
__device__ inline float dt_tanh(float x) { return tanhf(x); }
__device__ inline double dt_tanh(double x) { return tanh(x); }
__device__ inline float dt_sin(float x) { return sinf(x); }
__device__ inline double dt_sin(double x) { return sin(x); }
__device__ inline float dt_cos(float x) { return cosf(x); }
__device__ inline double dt_cos(double x) { return cos(x); }
__device__ inline float dt_erf(float x) { return erff(x); }
__device__ inline double dt_erf(double x) { return erf(x); }
__device__ inline float dt_erfc(float x) { return erfcf(x); }
__device__ inline double dt_erfc(double x) { return erfc(x); }
__device__ inline float dt_log1p(float x) { return log1pf(x); }
__device__ inline double dt_log1p(double x) { return log1p(x); }
__device__ inline float dt_expm1(float x) { return expm1f(x); }
__device__ inline double dt_expm1(double x) { return expm1(x); }
__device__ inline float dt_pow(float x, float p) { return powf(x, p); }
__device__ inline double dt_pow(double x, double p) { return pow(x, p); }
__device__ inline float dt_tan(float x) { return tanf(x); }
__device__ inline double dt_tan(double x) { return tan(x); }
__device__ inline float dt_asin(float x) { return asinf(x); }
__device__ inline double dt_asin(double x) { return asin(x); }
__device__ inline float dt_acos(float x) { return acosf(x); }
__device__ inline double dt_acos(double x) { return acos(x); }
__device__ inline float dt_atan(float x) { return atanf(x); }
__device__ inline double dt_atan(double x) { return atan(x); }
__device__ inline float dt_sinh(float x) { return sinhf(x); }
__device__ inline double dt_sinh(double x) { return sinh(x); }
__device__ inline float dt_cosh(float x) { return coshf(x); }
__device__ inline double dt_cosh(double x) { return cosh(x); }
__device__ inline float dt_asinh(float x) { return asinhf(x); }
__device__ inline double dt_asinh(double x) { return asinh(x); }
__device__ inline float dt_acosh(float x) { return acoshf(x); }
__device__ inline double dt_acosh(double x) { return acosh(x); }
__device__ inline float dt_atanh(float x) { return atanhf(x); }
__device__ inline double dt_atanh(double x) { return atanh(x); }
__device__ inline float dt_log2(float x) { return log2f(x); }
__device__ inline double dt_log2(double x) { return log2(x); }
__device__ inline float dt_log10(float x) { return log10f(x); }
__device__ inline double dt_log10(double x) { return log10(x); }
__device__ inline float dt_exp2(float x) { return exp2f(x); }
__device__ inline double dt_exp2(double x) { return exp2(x); }
// Rounding: integers are their own floor, ceiling, rounding and truncation.
// rint rounds halves to even in the default rounding mode, as torch.round.
template <typename T> __device__ inline T dt_floor(T x) { return x; }
__device__ inline float dt_floor(float x) { return floorf(x); }
__device__ inline double dt_floor(double x) { return floor(x); }
template <typename T> __device__ inline T dt_ceil(T x) { return x; }
__device__ inline float dt_ceil(float x) { return ceilf(x); }
__device__ inline double dt_ceil(double x) { return ceil(x); }
template <typename T> __device__ inline T dt_round(T x) { return x; }
__device__ inline float dt_round(float x) { return rintf(x); }
__device__ inline double dt_round(double x) { return rint(x); }
template <typename T> __device__ inline T dt_trunc(T x) { return x; }
__device__ inline float dt_trunc(float x) { return truncf(x); }
__device__ inline double dt_trunc(double x) { return trunc(x); }
/// C's fmod: the remainder with the dividend's sign. Zero integer divisors
/// are rejected on the host; i64::MIN fmod -1 is 0 (C's % is undefined).
__device__ inline float dt_fmod(float a, float b) { return fmodf(a, b); }
__device__ inline double dt_fmod(double a, double b) { return fmod(a, b); }
__device__ inline long long dt_fmod(long long a, long long b) { return b == -1 ? 0 : a % b; }
__device__ inline unsigned char dt_fmod(unsigned char a, unsigned char b) { return b == 0 ? 0 : a % b; }
/// Python's %: fmod moved by the divisor when the signs differ, as PyTorch.
template <typename T> __device__ inline T dt_remainder(T a, T b) {
    T m = dt_fmod(a, b);
    return (m != (T)0 && ((b < (T)0) != (m < (T)0))) ? m + b : m;
}
__device__ inline unsigned char dt_remainder(unsigned char a, unsigned char b) { return dt_fmod(a, b); }
__device__ inline float dt_atan2(float a, float b) { return atan2f(a, b); }
__device__ inline double dt_atan2(double a, double b) { return atan2(a, b); }
/// log(e^a + e^b): the larger plus log1p(e^-|a - b|); a when both are the same infinity.
template <typename T> __device__ inline T dt_logaddexp(T a, T b) {
    if (a == b && dt_is_nan(a - a)) return a; // the same infinity: inf - inf is NaN
    T d = a - b;
    return dt_max(a, b) + dt_log1p(dt_exp(d < (T)0 ? d : -d));
}

// ---------------------------------------------------------------------------
// Conversions with Rust's `as` semantics

/// `(To)v` as Rust's `v as To`. The general case (int to int, int to float,
/// float to float) is C++'s conversion: integers truncate modulo 2^bits,
/// floats round to nearest. Float to integer is specialised below, since
/// Rust saturates (NaN gives 0) where C++ is undefined out of range.
template <typename To, typename From> __device__ inline To dt_cast(From v) { return (To)v; }

/// Float to i64: NaN -> 0, saturating at the ends, else truncation toward 0.
template <typename From> __device__ inline long long dt_float_to_i64(From v) {
    if (dt_is_nan(v)) return 0;
    // 2^63 is exact in both float and double.
    if (v >= (From)9223372036854775808.0) return dt_highest<long long>();
    if (v <= -(From)9223372036854775808.0) return dt_lowest<long long>();
    return (long long)v;
}
/// Float to u8: NaN -> 0, saturating to 0..=255, else truncation toward 0.
template <typename From> __device__ inline unsigned char dt_float_to_u8(From v) {
    if (dt_is_nan(v) || v <= (From)0) return 0;
    if (v >= (From)255) return 255;
    return (unsigned char)v;
}
template <> __device__ inline long long dt_cast<long long, float>(float v) { return dt_float_to_i64(v); }
template <> __device__ inline long long dt_cast<long long, double>(double v) { return dt_float_to_i64(v); }
template <> __device__ inline unsigned char dt_cast<unsigned char, float>(float v) { return dt_float_to_u8(v); }
template <> __device__ inline unsigned char dt_cast<unsigned char, double>(double v) { return dt_float_to_u8(v); }
// The half types widen exactly to float, then convert as float does. The
// general case takes every type to a half type through float (the
// constructor's parameter), as PyTorch converts.
template <> __device__ inline long long dt_cast<long long, dt_bf16>(dt_bf16 v) { return dt_float_to_i64((float)v); }
template <> __device__ inline long long dt_cast<long long, dt_f16>(dt_f16 v) { return dt_float_to_i64((float)v); }
template <> __device__ inline unsigned char dt_cast<unsigned char, dt_bf16>(dt_bf16 v) { return dt_float_to_u8((float)v); }
template <> __device__ inline unsigned char dt_cast<unsigned char, dt_f16>(dt_f16 v) { return dt_float_to_u8((float)v); }

/// A value of the compute type stored as element type `S`: rounded once
/// for the half types, unchanged otherwise.
template <typename S> __device__ inline S dt_narrow(typename dt_compute<S>::type v) { return (S)v; }

// ---------------------------------------------------------------------------
// Tensor cores (sm_80 and later)
//
// The kernel contract's two inline-PTX instructions live here, each with
// the emulator's meaning beside it. The warp-wide product
// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`, d += a b with A 16x16,
// B 16x8 and D 16x8 in f32: every lane of a warp must call it together, and
// its fragment layout (which lane holds which element) is the PTX ISA's,
// spelled out in the emulator's stand-in (emu/shim/cuda_shim.h), which
// computes the same product from the same registers. And
// `cvt.rn.{bf16x2,f16x2}.f32`, which rounds two floats into one operand
// register in one instruction, where dt_bf16's and dt_f16's constructors
// take several each (the softmax's weights are rounded at every tile).

/// Two 16-bit elements in one operand register, `lo` in the low half.
template <typename H> __device__ inline unsigned int dt_pack2(H lo, H hi) {
    return (unsigned int)lo.bits | ((unsigned int)hi.bits << 16);
}

/// dt_pack2(H(lo), H(hi)): two floats rounded to H (nearest, ties to even)
/// in one operand register.
template <typename H> __device__ inline unsigned int dt_pack2_rounded(float lo, float hi);
#if defined(DEVTENSOR_EMULATED) || __CUDA_ARCH__ < 800
// The emulator, and GPUs that have no such instruction (nor tensor cores:
// the host never launches the kernels that call this there).
template <typename H> __device__ inline unsigned int dt_pack2_rounded(float lo, float hi) {
    return dt_pack2(H(lo), H(hi));
}
#else
#define DT_PACK2_ROUNDED(H, ptx_type)                                                                         \
    template <> __device__ inline unsigned int dt_pack2_rounded<H>(float lo, float hi) {                     \
        unsigned int packed;                                                                                  \
        /* The first source goes to the upper half. */                                                        \
        asm("cvt.rn." ptx_type ".f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));                       \
        return packed;                                                                                        \
    }
DT_PACK2_ROUNDED(dt_bf16, "bf16x2")
DT_PACK2_ROUNDED(dt_f16, "f16x2")
#endif

template <typename H> __device__ inline void dt_mma_16816(float d[4], const unsigned int a[4], const unsigned int b[2]);
#ifdef DEVTENSOR_EMULATED
template <> inline void dt_mma_16816<dt_bf16>(float d[4], const unsigned int a[4], const unsigned int b[2]) {
    ::emu::mma_16816(d, a, b, false);
}
template <> inline void dt_mma_16816<dt_f16>(float d[4], const unsigned int a[4], const unsigned int b[2]) {
    ::emu::mma_16816(d, a, b, true);
}
#else
#define DT_MMA_16816(H, ptx_type)                                                                             \
    template <> __device__ inline void dt_mma_16816<H>(float d[4], const unsigned int a[4], const unsigned int b[2]) { \
        DT_MMA_16816_BODY(ptx_type)                                                                           \
    }
#if __CUDA_ARCH__ >= 800
#define DT_MMA_16816_BODY(ptx_type)                                                                           \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." ptx_type "." ptx_type ".f32 "                               \
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                             \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                    \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
// Older GPUs have no such instruction; the host never launches these kernels there.
#define DT_MMA_16816_BODY(ptx_type) __trap();
#endif
DT_MMA_16816(dt_bf16, "bf16")
DT_MMA_16816(dt_f16, "f16")
#endif

// ---------------------------------------------------------------------------
// Reductions within a warp and a block

/// Combining functions for reductions: `apply` folds two values, and
/// `identity` is the value that changes nothing.
struct DtSum {
    template <typename T> __device__ static T apply(T a, T b) { return dt_add(a, b); }
    template <typename T> __device__ static T identity() { return (T)0; }
};
struct DtProd {
    template <typename T> __device__ static T apply(T a, T b) { return dt_mul(a, b); }
    template <typename T> __device__ static T identity() { return (T)1; }
};
struct DtMax {
    template <typename T> __device__ static T apply(T a, T b) { return dt_max(a, b); }
    template <typename T> __device__ static T identity() { return dt_lowest<T>(); }
};
struct DtMin {
    template <typename T> __device__ static T apply(T a, T b) { return dt_min(a, b); }
    template <typename T> __device__ static T identity() { return dt_highest<T>(); }
};

/// `__shfl_down_sync` over all 32 lanes. CUDA has no 8-bit shuffle, so
/// bytes travel as int.
template <typename T> __device__ inline T dt_shfl_down(T v, int delta) {
    return __shfl_down_sync(0xffffffff, v, delta);
}
template <> __device__ inline unsigned char dt_shfl_down<unsigned char>(unsigned char v, int delta) {
    return (unsigned char)__shfl_down_sync(0xffffffff, (int)v, delta);
}

/// Folds `v` across the 32 lanes of a warp; lane 0 holds the result.
template <typename Op, typename T> __device__ inline T dt_warp_reduce(T v) {
    for (int delta = 16; delta > 0; delta /= 2) v = Op::apply(v, dt_shfl_down(v, delta));
    return v;
}

/// Folds `v` across the block and returns the result to every thread.
/// `scratch` is a __shared__ array of 32 elements declared by the kernel.
/// Every thread of the block must call this (it has barriers), and
/// blockDim.x must be a multiple of 32. On return `scratch` may be reused.
template <typename Op, typename T> __device__ inline T dt_block_reduce(T v, T* scratch) {
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = dt_warp_reduce<Op>(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? scratch[lane] : Op::template identity<T>();
        v = dt_warp_reduce<Op>(v);
        if (lane == 0) scratch[0] = v;
    }
    __syncthreads();
    T result = scratch[0];
    // Keeps a fast thread from overwriting scratch[0] in the caller's next
    // reduction before every thread has read it.
    __syncthreads();
    return result;
}

/// Folds the candidate (ov, oi) into the running arg-reduction (v, i).
/// The first NaN wins; otherwise the strictly better value; ties keep the
/// smaller index. This order is associative and commutative, so tree
/// reductions in any shape pick exactly what the CPU's sequential scan picks.
template <bool IsMax, typename T> __device__ inline void dt_arg_combine(T* v, long long* i, T ov, long long oi) {
    bool v_nan = dt_is_nan(*v), o_nan = dt_is_nan(ov);
    bool take;
    if (v_nan || o_nan) {
        take = o_nan && (!v_nan || oi < *i);
    } else if (IsMax ? ov > *v : ov < *v) {
        take = true;
    } else {
        take = ov == *v && oi < *i;
    }
    if (take) {
        *v = ov;
        *i = oi;
    }
}

/// Identity of an arg-reduction: the worst value at an index no real
/// element has, so that any real element wins against it (ties go to the
/// smaller index, and every real index is smaller).
template <bool IsMax, typename T> __device__ inline T dt_arg_identity() {
    return IsMax ? dt_lowest<T>() : dt_highest<T>();
}
#define DT_ARG_NO_INDEX ((long long)((1ULL << 63) - 1))

/// Folds (v, i) across the block; every thread gets the result. `vals` and
/// `idxs` are __shared__ arrays of 32 declared by the kernel. Same calling
/// rules as dt_block_reduce.
template <bool IsMax, typename T>
__device__ inline void dt_block_arg_reduce(T* v, long long* i, T* vals, long long* idxs) {
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int delta = 16; delta > 0; delta /= 2) {
        T ov = dt_shfl_down(*v, delta);
        long long oi = __shfl_down_sync(0xffffffff, *i, delta);
        dt_arg_combine<IsMax>(v, i, ov, oi);
    }
    if (lane == 0) {
        vals[warp] = *v;
        idxs[warp] = *i;
    }
    __syncthreads();
    if (warp == 0) {
        *v = lane < warps ? vals[lane] : dt_arg_identity<IsMax, T>();
        *i = lane < warps ? idxs[lane] : DT_ARG_NO_INDEX;
        for (int delta = 16; delta > 0; delta /= 2) {
            T ov = dt_shfl_down(*v, delta);
            long long oi = __shfl_down_sync(0xffffffff, *i, delta);
            dt_arg_combine<IsMax>(v, i, ov, oi);
        }
        if (lane == 0) {
            vals[0] = *v;
            idxs[0] = *i;
        }
    }
    __syncthreads();
    *v = vals[0];
    *i = idxs[0];
    __syncthreads();
}

// ---------------------------------------------------------------------------
// Element-wise functions of one tensor in one line
//
// The Rust side declares each unary op once (a type implementing
// `devtensor::ops::unary::UnaryOp`); its kernels are one line here or in a
// user's own source:
//
//   DT_UNARY_FLOAT(log1p, dt_log1p(x))          // f32 and f64
//   DT_UNARY_ALL(square, dt_mul(x, x))          // f32, f64, i64 and u8
//   DT_UNARY_FLOAT_1(powf, dt_pow(x, a))        // one scalar parameter, `a`
//   DT_UNARY_ALL_2(clamp, dt_clamp_above(dt_clamp_below(x, a), b))  // two, `a` and `b`
//
// define `unary_<op>_<T>(size_t n, size_t rank, const size_t* dims,
// const size_t* strides, size_t offset, const T* x, [C a, [C b,]] T* out)`
// with out[i] = the expression, for the element `x` at row-major position i
// of the strided input. In the expression, `x`, `a`, `b` and `T` have the
// compute type C (float for bf16 and f16, whose FLOAT lines also define
// kernels: the result is rounded once). The scalar parameters come
// in the order of `UnaryOp::params`. Integer expressions must wrap (use
// dt_add, dt_sub, dt_mul).

#define DT_UNARY_PARAMS0(T)
#define DT_UNARY_PARAMS1(T) , T a
#define DT_UNARY_PARAMS2(T) , T a, T b

#define DT_UNARY_KERNEL(op, name, TYPE, PARAMS, ...)                                                       \
    extern "C" __global__ void unary_##op##_##name(size_t n, size_t rank, const size_t* dims,             \
                                                   const size_t* strides, size_t offset,                  \
                                                   const TYPE* xs PARAMS(dt_compute<TYPE>::type),         \
                                                   TYPE* out) {                                           \
        typedef dt_compute<TYPE>::type T;                                                                 \
        dt_map(n, out, [&](size_t i) {                                                                    \
            T x = xs[dt_offset(i, rank, dims, strides, offset)];                                          \
            return dt_narrow<TYPE>((T)(__VA_ARGS__));                                                     \
        });                                                                                               \
    }
#define DT_UNARY_FLOATS(op, PARAMS, ...)                                                                   \
    DT_UNARY_KERNEL(op, f32, float, PARAMS, __VA_ARGS__)                                                   \
    DT_UNARY_KERNEL(op, f64, double, PARAMS, __VA_ARGS__)                                                  \
    DT_UNARY_KERNEL(op, bf16, dt_bf16, PARAMS, __VA_ARGS__)                                                \
    DT_UNARY_KERNEL(op, f16, dt_f16, PARAMS, __VA_ARGS__)
#define DT_UNARY_INTS(op, PARAMS, ...)                                                                     \
    DT_UNARY_KERNEL(op, i64, long long, PARAMS, __VA_ARGS__)                                               \
    DT_UNARY_KERNEL(op, u8, unsigned char, PARAMS, __VA_ARGS__)

#define DT_UNARY_FLOAT(op, ...) DT_UNARY_FLOATS(op, DT_UNARY_PARAMS0, __VA_ARGS__)
#define DT_UNARY_FLOAT_1(op, ...) DT_UNARY_FLOATS(op, DT_UNARY_PARAMS1, __VA_ARGS__)
#define DT_UNARY_FLOAT_2(op, ...) DT_UNARY_FLOATS(op, DT_UNARY_PARAMS2, __VA_ARGS__)
#define DT_UNARY_ALL(op, ...) DT_UNARY_FLOAT(op, __VA_ARGS__) DT_UNARY_INTS(op, DT_UNARY_PARAMS0, __VA_ARGS__)
#define DT_UNARY_ALL_1(op, ...) DT_UNARY_FLOAT_1(op, __VA_ARGS__) DT_UNARY_INTS(op, DT_UNARY_PARAMS1, __VA_ARGS__)
#define DT_UNARY_ALL_2(op, ...) DT_UNARY_FLOAT_2(op, __VA_ARGS__) DT_UNARY_INTS(op, DT_UNARY_PARAMS2, __VA_ARGS__)

// ---------------------------------------------------------------------------
// Element-wise functions of two tensors in one line
//
// The Rust side declares each binary op once (a type implementing
// `devtensor::ops::binary::BinaryOp`); its kernels are one line here or in
// a user's own source:
//
//   DT_BINARY_ALL(add, dt_add(a, b))            // f32, f64, i64 and u8
//   DT_BINARY_FLOAT(hypot, sqrt(a * a + b * b)) // f32 and f64
//
// define, for each type T, with out = the expression of the elements `a`
// (left) and `b` (right), and `T` naming the compute type in it (float for
// bf16 and f16, whose FLOAT lines also define kernels, rounded once; the
// scalar parameter has the compute type too):
//   binary_<op>_<T>(size_t n, size_t rank, const size_t* dims,
//                   const size_t* lhs_strides, size_t lhs_offset,
//                   const size_t* rhs_strides, size_t rhs_offset,
//                   const T* lhs, const T* rhs, T* out)
//       over the broadcast output shape `dims` (n elements); both layouts
//       are broadcast to it (stride 0 on broadcast axes). rank == 0 is the
//       dense fast path. `out` may be a dense `lhs` at offset 0 (in place):
//       each element is read before it is written, by the same thread.
//   binary_<op>_rows_<T>(size_t rows, size_t cols,
//                        size_t lhs_row, size_t lhs_col, size_t lhs_offset,
//                        size_t rhs_row, size_t rhs_col, size_t rhs_offset,
//                        const T* lhs, const T* rhs, T* out)
//       the same for an output [rows, cols] whose operands have the strides
//       (row, col): a block per row, no index division. Same in-place rule.
//   binary_<op>_scalar_<T>(size_t n, size_t rank, const size_t* dims,
//                          const size_t* strides, size_t offset,
//                          const T* x, T scalar, int scalar_first, T* out)
//       x OP scalar, or scalar OP x when scalar_first != 0.
// Integer expressions must wrap (use dt_add, dt_sub, dt_mul).

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
                                 size_t offset, const T* x, typename dt_compute<T>::type scalar,
                                 int scalar_first, T* out) {
    // Two loops, so the operand order is not re-tested per element.
    if (scalar_first) {
        dt_map(n, out, [&](size_t i) { return Op::apply(scalar, x[dt_offset(i, rank, dims, strides, offset)]); });
    } else {
        dt_map(n, out, [&](size_t i) { return Op::apply(x[dt_offset(i, rank, dims, strides, offset)], scalar); });
    }
}

#define DT_BINARY_KERNELS(op, name, TYPE, ...)                                                             \
    struct dt_binary_##op##_##name {                                                                       \
        typedef dt_compute<TYPE>::type T;                                                                 \
        __device__ static TYPE apply(T a, T b) { return dt_narrow<TYPE>((T)(__VA_ARGS__)); }              \
    };                                                                                                     \
    extern "C" __global__ void binary_##op##_##name(                                                       \
        size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides, size_t lhs_offset,          \
        const size_t* rhs_strides, size_t rhs_offset, const TYPE* lhs, const TYPE* rhs, TYPE* out) {      \
        dt_binary<dt_binary_##op##_##name>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides,            \
                                            rhs_offset, lhs, rhs, out);                                    \
    }                                                                                                      \
    extern "C" __global__ void binary_##op##_rows_##name(                                                  \
        size_t rows, size_t cols, size_t lhs_row, size_t lhs_col, size_t lhs_offset, size_t rhs_row,      \
        size_t rhs_col, size_t rhs_offset, const TYPE* lhs, const TYPE* rhs, TYPE* out) {                 \
        dt_binary_rows<dt_binary_##op##_##name>(rows, cols, lhs_row, lhs_col, lhs_offset, rhs_row,         \
                                                 rhs_col, rhs_offset, lhs, rhs, out);                      \
    }                                                                                                      \
    extern "C" __global__ void binary_##op##_scalar_##name(size_t n, size_t rank, const size_t* dims,     \
                                                           const size_t* strides, size_t offset,          \
                                                           const TYPE* x, dt_compute<TYPE>::type scalar,  \
                                                           int scalar_first, TYPE* out) {                 \
        dt_binary_scalar<dt_binary_##op##_##name>(n, rank, dims, strides, offset, x, scalar, scalar_first, \
                                                   out);                                                   \
    }

#define DT_BINARY_FLOAT(op, ...)                                                                           \
    DT_BINARY_KERNELS(op, f32, float, __VA_ARGS__)                                                         \
    DT_BINARY_KERNELS(op, f64, double, __VA_ARGS__)                                                        \
    DT_BINARY_KERNELS(op, bf16, dt_bf16, __VA_ARGS__)                                                      \
    DT_BINARY_KERNELS(op, f16, dt_f16, __VA_ARGS__)
#define DT_BINARY_ALL(op, ...)                                                                             \
    DT_BINARY_FLOAT(op, __VA_ARGS__)                                                                       \
    DT_BINARY_KERNELS(op, i64, long long, __VA_ARGS__)                                                     \
    DT_BINARY_KERNELS(op, u8, unsigned char, __VA_ARGS__)

// ---------------------------------------------------------------------------
// Predicates of two tensors in one line (comparisons, mask logic)
//
// The Rust side declares each comparison once (a type implementing
// `devtensor::ops::compare::CompareOp`); its kernels are one line in
// compare.cu or in a user's own source:
//
//   DT_COMPARE_ALL(lt, a < b)                  // f32, f64, i64 and u8
//   DT_COMPARE_FLOAT(near, fabs(a - b) <= 0.1) // f32 and f64
//
// define, for each type T, with the predicate of the elements `a` (left)
// and `b` (right), and `T` naming the compute type in it (as for binary
// ops; the scalar parameter has the compute type):
//   compare_<op>_<T>(size_t n, size_t rank, const size_t* dims,
//                    const size_t* lhs_strides, size_t lhs_offset,
//                    const size_t* rhs_strides, size_t rhs_offset,
//                    const T* lhs, const T* rhs, unsigned char* out)
//       out[i] = 1 where the predicate holds at row-major position i of the
//       broadcast shape `dims`, else 0; both layouts are broadcast to it.
//   compare_<op>_scalar_<T>(size_t n, size_t rank, const size_t* dims,
//                           const size_t* strides, size_t offset,
//                           const T* x, T scalar, unsigned char* out)
//       the predicate of x (as `a`) and scalar (as `b`).

template <typename Op>
__device__ void dt_compare(size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides,
                           size_t lhs_offset, const size_t* rhs_strides, size_t rhs_offset,
                           const typename Op::S* lhs, const typename Op::S* rhs, unsigned char* out) {
    dt_map(n, out, [&](size_t i) {
        size_t a = lhs_offset, b = rhs_offset;
        dt_offset2(i, rank, dims, lhs_strides, &a, rhs_strides, &b);
        return (unsigned char)(Op::apply(lhs[a], rhs[b]) ? 1 : 0);
    });
}

template <typename Op>
__device__ void dt_compare_scalar(size_t n, size_t rank, const size_t* dims, const size_t* strides,
                                  size_t offset, const typename Op::S* x, typename Op::T scalar,
                                  unsigned char* out) {
    dt_map(n, out, [&](size_t i) {
        return (unsigned char)(Op::apply(x[dt_offset(i, rank, dims, strides, offset)], scalar) ? 1 : 0);
    });
}

#define DT_COMPARE_KERNELS(op, name, TYPE, ...)                                                            \
    struct dt_compare_##op##_##name {                                                                      \
        typedef TYPE S;                                                                                   \
        typedef dt_compute<TYPE>::type T;                                                                 \
        __device__ static bool apply(T a, T b) { return (__VA_ARGS__); }                                  \
    };                                                                                                     \
    extern "C" __global__ void compare_##op##_##name(                                                      \
        size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides, size_t lhs_offset,          \
        const size_t* rhs_strides, size_t rhs_offset, const TYPE* lhs, const TYPE* rhs,                   \
        unsigned char* out) {                                                                              \
        dt_compare<dt_compare_##op##_##name>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides,          \
                                             rhs_offset, lhs, rhs, out);                                   \
    }                                                                                                      \
    extern "C" __global__ void compare_##op##_scalar_##name(size_t n, size_t rank, const size_t* dims,     \
                                                            const size_t* strides, size_t offset,         \
                                                            const TYPE* x, dt_compute<TYPE>::type scalar, \
                                                            unsigned char* out) {                         \
        dt_compare_scalar<dt_compare_##op##_##name>(n, rank, dims, strides, offset, x, scalar, out);       \
    }

#define DT_COMPARE_FLOAT(op, ...)                                                                          \
    DT_COMPARE_KERNELS(op, f32, float, __VA_ARGS__)                                                        \
    DT_COMPARE_KERNELS(op, f64, double, __VA_ARGS__)                                                       \
    DT_COMPARE_KERNELS(op, bf16, dt_bf16, __VA_ARGS__)                                                     \
    DT_COMPARE_KERNELS(op, f16, dt_f16, __VA_ARGS__)
#define DT_COMPARE_ALL(op, ...)                                                                            \
    DT_COMPARE_FLOAT(op, __VA_ARGS__)                                                                      \
    DT_COMPARE_KERNELS(op, i64, long long, __VA_ARGS__)                                                    \
    DT_COMPARE_KERNELS(op, u8, unsigned char, __VA_ARGS__)

#endif // DEVTENSOR_COMMON_CUH
