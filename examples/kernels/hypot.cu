// The CUDA half of `Hypot` in examples/custom_op.rs: the three kernels of a
// binary op (broadcast, rows and scalar) for f32 and f64, in one line (see
// "Element-wise functions of two tensors in one line" in kernels/common.cuh).
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

// CUDA's hypot, as the CPU's f64::hypot: no overflow for large sides, and
// hypot(inf, NaN) = inf (IEEE 754; PyTorch's torch.hypot agrees).
DT_BINARY_FLOAT(hypot, hypot(a, b))
