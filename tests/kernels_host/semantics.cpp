// Semantics of the CUDA kernels, checked on the host against plain C++
// references: broadcasting and strided addressing, integer wrapping and
// division, Rust `as` casts, NaN rules, argmax/argmin ties and NaN, block
// reductions over several warps and blocks, two-pass whole-tensor
// reductions, softmax special values, and the index family. Built and run
// by tests/kernels_host.rs with shim.h force-included; exits non-zero and
// prints FAIL lines on any mismatch.
#include "copy.cu"
#include "binary.cu"
#include "unary.cu"
#include "compare.cu"
#include "reduce.cu"
#include "softmax.cu"
#include "index.cu"
#include <thread>
#include <vector>
#include <functional>
#include <cstdio>
#include <cstdint>
#include <limits>
thread_local dim3_ threadIdx, blockIdx;
dim3_ blockDim, gridDim;
std::barrier<>* g_block_barrier;
std::barrier<>* g_warp_barrier[32];
unsigned long long g_slots[32][32];
std::mutex g_atomic;
void launch(unsigned grid, unsigned block, std::function<void()> f) {
    gridDim.x = grid; blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b) {
        std::barrier<> bb(block); g_block_barrier = &bb;
        std::vector<std::unique_ptr<std::barrier<>>> wb;
        for (unsigned w = 0; w < (block + 31) / 32; ++w) { wb.emplace_back(new std::barrier<>(std::min(32u, block - w * 32))); g_warp_barrier[w] = wb.back().get(); }
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < block; ++t) ts.emplace_back([&, t, b] { threadIdx.x = t; blockIdx.x = b; f(); });
        for (auto& t : ts) t.join();
    }
}
int fails = 0;
#define CHECK(c) do { if (!(c)) { ++fails; printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #c); } } while (0)
bool same(double a, double b, double tol = 1e-5) { if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b); if (std::isinf(a) || std::isinf(b)) return a == b; return std::fabs(a - b) <= tol * (1 + std::fabs(b)); }
const float NaNf = std::numeric_limits<float>::quiet_NaN();
const float INFf = std::numeric_limits<float>::infinity();

