// Fused scaled dot-product attention: serves the Rust op family
// `ops::attention` (`AttentionKernel::{attention_forward, attention_backward}`).
// Semantics follow the CPU backend (src/ops/attention/cpu.rs): scores
// s = scale * q . k (+ an additive mask), hidden keys at -inf, weights
// softmax(s) over the keys; a query row that sees no key gets output 0,
// log-sum-exp -inf and no gradient.
//
// Every tensor is dense: q [batch, L, E], k [batch, S, E], v [batch, S, Ev],
// out and g [batch, L, Ev], lse and the row offsets d [batch, L]. One block
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
//   attention_forward_<T>(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale,
//           const T* q, const T* k, const T* v, MASK, T* out, T* lse)
//   attention_backward_queries_<T>(same sizes, scale, q, k, v, MASK,
//           const T* out, const T* lse, const T* g, T* dq, T* d)
//       dq, and d = g . out per row (the softmax gradient's offset)
//   attention_backward_keys_<T>(same sizes, scale, q, k, v, MASK,
//           const T* lse, const T* g, const T* d, T* dk, T* dv)
//       one block per key row: dk and dv summed over the queries
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
__device__ void dt_attention_forward(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q,
                                     const T* k, const T* v, DtAttentionMask m, size_t mrank, const size_t* mdims,
                                     const size_t* mstrides, size_t moffset, T* out, T* lse, T* weights,
                                     T* scratch) {
    for (size_t r = blockIdx.x; r < batch * L; r += gridDim.x) {
        size_t b = r / L, i = r % L;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        const T* qi = q + r * E;
        T acc[DT_ATTENTION_COLUMNS] = {0};
        T run_max = dt_lowest<T>(), run_sum = 0;
        size_t n = dt_attention_visible(m, i, S);
        for (size_t j0 = 0; j0 < n; j0 += blockDim.x) {
            size_t j = j0 + threadIdx.x;
            T s = j < n ? dt_attention_score(qi, k + (b * S + j) * E, E, scale, m, i, j) : dt_lowest<T>();
            T chunk_max = dt_block_reduce<DtMax>(s, scratch);
            T new_max = dt_max(run_max, chunk_max);
            // Until a visible key comes, there is nothing to rescale.
            T keep = new_max == dt_lowest<T>() ? (T)1 : dt_exp(run_max - new_max);
            T p = s == dt_lowest<T>() ? (T)0 : dt_exp(s - new_max);
            weights[threadIdx.x] = p;
            run_sum = run_sum * keep + dt_block_reduce<DtSum>(p, scratch);
            size_t chunk = n - j0 < blockDim.x ? n - j0 : blockDim.x;
            for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) acc[t] *= keep;
            dt_add_weighted_rows(acc, weights, v + (b * S + j0) * Ev, Ev, chunk);
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
__device__ void dt_attention_backward_queries(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                              const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                              const size_t* mdims, const size_t* mstrides, size_t moffset,
                                              const T* out, const T* lse, const T* g, T* dq, T* d, T* grads,
                                              T* scratch) {
    for (size_t r = blockIdx.x; r < batch * L; r += gridDim.x) {
        size_t b = r / L, i = r % L;
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
                T s = dt_attention_score(qi, k + (b * S + j) * E, E, scale, m, i, j);
                T p = s == dt_lowest<T>() ? (T)0 : dt_exp(s - row_lse);
                ds = p * (dt_dot(gi, v + (b * S + j) * Ev, Ev) - offset) * scale;
            }
            grads[threadIdx.x] = ds;
            __syncthreads();
            size_t chunk = n - j0 < blockDim.x ? n - j0 : blockDim.x;
            dt_add_weighted_rows(acc, grads, k + (b * S + j0) * E, E, chunk);
            __syncthreads();
        }
        for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
            size_t c = threadIdx.x + t * blockDim.x;
            if (c < E) dq[r * E + c] = acc[t];
        }
    }
}

