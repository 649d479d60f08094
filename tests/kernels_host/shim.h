// A minimal stand-in for the emulated GPU's shim header, only for
// tests/kernels_host.rs: it runs the kernels of kernels/*.cu as host C++ so
// that their results can be checked before the real emulator (issue 4)
// exists. One OS thread per GPU thread, blocks one after another, so that
// __syncthreads can be a std::barrier over the block and `__shared__` can be
// a function-level `static` (only one block is alive at a time). Slow, and
// only meant for the small launches of semantics.cpp.
#define DEVTENSOR_EMULATED 1
#include <cstddef>
#include <cmath>
#include <cstring>
#include <barrier>
#include <mutex>
#include <memory>
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
extern thread_local dim3_ threadIdx, blockIdx;
extern dim3_ blockDim, gridDim;
#define __global__
#define __device__
#define __shared__ static
extern std::barrier<>* g_block_barrier;
extern std::barrier<>* g_warp_barrier[32];
extern unsigned long long g_slots[32][32];
extern std::mutex g_atomic;
inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }
template <typename T> T __shfl_down_sync(unsigned mask, T v, int d) {
    if (mask != 0xffffffffu) throw 1;
    unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    std::memcpy(&g_slots[w][lane], &v, sizeof(T));
    g_warp_barrier[w]->arrive_and_wait();
    T r = v;
    if (lane + d < 32) std::memcpy(&r, &g_slots[w][lane + d], sizeof(T));
    g_warp_barrier[w]->arrive_and_wait();
    return r;
}
template <typename T> T atomicAdd(T* p, T v) { std::lock_guard<std::mutex> g(g_atomic); T old = *p; *p = old + v; return old; }
