// Force-included (`g++ -include cuda_shim.h`) before every kernel source, so
// that CUDA C written for NVRTC compiles as host C++ and runs on the emulator's
// fibers. Only the device features of the kernel contract exist here; anything
// else is left undeclared (or poisoned) so that it fails the build instead of
// running with a silently different meaning.
#pragma once

#define DEVTENSOR_EMULATED 1

#include <math.h>
#include <cmath>
#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <limits>
#include <type_traits>
#include <utility>

// ---- qualifiers -------------------------------------------------------------
// Kernels are called through generated trampolines, never directly. Each .cu
// file is compiled inside an anonymous namespace (see build.rs), so helpers of
// the same name in two files do not collide at link time.
#ifdef DEVTENSOR_EMU_SCAN
// build.rs preprocesses every source once with this marker to find kernel
// names, including those built by token pasting in macros.
#define __global__ __devtensor_emu_kernel__
#else
#define __global__
#endif
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
// One block runs at a time on an OS thread, and all its GPU threads are fibers
// of that OS thread, so a thread-local static is exactly block-wide storage.
// `extern __shared__` (dynamic shared memory) becomes `extern static`, a
// compile error, which is what the contract wants.
#define __shared__ static thread_local

struct uint3 {
    unsigned int x, y, z;
};
// CUDA's 16-byte vector, for loads and stores of eight 16-bit elements at
// once; aligned as on the GPU, so a misaligned vector access faults here too
// (with -fno-strict-aliasing, as build.rs compiles the kernels).
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct dim3 {
    unsigned int x, y, z;
};

namespace emu {
// Per-fiber and per-block launch state, maintained by the runtime (runtime.cpp).
extern thread_local const uint3* cur_thread_idx;
extern thread_local unsigned cur_flat_tid;
extern thread_local uint3 cur_block_idx;
extern thread_local dim3 cur_block_dim;
extern thread_local dim3 cur_grid_dim;
// Scratch of the current block used to exchange warp-shuffle values.
extern thread_local uint64_t shfl_slots[1024];

// Suspend the calling GPU thread until every live thread of its block
// (block_barrier) or of its warp (warp_barrier) has arrived.
void block_barrier();
void warp_barrier();
// Abort the launch with a message (reported by the driver as a launch error).
[[noreturn]] void fail(const char* what);
}  // namespace emu

#define threadIdx (*::emu::cur_thread_idx)
#define blockIdx (::emu::cur_block_idx)
#define blockDim (::emu::cur_block_dim)
#define gridDim (::emu::cur_grid_dim)
#define warpSize 32

inline void __syncthreads() { ::emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) ::emu::fail("__syncwarp with a partial mask is not emulated");
    ::emu::warp_barrier();
}

namespace emu {
template <class T>
inline T shuffle(unsigned mask, T var, unsigned src_of_lane_kind, int arg, int width) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles are emulated for scalars up to 8 bytes only");
    if (mask != 0xffffffffu) fail("warp shuffle with a mask other than 0xffffffff is not emulated");
    if (width <= 0 || width > 32 || (width & (width - 1)) != 0) fail("warp shuffle width must be a power of two <= 32");
    const unsigned tid = cur_flat_tid;
    std::memcpy(&shfl_slots[tid], &var, sizeof(T));
    warp_barrier();
    const unsigned lane = tid % 32u;
    const unsigned w = static_cast<unsigned>(width);
    unsigned src;
    bool own;
    if (src_of_lane_kind == 0) {  // down
        src = lane + static_cast<unsigned>(arg);
        own = (lane % w) + static_cast<unsigned>(arg) >= w;
    } else {  // xor
        src = lane ^ static_cast<unsigned>(arg);
        own = src >= 32u || (src / w) > (lane / w);
    }
    const unsigned src_tid = tid - lane + src;
    const unsigned nthreads = cur_block_dim.x * cur_block_dim.y * cur_block_dim.z;
    T result = var;
    // Lanes past the end of a partial last warp do not exist: keep our own value.
    if (!own && src_tid < nthreads) std::memcpy(&result, &shfl_slots[src_tid], sizeof(T));
    // Nobody may overwrite a slot before every lane has read it.
    warp_barrier();
    return result;
}
}  // namespace emu

template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return ::emu::shuffle(mask, var, 0, static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    return ::emu::shuffle(mask, var, 1, lane_mask, width);
}