template <typename T>
__device__ void dt_attention_backward_keys(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                           const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                           const size_t* mdims, const size_t* mstrides, size_t moffset,
                                           const T* lse, const T* g, const T* d, T* dk, T* dv, T* weights,
                                           T* grads) {
    for (size_t r = blockIdx.x; r < batch * S; r += gridDim.x) {
        size_t b = r / S, j = r % S;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        const T* kj = k + r * E;
        const T* vj = v + r * Ev;
        T acc_k[DT_ATTENTION_COLUMNS] = {0}, acc_v[DT_ATTENTION_COLUMNS] = {0};
        // Under a causal mask only queries j.. see key j.
        size_t first = m.kind == 1 ? j : 0;
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
        for (int t = 0; t < DT_ATTENTION_COLUMNS; ++t) {
            size_t c = threadIdx.x + t * blockDim.x;
            if (c < E) dk[r * E + c] = acc_k[t];
            if (c < Ev) dv[r * Ev + c] = acc_v[t];
        }
    }
}

#define DT_ATTENTION_MASK_PARAMS                                                                              \
    int mask_kind, const unsigned char *keep, const void *add, size_t mrank, const size_t *mdims,            \
        const size_t *mstrides, size_t moffset, size_t mrow, size_t mcol
#define DT_ATTENTION_MASK DtAttentionMask{mask_kind, keep, add, 0, mrow, mcol}, mrank, mdims, mstrides, moffset

