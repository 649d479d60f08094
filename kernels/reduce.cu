// Reductions along one axis and over all elements: serves the Rust op family
// `ops::reduce` (`ReduceKernel::{reduce, arg_reduce}`): sum, max, min,
// argmax, argmin (mean is sum followed by a scalar division on the host);
// and standardisation per group with its gradient
// (`ReduceKernel::{standardize, standardize_backward}`), batch norm's and
// layer norm's core.
//
// Semantics follow the CPU backend: integer sums wrap; max/min let NaN win;
// argmax/argmin return the index of the first NaN, else of the first
// occurrence of the extreme value. Arg-reductions are exact whatever the
// launch shape (see dt_arg_combine in common.cuh). Float sums are combined
// in a different order from the CPU's and agree to rounding.
//
// A reduction of `axis` is described as on the CPU: output element o folds
// src[base(o) + k * step] for k < len, where len and step are the size and
// stride of the reduced axis, and base(o) is the storage position of
// row-major element o of the layout *without* that axis:
// (rank, dims, strides, offset) with rank <= 7 (rank 0 = outputs at offset + o,
// e.g. a whole-tensor reduction with n_out = 1). Outputs are dense.
//
// Kernels (OP = sum, max, min; T = f32, f64, i64, u8):
//   reduce_<OP>_rows_<T>(size_t n_out, size_t len, size_t step, size_t rank,
//                        const size_t* dims, const size_t* strides, size_t offset,
//                        const T* src, T* out)
//       one block per output (grid-stride over outputs): for long axes.
//       Block size: a multiple of 32, at most 1024.
//   reduce_<OP>_cols_<T>(same arguments)
//       one thread per output folding its axis sequentially: for short axes
//       with many outputs, e.g. summing axis 0 of [len, many] (neighbouring
//       threads read neighbouring elements). Any block size.
//   reduce_<OP>_tiles_<T>(same arguments)
//       for a reduced axis that is not contiguous: a block takes 32
//       neighbouring outputs (so a warp's loads are adjacent) and splits the
//       axis among blockDim.x / 32 groups of threads, then combines the
//       groups in shared memory; grid-stride over tiles of 32 outputs.
//       Block size: a multiple of 32, at most 1024.
//   reduce_<OP>_scan_<T>(size_t lines, size_t len, size_t inner,
//                        unsigned reverse, const T* src, T* out)
//       the running fold along the middle axis of a dense [outer, len, inner]
//       input (cumsum for OP = sum): one thread per line of lines = outer *
//       inner, folding it in order (from the end when reverse), so results
//       match the CPU's bit for bit. Any block size.
//   reduce_<OP>_all_<T>(size_t n, const T* src, T* partials)
//       whole dense input: every block folds a grid-stride share of src[0..n]
//       and writes partials[blockIdx.x]. Launch with G <= 1024 blocks, then
//       once more with one block on (G, partials, out) to get out[0].
//       Block size: a multiple of 32, at most 1024.
//   reduce_standardize_stats_<T>(size_t outer, size_t groups, size_t inner,
//           const T* x, T* mean, T* var)        (T = f32, f64)
//       x dense [outer, groups, inner]: one block per group (grid-stride)
//       writes the group's mean and biased variance over its outer * inner
//       elements, in two passes (deviations from the mean, as on the CPU).
//   reduce_standardize_apply_<T>(size_t n, size_t groups, size_t inner,
//           const T* x, const T* mean, const T* var, T eps,
//           const T* weight, const T* bias, size_t per_inner, T* out)
//       out = (x - mean) / sqrt(var + eps), times weight plus bias where
//       weight is not null (indexed by group, or by the position along
//       inner where per_inner), element-wise over n = outer * groups *
//       inner.
//   reduce_standardize_backward_sums_<T>(size_t outer, size_t groups,
//           size_t inner, const T* x, const T* mean, const T* var, T eps,
//           const T* inner_weight, const T* g, T* sum_g, T* sum_gx)
//       per group (one block each): with gw = g * inner_weight[k % inner]
//       (g where null), sum_g[c] = sum(gw), sum_gx[c] = sum(gw * xhat),
//       xhat = (x - mean) / sqrt(var + eps).
//   reduce_standardize_backward_columns_<T>(size_t rows, size_t inner,
//           const T* x, const T* mean, const T* var, T eps, const T* g,
//           T* sum_g, T* sum_gx)
//       x, g dense [rows, inner], a group per row: per column j (one block
//       each), sum_g[j] = sum(g), sum_gx[j] = sum(g * xhat) over the rows.
//   reduce_standardize_backward_apply_<T>(size_t n, size_t groups,
//           size_t inner, const T* x, const T* mean, const T* var, T eps,
//           const T* weight, size_t per_inner, const T* g, const T* sum_g,
//           const T* sum_gx, T* out)
//       out = a * (gw - sum_g / M - xhat * sum_gx / M), M = n / groups:
//       along inner gw = g * weight[i % inner] and a = 1 / sqrt(var + eps);
//       else gw = g and a = weight[c] / sqrt(var + eps) (weight 1 where null).
//   reduce_<ARG>_rows_<T> / reduce_<ARG>_cols_<T>   (ARG = argmax, argmin)
//       as the rows/cols kernels, with `long long* out` holding the index
//       k along the axis. len must be at least 1.
//   reduce_<ARG>_all_<T>(size_t n, const T* src, const long long* src_idx,
//                        T* val_out, long long* idx_out)
//       two-pass whole-input arg-reduction: pass 1 with src_idx = NULL (the
//       index of src[i] is i) writes one (value, index) pair per block; pass 2
//       with one block and src_idx = pass 1's indices reduces the pairs.
//       n must be at least 1.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

