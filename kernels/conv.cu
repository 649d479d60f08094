// Convolution and pooling helpers (`ConvKernel::{unfold, fold}` in
// src/ops/conv/cuda.rs): the column ("im2col") form of an image and its
// adjoint. Convolution is then a matrix product and pooling a reduction.
//
// Geometry, all size_t: n, c, h, w (the image [N, C, H, W], dense from
// `offset`), kh, kw (kernel), sh, sw (stride), ph, pw (padding), dh, dw
// (dilation), oh, ow (output size). Output position (y, x) with kernel tap
// (i, j) reads image row y * sh + i * dh - ph and column x * sw + j * dw - pw.
//
// Kernels (T = f32, f64):
//   conv_unfold_<T>(size_t total, <geometry>, const T* img, size_t offset,
//           T pad, T* cols)
//       cols (dense [N, C, KH, KW, OH, OW], total elements) = the image
//       value each output position and tap reads, or `pad` where it falls
//       in the padding.
//   conv_fold_<T>(size_t total, <geometry>, const T* cols, T* img)
//       img (dense [N, C, H, W], total elements) = for every pixel, the sum
//       of the columns entries that read it (padding entries are dropped).
//       One thread per pixel gathers its taps in a fixed order: no atomics,
//       and the same sums as the CPU backend.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

#define DT_CONV_GEOMETRY                                                                             \
    size_t n, size_t c, size_t h, size_t w, size_t kh, size_t kw, size_t sh, size_t sw, size_t ph,   \
        size_t pw, size_t dh, size_t dw, size_t oh, size_t ow

template <typename T>
__device__ void dt_conv_unfold(size_t total, DT_CONV_GEOMETRY, const T* img, size_t offset, T pad, T* cols) {
    DT_GRID_STRIDE(i, total) {
        size_t x = i % ow, rest = i / ow;
        size_t y = rest % oh;
        rest /= oh;
        size_t j = rest % kw;
        rest /= kw;
        size_t k = rest % kh;
        size_t plane = rest / kh; // n * C + c
        // Unsigned wrap-around turns "above the top" into "past the bottom".
        size_t row = y * sh + k * dh - ph, col = x * sw + j * dw - pw;
        cols[i] = (row < h && col < w) ? img[offset + (plane * h + row) * w + col] : pad;
    }
}

template <typename T>
__device__ void dt_conv_fold(size_t total, DT_CONV_GEOMETRY, const T* cols, T* img) {
    DT_GRID_STRIDE(i, total) {
        size_t col = i % w, rest = i / w;
        size_t row = rest % h;
        size_t plane = rest / h;
        T sum = (T)0;
        for (size_t k = 0; k < kh; ++k) {
            size_t ty = row + ph;
            if (ty < k * dh) break;
            ty -= k * dh;
            if (ty % sh != 0 || ty / sh >= oh) continue;
            size_t y = ty / sh;
            for (size_t j = 0; j < kw; ++j) {
                size_t tx = col + pw;
                if (tx < j * dw) break;
                tx -= j * dw;
                if (tx % sw != 0 || tx / sw >= ow) continue;
                size_t x = tx / sw;
                sum += cols[(((plane * kh + k) * kw + j) * oh + y) * ow + x];
            }
        }
        img[i] = sum;
    }
}

#define CONV_KERNELS(name, T)                                                                            \
    extern "C" __global__ void conv_unfold_##name(size_t total, DT_CONV_GEOMETRY, const T* img,        \
                                                  size_t offset, T pad, T* cols) {                      \
        dt_conv_unfold<T>(total, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, img, offset, pad,  \
                          cols);                                                                         \
    }                                                                                                    \
    extern "C" __global__ void conv_fold_##name(size_t total, DT_CONV_GEOMETRY, const T* cols, T* img) { \
        dt_conv_fold<T>(total, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols, img);          \
    }
DT_FOR_EACH_FLOAT(CONV_KERNELS)
