// Fused scaled dot-product attention: serves the Rust op family
// `ops::attention` (`AttentionKernel::{attention_forward, attention_backward}`).
// Semantics follow the CPU backend (src/ops/attention/cpu.rs): scores
// s = scale * q . k (+ an additive mask), hidden keys at -inf, weights
// softmax(s) over the keys; a query row that sees no key gets output 0,
// log-sum-exp -inf and no gradient.
//
// Every tensor is dense: q [batch, L, E], k [batch / G, S, E], v [batch / G,
// S, Ev], out and g [batch, L, Ev], lse and the row offsets d [batch, L]:
// G consecutive query problems share one problem's keys and values
// (grouped-query attention; G = 1 otherwise), problem b reading key and
// value problem b / G, and the keys' pass sums over the G. One block
// per row (grid-stride over rows); block size a multiple of 32, at most
// 1024; E and Ev at most DT_ATTENTION_COLUMNS * blockDim.x (each thread keeps
// that many output columns in registers). No [L, S] matrix is ever stored:
// keys are taken blockDim.x at a time, each thread scoring one, and the
// output is updated with the chunk's weights (an online softmax).
//
// The mask (`mask_kind`): 0 none, 1 causal (key j visible to query i when
// j <= i), 2 keep (a byte per (problem, i, j), visible where non-zero), 3
// add (a T per (problem, i, j) added to the score). Problem b's mask matrix
// starts at dt_offset(b, mrank, mdims, mstrides, moffset) and its (i, j)
// element is mrow * i + mcol * j further.
//
// Kernels (T = f32, f64):
//   attention_forward_<T>(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, T scale,
//           const T* q, const T* k, const T* v, MASK, T* out, T* lse)
//   attention_backward_queries_<T>(same sizes, scale, q, k, v, MASK,
//           const T* out, const T* lse, const T* g, T* dq, T* d)
//       dq, and d = g . out per row (the softmax gradient's offset)
//   attention_backward_keys_<T>(same sizes, scale, q, k, v, MASK,
//           const T* lse, const T* g, const T* d, T* dk, T* dv)
//       one block per key row: dk and dv summed over the queries of the
//       key's G query problems
// where MASK = int mask_kind, const unsigned char* keep, const T* add,
//              size_t mrank, const size_t* mdims, const size_t* mstrides,
//              size_t moffset, size_t mrow, size_t mcol.
//
// Tiled kernels, for E and Ev up to DT_TILE_WIDTH (the common head
// widths): the same three passes with the same arguments, named
// attention_tiled_forward_<T>, attention_tiled_backward_queries_<T> and
// attention_tiled_backward_keys_<T>. A block takes a tile of rows (BQ
// query rows, or BK key rows for the keys' pass; BQ = BK = 32 for f32, 16
// for f64) and walks the other side a tile at a time through shared
// memory, so that each key and value row is read from global memory once
// per tile of queries instead of once per query. Four threads share a row
// (blockDim.x = 4 * BQ, exactly): each scores a quarter of the tile's
// keys, the four combine by warp shuffles, and each keeps a quarter of the
// row's output columns (c = part + 4 t) in registers.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

#define DT_ATTENTION_COLUMNS 4

struct DtAttentionMask {
    int kind;
    const unsigned char* keep;
    const void* add;
    size_t base, row, col;
};

template <typename T> __device__ inline T dt_dot(const T* a, const T* b, size_t n) {
    T s = 0;
    for (size_t c = 0; c < n; ++c) s += a[c] * b[c];
    return s;
}

template <typename T>
__device__ inline T dt_attention_score(const T* q, const T* k, size_t width, T scale, const DtAttentionMask& m,
                                       size_t i, size_t j) {
    if (m.kind == 1 && j > i) return dt_lowest<T>();
    if (m.kind == 2 && m.keep[m.base + i * m.row + j * m.col] == 0) return dt_lowest<T>();
    T s = dt_dot(q, k, width) * scale;
    if (m.kind == 3) s += ((const T*)m.add)[m.base + i * m.row + j * m.col];
    return s;
}

/// How many of the S keys query i can see at all (the causal prefix).
__device__ inline size_t dt_attention_visible(const DtAttentionMask& m, size_t i, size_t S) {
    return m.kind == 1 ? (i + 1 < S ? i + 1 : S) : S;
}

/// acc[t] += sum over jj < chunk of w[jj] * rows[jj * width + c], for this
/// thread's columns c = threadIdx.x + t * blockDim.x below width: a chunk's
/// weighted sum of rows, each thread keeping its columns in registers.
template <typename T>
__device__ inline void dt_add_weighted_rows(T* acc, const T* w, const T* rows, size_t width, size_t chunk) {
    for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
        size_t c = threadIdx.x + t * blockDim.x;
        if (c >= width) break;
        T a = acc[t];
        for (size_t jj = 0; jj < chunk; ++jj) a += w[jj] * rows[jj * width + c];
        acc[t] = a;
    }
}

template <typename T>
__device__ void dt_attention_forward(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                     const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                     const size_t* mdims, const size_t* mstrides, size_t moffset, T* out, T* lse,
                                     T* weights, T* scratch) {
    for (size_t r = blockIdx.x; r < batch * L; r += gridDim.x) {
        size_t b = r / L, i = r % L, bk = b / G;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        const T* qi = q + r * E;
        T acc[DT_ATTENTION_COLUMNS] = {0};
        T run_max = dt_lowest<T>(), run_sum = 0;
        size_t n = dt_attention_visible(m, i, S);
        for (size_t j0 = 0; j0 < n; j0 += blockDim.x) {
            size_t j = j0 + threadIdx.x;
            T s = j < n ? dt_attention_score(qi, k + (bk * S + j) * E, E, scale, m, i, j) : dt_lowest<T>();
            T chunk_max = dt_block_reduce<DtMax>(s, scratch);
            T new_max = dt_max(run_max, chunk_max);
            // Until a visible key comes, there is nothing to rescale.
            T keep = new_max == dt_lowest<T>() ? (T)1 : dt_exp(run_max - new_max);
            T p = s == dt_lowest<T>() ? (T)0 : dt_exp(s - new_max);
            weights[threadIdx.x] = p;
            run_sum = run_sum * keep + dt_block_reduce<DtSum>(p, scratch);
            size_t chunk = n - j0 < blockDim.x ? n - j0 : blockDim.x;
            for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) acc[t] *= keep;
            dt_add_weighted_rows(acc, weights, v + (bk * S + j0) * Ev, Ev, chunk);
            run_max = new_max;
            // Every thread has read the weights before the next chunk writes them.
            __syncthreads();
        }
        for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
            size_t c = threadIdx.x + t * blockDim.x;
            if (c < Ev) out[r * Ev + c] = run_sum > 0 ? acc[t] / run_sum : (T)0;
        }
        if (threadIdx.x == 0) lse[r] = run_sum > 0 ? run_max + dt_log(run_sum) : dt_lowest<T>();
    }
}