template <typename Op, typename T>
__device__ void dt_reduce_rows(size_t n_out, size_t len, size_t step, size_t rank, const size_t* dims,
                               const size_t* strides, size_t offset, const T* src, T* out, T* scratch) {
    // The loop bound depends on blockIdx only, so every thread of a block
    // takes the same trips and reaches the barriers in dt_block_reduce.
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        size_t base = dt_offset(o, rank, dims, strides, offset);
        T acc = dt_fold<Op, T>(threadIdx.x, len, blockDim.x, [&](size_t k) { return src[base + k * step]; });
        acc = dt_block_reduce<Op>(acc, scratch);
        if (threadIdx.x == 0) out[o] = acc;
    }
}

template <typename Op, typename T>
__device__ void dt_reduce_cols(size_t n_out, size_t len, size_t step, size_t rank, const size_t* dims,
                               const size_t* strides, size_t offset, const T* src, T* out) {
    DT_GRID_STRIDE(o, n_out) {
        size_t base = dt_offset(o, rank, dims, strides, offset);
        out[o] = dt_fold<Op, T>(0, len, 1, [&](size_t k) { return src[base + k * step]; });
    }
}

template <typename Op, typename T>
__device__ void dt_reduce_tiles(size_t n_out, size_t len, size_t step, size_t rank, const size_t* dims,
                                const size_t* strides, size_t offset, const T* src, T* out, T* scratch) {
    // Lane = output within a tile of 32, group = which share of the axis.
    const size_t lane = threadIdx.x % 32, group = threadIdx.x / 32, groups = blockDim.x / 32;
    const size_t tiles = (n_out + 31) / 32;
    // Uniform per block, so every thread reaches both barriers.
    for (size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        size_t o = tile * 32 + lane;
        T acc = Op::template identity<T>();
        if (o < n_out) {
            size_t base = dt_offset(o, rank, dims, strides, offset);
            acc = dt_fold<Op, T>(group, len, groups, [&](size_t k) { return src[base + k * step]; });
        }
        scratch[threadIdx.x] = acc;
        __syncthreads();
        if (group == 0 && o < n_out) {
            for (size_t g = 1; g < groups; ++g) acc = Op::apply(acc, scratch[g * 32 + lane]);
            out[o] = acc;
        }
        __syncthreads();
    }
}