#define ATTENTION_KERNELS(name, T)                                                                           \
    extern "C" __global__ void attention_forward_##name(size_t batch, size_t L, size_t S, size_t E, size_t Ev, \
                                                        T scale, const T* q, const T* k, const T* v,          \
                                                        DT_ATTENTION_MASK_PARAMS, T* out, T* lse) {           \
        __shared__ T weights[1024];                                                                           \
        __shared__ T scratch[32];                                                                             \
        dt_attention_forward(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse, weights,        \
                             scratch);                                                                        \
    }                                                                                                         \
    extern "C" __global__ void attention_backward_queries_##name(                                            \
        size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,   \
        DT_ATTENTION_MASK_PARAMS, const T* out, const T* lse, const T* g, T* dq, T* d) {                      \
        __shared__ T grads[1024];                                                                             \
        __shared__ T scratch[32];                                                                             \
        dt_attention_backward_queries(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse, g, dq, \
                                      d, grads, scratch);                                                     \
    }                                                                                                         \
    extern "C" __global__ void attention_backward_keys_##name(                                               \
        size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,   \
        DT_ATTENTION_MASK_PARAMS, const T* lse, const T* g, const T* d, T* dk, T* dv) {                       \
        __shared__ T weights[1024];                                                                           \
        __shared__ T grads[1024];                                                                             \
        dt_attention_backward_keys(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, lse, g, d, dk, dv,  \
                                   weights, grads);                                                           \
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
__device__ void dt_attention_tiled_forward(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q,
                                           const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                           const size_t* mdims, const size_t* mstrides, size_t moffset, T* out,
                                           T* lse, T* qs, T* ks, T* vs, T* ps) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BK + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (L + BQ - 1) / BQ;
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        size_t b = tile / tiles, i0 = (tile % tiles) * BQ, i = i0 + row;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        dt_load_tile(qs, pitch, q + b * L * E, i0, BQ, L, E);
        T acc[DT_TILE_WIDTH / DT_TILE_PARTS] = {0};
        T run_max = dt_lowest<T>(), run_sum = 0;
        // Under a causal mask the tile's last row sees keys up to i0 + BQ - 1.
        size_t n = m.kind == 1 ? (i0 + BQ < S ? i0 + BQ : S) : S;
        for (size_t j0 = 0; j0 < n; j0 += BK) {
            __syncthreads(); // the last tile's readers are done
            dt_load_tile(ks, pitch, k + b * S * E, j0, BK, S, E);
            dt_load_tile(vs, pitch, v + b * S * Ev, j0, BK, S, Ev);
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
__device__ void dt_attention_tiled_backward_queries(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                                    const T* q, const T* k, const T* v, DtAttentionMask m,
                                                    size_t mrank, const size_t* mdims, const size_t* mstrides,
                                                    size_t moffset, const T* out, const T* lse, const T* g, T* dq,
                                                    T* d, T* qs, T* gs, T* ks, T* vs, T* ps) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BK + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (L + BQ - 1) / BQ;
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        size_t b = tile / tiles, i0 = (tile % tiles) * BQ, i = i0 + row;
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
            dt_load_tile(ks, pitch, k + b * S * E, j0, BK, S, E);
            dt_load_tile(vs, pitch, v + b * S * Ev, j0, BK, S, Ev);
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
__device__ void dt_attention_tiled_backward_keys(size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale,
                                                 const T* q, const T* k, const T* v, DtAttentionMask m, size_t mrank,
                                                 const size_t* mdims, const size_t* mstrides, size_t moffset,
                                                 const T* lse, const T* g, const T* d, T* dk, T* dv, T* ks, T* vs,
                                                 T* qs, T* gs, T* pt, T* dst, T* row_lse, T* row_d) {
    const size_t pitch = DT_TILE_WIDTH + 1, ppitch = BQ + 1;
    const size_t row = threadIdx.x / DT_TILE_PARTS, part = threadIdx.x % DT_TILE_PARTS;
    const size_t tiles = (S + BK - 1) / BK;
    for (size_t tile = blockIdx.x; tile < batch * tiles; tile += gridDim.x) {
        size_t b = tile / tiles, j0 = (tile % tiles) * BK, j = j0 + row;
        m.base = m.kind >= 2 ? dt_offset(b, mrank, mdims, mstrides, moffset) : 0;
        dt_load_tile(ks, pitch, k + b * S * E, j0, BK, S, E);
        dt_load_tile(vs, pitch, v + b * S * Ev, j0, BK, S, Ev);
        T acc_k[DT_TILE_WIDTH / DT_TILE_PARTS] = {0}, acc_v[DT_TILE_WIDTH / DT_TILE_PARTS] = {0};
        // Under a causal mask only queries j0.. see the tile's keys.
        size_t first = m.kind == 1 ? (j0 / BQ) * BQ : 0;
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
        if (j < S) {
            for (int t = 0; t < DT_TILE_WIDTH / DT_TILE_PARTS; ++t) {
                size_t c = part + DT_TILE_PARTS * t;
                if (c < E) dk[(b * S + j) * E + c] = acc_k[t];
                if (c < Ev) dv[(b * S + j) * Ev + c] = acc_v[t];
            }
        }
        __syncthreads();
    }
}

#define ATTENTION_TILED_KERNELS(name, T, B)                                                                   \
    extern "C" __global__ void attention_tiled_forward_##name(                                               \
        size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,   \
        DT_ATTENTION_MASK_PARAMS, T* out, T* lse) {                                                           \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ps[B * (B + 1)];                                                                         \
        dt_attention_tiled_forward<T, B, B>(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, out, lse,  \
                                            qs, ks, vs, ps);                                                  \
    }                                                                                                         \
    extern "C" __global__ void attention_tiled_backward_queries_##name(                                      \
        size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,   \
        DT_ATTENTION_MASK_PARAMS, const T* out, const T* lse, const T* g, T* dq, T* d) {                      \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T gs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T ps[B * (B + 1)];                                                                         \
        dt_attention_tiled_backward_queries<T, B, B>(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK,   \
                                                     out, lse, g, dq, d, qs, gs, ks, vs, ps);                 \
    }                                                                                                         \
    extern "C" __global__ void attention_tiled_backward_keys_##name(                                         \
        size_t batch, size_t L, size_t S, size_t E, size_t Ev, T scale, const T* q, const T* k, const T* v,   \
        DT_ATTENTION_MASK_PARAMS, const T* lse, const T* g, const T* d, T* dk, T* dv) {                       \
        __shared__ T ks[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T vs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T qs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T gs[B * (DT_TILE_WIDTH + 1)];                                                             \
        __shared__ T pt[B * (B + 1)];                                                                         \
        __shared__ T dst[B * (B + 1)];                                                                        \
        __shared__ T row_lse[B];                                                                              \
        __shared__ T row_d[B];                                                                                \
        dt_attention_tiled_backward_keys<T, B, B>(batch, L, S, E, Ev, scale, q, k, v, DT_ATTENTION_MASK, lse, \
                                                  g, d, dk, dv, ks, vs, qs, gs, pt, dst, row_lse, row_d);     \
    }

ATTENTION_TILED_KERNELS(f32, float, 32)
ATTENTION_TILED_KERNELS(f64, double, 16)