template <typename T>
__device__ void dt_attention_backward_queries(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev,
                                              T scale, const T* q, const T* k, const T* v, DtAttentionMask m,
                                              size_t mrank, const size_t* mdims, const size_t* mstrides,
                                              size_t moffset, const T* out, const T* lse, const T* g, T* dq, T* d,
                                              T* grads, T* scratch) {
    for (size_t r = blockIdx.x; r < batch * L; r += gridDim.x) {
        size_t b = r / L, i = r % L, bk = b / G;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        const T* qi = q + r * E;
        const T* gi = g + r * Ev;
        T partial = 0;
        for (size_t c = threadIdx.x; c < Ev; c += blockDim.x) partial += gi[c] * out[r * Ev + c];
        T offset = dt_block_reduce<DtSum>(partial, scratch);
        if (threadIdx.x == 0) d[r] = offset;
        T acc[DT_ATTENTION_COLUMNS] = {0};
        T row_lse = lse[r];
        size_t n = row_lse == dt_lowest<T>() ? 0 : dt_attention_visible(m, i, S);
        for (size_t j0 = 0; j0 < n; j0 += blockDim.x) {
            size_t j = j0 + threadIdx.x;
            T ds = 0;
            if (j < n) {
                T s = dt_attention_score(qi, k + (bk * S + j) * E, E, scale, m, i, j);
                T p = s == dt_lowest<T>() ? (T)0 : dt_exp(s - row_lse);
                ds = p * (dt_dot(gi, v + (bk * S + j) * Ev, Ev) - offset) * scale;
            }
            grads[threadIdx.x] = ds;
            __syncthreads();
            size_t chunk = n - j0 < blockDim.x ? n - j0 : blockDim.x;
            dt_add_weighted_rows(acc, grads, k + (bk * S + j0) * E, E, chunk);
            __syncthreads();
        }
        for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
            size_t c = threadIdx.x + t * blockDim.x;
            if (c < E) dq[r * E + c] = acc[t];
        }
    }
}

template <typename T>
__device__ void dt_attention_backward_keys(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                           const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                           const size_t* mdims, const size_t* mstrides, size_t moffset,
                                           const T* lse, const T* g, const T* d, T* dk, T* dv, T* weights,
                                           T* grads) {
    for (size_t r = blockIdx.x; r < batch / G * S; r += gridDim.x) {
        size_t bk = r / S, j = r % S;
        const T* kj = k + r * E;
        const T* vj = v + r * Ev;
        T acc_k[DT_ATTENTION_COLUMNS] = {0}, acc_v[DT_ATTENTION_COLUMNS] = {0};
        // Under a causal mask only queries j.. see key j.
        size_t first = m.kind == 1 ? j : 0;
        // Every query problem of the group that shares this key.
        for (size_t b = bk * G; b < (bk + 1) * G; ++b) {
            m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
            for (size_t i0 = first; i0 < L; i0 += blockDim.x) {
                size_t i = i0 + threadIdx.x;
                T p = 0, ds = 0;
                if (i < L && lse[b * L + i] != dt_lowest<T>()) {
                    T s = dt_attention_score(q + (b * L + i) * E, kj, E, scale, m, i, j);
                    p = s == dt_lowest<T>() ? (T)0 : dt_exp(s - lse[b * L + i]);
                    ds = p * (dt_dot(g + (b * L + i) * Ev, vj, Ev) - d[b * L + i]) * scale;
                }
                weights[threadIdx.x] = p;
                grads[threadIdx.x] = ds;
                __syncthreads();
                size_t chunk = L - i0 < blockDim.x ? L - i0 : blockDim.x;
                dt_add_weighted_rows(acc_k, grads, q + (b * L + i0) * E, E, chunk);
                dt_add_weighted_rows(acc_v, weights, g + (b * L + i0) * Ev, Ev, chunk);
                __syncthreads();
            }
        }
        for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
            size_t c = threadIdx.x + t * blockDim.x;
            if (c < E) dk[r * E + c] = acc_k[t];
            if (c < Ev) dv[r * Ev + c] = acc_v[t];
        }
    }
}

#define DT_ATTENTION_MASK_PARAMS                                                                              \
    int mask_kind, const unsigned char *keep, const void *add, size_t mrank, const size_t *mdims,             \
        const size_t *mstrides, size_t moffset, size_t mrow, size_t mcol
#define DT_ATTENTION_MASK DtAttentionMask{mask_kind, keep, add, 0, mrow, mcol}, mrank, mdims, mstrides, moffset

#define ATTENTION_KERNELS(name, T)                                                                            \
    extern "C" __global__ void attention_forward_##name(size_t batch, size_t G, size_t L, size_t S,           \
        size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v, DT_ATTENTION_MASK_PARAMS, T* out,   \
        T* lse) {                                                                                             \
        __shared__ T weights[1024];                                                                           \
        __shared__ T scratch[32];                                                                             \
        dt_attention_forward(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse, weights,     \
                             scratch);                                                                        \
    }                                                                                                         \
    extern "C" __global__ void attention_backward_queries_##name(size_t batch, size_t G, size_t L,            \
        size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,                           \
        DT_ATTENTION_MASK_PARAMS, const T* out, const T* lse, const T* g, T* dq, T* d) {                      \
        __shared__ T grads[1024];                                                                             \
        __shared__ T scratch[32];                                                                             \
        dt_attention_backward_queries(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse,     \
                                      g, dq, d, grads, scratch);                                              \
    }                                                                                                         \
    extern "C" __global__ void attention_backward_keys_##name(size_t batch, size_t G, size_t L, size_t S,     \
        size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v, DT_ATTENTION_MASK_PARAMS,           \
        const T* lse, const T* g, const T* d, T* dk, T* dv) {                                                 \
        __shared__ T weights[1024];                                                                           \
        __shared__ T grads[1024];                                                                             \
        dt_attention_backward_keys(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, lse, g, d, dk,   \
                                   dv, weights, grads);                                                       \
    }

ATTENTION_KERNELS(f32, float)
ATTENTION_KERNELS(f64, double)

// ---------------------------------------------------------------------------
// Tiled kernels (see the header).

#define DT_TILE_WIDTH 64
/// Threads per row of a tile.
#define DT_TILE_PARTS 4

/// Whether query i sees key j (below S) under the mask, as dt_attention_score decides.
__device__ inline bool dt_attention_sees(const DtAttentionMask& m, size_t i, size_t j) {
    if (m.kind == 1) return j <= i;
    if (m.kind == 2) return m.keep[m.base + i * m.row + j * m.col] != 0;
    return true;
}

/// The scaled score of query row qi (shared, padded) and key row kj, with
/// the additive mask; lowest where hidden or out of range.
template <typename T>
__device__ inline T dt_tile_score(const T* qi, const T* kj, size_t width, T scale, const DtAttentionMask& m, size_t i,
                                  size_t j, bool in_range) {
    if (!in_range || !dt_attention_sees(m, i, j)) return dt_lowest<T>();
    T s = 0;
    for (size_t c = 0; c < width; ++c) s += qi[c] * kj[c];
    s *= scale;
    if (m.kind == 3) s += ((const T*)m.add)[m.base + i * m.row + j * m.col];
    return s;
}

/// Copies rows first..first+count (of `total`) of width `width` from the
/// dense `src` into the padded shared `tile`, zeros past `total`.
template <typename T>
__device__ inline void dt_load_tile(T* tile, size_t pitch, const T* src, size_t first, size_t count, size_t total,
                                    size_t width) {
    for (size_t at = threadIdx.x; at < count * width; at += blockDim.x) {
        size_t r = at / width, c = at % width;
        tile[r * pitch + c] = first + r < total ? src[(first + r) * width + c] : (T)0;
    }
}

