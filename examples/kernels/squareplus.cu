// The CUDA half of examples/custom_op.rs: `unary_squareplus_f32` and
// `unary_squareplus_f64`, in one line (see "Element-wise functions of one
// tensor in one line" in kernels/common.cuh). devtensor compiles this text
// with NVRTC, after common.cuh, the first time the op runs on a GPU; the
// emulated GPU compiles it in at build time.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

DT_UNARY_FLOAT(squareplus, (x + dt_sqrt(x * x + (T)4)) / (T)2)
