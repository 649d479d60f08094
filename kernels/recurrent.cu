// The fused gates of the recurrent cells: the kernels of the Rust op family
// `ops::recurrent` (src/ops/recurrent/mod.rs documents every operand). One
// thread per (row, hidden unit), in dt_compute<T>::type (float for the half
// types, each result rounded once), as the CPU loop (src/ops/recurrent/cpu.rs):
//
//   recurrent_lstm_gates_<T>(size_t batch, size_t hidden, const T* gx,
//       const T* gh, const T* c, T* out, T* saved, size_t save)
//       gates = gx + gh ([batch, 4H]: input, forget, cell, output);
//       out ([2, batch, H]) = h' then c', c' = f c + i g, h' = o tanh(c');
//       with save != 0, saved ([batch, 5H]) = i, f, g, o, tanh(c').
//   recurrent_lstm_gates_backward_<T>(size_t batch, size_t hidden,
//       const T* dh, const T* dc, const T* saved, const T* c, T* dgates,
//       T* dc_prev)
//       dh, dc: the gradients of h' and c' ([batch, H] each);
//       dgates [batch, 4H], dc_prev [batch, H].
//   recurrent_gru_gates_<T>(size_t batch, size_t hidden, const T* gx,
//       const T* gh, const T* h, T* out, T* saved, size_t save)
//       r = s(gx_r + gh_r), z = s(gx_z + gh_z), n = tanh(gx_n + r gh_n);
//       out ([batch, H]) = n + z (h - n); saved ([batch, 4H]) = r, z, n, gh_n.
//   recurrent_gru_gates_backward_<T>(size_t batch, size_t hidden,
//       const T* grad, const T* saved, const T* h, T* dgx, T* dgh, T* dh)
//
// `saved` may alias `out` when save is 0: it is then never written.
#ifndef DEVTENSOR_COMMON_CUH
#include "common.cuh"
#endif

// The logistic function through e^-|x|, which never overflows.
template <typename T> __device__ inline T dt_recurrent_sigmoid(T x) {
    T e = dt_exp(x >= (T)0 ? -x : x);
    return (x >= (T)0 ? (T)1 : e) / ((T)1 + e);
}

template <typename S>
__device__ void dt_lstm_gates(size_t batch, size_t hidden, const S* gx, const S* gh, const S* c, S* out, S* saved,
                              size_t save) {
    typedef typename dt_compute<S>::type T;
    size_t cells = batch * hidden;
    DT_GRID_STRIDE(e, cells) {
        size_t r = e / hidden, j = e % hidden;
        size_t at = r * 4 * hidden + j;
        T i = dt_recurrent_sigmoid((T)gx[at] + (T)gh[at]);
        T f = dt_recurrent_sigmoid((T)gx[at + hidden] + (T)gh[at + hidden]);
        T g = dt_tanh((T)gx[at + 2 * hidden] + (T)gh[at + 2 * hidden]);
        T o = dt_recurrent_sigmoid((T)gx[at + 3 * hidden] + (T)gh[at + 3 * hidden]);
        T c_next = f * (T)c[e] + i * g;
        T tc = dt_tanh(c_next);
        out[e] = dt_narrow<S>(o * tc);
        out[cells + e] = dt_narrow<S>(c_next);
        if (save) {
            size_t s = r * 5 * hidden + j;
            saved[s] = dt_narrow<S>(i);
            saved[s + hidden] = dt_narrow<S>(f);
            saved[s + 2 * hidden] = dt_narrow<S>(g);
            saved[s + 3 * hidden] = dt_narrow<S>(o);
            saved[s + 4 * hidden] = dt_narrow<S>(tc);
        }
    }
}

template <typename S>
__device__ void dt_lstm_gates_backward(size_t batch, size_t hidden, const S* dh_in, const S* dc_in, const S* saved,
                                       const S* c, S* dgates, S* dc) {
    typedef typename dt_compute<S>::type T;
    size_t cells = batch * hidden;
    DT_GRID_STRIDE(e, cells) {
        size_t r = e / hidden, j = e % hidden;
        size_t s = r * 5 * hidden + j, d = r * 4 * hidden + j;
        T i = (T)saved[s], f = (T)saved[s + hidden], g = (T)saved[s + 2 * hidden];
        T o = (T)saved[s + 3 * hidden], tc = (T)saved[s + 4 * hidden];
        T dh = (T)dh_in[e], dcell = (T)dc_in[e];
        T dct = dcell + dh * o * ((T)1 - tc * tc);
        dgates[d] = dt_narrow<S>(dct * g * i * ((T)1 - i));
        dgates[d + hidden] = dt_narrow<S>(dct * (T)c[e] * f * ((T)1 - f));
        dgates[d + 2 * hidden] = dt_narrow<S>(dct * i * ((T)1 - g * g));
        dgates[d + 3 * hidden] = dt_narrow<S>(dh * tc * o * ((T)1 - o));
        dc[e] = dt_narrow<S>(dct * f);
    }
}