template <typename Op, typename T> __device__ void dt_reduce_all(size_t n, const T* src, T* partials, T* scratch) {
    size_t first = (size_t)blockIdx.x * (size_t)blockDim.x + (size_t)threadIdx.x;
    T acc = dt_fold<Op, T>(first, n, (size_t)blockDim.x * (size_t)gridDim.x, [&](size_t i) { return src[i]; });
    acc = dt_block_reduce<Op>(acc, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <typename Op, typename T>
__device__ void dt_scan(size_t lines, size_t len, size_t inner, unsigned reverse, const T* src, T* out) {
    // Neighbouring threads take neighbouring columns of a [outer, len,
    // inner] group, so their loads and stores are adjacent when inner > 1.
    DT_GRID_STRIDE(line, lines) {
        size_t first = (line / inner) * len * inner + line % inner;
        T acc = Op::template identity<T>();
        for (size_t j = 0; j < len; ++j) {
            size_t at = first + (reverse ? len - 1 - j : j) * inner;
            acc = Op::apply(acc, src[at]);
            out[at] = acc;
        }
    }
}

template <bool IsMax, typename T>
__device__ void dt_arg_rows(size_t n_out, size_t len, size_t step, size_t rank, const size_t* dims,
                            const size_t* strides, size_t offset, const T* src, long long* out, T* vals,
                            long long* idxs) {
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        size_t base = dt_offset(o, rank, dims, strides, offset);
        T v = dt_arg_identity<IsMax, T>();
        long long i = DT_ARG_NO_INDEX;
        for (size_t k = threadIdx.x; k < len; k += blockDim.x)
            dt_arg_combine<IsMax>(&v, &i, src[base + k * step], (long long)k);
        dt_block_arg_reduce<IsMax>(&v, &i, vals, idxs);
        if (threadIdx.x == 0) out[o] = i;
    }
}

template <bool IsMax, typename T>
__device__ void dt_arg_cols(size_t n_out, size_t len, size_t step, size_t rank, const size_t* dims,
                            const size_t* strides, size_t offset, const T* src, long long* out) {
    DT_GRID_STRIDE(o, n_out) {
        size_t base = dt_offset(o, rank, dims, strides, offset);
        T v = dt_arg_identity<IsMax, T>();
        long long i = DT_ARG_NO_INDEX;
        for (size_t k = 0; k < len; ++k) dt_arg_combine<IsMax>(&v, &i, src[base + k * step], (long long)k);
        out[o] = i;
    }
}

template <bool IsMax, typename T>
__device__ void dt_arg_all(size_t n, const T* src, const long long* src_idx, T* val_out, long long* idx_out,
                           T* vals, long long* idxs) {
    T v = dt_arg_identity<IsMax, T>();
    long long i = DT_ARG_NO_INDEX;
    DT_GRID_STRIDE(k, n) dt_arg_combine<IsMax>(&v, &i, src[k], src_idx ? src_idx[k] : (long long)k);
    dt_block_arg_reduce<IsMax>(&v, &i, vals, idxs);
    if (threadIdx.x == 0) {
        val_out[blockIdx.x] = v;
        idx_out[blockIdx.x] = i;
    }
}

#define REDUCE_OP(op, Op, name, T)                                                                         \
    extern "C" __global__ void reduce_##op##_rows_##name(size_t n_out, size_t len, size_t step,           \
                                                         size_t rank, const size_t* dims,                 \
                                                         const size_t* strides, size_t offset,            \
                                                         const T* src, T* out) {                          \
        __shared__ T scratch[32];                                                                          \
        dt_reduce_rows<Op>(n_out, len, step, rank, dims, strides, offset, src, out, scratch);             \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_cols_##name(size_t n_out, size_t len, size_t step,           \
                                                         size_t rank, const size_t* dims,                 \
                                                         const size_t* strides, size_t offset,            \
                                                         const T* src, T* out) {                          \
        dt_reduce_cols<Op>(n_out, len, step, rank, dims, strides, offset, src, out);                      \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_tiles_##name(size_t n_out, size_t len, size_t step,          \
                                                          size_t rank, const size_t* dims,                \
                                                          const size_t* strides, size_t offset,           \
                                                          const T* src, T* out) {                         \
        __shared__ T scratch[1024];                                                                        \
        dt_reduce_tiles<Op>(n_out, len, step, rank, dims, strides, offset, src, out, scratch);            \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_scan_##name(size_t lines, size_t len, size_t inner,          \
                                                         unsigned reverse, const T* src, T* out) {        \
        dt_scan<Op>(lines, len, inner, reverse, src, out);                                                 \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_all_##name(size_t n, const T* src, T* partials) {            \
        __shared__ T scratch[32];                                                                          \
        dt_reduce_all<Op>(n, src, partials, scratch);                                                      \
    }

