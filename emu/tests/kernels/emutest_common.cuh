// Shared helpers of the emulator's own test kernels (written to the same
// contract as the project's kernels/: NVRTC and the emulator's shim alike).
#pragma once

#ifndef INFINITY
// NVRTC has no <cmath>; the emulator's shim brings the real one.
#define INFINITY __int_as_float(0x7f800000)
#endif

__device__ __forceinline__ float emutest_warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}