int main() {
    // binary: out [2,3,4]; lhs is a transposed [4,3,2] storage viewed as [2,3,4]; rhs [3] broadcast on axis 1.
    {
        std::vector<float> l(24), r = {1, NaNf, -2}; for (int i = 0; i < 24; ++i) l[i] = i * 0.5f - 3;
        size_t dims[] = {2, 3, 4}, ls[] = {1, 2, 6}, rs[] = {0, 1, 0};
        std::vector<float> o(24);
        for (auto kind : {0, 1, 2}) {
            launch(2, 64, [&] {
                if (kind == 0) binary_add_f32(24, 3, dims, ls, 0, rs, 0, l.data(), r.data(), o.data());
                if (kind == 1) binary_maximum_f32(24, 3, dims, ls, 0, rs, 0, l.data(), r.data(), o.data());
                if (kind == 2) binary_sub_scalar_f32(24, 3, dims, ls, 0, l.data(), 10.0f, 1, o.data());
            });
            for (size_t i = 0; i < 2; ++i) for (size_t j = 0; j < 3; ++j) for (size_t k = 0; k < 4; ++k) {
                float a = l[i * 1 + j * 2 + k * 6], b = r[j], want;
                if (kind == 0) want = a + b; else if (kind == 1) want = (std::isnan(a) || a > b) ? a : b; else want = 10.0f - a;
                CHECK(same(o[i * 12 + j * 4 + k], want));
            }
        }
        long long li[] = {INT64_MAX, INT64_MIN, -7, 7}, ri[] = {1, -1, 2, 0}; long long oi[4];
        launch(1, 32, [&] { binary_add_i64(4, 0, nullptr, nullptr, 0, nullptr, 0, li, ri, oi); });
        CHECK(oi[0] == INT64_MIN && oi[1] == INT64_MAX && oi[2] == -5 && oi[3] == 7);
        launch(1, 32, [&] { binary_div_i64(4, 0, nullptr, nullptr, 0, nullptr, 0, li, ri, oi); });
        CHECK(oi[0] == INT64_MAX && oi[1] == INT64_MIN && oi[2] == -3 && oi[3] == 0);
        unsigned char a8[] = {250, 3, 16}, b8[] = {10, 0, 16}, o8[3];
        launch(1, 32, [&] { binary_mul_u8(3, 0, nullptr, nullptr, 0, nullptr, 0, a8, b8, o8); });
        CHECK(o8[0] == (unsigned char)2500 && o8[1] == 0 && o8[2] == 0);
        unsigned long long zeros = 0; size_t d1[] = {3}, s1[] = {1};
        launch(2, 32, [&] { binary_count_zero_u8(3, 1, d1, s1, 0, b8, &zeros); });
        CHECK(zeros == 1);
    }
    // casts and unary
    {
        float f[] = {NaNf, 300.7f, -5.5f, 2.9f, 1e30f, -1e30f, INFf, -0.0f}; unsigned char u[8]; long long q[8];
        launch(1, 32, [&] { copy_cast_f32_to_u8(8, 0, nullptr, nullptr, 0, f, u); copy_cast_f32_to_i64(8, 0, nullptr, nullptr, 0, f, q); });
        unsigned char wu[] = {0, 255, 0, 2, 255, 0, 255, 0}; long long wq[] = {0, 300, -5, 2, INT64_MAX, INT64_MIN, INT64_MAX, 0};
        for (int i = 0; i < 8; ++i) { CHECK(u[i] == wu[i]); CHECK(q[i] == wq[i]); }
        long long big[] = {300, -1}; unsigned char bu[2];
        launch(1, 32, [&] { copy_cast_i64_to_u8(2, 0, nullptr, nullptr, 0, big, bu); });
        CHECK(bu[0] == 44 && bu[1] == 255);
        float x[] = {-0.0f, -3, NaNf, 5, 0.5f}; float o[5];
        launch(1, 32, [&] { unary_abs_f32(5, 0, nullptr, nullptr, 0, x, o); });
        CHECK(o[0] == 0 && !std::signbit(o[0]) && o[1] == 3 && std::isnan(o[2]));
        launch(1, 32, [&] { unary_clamp_f32(5, 0, nullptr, nullptr, 0, x, 2.0f, 1.0f, o); });
        CHECK(o[0] == 1 && o[1] == 1 && std::isnan(o[2]) && o[3] == 1);
        launch(1, 32, [&] { unary_neg_f32(5, 0, nullptr, nullptr, 0, x, o); });
        CHECK(o[0] == 0 && !std::signbit(o[0]) && o[3] == -5);
        float s[] = {0, -1000, 1000}; launch(1, 32, [&] { unary_sigmoid_f32(3, 0, nullptr, nullptr, 0, s, o); });
        CHECK(o[0] == 0.5f && o[1] == 0 && o[2] == 1);
        long long m[] = {INT64_MIN}; long long mo[1];
        launch(1, 32, [&] { unary_abs_i64(1, 0, nullptr, nullptr, 0, m, mo); }); CHECK(mo[0] == INT64_MIN);
    }
    // reductions: x [7, 45] (dense), along axis 1 (rows kernel) and axis 0 (cols kernel)
    {
        const size_t R = 7, C = 45; std::vector<float> x(R * C);
        for (size_t i = 0; i < R * C; ++i) x[i] = float((i * 37) % 11) - 5;
        x[2 * C + 9] = NaNf; x[2 * C + 30] = NaNf; // row 2: first NaN at 9
        x[4 * C + 3] = 100; x[4 * C + 40] = 100;   // row 4: tie, first at 3
        std::vector<float> o(R), oc(C); std::vector<long long> ai(R), aic(C);
        size_t od[] = {R}, os[] = {C};
        launch(3, 64, [&] { reduce_sum_rows_f32(R, C, 1, 1, od, os, 0, x.data(), o.data()); });
        for (size_t r = 0; r < R; ++r) { double s = 0; for (size_t c = 0; c < C; ++c) s += x[r * C + c]; CHECK(same(o[r], s)); }
        launch(3, 64, [&] { reduce_argmax_rows_f32(R, C, 1, 1, od, os, 0, x.data(), ai.data()); });
        CHECK(ai[2] == 9 && ai[4] == 3);
        for (size_t r = 0; r < R; ++r) if (r != 2 && r != 4) { size_t b = 0; for (size_t c = 1; c < C; ++c) if (x[r * C + c] > x[r * C + b]) b = c; CHECK((size_t)ai[r] == b); }
        launch(2, 32, [&] { reduce_argmin_cols_f32(R, C, 1, 1, od, os, 0, x.data(), ai.data()); });
        CHECK(ai[2] == 9);
        launch(1, 64, [&] { reduce_max_rows_f32(R, C, 1, 1, od, os, 0, x.data(), o.data()); });
        CHECK(std::isnan(o[2]) && o[4] == 100);
        size_t cd[] = {C}, cs[] = {1};
        launch(2, 32, [&] { reduce_sum_cols_f32(C, R, C, 1, cd, cs, 0, x.data(), oc.data()); });
        for (size_t c = 0; c < C; ++c) { double s = 0; for (size_t r = 0; r < R; ++r) s += x[r * C + c]; CHECK(same(oc[c], s)); }
        launch(2, 64, [&] { reduce_argmax_rows_f32(C, R, C, 1, cd, cs, 0, x.data(), aic.data()); });
        for (size_t c = 0; c < C; ++c) { size_t b = 0; bool nan = false; for (size_t r = 0; r < R; ++r) { float v = x[r * C + c]; if (std::isnan(v)) { b = r; nan = true; break; } if (v > x[b * C + c]) b = r; } (void)nan; CHECK((size_t)aic[c] == b); }
        // whole-tensor, two passes, i64 sum wraps and argmin
        const size_t N = 1000; std::vector<long long> v(N); for (size_t i = 0; i < N; ++i) v[i] = (long long)((i * 7919) % 1000) - 400;
        v[10] = INT64_MAX; v[11] = 5; v[700] = -400;
        std::vector<long long> part(4), outv(1);
        launch(4, 64, [&] { reduce_sum_all_i64(N, v.data(), part.data()); });
        launch(1, 64, [&] { reduce_sum_all_i64(4, part.data(), outv.data()); });
        unsigned long long ref = 0; for (auto e : v) ref += (unsigned long long)e; CHECK(outv[0] == (long long)ref);
        std::vector<long long> pv(4), pi(4), fv(1), fi(1);
        launch(4, 64, [&] { reduce_argmin_all_i64(N, v.data(), nullptr, pv.data(), pi.data()); });
        launch(1, 32, [&] { reduce_argmin_all_i64(4, pv.data(), pi.data(), fv.data(), fi.data()); });
        size_t b = 0; for (size_t i = 1; i < N; ++i) if (v[i] < v[b]) b = i; CHECK((size_t)fi[0] == b && fv[0] == v[b]);
        unsigned char u8s[300]; for (int i = 0; i < 300; ++i) u8s[i] = 200; unsigned char up[2], uo[1];
        launch(2, 32, [&] { reduce_sum_all_u8(300, u8s, up); }); launch(1, 32, [&] { reduce_sum_all_u8(2, up, uo); });
        CHECK(uo[0] == (unsigned char)(300 * 200));
    }
    // softmax: [3, 50] last axis, and axis 0 of [4, 3] (inner 3)
    {
        std::vector<double> x(150), o(150);
        for (int i = 0; i < 150; ++i) x[i] = std::sin(i) * 30;
        x[60] = -INFINITY; for (int k = 100; k < 150; ++k) x[k] = -INFINITY;
        for (int lg = 0; lg < 2; ++lg) {
            launch(2, 64, [&] { if (lg) softmax_log_f64(3, 50, 1, x.data(), o.data()); else softmax_plain_f64(3, 50, 1, x.data(), o.data()); });
            for (int r = 0; r < 2; ++r) { double m = -INFINITY, s = 0; for (int k = 0; k < 50; ++k) m = std::max(m, x[r * 50 + k]); for (int k = 0; k < 50; ++k) s += std::exp(x[r * 50 + k] - m);
                for (int k = 0; k < 50; ++k) { double e = x[r * 50 + k] - m; CHECK(same(o[r * 50 + k], lg ? e - std::log(s) : std::exp(e) / s, 1e-12)); } }
            for (int k = 100; k < 150; ++k) CHECK(std::isnan(o[k]));
        }
        float y[12], yo[12]; for (int i = 0; i < 12; ++i) y[i] = float(i % 5);
        launch(2, 32, [&] { softmax_plain_f32(3, 4, 3, y, yo); });
        for (int c = 0; c < 3; ++c) { double m = -1e9, s = 0; for (int k = 0; k < 4; ++k) m = std::max(m, (double)y[k * 3 + c]); for (int k = 0; k < 4; ++k) s += std::exp(y[k * 3 + c] - m);
            for (int k = 0; k < 4; ++k) CHECK(same(yo[k * 3 + c], std::exp(y[k * 3 + c] - m) / s)); }
    }
    // compare / where
    {
        float a[] = {1, NaNf, 3}, b[] = {1, NaNf, 2}; unsigned char m[3];
        launch(1, 32, [&] { compare_ne_f32(3, 0, nullptr, nullptr, 0, nullptr, 0, a, b, m); }); CHECK(m[0] == 0 && m[1] == 1 && m[2] == 1);
        launch(1, 32, [&] { compare_ge_f32(3, 0, nullptr, nullptr, 0, nullptr, 0, a, b, m); }); CHECK(m[0] == 1 && m[1] == 0 && m[2] == 1);
        unsigned char c[] = {7, 0}; long long t[] = {1, 2, 3}, f[] = {-1}; long long o[6];
        size_t d[] = {2, 3}, cs[] = {1, 0}, ts[] = {0, 1}, fs[] = {0, 0};
        launch(1, 32, [&] { compare_where_i64(6, 2, d, cs, 0, ts, 0, fs, 0, c, t, f, o); });
        long long w[] = {1, 2, 3, -1, -1, -1}; for (int i = 0; i < 6; ++i) CHECK(o[i] == w[i]);
        unsigned char nn[2]; launch(1, 32, [&] { compare_not_u8(2, 0, nullptr, nullptr, 0, c, nn); }); CHECK(nn[0] == 0 && nn[1] == 1);
    }
    // index family on src [3, 4] = 0..11
    {
        float src[12]; for (int i = 0; i < 12; ++i) src[i] = float(i);
        long long idx[] = {2, 0, 2}; float o[12];
        size_t od[] = {3, 3}, ss[] = {4, 1};
        launch(1, 32, [&] { index_select_f32(9, 2, od, ss, 0, 1, idx, 1, 0, src, o); }); // axis 1
        float w1[] = {2, 0, 2, 6, 4, 6, 10, 8, 10}; for (int i = 0; i < 9; ++i) CHECK(o[i] == w1[i]);
        size_t od0[] = {3, 4};
        launch(1, 32, [&] { index_select_f32(12, 2, od0, ss, 0, 0, idx, 1, 0, src, o); }); // axis 0
        for (int i = 0; i < 12; ++i) CHECK(o[i] == src[idx[i / 4] * 4 + i % 4]);
        // gather axis 1 with index [3, 2]
        long long gi[] = {3, 0, 1, 1, 0, 2}; size_t gd[] = {3, 2}, gs[] = {2, 1};
        launch(1, 32, [&] { index_gather_f32(6, 2, gd, gs, 0, ss, 0, 1, gi, src, o); });
        float w2[] = {3, 0, 5, 5, 8, 10}; for (int i = 0; i < 6; ++i) CHECK(o[i] == w2[i]);
        // gather axis 0 with index [2, 4] read through a transposed [4, 2] storage
        long long g0[] = {2, 1, 0, 1, 0, 2, 2, 0}; size_t g0d[] = {2, 4}, g0s[] = {1, 2};
        launch(1, 32, [&] { index_gather_f32(8, 2, g0d, g0s, 0, ss, 0, 0, g0, src, o); });
        for (int p = 0; p < 8; ++p) CHECK(o[p] == src[g0[(p / 4) * 1 + (p % 4) * 2] * 4 + p % 4]);
        // scatter_add along axis 0: dst zeros [3, 4]; index [2, 4]; src ones [2, 4] in a [2, 5] storage
        float dst[12] = {}; long long si[] = {1, 1, 0, 2, 1, 0, 0, 2}; float ones[10]; for (auto& e : ones) e = 1;
        size_t sd[] = {2, 4}, sis[] = {4, 1}, srs[] = {5, 1}, dstr[] = {4, 1};
        launch(1, 32, [&] { index_scatter_add_f32(4, 2, sd, 0, sis, 0, srs, 0, dstr, si, ones, dst); });
        float w3[] = {0, 1, 2, 0, 2, 1, 0, 0, 0, 0, 0, 2}; for (int i = 0; i < 12; ++i) CHECK(dst[i] == w3[i]);
        // index_add along axis 1: out [3, 4] zeros, indices [1, 1, 3], src [3, 3] = 1..9
        float out[12] = {}; long long ii[] = {1, 1, 3}; float s9[9]; for (int i = 0; i < 9; ++i) s9[i] = float(i + 1);
        size_t ad[] = {3, 3}, as[] = {3, 1}, aos[] = {4, 1};
        launch(1, 32, [&] { index_add_f32(3, 2, ad, 1, ii, 1, 0, as, 0, aos, s9, out); });
        float w4[] = {0, 3, 0, 3, 0, 9, 0, 6, 0, 15, 0, 9}; for (int i = 0; i < 12; ++i) CHECK(out[i] == w4[i]);
        // cat [3,4] (transposed view of src) and [3,1] along axis 1 into [3,5]
        float co[15]; size_t cd[] = {3, 4}, cts[] = {1, 3}, dsts[] = {5, 1};
        launch(1, 32, [&] { index_cat_f32(12, 2, cd, cts, 0, src, dsts, 0, co); });
        float tail[] = {-1, -2, -3}; size_t td[] = {3, 1}, tts[] = {1, 1};
        launch(1, 32, [&] { index_cat_f32(3, 2, td, tts, 0, tail, dsts, 4, co); });
        for (int r = 0; r < 3; ++r) { for (int c = 0; c < 4; ++c) CHECK(co[r * 5 + c] == src[r + c * 3]); CHECK(co[r * 5 + 4] == tail[r]); }
        unsigned long long bad = 0; long long bi[] = {0, 3, -1, 2}; size_t bd[] = {4}, bs[] = {1};
        launch(2, 32, [&] { index_count_out_of_range_i64(4, 1, bd, bs, 0, bi, 3, &bad); }); CHECK(bad == 2);
    }
    printf(fails ? "%d FAILED\n" : "all ok\n", fails);
    return fails != 0;
}
