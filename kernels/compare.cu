// Comparisons producing masks, mask logic and selection by mask: serves the
// Rust op family `ops::compare` (`CompareKernel::{compare, compare_scalar,
// logical_not, logical, where_cond}`).
//
// Masks are u8 tensors holding 1 for true and 0 for false. Comparisons follow
// IEEE 754 (NaN compares false, except under ne); mask inputs read any
// non-zero byte as true; every mask output is exactly 0 or 1.
//
// Kernels (OP = eq, ne, lt, le, gt, ge; T = f32, f64, i64, u8; rank 0 = every
// operand dense, see common.cuh):
//   compare_<OP>_<T>(size_t n, size_t rank, const size_t* dims,
//                    const size_t* lhs_strides, size_t lhs_offset,
//                    const size_t* rhs_strides, size_t rhs_offset,
//                    const T* lhs, const T* rhs, unsigned char* out)
//       out[i] = lhs OP rhs at row-major position i of the broadcast shape
//       `dims`; both layouts are already broadcast to it.
//   compare_<OP>_scalar_<T>(size_t n, size_t rank, const size_t* dims,
//                           const size_t* strides, size_t offset,
//                           const T* x, T scalar, unsigned char* out)
//       out[i] = x OP scalar.
//   compare_not_u8(size_t n, size_t rank, const size_t* dims, const size_t* strides,
//                  size_t offset, const unsigned char* x, unsigned char* out)
//   compare_and_u8 / compare_or_u8: same arguments as compare_<OP>_u8.
//   compare_where_<T>(size_t n, size_t rank, const size_t* dims,
//                     const size_t* cond_strides, size_t cond_offset,
//                     const size_t* true_strides, size_t true_offset,
//                     const size_t* false_strides, size_t false_offset,
//                     const unsigned char* cond, const T* on_true,
//                     const T* on_false, T* out)
//       out[i] = cond != 0 ? on_true : on_false, all three broadcast to `dims`.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

struct DtEq {
    template <typename T> __device__ static bool apply(T a, T b) { return a == b; }
};
struct DtNe {
    template <typename T> __device__ static bool apply(T a, T b) { return a != b; }
};
struct DtLt {
    template <typename T> __device__ static bool apply(T a, T b) { return a < b; }
};
struct DtLe {
    template <typename T> __device__ static bool apply(T a, T b) { return a <= b; }
};
struct DtGt {
    template <typename T> __device__ static bool apply(T a, T b) { return a > b; }
};
struct DtGe {
    template <typename T> __device__ static bool apply(T a, T b) { return a >= b; }
};
struct DtAnd {
    template <typename T> __device__ static bool apply(T a, T b) { return a != 0 && b != 0; }
};
struct DtOr {
    template <typename T> __device__ static bool apply(T a, T b) { return a != 0 || b != 0; }
};

template <typename Op, typename T>
__device__ void dt_compare(size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides,
                           size_t lhs_offset, const size_t* rhs_strides, size_t rhs_offset, const T* lhs,
                           const T* rhs, unsigned char* out) {
    dt_map(n, out, [&](size_t i) {
        size_t a = lhs_offset, b = rhs_offset;
        dt_offset2(i, rank, dims, lhs_strides, &a, rhs_strides, &b);
        return (unsigned char)(Op::apply(lhs[a], rhs[b]) ? 1 : 0);
    });
}

#define COMPARE_OP(op, Op, name, T)                                                                        \
    extern "C" __global__ void compare_##op##_##name(                                                      \
        size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides, size_t lhs_offset,          \
        const size_t* rhs_strides, size_t rhs_offset, const T* lhs, const T* rhs, unsigned char* out) {   \
        dt_compare<Op>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides, rhs_offset, lhs, rhs, out);   \
    }                                                                                                      \
    extern "C" __global__ void compare_##op##_scalar_##name(size_t n, size_t rank, const size_t* dims,    \
                                                            const size_t* strides, size_t offset,         \
                                                            const T* x, T scalar, unsigned char* out) {   \
        dt_map(n, out, [&](size_t i) {                                                                     \
            return (unsigned char)(Op::apply(x[dt_offset(i, rank, dims, strides, offset)], scalar) ? 1 : 0); \
        });                                                                                                \
    }

#define COMPARE_KERNELS(name, T)                                                                           \
    COMPARE_OP(eq, DtEq, name, T)                                                                          \
    COMPARE_OP(ne, DtNe, name, T)                                                                          \
    COMPARE_OP(lt, DtLt, name, T)                                                                          \
    COMPARE_OP(le, DtLe, name, T)                                                                          \
    COMPARE_OP(gt, DtGt, name, T)                                                                          \
    COMPARE_OP(ge, DtGe, name, T)                                                                          \
    extern "C" __global__ void compare_where_##name(                                                       \
        size_t n, size_t rank, const size_t* dims, const size_t* cond_strides, size_t cond_offset,        \
        const size_t* true_strides, size_t true_offset, const size_t* false_strides, size_t false_offset,  \
        const unsigned char* cond, const T* on_true, const T* on_false, T* out) {                         \
        dt_map(n, out, [&](size_t i) {                                                                     \
            size_t c = cond_offset, t = true_offset, f = false_offset;                                     \
            dt_offset3(i, rank, dims, cond_strides, &c, true_strides, &t, false_strides, &f);              \
            return cond[c] != 0 ? on_true[t] : on_false[f];                                                \
        });                                                                                                \
    }
DT_FOR_EACH_DTYPE(COMPARE_KERNELS)

extern "C" __global__ void compare_not_u8(size_t n, size_t rank, const size_t* dims, const size_t* strides,
                                          size_t offset, const unsigned char* x, unsigned char* out) {
    dt_map(n, out, [&](size_t i) { return (unsigned char)(x[dt_offset(i, rank, dims, strides, offset)] == 0 ? 1 : 0); });
}

extern "C" __global__ void compare_and_u8(size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides,
                                          size_t lhs_offset, const size_t* rhs_strides, size_t rhs_offset,
                                          const unsigned char* lhs, const unsigned char* rhs,
                                          unsigned char* out) {
    dt_compare<DtAnd>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides, rhs_offset, lhs, rhs, out);
}

extern "C" __global__ void compare_or_u8(size_t n, size_t rank, const size_t* dims, const size_t* lhs_strides,
                                         size_t lhs_offset, const size_t* rhs_strides, size_t rhs_offset,
                                         const unsigned char* lhs, const unsigned char* rhs,
                                         unsigned char* out) {
    dt_compare<DtOr>(n, rank, dims, lhs_strides, lhs_offset, rhs_strides, rhs_offset, lhs, rhs, out);
}
