// The CUDA half of `IsClose` in examples/custom_op.rs: the tensor and
// scalar kernels of a comparison for f32 and f64, in one line (see
// "Predicates of two tensors in one line" in kernels/common.cuh), written
// as the Rust `apply` is. `b - b == 0` says that b is finite (NVRTC has no
// isfinite): an infinite b would make the tolerance infinite too.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

DT_COMPARE_FLOAT(is_close, a == b || (b - b == (T)0 && fabs(a - b) <= (T)1e-8 + (T)1e-5 * fabs(b)))
