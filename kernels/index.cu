// Indexing and joining: serves the Rust op family `ops::index`
// (`IndexKernel::{first_out_of_range, index_select, gather, scatter,
// index_add, cat}`; `stack` is `cat` of unsqueezed views).
//
// Indices are i64 (`long long`). The host checks every index against its
// axis before launching the kernels below (index_count_out_of_range_i64),
// so they may assume 0 <= index < size of the axis they address.
//
// Kernels (T = f32, f64, i64, u8). Layouts are (rank, dims, strides, offset)
// as in common.cuh, with rank >= 1 here (an axis is always involved); the
// rank-0 dense shortcut applies only to index_count_out_of_range_i64.
//   index_count_out_of_range_i64(size_t n, size_t rank, const size_t* dims,
//           const size_t* strides, size_t offset, const long long* idx,
//           size_t size, unsigned long long* count)
//       adds to *count (zeroed by the host) the number of indices outside
//       0..size. When it is not 0, the host reads the indices back to name
//       the first bad one: that is the error path, so it need not be fast.
//   index_select_<T>(size_t n, size_t rank, const size_t* out_dims,
//           const size_t* src_strides, size_t src_offset, size_t axis,
//           const long long* indices, size_t idx_stride, size_t idx_offset,
//           const T* src, T* out)
//       out (dense, shape out_dims = src dims with out_dims[axis] = number of
//       indices) = src with coordinate j along axis replaced by
//       indices[idx_offset + j * idx_stride].
//   index_gather_<T>(size_t n, size_t rank, const size_t* dims,
//           const size_t* index_strides, size_t index_offset,
//           const size_t* src_strides, size_t src_offset, size_t axis,
//           const long long* index, const T* src, T* out)
//       out[p] = src[p with p[axis] = index[p]] for every position p of the
//       index shape `dims`; out is dense in that shape.
//   index_scatter_<T>(size_t n_lines, size_t rank, const size_t* dims, size_t axis,
//           const size_t* index_strides, size_t index_offset,
//           const size_t* src_strides, size_t src_offset,
//           const size_t* out_strides, const long long* index, const T* src, T* out,
//           int mode)
//       out[q] = combine(out[q], src[p]) at q = p with p[axis] = index[p], for
//       every position p of the index shape `dims`; `mode` is the Rust
//       `ScatterMode`: 0 assign (src replaces), 1 add, 2 multiply, 3 max,
//       4 min (NaN wins both). `out` is the host's dense copy of dst, addressed
//       through out_strides (dst's contiguous strides, rank entries).
//       n_lines = prod(dims) / dims[axis] (host skips the launch when
//       dims[axis] == 0): one thread per line along `axis` walks it in order,
//       so colliding indices combine without atomics, deterministically
//       and in the CPU backend's order (the last write wins for assign), and
//       u8/i64 sums and products wrap.
//   index_add_<T>(size_t n_lines, size_t rank, const size_t* dims, size_t axis,
//           const long long* indices, size_t idx_stride, size_t idx_offset,
//           const size_t* src_strides, size_t src_offset,
//           const size_t* out_strides, const T* src, T* out)
//       out[.., indices[j], ..] += src[.., j, ..] along axis, for the src
//       shape `dims` (dst's shape with dims[axis] = number of indices); `out`
//       is the dense copy of dst (out_strides as above). One thread per line,
//       j in order, for the same reasons as scatter_add.
//   index_cat_<T>(size_t n, size_t rank, const size_t* dims,
//           const size_t* src_strides, size_t src_offset, const T* src,
//           const size_t* dst_strides, size_t dst_offset, T* dst)
//       strided-to-strided copy of one input into its window of the output:
//       for cat along `axis`, dst_strides are the output's contiguous strides
//       and dst_offset = (sum of the earlier inputs' sizes along axis) *
//       dst_strides[axis]. One launch per input.
//
// Sorting (`IndexKernel::argsort_rows`): the indices that order each dense
// row of `n` elements of `src` ([rows, n]), ascending or descending, NaN
// after every number ascending and before every number descending (as
// PyTorch's sort), equal keys in index order (a stable sort). A bitonic
// network over the row padded to P = the next power of two, the padding
// ordered after everything; comparing (key, index) pairs makes the result
// the stable order whatever the network's exchanges.
//   index_sort_rows_<T>(size_t rows, size_t n, size_t k, int descending,
//           const T* src, long long* out)
//       P <= DT_SORT_CHUNK: one block per row sorts it in shared memory and
//       writes the first k indices of its order to out ([rows, k]).
//   index_sort_chunks_<T>(size_t rows, size_t n, size_t p, size_t size,
//           int descending, const T* src, T* keys, long long* idx)
//       P > DT_SORT_CHUNK, working in keys/idx ([rows, P]): each block
//       takes DT_SORT_CHUNK consecutive positions of a row. With size == 0
//       it loads them from src (padding past n) and runs every stage of
//       sequence size up to DT_SORT_CHUNK; otherwise it runs the stages of
//       `size` whose stride is below DT_SORT_CHUNK.
//   index_sort_step_<T>(size_t rows, size_t n, size_t p, size_t size,
//           size_t stride, int descending, T* keys, long long* idx)
//       one stage with a stride of at least DT_SORT_CHUNK, in global memory.
//   index_sort_take_i64(size_t rows, size_t p, size_t k, const long long* idx,
//           long long* out)
//       the first k indices of each sorted row.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