/// The sum over the DT_TILE_PARTS threads of a row (consecutive lanes).
template <typename T> __device__ inline T dt_row_sum(T v) {
    for (int o = 1; o < DT_TILE_PARTS; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename T> __device__ inline T dt_row_max(T v) {
    for (int o = 1; o < DT_TILE_PARTS; o <<= 1) v = dt_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename T, int BQ, int BK>
__device__ void dt_attention_tiled_forward(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                           const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                           const size_t* mdims, const size_t* mstrides, size_t moffset, T* out,
                                           T* lse, T* qs, T* ks, T* vs, T* ps) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BK + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (L + BQ - 1) / BQ;
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        size_t b = tile / tiles, i0 = (tile % tiles) * BQ, i = i0 + row, bk = b / G;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        dt_load_tile(qs, pitch, q + b * L * E, i0, BQ, L, E);
        T acc[DT_TILE_WIDTH / DT_TILE_PARTS] = {0};
        T run_max = dt_lowest<T>(), run_sum = 0;
        // Under a causal mask the tile's last row sees keys up to i0 + BQ - 1.
        size_t n = m.kind == 1 ? (i0 + BQ < S ? i0 + BQ : S) : S;
        for (size_t j0 = 0; j0 < n; j0 += BK) {
            __syncthreads(); // the last tile's readers are done
            dt_load_tile(ks, pitch, k + bk * S * E, j0, BK, S, E);
            dt_load_tile(vs, pitch, v + bk * S * Ev, j0, BK, S, Ev);
            __syncthreads();
            T s[BK / DT_TILE_PARTS];
            T tile_max = dt_lowest<T>();
            for (int u = 0; u < BK / DT_TILE_PARTS; ++u) {
                size_t jj = part + DT_TILE_PARTS * u, j = j0 + jj;
                s[u] = dt_tile_score(qs + row * pitch, ks + jj * pitch, E, scale, m, i, j, i < L && j < S);
                tile_max = dt_max(tile_max, s[u]);
            }
            T new_max = dt_max(run_max, dt_row_max(tile_max));
            // Until a visible key comes, there is nothing to rescale.
            T keep = new_max == dt_lowest<T>() ? (T)1 : dt_exp(run_max - new_max);
            T sum = 0;
            for (int u = 0; u < BK / DT_TILE_PARTS; ++u) {
                T p = s[u] == dt_lowest<T>() ? (T)0 : dt_exp(s[u] - new_max);
                ps[row * ppitch + part + DT_TILE_PARTS * u] = p;
                sum += p;
            }
            run_sum = run_sum * keep + dt_row_sum(sum);
            run_max = new_max;
            __syncthreads(); // the row's weights are all written
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c >= Ev) break;
                T a = acc[t] * keep;
                for (int jj = 0; jj < BK; ++jj) a += ps[row * ppitch + jj] * vs[jj * pitch + c];
                acc[t] = a;
            }
        }
        if (i < L) {
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c < Ev) out[(b * L + i) * Ev + c] = run_sum > 0 ? acc[t] / run_sum : (T)0;
            }
            if (part == 0) lse[b * L + i] = run_sum > 0 ? run_max + dt_log(run_sum) : dt_lowest<T>();
        }
        __syncthreads(); // the next tile's loads wait for this tile's readers
    }
}

template <typename T, int BQ, int BK>
__device__ void dt_attention_tiled_backward_queries(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev,
                                                    T scale, const T* q, const T* k, const T* v, DtAttentionMask m,
                                                    size_t mrank, const size_t* mdims, const size_t* mstrides,
                                                    size_t moffset, const T* out, const T* lse, const T* g, T* dq,
                                                    T* d, T* qs, T* gs, T* ks, T* vs, T* ps) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BK + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (L + BQ - 1) / BQ;
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        size_t b = tile / tiles, i0 = (tile % tiles) * BQ, i = i0 + row, bk = b / G;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        dt_load_tile(qs, pitch, q + b * L * E, i0, BQ, L, E);
        dt_load_tile(gs, pitch, g + b * L * Ev, i0, BQ, L, Ev);
        __syncthreads();
        // The softmax gradient's offset g . out of this row.
        T partial = 0;
        for (size_t c = part; c < Ev; c += DT_TILE_PARTS) partial += i < L ? gs[row * pitch + c] * out[(b * L + i) * Ev + c] : (T)0;
        T offset = dt_row_sum(partial);
        if (i < L && part == 0) d[b * L + i] = offset;
        T row_lse = i < L ? lse[b * L + i] : dt_lowest<T>();
        T acc[DT_TILE_WIDTH / DT_TILE_PARTS] = {0};
        size_t n = m.kind == 1 ? (i0 + BQ < S ? i0 + BQ : S) : S;
        for (size_t j0 = 0; j0 < n; j0 += BK) {
            __syncthreads();
            dt_load_tile(ks, pitch, k + bk * S * E, j0, BK, S, E);
            dt_load_tile(vs, pitch, v + bk * S * Ev, j0, BK, S, Ev);
            __syncthreads();
            for (int u = 0; u < BK / DT_TILE_PARTS; ++u) {
                size_t jj = part + DT_TILE_PARTS * u, j = j0 + jj;
                T s = dt_tile_score(qs + row * pitch, ks + jj * pitch, E, scale, m, i, j,
                                    i < L && j < S && row_lse != dt_lowest<T>());
                T ds = 0;
                if (s != dt_lowest<T>()) {
                    T dp = 0;
                    for (size_t c = 0; c < Ev; ++c) dp += gs[row * pitch + c] * vs[jj * pitch + c];
                    ds = dt_exp(s - row_lse) * (dp - offset) * scale;
                }
                ps[row * ppitch + jj] = ds;
            }
            __syncthreads();
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c >= E) break;
                T a = acc[t];
                for (int jj = 0; jj < BK; ++jj) a += ps[row * ppitch + jj] * ks[jj * pitch + c];
                acc[t] = a;
            }
        }
        if (i < L) {
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c < E) dq[(b * L + i) * E + c] = acc[t];
            }
        }
        __syncthreads();
    }
}