#define ARG_OP(op, is_max, name, T)                                                                        \
    extern "C" __global__ void reduce_##op##_rows_##name(size_t n_out, size_t len, size_t step,           \
                                                         size_t rank, const size_t* dims,                 \
                                                         const size_t* strides, size_t offset,            \
                                                         const T* src, long long* out) {                  \
        __shared__ T vals[32];                                                                             \
        __shared__ long long idxs[32];                                                                     \
        dt_arg_rows<is_max>(n_out, len, step, rank, dims, strides, offset, src, out, vals, idxs);         \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_cols_##name(size_t n_out, size_t len, size_t step,           \
                                                         size_t rank, const size_t* dims,                 \
                                                         const size_t* strides, size_t offset,            \
                                                         const T* src, long long* out) {                  \
        dt_arg_cols<is_max>(n_out, len, step, rank, dims, strides, offset, src, out);                     \
    }                                                                                                      \
    extern "C" __global__ void reduce_##op##_all_##name(size_t n, const T* src, const long long* src_idx, \
                                                        T* val_out, long long* idx_out) {                 \
        __shared__ T vals[32];                                                                             \
        __shared__ long long idxs[32];                                                                     \
        dt_arg_all<is_max>(n, src, src_idx, val_out, idx_out, vals, idxs);                                 \
    }

#define REDUCE_KERNELS(name, T)          \
    REDUCE_OP(sum, DtSum, name, T)       \
    REDUCE_OP(prod, DtProd, name, T)     \
    REDUCE_OP(max, DtMax, name, T)       \
    REDUCE_OP(min, DtMin, name, T)       \
    ARG_OP(argmax, true, name, T)        \
    ARG_OP(argmin, false, name, T)
DT_FOR_EACH_WIDE(REDUCE_KERNELS)

/// Standardisation per group (batch norm's channels, layer norm's rows) of
/// x viewed as dense [outer, groups, inner]; element k of group c is
/// x[((k / inner) * groups + c) * inner + k % inner].
template <typename T>
__device__ void dt_standardize_stats(size_t outer, size_t groups, size_t inner, const T* x, T* mean, T* var,
                                     T* scratch) {
    size_t count = outer * inner;
    for (size_t c = blockIdx.x; c < groups; c += gridDim.x) {
        auto at = [&](size_t k) { return x[((k / inner) * groups + c) * inner + k % inner]; };
        T m = dt_block_reduce<DtSum>(dt_fold<DtSum, T>(threadIdx.x, count, blockDim.x, at), scratch) / (T)count;
        T v = dt_fold<DtSum, T>(threadIdx.x, count, blockDim.x, [&](size_t k) {
            T d = at(k) - m;
            return d * d;
        });
        v = dt_block_reduce<DtSum>(v, scratch) / (T)count;
        if (threadIdx.x == 0) {
            mean[c] = m;
            var[c] = v;
        }
    }
}

template <typename T>
__device__ void dt_standardize_backward_sums(size_t outer, size_t groups, size_t inner, const T* x, const T* mean,
                                             const T* var, T eps, const T* weight, const T* g, T* sum_g, T* sum_gx,
                                             T* scratch) {
    size_t count = outer * inner;
    for (size_t c = blockIdx.x; c < groups; c += gridDim.x) {
        auto index = [&](size_t k) { return ((k / inner) * groups + c) * inner + k % inner; };
        // The gradient times the weight where the weight runs along inner.
        auto scaled = [&](size_t k) { return weight ? g[index(k)] * weight[k % inner] : g[index(k)]; };
        T sg = dt_fold<DtSum, T>(threadIdx.x, count, blockDim.x, scaled);
        sg = dt_block_reduce<DtSum>(sg, scratch);
        T m = mean[c];
        T sgx = dt_fold<DtSum, T>(threadIdx.x, count, blockDim.x, [&](size_t k) { return scaled(k) * (x[index(k)] - m); });
        sgx = dt_block_reduce<DtSum>(sgx, scratch);
        if (threadIdx.x == 0) {
            sum_g[c] = sg;
            sum_gx[c] = sgx / sqrt(var[c] + eps);
        }
    }
}