extern "C" __global__ void index_count_out_of_range_i64(size_t n, size_t rank, const size_t* dims,
                                                        const size_t* strides, size_t offset,
                                                        const long long* idx, size_t size,
                                                        unsigned long long* count) {
    unsigned long long bad = 0;
    // A negative index becomes huge as unsigned: one comparison catches both ends.
    DT_GRID_STRIDE(i, n) bad += (size_t)idx[dt_offset(i, rank, dims, strides, offset)] >= size;
    if (bad != 0) atomicAdd(count, bad);
}

template <typename T>
__device__ void dt_index_select(size_t n, size_t rank, const size_t* out_dims, const size_t* src_strides,
                                size_t src_offset, size_t axis, const long long* indices, size_t idx_stride,
                                size_t idx_offset, const T* src, T* out) {
    DT_GRID_STRIDE(i, n) {
        size_t rest = i, s = src_offset;
        for (size_t d = rank; d > 0; --d) {
            size_t dim = out_dims[d - 1];
            size_t c = rest % dim;
            rest /= dim;
            if (d - 1 == axis) c = (size_t)indices[idx_offset + c * idx_stride];
            s += c * src_strides[d - 1];
        }
        out[i] = src[s];
    }
}

template <typename T>
__device__ void dt_gather(size_t n, size_t rank, const size_t* dims, const size_t* index_strides,
                          size_t index_offset, const size_t* src_strides, size_t src_offset, size_t axis,
                          const long long* index, const T* src, T* out) {
    DT_GRID_STRIDE(i, n) {
        size_t rest = i, s = src_offset, x = index_offset;
        for (size_t d = rank; d > 0; --d) {
            size_t dim = dims[d - 1];
            size_t c = rest % dim;
            rest /= dim;
            x += c * index_strides[d - 1];
            if (d - 1 != axis) s += c * src_strides[d - 1];
        }
        out[i] = src[s + (size_t)index[x] * src_strides[axis]];
    }
}

/// Start positions of line `line` (a position of `dims` without `axis`) in
/// three layouts.
__device__ inline void dt_line_start(size_t line, size_t rank, const size_t* dims, size_t axis,
                                     const size_t* a_strides, size_t* a, const size_t* b_strides, size_t* b,
                                     const size_t* c_strides, size_t* c) {
    for (size_t d = rank; d > 0; --d) {
        if (d - 1 == axis) continue;
        size_t dim = dims[d - 1];
        size_t k = line % dim;
        line /= dim;
        *a += k * a_strides[d - 1];
        *b += k * b_strides[d - 1];
        *c += k * c_strides[d - 1];
    }
}