template <typename T, int BQ, int BK>
__device__ void dt_attention_tiled_backward_keys(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev,
                                                 T scale, const T* q, const T* k, const T* v, DtAttentionMask m,
                                                 size_t mrank, const size_t* mdims, const size_t* mstrides,
                                                 size_t moffset, const T* lse, const T* g, const T* d, T* dk, T* dv,
                                                 T* ks, T* vs, T* qs, T* gs, T* pt, T* dst, T* row_lse, T* row_d) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BQ + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (S + BK - 1) / BK;
    for (size_t tile = blockIdx.x; tile < batch / G * tiles; tile += gridDim.x) {
        size_t bk = tile / tiles, j0 = (tile % tiles) * BK, j = j0 + row;
        dt_load_tile(ks, pitch, k + bk * S * E, j0, BK, S, E);
        dt_load_tile(vs, pitch, v + bk * S * Ev, j0, BK, S, Ev);
        T acc_k[DT_TILE_WIDTH / DT_TILE_PARTS] = {0}, acc_v[DT_TILE_WIDTH / DT_TILE_PARTS] = {0};
        // Under a causal mask only queries j0.. see the tile's keys.
        size_t first = m.kind == 1 ? (j0 / BQ) * BQ : 0;
        // Every query problem of the group that shares these keys.
        for (size_t b = bk * G; b < (bk + 1) * G; ++b) {
            m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
            for (size_t i0 = first; i0 < L; i0 += BQ) {
                __syncthreads();
                dt_load_tile(qs, pitch, q + b * L * E, i0, BQ, L, E);
                dt_load_tile(gs, pitch, g + b * L * Ev, i0, BQ, L, Ev);
                for (size_t r = threadIdx.x; r < BQ; r += blockDim.x) {
                    row_lse[r] = i0 + r < L ? lse[b * L + i0 + r] : dt_lowest<T>();
                    row_d[r] = i0 + r < L ? d[b * L + i0 + r] : (T)0;
                }
                __syncthreads();
                for (int u = 0; u < BQ / DT_TILE_PARTS; ++u) {
                    size_t ii = part + DT_TILE_PARTS * u, i = i0 + ii;
                    T s = dt_tile_score(qs + ii * pitch, ks + row * pitch, E, scale, m, i, j,
                                        i < L && j < S && row_lse[ii] != dt_lowest<T>());
                    T p = 0, ds = 0;
                    if (s != dt_lowest<T>()) {
                        p = dt_exp(s - row_lse[ii]);
                        T dp = 0;
                        for (size_t c = 0; c < Ev; ++c) dp += gs[ii * pitch + c] * vs[row * pitch + c];
                        ds = p * (dp - row_d[ii]) * scale;
                    }
                    pt[row * ppitch + ii] = p;
                    dst[row * ppitch + ii] = ds;
                }
                __syncthreads();
                for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                    size_t c = part + DT_TILE_PARTS * t;
                    if (c < E) {
                        T a = acc_k[t];
                        for (int ii = 0; ii < BQ; ++ii) a += dst[row * ppitch + ii] * qs[ii * pitch + c];
                        acc_k[t] = a;
                    }
                    if (c < Ev) {
                        T a = acc_v[t];
                        for (int ii = 0; ii < BQ; ++ii) a += pt[row * ppitch + ii] * gs[ii * pitch + c];
                        acc_v[t] = a;
                    }
                }
            }
        }
        if (j < S) {
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c < E) dk[(bk * S + j) * E + c] = acc_k[t];
                if (c < Ev) dv[(bk * S + j) * Ev + c] = acc_v[t];
            }
        }
        __syncthreads();
    }
}

#define ATTENTION_TILED_KERNELS(name, T, B)                                                                   \
    extern "C" __global__ void attention_tiled_forward_##name(size_t batch, size_t G, size_t L, size_t S,     \
        size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v, DT_ATTENTION_MASK_PARAMS, T* out,   \
        T* lse) {                                                                                             \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ps[B * (B + 1)];                                                                         \
        dt_attention_tiled_forward<T, B, B>(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out,    \
                                            lse, qs, ks, vs, ps);                                             \
    }                                                                                                         \
    extern "C" __global__ void attention_tiled_backward_queries_##name(size_t batch, size_t G, size_t L,      \
        size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,                           \
        DT_ATTENTION_MASK_PARAMS, const T* out, const T* lse, const T* g, T* dq, T* d) {                      \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T gs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ps[B * (B + 1)];                                                                         \
        dt_attention_tiled_backward_queries<T, B, B>(batch, G, L, S, E, Ev, scale, q, k, v,                   \
                                                     DT_ATTENTION_MASK, out, lse, g, dq, d, qs, gs, ks, vs,   \
                                                     ps);                                                     \
    }                                                                                                         \
    extern "C" __global__ void attention_tiled_backward_keys_##name(size_t batch, size_t G, size_t L,         \
        size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,                           \
        DT_ATTENTION_MASK_PARAMS, const T* lse, const T* g, const T* d, T* dk, T* dv) {                       \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T gs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T pt[B * (B + 1)];                                                                         \
        __shared__ T dst[B * (B + 1)];                                                                        \
        __shared__ T row_lse[B];                                                                              \
        __shared__ T row_d[B];                                                                                \
        dt_attention_tiled_backward_keys<T, B, B>(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK,   \
                                                  lse, g, d, dk, dv, ks, vs, qs, gs, pt, dst, row_lse,        \
                                                  row_d);                                                     \
    }

ATTENTION_TILED_KERNELS(f32, float, 32)
ATTENTION_TILED_KERNELS(f64, double, 16)

// ---------------------------------------------------------------------------
// Tensor-core kernels for the half types (sm_80 and later), for E and Ev up
// to W = 32 or 64 (the host takes the narrower that fits):
//   attention_mma<W>_forward_<H>(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, float scale,
//           const H* q, const H* k, const H* v, MASK, H* out, float* lse)
//   attention_mma<W>_backward_queries_<H>(same sizes, scale, q, k, v, MASK,
//           const H* out, const float* lse, const H* g, H* dq, float* d)
//   attention_mma<W>_backward_keys_<H>(same sizes, scale, q, k, v, MASK,
//           const float* lse, const H* g, const float* d, H* dk, H* dv)
//       dk and dv [batch, S, E] per query problem (the host sums the G that
//       share a key problem)
// with H = bf16 or f16 (MASK's `add` values are H too); the log-sum-exps
// and the row offsets d stay in f32. Products run on the tensor cores with
// f32 sums (dt_mma_16816), the softmax in f32 registers, in base 2 (the
// scale carries log2 e, so each weight is one exp2f); each output is
// rounded once, and the weights (and the backward's ds) are rounded to H
// before the product they feed, as FlashAttention does. A block of four
// warps takes a tile of 64 rows, 16 per warp (query rows, or key rows for
// the keys' pass); each warp keeps its rows' fragments, scores and results
// in registers, laid out as the mma fragments are, and walks the other side
// 64 rows at a time through shared memory, loading the next tile into
// registers while it computes on the current one. Columns past E or Ev up
// to W are zeros, so every product has W columns and no branch. Tiles that
// every row sees whole (no mask, or below a causal mask's diagonal, and no
// key past S) skip the per-score mask test. Weights go from the score
// fragments (D layout) to the next product's A fragments without leaving
// registers: the D fragments of two adjacent 8-column slices are exactly
// the A fragment of their 16 columns. blockDim.x = DT_MMA_THREADS, exactly.

#define DT_MMA_THREADS 128
#define DT_MMA_ROWS 64
/// Words (two 16-bit elements) per shared row: 36, so that the 8 rows one
/// fragment load touches start in 8 different banks (36 mod 32 = 4), and
/// every row starts on a 16-byte boundary (144 bytes).
#define DT_MMA_PITCH 36
#define DT_LOG2E 1.4426950408889634f
#define DT_LN2 0.6931471805599453f

/// A shared tile of DT_MMA_ROWS rows of up to 64 16-bit elements,
/// 16-byte aligned so that eight elements go in with one store.
struct alignas(16) DtMmaTile {
    unsigned int w[DT_MMA_ROWS * DT_MMA_PITCH];
};

/// Elements (row, col) and (row, col + 1) of the dense rows x cols matrix
/// `x` as one operand register, zeros outside it.
template <typename H>
__device__ inline unsigned int dt_mma_pair(const H* x, size_t row, size_t col, size_t rows, size_t cols) {
    if (row >= rows) return 0;
    H zero = H(0.0f);
    H lo = col < cols ? x[row * cols + col] : zero, hi = col + 1 < cols ? x[row * cols + col + 1] : zero;
    return dt_pack2(lo, hi);
}

