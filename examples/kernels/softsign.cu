// The CUDA half of examples/custom_op.rs: `unary_softsign_f32` and
// `unary_softsign_f64`, in one line (see "Element-wise functions of one
// tensor in one line" in kernels/common.cuh). devtensor compiles this text
// with NVRTC, after common.cuh, the first time the op runs on a GPU; the
// emulated GPU compiles it in at build time.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

DT_UNARY_FLOAT(softsign, x / ((T)1 + (x < (T)0 ? -x : x)))