template <typename T> __device__ inline T dt_scatter_combine(int mode, T old, T value) {
    switch (mode) {
    case 0: return value;
    case 1: return dt_add(old, value);
    case 2: return (T)dt_mul(old, value);  // half types multiply in float
    case 3: return dt_max(old, value);
    default: return dt_min(old, value);
    }
}

template <typename T>
__device__ void dt_scatter(size_t n_lines, size_t rank, const size_t* dims, size_t axis,
                           const size_t* index_strides, size_t index_offset, const size_t* src_strides,
                           size_t src_offset, const size_t* out_strides, const long long* index, const T* src,
                           T* out, int mode) {
    size_t len = dims[axis];
    DT_GRID_STRIDE(line, n_lines) {
        size_t x = index_offset, s = src_offset, o = 0;
        dt_line_start(line, rank, dims, axis, index_strides, &x, src_strides, &s, out_strides, &o);
        for (size_t k = 0; k < len; ++k) {
            size_t at = o + (size_t)index[x + k * index_strides[axis]] * out_strides[axis];
            out[at] = dt_scatter_combine(mode, out[at], src[s + k * src_strides[axis]]);
        }
    }
}

template <typename T>
__device__ void dt_index_add(size_t n_lines, size_t rank, const size_t* dims, size_t axis,
                             const long long* indices, size_t idx_stride, size_t idx_offset,
                             const size_t* src_strides, size_t src_offset, const size_t* out_strides,
                             const T* src, T* out) {
    size_t len = dims[axis];
    DT_GRID_STRIDE(line, n_lines) {
        // The index layout is 1-D and shared by all lines: a dummy third
        // layout (src again) keeps one line-start helper for both kernels.
        size_t s = src_offset, o = 0, unused = 0;
        dt_line_start(line, rank, dims, axis, src_strides, &s, out_strides, &o, src_strides, &unused);
        for (size_t j = 0; j < len; ++j) {
            size_t at = o + (size_t)indices[idx_offset + j * idx_stride] * out_strides[axis];
            out[at] = dt_add(out[at], src[s + j * src_strides[axis]]);
        }
    }
}

#define INDEX_KERNELS(name, T)                                                                             \
    extern "C" __global__ void index_select_##name(size_t n, size_t rank, const size_t* out_dims,         \
                                                   const size_t* src_strides, size_t src_offset,          \
                                                   size_t axis, const long long* indices,                 \
                                                   size_t idx_stride, size_t idx_offset, const T* src,    \
                                                   T* out) {                                              \
        dt_index_select(n, rank, out_dims, src_strides, src_offset, axis, indices, idx_stride, idx_offset, \
                        src, out);                                                                         \
    }                                                                                                      \
    extern "C" __global__ void index_gather_##name(size_t n, size_t rank, const size_t* dims,             \
                                                   const size_t* index_strides, size_t index_offset,      \
                                                   const size_t* src_strides, size_t src_offset,          \
                                                   size_t axis, const long long* index, const T* src,     \
                                                   T* out) {                                              \
        dt_gather(n, rank, dims, index_strides, index_offset, src_strides, src_offset, axis, index, src,   \
                  out);                                                                                    \
    }                                                                                                      \
    extern "C" __global__ void index_scatter_##name(                                                       \
        size_t n_lines, size_t rank, const size_t* dims, size_t axis, const size_t* index_strides,        \
        size_t index_offset, const size_t* src_strides, size_t src_offset, const size_t* out_strides,     \
        const long long* index, const T* src, T* out, int mode) {                                         \
        dt_scatter(n_lines, rank, dims, axis, index_strides, index_offset, src_strides, src_offset,        \
                   out_strides, index, src, out, mode);                                                    \
    }                                                                                                      \
    extern "C" __global__ void index_add_##name(size_t n_lines, size_t rank, const size_t* dims,          \
                                                size_t axis, const long long* indices, size_t idx_stride, \
                                                size_t idx_offset, const size_t* src_strides,             \
                                                size_t src_offset, const size_t* out_strides,             \
                                                const T* src, T* out) {                                   \
        dt_index_add(n_lines, rank, dims, axis, indices, idx_stride, idx_offset, src_strides, src_offset,  \
                     out_strides, src, out);                                                               \
    }                                                                                                      \
    extern "C" __global__ void index_cat_##name(size_t n, size_t rank, const size_t* dims,                \
                                                const size_t* src_strides, size_t src_offset,             \
                                                const T* src, const size_t* dst_strides,                  \
                                                size_t dst_offset, T* dst) {                              \
        DT_GRID_STRIDE(i, n) {                                                                             \
            size_t s = src_offset, d = dst_offset;                                                         \
            dt_offset2(i, rank, dims, src_strides, &s, dst_strides, &d);                                   \
            dst[d] = src[s];                                                                               \
        }                                                                                                  \
    }