/// Whether the rows of the dense matrix `x` (`cols` wide) are whole
/// 16-byte chunks of eight elements, so that chunks load as one vector.
template <typename H> __device__ inline bool dt_mma_whole(const H* x, size_t cols) {
    return cols % 8 == 0 && (size_t)x % 16 == 0;
}

/// Elements (row, col..col + 7) of the dense rows x cols matrix `x`, zeros
/// outside it: one 16-byte load where `whole` (dt_mma_whole), else by pairs.
template <typename H>
__device__ inline uint4 dt_mma_chunk(const H* x, size_t row, size_t col, size_t rows, size_t cols, bool whole) {
    if (!whole)
        return uint4{dt_mma_pair(x, row, col, rows, cols), dt_mma_pair(x, row, col + 2, rows, cols),
                     dt_mma_pair(x, row, col + 4, rows, cols), dt_mma_pair(x, row, col + 6, rows, cols)};
    if (row >= rows || col >= cols) return uint4{0, 0, 0, 0};
    return *reinterpret_cast<const uint4*>(x + row * cols + col);
}

/// One thread's share of a tile (its first W columns) on the way from
/// global to shared memory: `COUNT` chunks of eight elements from each of
/// two adjacent rows. Its i-th are chunk threadIdx.x / 32 + 4 i of rows
/// 2p and 2p + 1, p = threadIdx.x % 32, so that a warp's 32 stores of one
/// word into a transposed tile hit 32 different banks.
template <unsigned W> struct DtMmaStage {
    static constexpr unsigned COUNT = (DT_MMA_ROWS / 2) * (W / 8) / DT_MMA_THREADS;
    uint4 even[COUNT], odd[COUNT];
};

/// Loads this thread's chunks of rows first..first + DT_MMA_ROWS of the
/// dense rows x cols matrix `x` into `stage`, every load issued before any
/// is used, so that they run while the block computes.
template <typename H, unsigned W>
__device__ inline void dt_mma_fetch(DtMmaStage<W>& stage, const H* x, size_t first, size_t rows, size_t cols,
                                    bool whole) {
    const size_t row = first + 2 * (threadIdx.x % 32);
#pragma unroll
    for (unsigned i = 0; i < DtMmaStage<W>::COUNT; ++i) {
        const size_t col = 8 * (threadIdx.x / 32 + 4 * i);
        stage.even[i] = dt_mma_chunk(x, row, col, rows, cols, whole);
        stage.odd[i] = dt_mma_chunk(x, row + 1, col, rows, cols, whole);
    }
}

/// Stores `stage` (dt_mma_fetch) into the shared `tile`, row for row.
template <unsigned W> __device__ inline void dt_mma_put(DtMmaTile& tile, const DtMmaStage<W>& stage) {
    const unsigned row = 2 * (threadIdx.x % 32);
#pragma unroll
    for (unsigned i = 0; i < DtMmaStage<W>::COUNT; ++i) {
        unsigned int* at = tile.w + row * DT_MMA_PITCH + 4 * (threadIdx.x / 32 + 4 * i);
        *reinterpret_cast<uint4*>(at) = stage.even[i];
        *reinterpret_cast<uint4*>(at + DT_MMA_PITCH) = stage.odd[i];
    }
}

/// Stores `stage` (dt_mma_fetch) into the shared `tile_t` transposed: its
/// row c holds column c, each word the elements of two adjacent rows, as a
/// B register of a product whose k runs down the rows wants them.
template <unsigned W> __device__ inline void dt_mma_put_transposed(DtMmaTile& tile_t, const DtMmaStage<W>& stage) {
    const unsigned pair = threadIdx.x % 32;
#pragma unroll
    for (unsigned i = 0; i < DtMmaStage<W>::COUNT; ++i) {
        const unsigned even[4] = {stage.even[i].x, stage.even[i].y, stage.even[i].z, stage.even[i].w};
        const unsigned odd[4] = {stage.odd[i].x, stage.odd[i].y, stage.odd[i].z, stage.odd[i].w};
        unsigned int* at = tile_t.w + 8 * (threadIdx.x / 32 + 4 * i) * DT_MMA_PITCH + pair;
#pragma unroll
        for (unsigned m = 0; m < 4; ++m) {
            at[2 * m * DT_MMA_PITCH] = (even[m] & 0xffffu) | (odd[m] << 16);
            at[(2 * m + 1) * DT_MMA_PITCH] = (even[m] >> 16) | (odd[m] & 0xffff0000u);
        }
    }
}

/// Lane t's A fragments of rows r0 and r0 + 8 of the dense rows x cols
/// matrix `x`, one per 16 of W columns (zeros outside `x`).
template <typename H, unsigned W>
__device__ inline void dt_mma_load_a(unsigned int a[W / 16][4], const H* x, size_t r0, size_t rows, size_t cols,
                                     unsigned t) {
#pragma unroll
    for (unsigned c = 0; c < W / 16; ++c) {
        a[c][0] = dt_mma_pair(x, r0, 16 * c + 2 * t, rows, cols);
        a[c][1] = dt_mma_pair(x, r0 + 8, 16 * c + 2 * t, rows, cols);
        a[c][2] = dt_mma_pair(x, r0, 16 * c + 2 * t + 8, rows, cols);
        a[c][3] = dt_mma_pair(x, r0 + 8, 16 * c + 2 * t + 8, rows, cols);
    }
}

/// d += a tile[first..first + 8]ᵀ over W columns: the products of the
/// warp's 16 rows with 8 rows of a shared tile (whose rows are the
/// product's columns, so each B register is a pair of adjacent elements of
/// one tile row).
template <typename H, unsigned W>
__device__ inline void dt_mma_times_rows(float d[4], const unsigned int a[W / 16][4], const DtMmaTile& tile,
                                         unsigned first, unsigned g, unsigned t) {
#pragma unroll
    for (unsigned e = 0; e < W / 16; ++e) {
        const unsigned int* row = tile.w + (first + g) * DT_MMA_PITCH + 8 * e + t;
        const unsigned int b[2] = {row[0], row[4]};
        dt_mma_16816<H>(d, a[e], b);
    }
}

/// d[j] += a tile[k0..k0 + 16][8j..8j + 8] for the W / 8 8-column slices
/// (k0 even), from the tile's transpose `tile_t` (dt_mma_put_transposed):
/// a product whose k runs down the tile's rows.
template <typename H, unsigned W>
__device__ inline void dt_mma_times_columns(float d[W / 8][4], const unsigned int a[4], const DtMmaTile& tile_t,
                                            unsigned k0, unsigned g, unsigned t) {
#pragma unroll
    for (unsigned j = 0; j < W / 8; ++j) {
        const unsigned int* row = tile_t.w + (8 * j + g) * DT_MMA_PITCH + k0 / 2 + t;
        const unsigned int b[2] = {row[0], row[4]};
        dt_mma_16816<H>(d[j], a, b);
    }
}