// ---- tensor cores -------------------------------------------------------------
// The one tensor-core instruction kernels use, PTX's warp-wide
// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32`, reached
// only through common.cuh's dt_mma_16816. Each lane holds its part of the
// operands in the PTX ISA's fragment layout (lane = 4 g + t; two 16-bit
// values per register, the lower column or row in the low half):
//   A (16x16, row-major): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1],
//                         a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
//   B (16x8, column-major): b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C, D (16x8, f32): d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1]
// The stand-in gathers every lane's registers through a block scratch and
// each lane computes its own four sums, so a kernel that puts an element in
// the wrong register computes a wrong product here as it would on the GPU.
// Products of 16-bit values are exact in float; the sums run in float, in
// order of k (the hardware's order and internal rounding are unspecified).
namespace emu {
extern thread_local uint32_t mma_slots[1024][6];
extern thread_local uint64_t mma_calls[1024];

inline float bf16_bits_to_float(uint32_t b) {
    uint32_t x = b << 16;
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}
inline float f16_bits_to_float(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        x = sign | ((exp + 112u) << 23) | (man << 13);
    } else {
        // Zero or subnormal: exactly man * 2^-24.
        float f = std::ldexp(static_cast<float>(man), -24);
        return sign ? -f : f;
    }
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2], bool f16) {
    const unsigned nthreads = cur_block_dim.x * cur_block_dim.y * cur_block_dim.z;
    if (nthreads % 32u != 0) fail("mma.sync needs whole warps: the block size is not a multiple of 32");
    const unsigned tid = cur_flat_tid, lane = tid % 32u, first = tid - lane;
    for (int r = 0; r < 4; ++r) mma_slots[tid][r] = a[r];
    mma_slots[tid][4] = b[0];
    mma_slots[tid][5] = b[1];
    const uint64_t call = ++mma_calls[tid];
    warp_barrier();
    for (unsigned l = 0; l < 32; ++l)
        if (mma_calls[first + l] != call) fail("mma.sync reached by only part of a warp (divergent or exited lanes)");
    auto value = [f16](uint32_t reg, unsigned high) {
        const uint32_t bits = (reg >> (16 * high)) & 0xffffu;
        return f16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
    };
    // A[r][k] and B[k][n], found in the lane and register the layout puts them.
    auto a_at = [&](unsigned r, unsigned k) {
        const unsigned owner = 4 * (r % 8) + (k % 8) / 2, reg = r / 8 + 2 * (k / 8);
        return value(mma_slots[first + owner][reg], k % 2);
    };
    auto b_at = [&](unsigned k, unsigned n) {
        const unsigned owner = 4 * n + (k % 8) / 2, reg = 4 + k / 8;
        return value(mma_slots[first + owner][reg], k % 2);
    };
    const unsigned g = lane / 4, t = lane % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const unsigned r = g + 8 * (i / 2), n = 2 * t + i % 2;
        float s = d[i];
        for (unsigned k = 0; k < 16; ++k) s += a_at(r, k) * b_at(k, n);
        out[i] = s;
    }
    // Nobody may overwrite a slot before every lane has read it.
    warp_barrier();
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}
}  // namespace emu

// ---- atomics ----------------------------------------------------------------
// Blocks run in parallel on OS threads, so atomics must be real atomics.
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <class F, class U>
inline F emu_atomic_add_float(F* p, F v) {
    static_assert(sizeof(F) == sizeof(U), "size mismatch");
    U old_bits = __atomic_load_n(reinterpret_cast<U*>(p), __ATOMIC_SEQ_CST);
    for (;;) {
        F old_val;
        std::memcpy(&old_val, &old_bits, sizeof(F));
        F new_val = old_val + v;
        U new_bits;
        std::memcpy(&new_bits, &new_val, sizeof(F));
        if (__atomic_compare_exchange_n(reinterpret_cast<U*>(p), &old_bits, new_bits, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return old_val;
    }
}
inline float atomicAdd(float* p, float v) { return emu_atomic_add_float<float, uint32_t>(p, v); }
inline double atomicAdd(double* p, double v) { return emu_atomic_add_float<double, uint64_t>(p, v); }

// ---- math -------------------------------------------------------------------
// CUDA's integer and float min/max overloads (NVRTC has them built in).
template <class T, class = typename std::enable_if<std::is_arithmetic<T>::value>::type>
inline T min(T a, T b) { return b < a ? b : a; }
template <class T, class = typename std::enable_if<std::is_arithmetic<T>::value>::type>
inline T max(T a, T b) { return a < b ? b : a; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
template <class T>
inline T __ldg(const T* p) { return *p; }

// Device code may not print; kernels that try must not build here either.
#pragma GCC poison printf