template <typename S>
__device__ void dt_gru_gates(size_t batch, size_t hidden, const S* gx, const S* gh, const S* h, S* out, S* saved,
                             size_t save) {
    typedef typename dt_compute<S>::type T;
    size_t cells = batch * hidden;
    DT_GRID_STRIDE(e, cells) {
        size_t r = e / hidden, j = e % hidden;
        size_t at = r * 3 * hidden + j;
        T rg = dt_recurrent_sigmoid((T)gx[at] + (T)gh[at]);
        T z = dt_recurrent_sigmoid((T)gx[at + hidden] + (T)gh[at + hidden]);
        T ghn = (T)gh[at + 2 * hidden];
        T n = dt_tanh((T)gx[at + 2 * hidden] + rg * ghn);
        out[e] = dt_narrow<S>(n + z * ((T)h[e] - n));
        if (save) {
            size_t s = r * 4 * hidden + j;
            saved[s] = dt_narrow<S>(rg);
            saved[s + hidden] = dt_narrow<S>(z);
            saved[s + 2 * hidden] = dt_narrow<S>(n);
            saved[s + 3 * hidden] = dt_narrow<S>(ghn);
        }
    }
}

template <typename S>
__device__ void dt_gru_gates_backward(size_t batch, size_t hidden, const S* grad, const S* saved, const S* h, S* dgx,
                                      S* dgh, S* dh) {
    typedef typename dt_compute<S>::type T;
    size_t cells = batch * hidden;
    DT_GRID_STRIDE(e, cells) {
        size_t r = e / hidden, j = e % hidden;
        size_t s = r * 4 * hidden + j, d = r * 3 * hidden + j;
        T rg = (T)saved[s], z = (T)saved[s + hidden], n = (T)saved[s + 2 * hidden], ghn = (T)saved[s + 3 * hidden];
        T g = (T)grad[e];
        T dn = g * ((T)1 - z) * ((T)1 - n * n);
        T dr = dn * ghn * rg * ((T)1 - rg);
        T dz = g * ((T)h[e] - n) * z * ((T)1 - z);
        dgx[d] = dt_narrow<S>(dr);
        dgx[d + hidden] = dt_narrow<S>(dz);
        dgx[d + 2 * hidden] = dt_narrow<S>(dn);
        dgh[d] = dt_narrow<S>(dr);
        dgh[d + hidden] = dt_narrow<S>(dz);
        dgh[d + 2 * hidden] = dt_narrow<S>(dn * rg);
        dh[e] = dt_narrow<S>(g * z);
    }
}

#define RECURRENT_KERNELS(name, T)                                                                              \
    extern "C" __global__ void recurrent_lstm_gates_##name(size_t batch, size_t hidden, const T* gx, const T* gh, \
                                                           const T* c, T* out, T* saved, size_t save) {          \
        dt_lstm_gates<T>(batch, hidden, gx, gh, c, out, saved, save);                                           \
    }                                                                                                           \
    extern "C" __global__ void recurrent_lstm_gates_backward_##name(size_t batch, size_t hidden, const T* dh,    \
                                                                    const T* dc, const T* saved, const T* c,    \
                                                                    T* dgates, T* dc_prev) {                    \
        dt_lstm_gates_backward<T>(batch, hidden, dh, dc, saved, c, dgates, dc_prev);                            \
    }                                                                                                           \
    extern "C" __global__ void recurrent_gru_gates_##name(size_t batch, size_t hidden, const T* gx, const T* gh,  \
                                                          const T* h, T* out, T* saved, size_t save) {           \
        dt_gru_gates<T>(batch, hidden, gx, gh, h, out, saved, save);                                            \
    }                                                                                                           \
    extern "C" __global__ void recurrent_gru_gates_backward_##name(size_t batch, size_t hidden, const T* grad,   \
                                                                   const T* saved, const T* h, T* dgx, T* dgh,  \
                                                                   T* dh) {                                     \
        dt_gru_gates_backward<T>(batch, hidden, grad, saved, h, dgx, dgh, dh);                                  \
    }
DT_FOR_EACH_FLOAT(RECURRENT_KERNELS)
DT_FOR_EACH_HALF(RECURRENT_KERNELS)