/// The A fragment of 16 columns from the D fragments of their two 8-column
/// halves, rounded to H: the layouts agree, so it never leaves registers.
template <typename H>
__device__ inline void dt_mma_a_from_d(unsigned int a[4], const float lo[4], const float hi[4]) {
    a[0] = dt_pack2_rounded<H>(lo[0], lo[1]);
    a[1] = dt_pack2_rounded<H>(lo[2], lo[3]);
    a[2] = dt_pack2_rounded<H>(hi[0], hi[1]);
    a[3] = dt_pack2_rounded<H>(hi[2], hi[3]);
}

/// Stores the D fragments `d` (rows r0 and r0 + 8) into the dense rows x
/// cols matrix `x`, rounded to H: each lane's two adjacent columns as one
/// word where both exist and `x` is 4-byte aligned there.
template <typename H, unsigned W>
__device__ inline void dt_mma_store(H* x, const float d[W / 8][4], size_t r0, size_t rows, size_t cols, unsigned t) {
    const bool words = cols % 2 == 0 && (size_t)x % 4 == 0;
#pragma unroll
    for (unsigned j = 0; j < W / 8; ++j) {
#pragma unroll
        for (unsigned half = 0; half < 2; ++half) {
            const size_t r = r0 + 8 * half, c = 8 * j + 2 * t;
            if (r >= rows || c >= cols) continue;
            const unsigned int pair = dt_pack2_rounded<H>(d[j][2 * half], d[j][2 * half + 1]);
            if (words) {
                *reinterpret_cast<unsigned int*>(x + r * cols + c) = pair;
            } else {
                x[r * cols + c].bits = (unsigned short)(pair & 0xffffu);
                if (c + 1 < cols) x[r * cols + c + 1].bits = (unsigned short)(pair >> 16);
            }
        }
    }
}

/// Whether every query of rows i0..i0 + DT_MMA_ROWS that exists sees every
/// key of j0..j0 + DT_MMA_ROWS, all below S, so that no score needs a test.
__device__ inline bool dt_mma_all_seen(const DtAttentionMask& m, size_t i0, size_t j0, size_t S) {
    return j0 + DT_MMA_ROWS <= S && (m.kind == 0 || (m.kind == 1 && j0 + DT_MMA_ROWS - 1 <= i0));
}

/// The base-2 score of query i and key `key` from their product `x`
/// (scale2 = scale log2 e), with the additive mask added; -inf where the
/// mask hides it or out of range.
template <typename H>
__device__ inline float dt_mma_score(float x, float scale2, const DtAttentionMask& m, size_t i, size_t key, size_t L,
                                     size_t S) {
    if (i >= L || key >= S || !dt_attention_sees(m, i, key)) return dt_lowest<float>();
    x *= scale2;
    if (m.kind == 3) x += DT_LOG2E * (float)((const H*)m.add)[m.base + i * m.row + key * m.col];
    return x;
}

/// The base-2 log-sum-exp of a row from its natural one: +inf for rows
/// that do not exist or see no key, so that every weight exp2f(x - it)
/// of theirs is 0.
__device__ inline float dt_mma_lse2(float lse, bool exists) {
    return exists && lse != dt_lowest<float>() ? lse * DT_LOG2E : INFINITY;
}

/// The first query row of tile `tile` of a problem's `tiles`: the last
/// first, since under a causal mask they see the most keys and the grid's
/// tail is shorter when they start early.
__device__ inline size_t dt_mma_row_tile(size_t tile, size_t tiles) {
    return (tiles - 1 - tile % tiles) * DT_MMA_ROWS;
}

template <typename H, unsigned W>
__device__ void dt_attention_mma_forward(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev, float scale,
                                         const H* q, const H* k, const H* v, DtAttentionMask m, size_t mrank,
                                         const size_t* mdims, const size_t* mstrides, size_t moffset, H* out,
                                         float* lse, DtMmaTile& ks, DtMmaTile& vt) {
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const size_t tiles = (L + DT_MMA_ROWS - 1) / DT_MMA_ROWS;
    const float lowest = dt_lowest<float>(), scale2 = scale * DT_LOG2E;
    const bool whole_k = dt_mma_whole(k, E), whole_v = dt_mma_whole(v, Ev);
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        const size_t b = tile / tiles, i0 = dt_mma_row_tile(tile, tiles);
        const H *kb = k + b / G * S * E, *vb = v + b / G * S * Ev;
        // This lane's two query rows: g and g + 8 of its warp's 16.
        const size_t rows[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        unsigned int qa[W / 16][4];
        dt_mma_load_a<H, W>(qa, q + b * L * E, rows[0], L, E, t);
        float o[W / 8][4] = {};
        // Per row: the running maximum, and this lane's part of the running sum.
        float run_max[2] = {lowest, lowest}, run_sum[2] = {0.0f, 0.0f};
        const size_t n = m.kind == 1 ? (i0 + DT_MMA_ROWS < S ? i0 + DT_MMA_ROWS : S) : S;
        DtMmaStage<W> k_next, v_next;
        dt_mma_fetch<H, W>(k_next, kb, 0, S, E, whole_k);
        dt_mma_fetch<H, W>(v_next, vb, 0, S, Ev, whole_v);
        for (size_t j0 = 0; j0 < n; j0 += DT_MMA_ROWS) {
            __syncthreads();  // the last tile's readers are done
            dt_mma_put(ks, k_next);
            dt_mma_put_transposed(vt, v_next);
            __syncthreads();
            if (j0 + DT_MMA_ROWS < n) {
                dt_mma_fetch<H, W>(k_next, kb, j0 + DT_MMA_ROWS, S, E, whole_k);
                dt_mma_fetch<H, W>(v_next, vb, j0 + DT_MMA_ROWS, S, Ev, whole_v);
            }
            // Scores of 8 keys per slice: s[j][0..1] row g, keys 8j + 2t..; s[j][2..3] row g + 8.
            float s[DT_MMA_ROWS / 8][4] = {};
#pragma unroll
            for (unsigned j = 0; j < DT_MMA_ROWS / 8; ++j) dt_mma_times_rows<H, W>(s[j], qa, ks, 8 * j, g, t);
            if (dt_mma_all_seen(m, i0, j0, S)) {
#pragma unroll
                for (unsigned j = 0; j < DT_MMA_ROWS / 8; ++j)
#pragma unroll
                    for (unsigned e = 0; e < 4; ++e) s[j][e] *= scale2;
            } else {
#pragma unroll
                for (unsigned j = 0; j < DT_MMA_ROWS / 8; ++j)
#pragma unroll
                    for (unsigned e = 0; e < 4; ++e)
                        s[j][e] = dt_mma_score<H>(s[j][e], scale2, m, rows[e / 2], j0 + 8 * j + 2 * t + e % 2, L, S);
            }
            float base[2];
#pragma unroll
            for (unsigned r = 0; r < 2; ++r) {
                float mx = run_max[r];
#pragma unroll
                for (unsigned j = 0; j < DT_MMA_ROWS / 8; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                // Until a visible key comes the maximum is -inf: weights are
                // taken against 0 then, so that every one is 0, not NaN.
                base[r] = mx == lowest ? 0.0f : mx;
                const float keep = exp2f(run_max[r] - base[r]);
                run_max[r] = mx;
                run_sum[r] *= keep;
#pragma unroll
                for (unsigned c = 0; c < W / 8; ++c) {
                    o[c][2 * r] *= keep;
                    o[c][2 * r + 1] *= keep;
                }
            }
#pragma unroll
            for (unsigned j = 0; j < DT_MMA_ROWS / 8; ++j) {
#pragma unroll
                for (unsigned e = 0; e < 4; ++e) {
                    s[j][e] = exp2f(s[j][e] - base[e / 2]);
                    run_sum[e / 2] += s[j][e];
                }
            }
            // out += p v, 16 keys at a time.
#pragma unroll
            for (unsigned c = 0; c < DT_MMA_ROWS / 16; ++c) {
                unsigned int pa[4];
                dt_mma_a_from_d<H>(pa, s[2 * c], s[2 * c + 1]);
                dt_mma_times_columns<H, W>(o, pa, vt, 16 * c, g, t);
            }
        }
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
            run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 1);
            run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 2);
        }