template <typename T>
__device__ void dt_standardize_backward_columns(size_t rows, size_t inner, const T* x, const T* mean, const T* var,
                                                T eps, const T* g, T* sum_g, T* sum_gx, T* scratch) {
    for (size_t j = blockIdx.x; j < inner; j += gridDim.x) {
        T sg = dt_fold<DtSum, T>(threadIdx.x, rows, blockDim.x, [&](size_t r) { return g[r * inner + j]; });
        sg = dt_block_reduce<DtSum>(sg, scratch);
        T sgx = dt_fold<DtSum, T>(threadIdx.x, rows, blockDim.x, [&](size_t r) {
            size_t i = r * inner + j;
            return g[i] * (x[i] - mean[r]) / sqrt(var[r] + eps);
        });
        sgx = dt_block_reduce<DtSum>(sgx, scratch);
        if (threadIdx.x == 0) {
            sum_g[j] = sg;
            sum_gx[j] = sgx;
        }
    }
}

#define STANDARDIZE_KERNELS(name, T)                                                                               \
    extern "C" __global__ void reduce_standardize_stats_##name(size_t outer, size_t groups, size_t inner,         \
                                                               const T* x, T* mean, T* var) {                    \
        __shared__ T scratch[32];                                                                                  \
        dt_standardize_stats(outer, groups, inner, x, mean, var, scratch);                                        \
    }                                                                                                              \
    extern "C" __global__ void reduce_standardize_apply_##name(size_t n, size_t groups, size_t inner, const T* x, \
                                                               const T* mean, const T* var, T eps,               \
                                                               const T* weight, const T* bias,                   \
                                                               size_t per_inner, T* out) {                       \
        DT_GRID_STRIDE(i, n) {                                                                                     \
            size_t c = (i / inner) % groups;                                                                       \
            size_t a = per_inner ? i % inner : c;                                                                  \
            T y = (x[i] - mean[c]) / sqrt(var[c] + eps);                                                           \
            out[i] = weight ? y * weight[a] + bias[a] : y;                                                         \
        }                                                                                                          \
    }                                                                                                              \
    extern "C" __global__ void reduce_standardize_backward_sums_##name(                                           \
        size_t outer, size_t groups, size_t inner, const T* x, const T* mean, const T* var, T eps,                 \
        const T* inner_weight, const T* g, T* sum_g, T* sum_gx) {                                                  \
        __shared__ T scratch[32];                                                                                  \
        dt_standardize_backward_sums(outer, groups, inner, x, mean, var, eps, inner_weight, g, sum_g, sum_gx,     \
                                     scratch);                                                                     \
    }                                                                                                              \
    extern "C" __global__ void reduce_standardize_backward_columns_##name(                                        \
        size_t rows, size_t inner, const T* x, const T* mean, const T* var, T eps, const T* g, T* sum_g,          \
        T* sum_gx) {                                                                                               \
        __shared__ T scratch[32];                                                                                  \
        dt_standardize_backward_columns(rows, inner, x, mean, var, eps, g, sum_g, sum_gx, scratch);               \
    }                                                                                                              \
    extern "C" __global__ void reduce_standardize_backward_apply_##name(                                          \
        size_t n, size_t groups, size_t inner, const T* x, const T* mean, const T* var, T eps, const T* weight,   \
        size_t per_inner, const T* g, const T* sum_g, const T* sum_gx, T* out) {                                   \
        T count = (T)(n / groups);                                                                                 \
        DT_GRID_STRIDE(i, n) {                                                                                     \
            size_t c = (i / inner) % groups;                                                                       \
            T scale = 1 / sqrt(var[c] + eps);                                                                      \
            T xhat = (x[i] - mean[c]) * scale;                                                                     \
            T w = weight ? weight[per_inner ? i % inner : c] : (T)1;                                               \
            /* Along inner the sums are of g * weight already. */                                                  \
            T gw = per_inner ? g[i] * w : g[i];                                                                    \
            T a = per_inner ? scale : w * scale;                                                                   \
            out[i] = a * (gw - sum_g[c] / count - xhat * sum_gx[c] / count);                                      \
        }                                                                                                          \
    }
DT_FOR_EACH_FLOAT(STANDARDIZE_KERNELS)
