// Test kernels for the emulated driver. Names follow `<family>_<op>_<dtype>`
// with the family `emutest`.
#include "emutest_common.cuh"

// Grid-stride elementwise: y = a * x + y.
extern "C" __global__ void emutest_axpy_f32(const float* x, float* y, float a, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// The same kernel with a deliberate indexing bug (the block offset is
// missing): the mutation check must see wrong results.
extern "C" __global__ void emutest_axpybroken_f32(const float* x, float* y, float a, size_t n) {
    for (size_t i = threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// Block reduction: grid-stride partial sums, warp shuffles, one __shared__
// slot per warp, __syncthreads, and a last warp-level pass. One partial sum
// per block. Needs blockDim.x a multiple of 32, at most 1024.
extern "C" __global__ void emutest_blocksum_f32(const float* x, float* partial, size_t n) {
    __shared__ float warp_sums[32];
    float v = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        v += x[i];
    }
    v = emutest_warp_sum(v);
    const unsigned lane = threadIdx.x % 32;
    const unsigned warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const unsigned nwarps = blockDim.x / 32;
        v = lane < nwarps ? warp_sums[lane] : 0.0f;
        v = emutest_warp_sum(v);
        if (lane == 0) partial[blockIdx.x] = v;
    }
}

// Butterfly all-reduce inside each warp: every lane ends with its warp's max.
extern "C" __global__ void emutest_warpmax_f64(const double* x, double* y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    double v = i < n ? x[i] : -INFINITY;
    for (int m = 16; m > 0; m >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffff, v, m));
    if (i < n) y[i] = v;
}

// atomicAdd on double and unsigned long long: a total and a count of positives.
extern "C" __global__ void emutest_atomicsum_f64(const double* x, double* total, unsigned long long* positives, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        atomicAdd(total, x[i]);
        if (x[i] > 0.0) atomicAdd(positives, 1ull);
    }
}

// Writes one element past the end: the emulator must report it.
extern "C" __global__ void emutest_oobwrite_f32(float* y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + 1] = 1.0f;
}

// 2D grid and block geometry: y[row * cols + col] = row * 1000 + col.
extern "C" __global__ void emutest_iota2d_i64(long long* y, size_t rows, size_t cols) {
    size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    if (row < rows && col < cols) y[row * cols + col] = (long long)(row * 1000 + col);
}

// Even lanes wait at __syncthreads while odd lanes wait at a shuffle: on a
// GPU this hangs or is undefined; the emulator must report it.
extern "C" __global__ void emutest_divergentsync_f32(float* y) {
    float v = y[threadIdx.x];
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    } else {
        v = __shfl_xor_sync(0xffffffff, v, 1);
    }
    y[threadIdx.x] = v;
}

// 160 KiB of locals per thread: more than an emulator fiber's stack, which the
// emulator must report rather than run over neighbouring memory.
extern "C" __global__ void emutest_bigstack_f32(float* y, size_t n) {
    volatile float local[40960];
    for (size_t i = 0; i < 40960; i += 1024) local[i] = (float)i;
    y[threadIdx.x % n] = local[threadIdx.x % 40960];
}

// Reverses each block's slice through __shared__ memory. With `sync` = 0 the
// __syncthreads between the write and the read is skipped: a data race the
// emulator's alternating thread order must turn into wrong results.
extern "C" __global__ void emutest_reverse_f32(const float* x, float* y, size_t n, int sync) {
    __shared__ float tile[256];
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    if (sync) __syncthreads();
    if (i < n) y[i] = tile[blockDim.x - 1 - threadIdx.x];
}
