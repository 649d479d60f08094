// Comparisons producing masks, mask logic and selection by mask: serves the
// Rust op family `ops::compare` (`CompareKernel::{compare, compare_scalar,
// logical_not, where_cond}`).
//
// Masks are u8 tensors holding 1 for true and 0 for false. Comparisons follow
// IEEE 754 (NaN compares false, except under ne); mask inputs read any
// non-zero byte as true; every mask output is exactly 0 or 1.
//
// Kernels (T = f32, f64, i64, u8; rank 0 = every operand dense, see common.cuh):
//   compare_<op>_<T> and compare_<op>_scalar_<T>: one DT_COMPARE_ALL line per
//       op below (common.cuh describes the kernels); `op` is its Rust type's
//       `CompareOp::NAME`.
//   compare_not_u8(size_t n, size_t rank, const size_t* dims, const size_t* strides,
//                  size_t offset, const unsigned char* x, unsigned char* out)
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

DT_COMPARE_ALL(eq, a == b)
DT_COMPARE_ALL(ne, a != b)
DT_COMPARE_ALL(lt, a < b)
DT_COMPARE_ALL(le, a <= b)
DT_COMPARE_ALL(gt, a > b)
DT_COMPARE_ALL(ge, a >= b)
DT_COMPARE_ALL(logical_and, a != 0 && b != 0)
DT_COMPARE_ALL(logical_or, a != 0 || b != 0)

#define WHERE_KERNEL(name, T)                                                                              \
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
DT_FOR_EACH_DTYPE(WHERE_KERNEL)

extern "C" __global__ void compare_not_u8(size_t n, size_t rank, const size_t* dims, const size_t* strides,
                                          size_t offset, const unsigned char* x, unsigned char* out) {
    dt_map(n, out, [&](size_t i) { return (unsigned char)(x[dt_offset(i, rank, dims, strides, offset)] == 0 ? 1 : 0); });
}