DT_FOR_EACH_DTYPE(INDEX_KERNELS)

/// Positions a block sorts in shared memory.
#define DT_SORT_CHUNK 2048

/// Whether (a, ia) comes before (b, ib): positions at or past n (padding)
/// last, then the key order with NaN greatest, then the index.
template <typename T>
__device__ bool dt_sort_before(T a, unsigned long long ia, T b, unsigned long long ib, size_t n, int descending) {
    if (ia >= n || ib >= n) return ib >= n && ia < ib;
    bool a_nan = a != a, b_nan = b != b;
    if (a_nan != b_nan) return descending ? a_nan : b_nan;
    if (!a_nan && a != b) return descending ? a > b : a < b;
    return ia < ib;
}

/// The bitonic stages of sequence sizes `first_size..=last_size` (powers of
/// two) on `count` positions in shared memory, of which the first is the
/// row position `base`; the stages of `first_size` start at `first_stride`.
/// A block's threads share the pairs; every thread calls this.
template <typename T>
__device__ void dt_bitonic_shared(T* keys, unsigned long long* idx, size_t count, size_t base, size_t first_size,
                                  size_t last_size, size_t first_stride, size_t n, int descending) {
    for (size_t size = first_size; size <= last_size; size <<= 1) {
        for (size_t stride = size == first_size ? first_stride : size >> 1; stride > 0; stride >>= 1) {
            for (size_t t = threadIdx.x; t < count / 2; t += blockDim.x) {
                size_t lo = 2 * t - (t & (stride - 1)), hi = lo + stride;
                bool ascending = ((base + lo) & size) == 0;
                bool swap = ascending ? dt_sort_before(keys[hi], idx[hi], keys[lo], idx[lo], n, descending)
                                      : dt_sort_before(keys[lo], idx[lo], keys[hi], idx[hi], n, descending);
                if (swap) {
                    T key = keys[lo];
                    keys[lo] = keys[hi];
                    keys[hi] = key;
                    unsigned long long at = idx[lo];
                    idx[lo] = idx[hi];
                    idx[hi] = at;
                }
            }
            __syncthreads();
        }
    }
}

/// Loads `count` positions of a row starting at `base` into shared memory:
/// from `src` (a dense row of n) when `from_src`, else from the scratch row.
template <typename T>
__device__ void dt_sort_load(T* keys, unsigned long long* idx, size_t count, size_t base, size_t n, bool from_src,
                             const T* src, const T* scratch_keys, const long long* scratch_idx) {
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
        if (from_src) {
            idx[i] = base + i;
            keys[i] = base + i < n ? src[base + i] : T(0);
        } else {
            idx[i] = (unsigned long long)scratch_idx[base + i];
            keys[i] = scratch_keys[base + i];
        }
    }
    __syncthreads();
}