#pragma unroll
        for (unsigned j = 0; j < W / 8; ++j) {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) o[j][e] = run_sum[e / 2] > 0.0f ? o[j][e] / run_sum[e / 2] : 0.0f;
        }
        dt_mma_store<H, W>(out + b * L * Ev, o, rows[0], L, Ev, t);
        if (t == 0) {
#pragma unroll
            for (unsigned r = 0; r < 2; ++r)
                if (rows[r] < L)
                    lse[b * L + rows[r]] = run_sum[r] > 0.0f ? (run_max[r] + log2f(run_sum[r])) * DT_LN2 : lowest;
        }
    }
}

/// The gradient of the queries, and each query row's softmax offset
/// d = g . out (f32), for the rows of a tile of DT_MMA_ROWS queries:
/// each warp recomputes its 16 rows' scores and weights for a tile of keys
/// at a time, 16 keys at a time, and adds ds K to its dq fragments.
template <typename H, unsigned W>
__device__ void dt_attention_mma_backward_queries(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev,
                                                  float scale, const H* q, const H* k, const H* v, DtAttentionMask m,
                                                  size_t mrank, const size_t* mdims, const size_t* mstrides,
                                                  size_t moffset, const H* out, const float* lse, const H* g, H* dq,
                                                  float* d, DtMmaTile& ks, DtMmaTile& kt, DtMmaTile& vs) {
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, t = lane % 4;
    const size_t tiles = (L + DT_MMA_ROWS - 1) / DT_MMA_ROWS;
    const float scale2 = scale * DT_LOG2E;
    const bool whole_k = dt_mma_whole(k, E), whole_v = dt_mma_whole(v, Ev);
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        const size_t b = tile / tiles, i0 = dt_mma_row_tile(tile, tiles);
        const size_t rows[2] = {i0 + warp * 16 + gr, i0 + warp * 16 + gr + 8};
        const H *kb = k + b / G * S * E, *vb = v + b / G * S * Ev, *gb = g + b * L * Ev;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        unsigned int qa[W / 16][4], ga[W / 16][4];
        dt_mma_load_a<H, W>(qa, q + b * L * E, rows[0], L, E, t);
        dt_mma_load_a<H, W>(ga, gb, rows[0], L, Ev, t);
        const size_t n = m.kind == 1 ? (i0 + DT_MMA_ROWS < S ? i0 + DT_MMA_ROWS : S) : S;
        DtMmaStage<W> k_next, v_next;
        dt_mma_fetch<H, W>(k_next, kb, 0, S, E, whole_k);
        dt_mma_fetch<H, W>(v_next, vb, 0, S, Ev, whole_v);
        // Per row: the softmax offset (the four lanes of a row split its
        // columns) and the base-2 log-sum-exp.
        float offset[2], row_lse[2];
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
            float partial = 0.0f;
            if (rows[r] < L)
                for (size_t c = t; c < Ev; c += 4)
                    partial += (float)gb[rows[r] * Ev + c] * (float)out[(b * L + rows[r]) * Ev + c];
            partial += __shfl_xor_sync(0xffffffffu, partial, 1);
            partial += __shfl_xor_sync(0xffffffffu, partial, 2);
            offset[r] = partial;
            row_lse[r] = dt_mma_lse2(rows[r] < L ? lse[b * L + rows[r]] : 0.0f, rows[r] < L);
            if (t == 0 && rows[r] < L) d[b * L + rows[r]] = partial;
        }
        float acc[W / 8][4] = {};
        for (size_t j0 = 0; j0 < n; j0 += DT_MMA_ROWS) {
            __syncthreads();
            dt_mma_put(ks, k_next);
            dt_mma_put_transposed(kt, k_next);
            dt_mma_put(vs, v_next);
            __syncthreads();
            if (j0 + DT_MMA_ROWS < n) {
                dt_mma_fetch<H, W>(k_next, kb, j0 + DT_MMA_ROWS, S, E, whole_k);
                dt_mma_fetch<H, W>(v_next, vb, j0 + DT_MMA_ROWS, S, Ev, whole_v);
            }
            const bool all_seen = dt_mma_all_seen(m, i0, j0, S);
#pragma unroll
            for (unsigned c = 0; c < DT_MMA_ROWS / 16; ++c) {
                // Scores, dp = g vᵀ and then ds = p (dp - offset) scale for
                // keys 16c..16c+15, two 8-key slices.
                float s[2][4] = {}, dp[2][4] = {};
#pragma unroll
                for (unsigned h = 0; h < 2; ++h) {
                    dt_mma_times_rows<H, W>(s[h], qa, ks, 16 * c + 8 * h, gr, t);
                    dt_mma_times_rows<H, W>(dp[h], ga, vs, 16 * c + 8 * h, gr, t);
#pragma unroll
                    for (unsigned e = 0; e < 4; ++e) {
                        const unsigned r = e / 2;
                        const float x = all_seen ? s[h][e] * scale2
                                                 : dt_mma_score<H>(s[h][e], scale2, m, rows[r],
                                                                   j0 + 16 * c + 8 * h + 2 * t + e % 2, L, S);
                        s[h][e] = exp2f(x - row_lse[r]) * (dp[h][e] - offset[r]) * scale;
                    }
                }
                // dq += ds k.
                unsigned int dsa[4];
                dt_mma_a_from_d<H>(dsa, s[0], s[1]);
                dt_mma_times_columns<H, W>(acc, dsa, kt, 16 * c, gr, t);
            }
        }
        dt_mma_store<H, W>(dq + b * L * E, acc, rows[0], L, E, t);
    }
}