#define SORT_KERNELS(name, T)                                                                               \
    extern "C" __global__ void index_sort_rows_##name(size_t rows, size_t n, size_t k, int descending,     \
                                                      const T* src, long long* out) {                      \
        __shared__ T keys[DT_SORT_CHUNK];                                                                   \
        __shared__ unsigned long long idx[DT_SORT_CHUNK];                                                   \
        size_t p = 1;                                                                                       \
        while (p < n) p <<= 1;                                                                              \
        for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {                                       \
            dt_sort_load<T>(keys, idx, p, 0, n, true, src + row * n, nullptr, nullptr);                     \
            dt_bitonic_shared(keys, idx, p, 0, 2, p, 1, n, descending);                                     \
            for (size_t i = threadIdx.x; i < k; i += blockDim.x) out[row * k + i] = (long long)idx[i];      \
            __syncthreads();                                                                                \
        }                                                                                                   \
    }                                                                                                       \
    extern "C" __global__ void index_sort_chunks_##name(size_t rows, size_t n, size_t p, size_t size,      \
                                                        int descending, const T* src, T* scratch_keys,     \
                                                        long long* scratch_idx) {                          \
        __shared__ T keys[DT_SORT_CHUNK];                                                                   \
        __shared__ unsigned long long idx[DT_SORT_CHUNK];                                                   \
        size_t chunks = rows * (p / DT_SORT_CHUNK);                                                         \
        for (size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {                               \
            size_t row = chunk / (p / DT_SORT_CHUNK), base = (chunk % (p / DT_SORT_CHUNK)) * DT_SORT_CHUNK; \
            dt_sort_load<T>(keys, idx, DT_SORT_CHUNK, base, n, size == 0, src + row * n,                    \
                            scratch_keys + row * p, scratch_idx + row * p);                                 \
            if (size == 0) {                                                                                \
                dt_bitonic_shared(keys, idx, DT_SORT_CHUNK, base, 2, DT_SORT_CHUNK, 1, n, descending);      \
            } else {                                                                                        \
                dt_bitonic_shared(keys, idx, DT_SORT_CHUNK, base, size, size, DT_SORT_CHUNK / 2, n,         \
                                  descending);                                                              \
            }                                                                                               \
            for (size_t i = threadIdx.x; i < DT_SORT_CHUNK; i += blockDim.x) {                              \
                scratch_keys[row * p + base + i] = keys[i];                                                 \
                scratch_idx[row * p + base + i] = (long long)idx[i];                                        \
            }                                                                                               \
            __syncthreads();                                                                                \
        }                                                                                                   \
    }                                                                                                       \
    extern "C" __global__ void index_sort_step_##name(size_t rows, size_t n, size_t p, size_t size,        \
                                                      size_t stride, int descending, T* keys,               \
                                                      long long* idx) {                                     \
        DT_GRID_STRIDE(t, rows * (p / 2)) {                                                                 \
            size_t row = t / (p / 2), pair = t % (p / 2);                                                   \
            size_t lo = 2 * pair - (pair & (stride - 1)), hi = lo + stride;                                 \
            bool ascending = (lo & size) == 0;                                                              \
            T* k = keys + row * p;                                                                          \
            long long* at = idx + row * p;                                                                  \
            unsigned long long ilo = (unsigned long long)at[lo], ihi = (unsigned long long)at[hi];          \
            bool swap = ascending ? dt_sort_before(k[hi], ihi, k[lo], ilo, n, descending)                   \
                                  : dt_sort_before(k[lo], ilo, k[hi], ihi, n, descending);                  \
            if (swap) {                                                                                     \
                T key = k[lo];                                                                              \
                k[lo] = k[hi];                                                                              \
                k[hi] = key;                                                                                \
                at[lo] = (long long)ihi;                                                                    \
                at[hi] = (long long)ilo;                                                                    \
            }                                                                                               \
        }                                                                                                   \
    }
DT_FOR_EACH_DTYPE(SORT_KERNELS)

extern "C" __global__ void index_sort_take_i64(size_t rows, size_t p, size_t k, const long long* idx,
                                               long long* out) {
    DT_GRID_STRIDE(i, rows * k) out[i] = idx[(i / k) * p + i % k];
}