/// The gradients of the keys and values for a tile of DT_MMA_ROWS keys:
/// each warp holds its 16 keys' and values' fragments and walks the queries
/// that see them, a tile at a time through shared memory, recomputing the
/// transposed scores and weights 16 queries at a time, adding pᵀ g to dv
/// and dsᵀ q to dk. Per query problem b: under grouped-query attention
/// (G > 1) it reads key problem b / G and writes the gradients of b's own
/// copy of it, dk and dv [batch, S, E], which the host sums over each group
/// in f32 (as FlashAttention sums its expanded heads): a loop over the group
/// here would hold more registers than this pass has.
template <typename H, unsigned W>
__device__ void dt_attention_mma_backward_keys(size_t batch, size_t G, size_t L, size_t S, size_t E, size_t Ev,
                                               float scale, const H* q, const H* k, const H* v, DtAttentionMask m,
                                               size_t mrank,
                                               const size_t* mdims, const size_t* mstrides, size_t moffset,
                                               const float* lse, const H* g, const float* d, H* dk, H* dv,
                                               DtMmaTile& qs, DtMmaTile& qt, DtMmaTile& gs, DtMmaTile& gt,
                                               float* row_lse, float* row_d) {
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, t = lane % 4;
    const size_t tiles = (S + DT_MMA_ROWS - 1) / DT_MMA_ROWS;
    const float scale2 = scale * DT_LOG2E;
    const bool whole_q = dt_mma_whole(q, E), whole_g = dt_mma_whole(g, Ev);
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        const size_t b = tile / tiles, j0 = (tile % tiles) * DT_MMA_ROWS;
        const size_t keys[2] = {j0 + warp * 16 + gr, j0 + warp * 16 + gr + 8};
        const H *qb = q + b * L * E, *gb = g + b * L * Ev;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        unsigned int ka[W / 16][4], va[W / 16][4];
        dt_mma_load_a<H, W>(ka, k + b / G * S * E, keys[0], S, E, t);
        dt_mma_load_a<H, W>(va, v + b / G * S * Ev, keys[0], S, Ev, t);
        float acc_k[W / 8][4] = {}, acc_v[W / 8][4] = {};
        // Under a causal mask only queries j0.. see the tile's keys.
        const size_t first = m.kind == 1 ? (j0 / DT_MMA_ROWS) * DT_MMA_ROWS : 0;
        // At W = 64 this pass holds 64 fragment and 64 sum registers a lane,
        // and a staged next tile beside them would spill: it loads each tile
        // just before the barrier instead, where the loads overlap the other
        // warps' last products.
        constexpr bool ahead = W <= 32;
        DtMmaStage<W> q_next, g_next;
        if (ahead) {
            dt_mma_fetch<H, W>(q_next, qb, first, L, E, whole_q);
            dt_mma_fetch<H, W>(g_next, gb, first, L, Ev, whole_g);
        }
        for (size_t i0 = first; i0 < L; i0 += DT_MMA_ROWS) {
            if (!ahead) {
                dt_mma_fetch<H, W>(q_next, qb, i0, L, E, whole_q);
                dt_mma_fetch<H, W>(g_next, gb, i0, L, Ev, whole_g);
            }
            __syncthreads();
            dt_mma_put(qs, q_next);
            dt_mma_put_transposed(qt, q_next);
            dt_mma_put(gs, g_next);
            dt_mma_put_transposed(gt, g_next);
            for (unsigned r = threadIdx.x; r < DT_MMA_ROWS; r += DT_MMA_THREADS) {
                row_lse[r] = dt_mma_lse2(i0 + r < L ? lse[b * L + i0 + r] : 0.0f, i0 + r < L);
                row_d[r] = i0 + r < L ? d[b * L + i0 + r] : 0.0f;
            }
            __syncthreads();
            if (ahead && i0 + DT_MMA_ROWS < L) {
                dt_mma_fetch<H, W>(q_next, qb, i0 + DT_MMA_ROWS, L, E, whole_q);
                dt_mma_fetch<H, W>(g_next, gb, i0 + DT_MMA_ROWS, L, Ev, whole_g);
            }
            // Every key exists here only if the tile is whole; queries past L
            // get weight 0 from their log-sum-exp (dt_mma_lse2).
            const bool all_seen = dt_mma_all_seen(m, i0, j0, S);
#pragma unroll
            for (unsigned c = 0; c < DT_MMA_ROWS / 16; ++c) {
                // Transposed scores, dpᵀ = v gᵀ, the weights pᵀ and dsᵀ for
                // queries 16c..16c+15, two 8-query slices.
                float s[2][4] = {}, dp[2][4] = {};
#pragma unroll
                for (unsigned h = 0; h < 2; ++h) {
                    dt_mma_times_rows<H, W>(s[h], ka, qs, 16 * c + 8 * h, gr, t);
                    dt_mma_times_rows<H, W>(dp[h], va, gs, 16 * c + 8 * h, gr, t);
#pragma unroll
                    for (unsigned e = 0; e < 4; ++e) {
                        const unsigned local = 16 * c + 8 * h + 2 * t + e % 2;
                        const float x = all_seen ? s[h][e] * scale2
                                                 : dt_mma_score<H>(s[h][e], scale2, m, i0 + local, keys[e / 2], L, S);
                        s[h][e] = exp2f(x - row_lse[local]);
                        dp[h][e] = s[h][e] * (dp[h][e] - row_d[local]) * scale;
                    }
                }
                // dv += pᵀ g and dk += dsᵀ q.
                unsigned int pa[4], dsa[4];
                dt_mma_a_from_d<H>(pa, s[0], s[1]);
                dt_mma_a_from_d<H>(dsa, dp[0], dp[1]);
                dt_mma_times_columns<H, W>(acc_v, pa, gt, 16 * c, gr, t);
                dt_mma_times_columns<H, W>(acc_k, dsa, qt, 16 * c, gr, t);
            }
        }
        dt_mma_store<H, W>(dk + b * S * E, acc_k, keys[0], S, E, t);
        dt_mma_store<H, W>(dv + b * S * Ev, acc_v, keys[0], S, Ev, t);
    }
}

#define ATTENTION_MMA_KERNELS_OF_WIDTH(name, H, W)                                                            \
    extern "C" __global__ void attention_mma##W##_forward_##name(size_t batch, size_t G, size_t L,            \
        size_t S, size_t E, size_t Ev, float scale, const H* q, const H* k, const H* v,                       \
        DT_ATTENTION_MASK_PARAMS, H* out, float* lse) {                                                       \
        __shared__ DtMmaTile ks, vt;                                                                          \
        dt_attention_mma_forward<H, W>(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse,    \
                                       ks, vt);                                                               \
    }                                                                                                         \
    extern "C" __global__ void attention_mma##W##_backward_queries_##name(size_t batch, size_t G, size_t L,   \
        size_t S, size_t E, size_t Ev, float scale, const H* q, const H* k, const H* v,                       \
        DT_ATTENTION_MASK_PARAMS, const H* out, const float* lse, const H* g, H* dq, float* d) {              \
        __shared__ DtMmaTile ks, kt, vs;                                                                      \
        dt_attention_mma_backward_queries<H, W>(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK,     \
                                                out, lse, g, dq, d, ks, kt, vs);                              \
    }                                                                                                         \
    extern "C" __global__ void attention_mma##W##_backward_keys_##name(size_t batch, size_t G, size_t L,      \
        size_t S, size_t E, size_t Ev, float scale, const H* q, const H* k, const H* v,                       \
        DT_ATTENTION_MASK_PARAMS, const float* lse, const H* g, const float* d, H* dk, H* dv) {               \
        __shared__ DtMmaTile qs, qt, gs, gt;                                                                  \
        __shared__ float row_lse[DT_MMA_ROWS];                                                                \
        __shared__ float row_d[DT_MMA_ROWS];                                                                  \
        dt_attention_mma_backward_keys<H, W>(batch, G, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, lse,   \
                                             g, d, dk, dv, qs, qt, gs, gt, row_lse, row_d);                   \
    }
#define ATTENTION_MMA_KERNELS(name, H)                                                                        \
    ATTENTION_MMA_KERNELS_OF_WIDTH(name, H, 32)                                                               \
    ATTENTION_MMA_KERNELS_OF_WIDTH(name, H, 64)

DT_FOR_EACH_HALF(ATTENTION_MMA_KERNELS)
