//! Direct `f32` convolution kernels for CPUs with AVX-512, without im2col
//! columns: the forward (stride 1, dilation 1, one group, any kernel size
//! and padding), which also runs the image gradient, and the weight
//! gradient (any stride, padding and dilation).
//!
//! `gemm` runs a convolution's product at 40-55% of the FMA peak, because
//! its shapes are as skinny as a layer's channels. The forward keeps a
//! block of 8 output channels x 32 output pixels (of one row, or of two
//! rows up to 16 wide) in 16 vector registers and, for each input channel
//! and tap, loads the two input vectors once and multiplies them by 8
//! broadcast weights: on the ResNet
//! layer of `benches/peers` (32x32x32x32, 3x3) it ran at about 90% of the
//! peak, 1.25 ms against 2.9 ms for unfold + `gemm`. The weight gradient
//! is laid out the other way (see [`weight_gradient`]).

use super::Unfold2d;
use crate::backend::Cpu;
use crate::backend::cpu::{CpuIsa, output_buffer, pool_threads};
use crate::error::Result;
use rayon::prelude::*;

/// Output channels per register block.
const CHANNELS: usize = 8;
/// Output pixels per register block: two vectors of 16, on one row or two.
const PIXELS: usize = 32;

/// Whether [`conv2d`] runs on this CPU for this geometry: outputs at least
/// 8 pixels wide, since a block is 32 pixels of one row, or of two rows
/// for outputs up to 16 wide, and narrower rows would leave most of it
/// idle.
pub(super) fn applies(g: &Unfold2d) -> bool {
    let w = g.window;
    !cfg!(miri)
        && w.stride == [1, 1]
        && w.dilation == [1, 1]
        && avx512()
        && g.output[0] > 0
        && g.output[1] >= 8
        && g.image.iter().all(|&d| d > 0)
}

/// Whether the kernels here may run: they are AVX-512 code, and run only
/// where the CPU has it and [`Cpu::isa`] allows it.
fn avx512() -> bool {
    Cpu::isa() >= CpuIsa::Avx512
}

/// `conv2d` of the dense image batch `image` (`g.image`) with the dense
/// weight `[out_channels, C, KH, KW]` and an optional bias
/// `[out_channels]`, into a new dense `[N, out_channels, OH, OW]`. Only
/// where [`applies`] holds.
pub(super) fn conv2d(
    image: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    g: &Unfold2d,
    out_channels: usize,
) -> Result<Vec<f32>> {
    let [n, c, h, w] = g.image;
    let ([kh, kw], [ph, pw]) = (g.window.kernel, g.window.padding);
    let [oh, ow] = g.output;
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let taps = kh * kw;
    // The zero-padded images. Fallible, like every kernel output: a size
    // that does not fit is an error, not an abort (saturating, so it fails
    // the same way).
    let len = n.saturating_mul(c).saturating_mul(hp).saturating_mul(wp);
    let mut padded = output_buffer::<f32>("conv2d", len)?;
    padded.fill(0.0);
    pad_planes(image, &mut padded, [h, w], [ph, pw]);
    // The weights as [blocks][C][KH*KW][CHANNELS], zero for the channels
    // past `out_channels` in the last block.
    let blocks = out_channels.div_ceil(CHANNELS);
    let mut packed = output_buffer::<f32>("conv2d", blocks * c * taps * CHANNELS)?;
    packed.fill(0.0);
    for (o, filter) in weight.chunks_exact(c * taps).enumerate() {
        let (block, lane) = (o / CHANNELS, o % CHANNELS);
        for (i, &v) in filter.iter().enumerate() {
            packed[(block * c * taps + i) * CHANNELS + lane] = v;
        }
    }
    let mut out = output_buffer::<f32>("conv2d", n * out_channels * oh * ow)?;
    let shape = Shape { c, kh, kw, hp, wp, oh, ow };
    let run = |(task, out): (usize, &mut [f32])| {
        let (b, block) = (task / blocks, task % blocks);
        let image = &padded[b * c * hp * wp..];
        let weights = &packed[block * c * taps * CHANNELS..][..c * taps * CHANNELS];
        // The block's biases, where the accumulators start.
        let mut biases = [0.0; CHANNELS];
        if let Some(bias) = bias {
            let first = block * CHANNELS;
            let own = &bias[first..(first + CHANNELS).min(out_channels)];
            biases[..own.len()].copy_from_slice(own);
        }
        // SAFETY: `applies` checked that this CPU has AVX-512F.
        unsafe { block_rows(image, weights, &biases, out, &shape) };
    };
    // One task per image and block of output channels (the last block of
    // an image may be short), so that a batch of one still splits.
    let block_len = CHANNELS * oh * ow;
    let tasks = out.chunks_mut(out_channels * oh * ow).flat_map(|image| image.chunks_mut(block_len));
    if pool_threads() > 1 {
        tasks.collect::<Vec<_>>().into_par_iter().enumerate().for_each(run);
    } else {
        tasks.enumerate().for_each(run);
    }
    Ok(out)
}

/// Copies the `[h, w]` planes of `src` into the middle of the zeroed
/// `[h + 2 ph, w + 2 pw]` planes of `padded`.
fn pad_planes(src: &[f32], padded: &mut [f32], [h, w]: [usize; 2], [ph, pw]: [usize; 2]) {
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    for (plane, src) in src.chunks_exact(h * w).enumerate() {
        for (y, row) in src.chunks_exact(w).enumerate() {
            let at = (plane * hp + y + ph) * wp + pw;
            padded[at..at + w].copy_from_slice(row);
        }
    }
}

/// The sizes [`block_rows`] works with.
struct Shape {
    c: usize,
    kh: usize,
    kw: usize,
    hp: usize,
    wp: usize,
    oh: usize,
    ow: usize,
}

/// One block of up to [`CHANNELS`] output channels of one image: `out` is
/// their `[channels, OH, OW]` planes, `image` the padded image from its
/// first channel on (`C` planes of `hp x wp`), `weights` the block's
/// `[C][KH*KW][CHANNELS]`, `biases` the block's channels' biases. Each
/// step computes 32 output pixels in two vectors: 32 of one row, or, for
/// outputs at most 16 wide, one row and the next.
///
/// # Safety
///
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_rows(image: &[f32], weights: &[f32], biases: &[f32; CHANNELS], out: &mut [f32], s: &Shape) {
    use std::arch::x86_64::*;
    let &Shape { c, kh, kw, hp, wp, oh, ow } = s;
    let channels = out.len() / (oh * ow);
    assert!(image.len() >= c * hp * wp, "the padded image");
    assert!(weights.len() >= c * kh * kw * CHANNELS && channels <= CHANNELS, "one block of weights");
    let lanes = |len: usize| -> __mmask16 { (u32::MAX >> (32 - len.min(16))) as __mmask16 };
    // The second vector's pixels: 16 further along the row, or a row down.
    let two_rows = ow <= PIXELS / 2;
    let (second_in, second_out) = if two_rows { (wp, ow) } else { (16, 16) };
    let steps = if two_rows { oh.div_ceil(2) } else { oh * ow.div_ceil(PIXELS) };
    for step in 0..steps {
        // The step's first output pixel and how many lanes each vector holds.
        let (y, x0, first, second) = if two_rows {
            let y = 2 * step;
            (y, 0, lanes(ow), if y + 1 < oh { lanes(ow) } else { 0 })
        } else {
            let (y, x0) = (step / ow.div_ceil(PIXELS), step % ow.div_ceil(PIXELS) * PIXELS);
            let len = ow - x0;
            (y, x0, lanes(len), if len > 16 { lanes(len - 16) } else { 0 })
        };
        // A plain loop: a closure would not inherit this function's target
        // features, and the accumulators left in memory halved the speed.
        let mut acc = [[_mm512_setzero_ps(); 2]; CHANNELS];
        for (acc, &b) in acc.iter_mut().zip(biases) {
            *acc = [_mm512_set1_ps(b); 2];
        }
        for ch in 0..c {
            for dy in 0..kh {
                // Output row y reads padded row y + dy, from column x0.
                let row = (ch * hp + y + dy) * wp + x0;
                for dx in 0..kw {
                    // SAFETY: an enabled lane of the first vector is an output pixel
                    // (y, x) with x < ow, and reads padded pixel (y + dy, x + dx),
                    // inside the image since oh + kh - 1 = hp and ow + kw - 1 = wp at
                    // stride and dilation 1; so does the second's, pixel (y, x + 16) or
                    // (y + 1, x). Disabled lanes read nothing.
                    let (v0, v1) = unsafe {
                        let p = image.as_ptr().add(row + dx);
                        (_mm512_maskz_loadu_ps(first, p), _mm512_maskz_loadu_ps(second, p.wrapping_add(second_in)))
                    };
                    let w = &weights[((ch * kh + dy) * kw + dx) * CHANNELS..][..CHANNELS];
                    for (acc, &wk) in acc.iter_mut().zip(w) {
                        let wk = _mm512_set1_ps(wk);
                        acc[0] = _mm512_fmadd_ps(wk, v0, acc[0]);
                        acc[1] = _mm512_fmadd_ps(wk, v1, acc[1]);
                    }
                }
            }
        }
        for (k, acc) in acc.iter().enumerate().take(channels) {
            let at = (k * oh + y) * ow + x0;
            // SAFETY: the enabled lanes are output pixels of channel k, inside
            // `out`; disabled lanes write nothing.
            unsafe {
                let p = out.as_mut_ptr().add(at);
                _mm512_mask_storeu_ps(p, first, acc[0]);
                _mm512_mask_storeu_ps(p.wrapping_add(second_out), second, acc[1]);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block_rows(_: &[f32], _: &[f32], _: &[f32; CHANNELS], _: &mut [f32], _: &Shape) {
    unreachable!("`applies` is false off x86-64")
}

/// Output channels per vector of the weight gradient's accumulators.
const LANES: usize = 16;
/// Accumulator registers of [`weight_block`]: 24 of the 32, which leaves
/// the output gradient's vectors and a broadcast tap room.
const ACCUMULATORS: usize = 24;

/// Whether [`weight_gradient`] runs on this CPU for this geometry (any
/// stride, padding and dilation, one group).
pub(super) fn weight_gradient_applies(g: &Unfold2d) -> bool {
    !cfg!(miri) && avx512() && g.output.iter().chain(&g.image).all(|&d| d > 0)
}

/// The weight gradient `[out_channels, C, KH, KW]` of `conv2d` from the
/// dense image batch `image` (`g.image`) and the dense output gradient
/// `grad` `[N, out_channels, OH, OW]`: the sum over images and output
/// pixels of `grad[o, pixel] · image[tap at pixel]`; and the bias's, the
/// sum of `grad[o, pixel]`. Only where [`weight_gradient_applies`] holds.
///
/// `gemm` ran this product at about half the FMA peak after `unfold` had
/// written the columns. Here each image's output gradient is transposed to
/// `[OH * OW][channels]`, so that a vector holds 16 output channels of one
/// pixel, and 24 accumulators hold a block of channels x taps while the
/// pixels stream past: per pixel, a few vector loads of the gradient and
/// one broadcast per tap, no columns and no horizontal sums.
pub(super) fn weight_gradient(
    image: &[f32],
    grad: &[f32],
    g: &Unfold2d,
    out_channels: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    const OP: &str = "conv2d";
    let [n, c, h, w] = g.image;
    let ([kh, kw], [sh, sw], [ph, pw], [dh, dw]) =
        (g.window.kernel, g.window.stride, g.window.padding, g.window.dilation);
    let [oh, ow] = g.output;
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let lanes = out_channels.div_ceil(LANES) * LANES;
    // Where each tap of a window reads, from the window's first element in
    // the padded image, in the weight's [C][KH][KW] order.
    let offsets: Vec<usize> = (0..c)
        .flat_map(|ch| (0..kh).flat_map(move |y| (0..kw).map(move |x| (ch * hp + y * dh) * wp + x * dw)))
        .collect();
    let shape = GradShape { oh, ow, row_step: sh * wp, column_step: sw, lanes };
    // Each thread sums its share of the images into its own `[taps][lanes]`
    // and `[lanes]` (the bias's).
    let threads = pool_threads().min(n);
    let per_thread = n.div_ceil(threads);
    let partial = |first: usize| -> Result<(Vec<f32>, Vec<f32>)> {
        let mut padded = output_buffer::<f32>(OP, c.saturating_mul(hp).saturating_mul(wp))?;
        let mut transposed = output_buffer::<f32>(OP, (oh * ow).saturating_mul(lanes))?;
        let mut sums = output_buffer::<f32>(OP, offsets.len().saturating_mul(lanes))?;
        // The borders and the lanes past `out_channels` stay zero.
        padded.fill(0.0);
        transposed.fill(0.0);
        sums.fill(0.0);
        let mut bias_sums = vec![0.0; lanes];
        for b in first..(first + per_thread).min(n) {
            pad_planes(&image[b * c * h * w..][..c * h * w], &mut padded, [h, w], [ph, pw]);
            let src = &grad[b * out_channels * oh * ow..][..out_channels * oh * ow];
            // SAFETY: `weight_gradient_applies` checked for AVX-512F.
            unsafe { transpose_gradient(src, oh * ow, &mut transposed, &mut bias_sums) };
            accumulate(&padded, &transposed, &offsets, &mut sums, &shape);
        }
        Ok((sums, bias_sums))
    };
    let starts = (0..n).step_by(per_thread);
    let partials: Vec<(Vec<f32>, Vec<f32>)> = if threads > 1 {
        starts.collect::<Vec<_>>().into_par_iter().map(partial).collect::<Result<_>>()?
    } else {
        starts.map(partial).collect::<Result<_>>()?
    };
    let taps = offsets.len();
    let mut out = output_buffer::<f32>(OP, out_channels * taps)?;
    for (o, row) in out.chunks_exact_mut(taps).enumerate() {
        for (t, v) in row.iter_mut().enumerate() {
            *v = partials.iter().map(|(sums, _)| sums[t * lanes + o]).sum();
        }
    }
    let bias = (0..out_channels).map(|o| partials.iter().map(|(_, sums)| sums[o]).sum()).collect();
    Ok((out, bias))
}

/// The sizes [`weight_block`] works with: the output's, the steps in the
/// padded image between output rows and columns, and the padded channel
/// count of the transposed gradient.
struct GradShape {
    oh: usize,
    ow: usize,
    row_step: usize,
    column_step: usize,
    lanes: usize,
}

/// `grad`, one image's output gradient `[channels][pixels]`, as `out`
/// `[pixels][lanes]` (the lanes past `channels` zero), by 16 x 16 tiles
/// transposed in registers: a scalar copy cost as much as the products,
/// and a gather per pixel still half as much. Adds each channel's sum to
/// `sums` (`[lanes]`), the bias's gradient, from the transposed tiles.
///
/// # Safety
///
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_gradient(grad: &[f32], pixels: usize, out: &mut [f32], sums: &mut [f32]) {
    use std::arch::x86_64::*;
    let (channels, lanes) = (grad.len() / pixels, sums.len());
    assert!(channels <= lanes && out.len() >= pixels * lanes, "the transposed gradient has room");
    for first in (0..channels).step_by(LANES) {
        let live = (channels - first).min(LANES);
        for start in (0..pixels).step_by(LANES) {
            let len = (pixels - start).min(LANES);
            let mask = (u32::MAX >> (32 - len)) as __mmask16;
            let mut tile = [_mm512_setzero_ps(); LANES];
            for (k, row) in tile.iter_mut().enumerate().take(live) {
                // SAFETY: the mask enables `len` lanes from pixel `start` of
                // channel `first + k` < channels: inside `grad`.
                *row = unsafe { _mm512_maskz_loadu_ps(mask, grad.as_ptr().add((first + k) * pixels + start)) };
            }
            let mut sum = _mm512_setzero_ps();
            for (i, column) in transpose16(tile).iter().enumerate().take(len) {
                sum = _mm512_add_ps(sum, *column);
                // SAFETY: pixel `start + i` < pixels, and its lanes from
                // `first` on hold 16 more: inside `out` (asserted above).
                unsafe { _mm512_storeu_ps(out.as_mut_ptr().add((start + i) * lanes + first), *column) };
            }
            let sums = &mut sums[first..first + LANES];
            // SAFETY: `sums` is 16 elements long.
            unsafe { _mm512_storeu_ps(sums.as_mut_ptr(), _mm512_add_ps(_mm512_loadu_ps(sums.as_ptr()), sum)) };
        }
    }
}

/// The transpose of the 16 x 16 matrix whose rows are `r`: pairs of rows
/// interleaved by 32 and then 64 bits give, in each 128-bit lane, four
/// rows of one column; two rounds of lane shuffles gather each column's
/// four lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose16(r: [std::arch::x86_64::__m512; 16]) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    let mut t = [_mm512_setzero_ps(); 16];
    for q in 0..4 {
        let (a, b, c, d) = (r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]);
        let (ab_lo, ab_hi) = (_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        let (cd_lo, cd_hi) = (_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
        // Interleaved by 64 bits, without a closure (which would not
        // inherit this function's target features).
        let (ab_lo, ab_hi) = (_mm512_castps_pd(ab_lo), _mm512_castps_pd(ab_hi));
        let (cd_lo, cd_hi) = (_mm512_castps_pd(cd_lo), _mm512_castps_pd(cd_hi));
        // t[4q + j], lane k: column 4k + j of rows 4q..4q + 4.
        t[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(ab_lo, cd_lo));
        t[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(ab_lo, cd_lo));
        t[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(ab_hi, cd_hi));
        t[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(ab_hi, cd_hi));
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        // Lanes 0-1 (then 2-3) of the four row groups, then every other lane.
        let low = (_mm512_shuffle_f32x4::<0x44>(t[j], t[4 + j]), _mm512_shuffle_f32x4::<0x44>(t[8 + j], t[12 + j]));
        let high = (_mm512_shuffle_f32x4::<0xee>(t[j], t[4 + j]), _mm512_shuffle_f32x4::<0xee>(t[8 + j], t[12 + j]));
        out[j] = _mm512_shuffle_f32x4::<0x88>(low.0, low.1);
        out[4 + j] = _mm512_shuffle_f32x4::<0xdd>(low.0, low.1);
        out[8 + j] = _mm512_shuffle_f32x4::<0x88>(high.0, high.1);
        out[12 + j] = _mm512_shuffle_f32x4::<0xdd>(high.0, high.1);
    }
    out
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose_gradient(_: &[f32], _: usize, _: &mut [f32], _: &mut [f32]) {
    unreachable!("`weight_gradient_applies` is false off x86-64")
}

/// Adds one image's weight gradient to `sums` (`[taps][lanes]`), block by
/// block: as many channel vectors as remain (up to 4) times as many taps as
/// fill [`ACCUMULATORS`], or a smaller block of taps for the last few.
fn accumulate(padded: &[f32], transposed: &[f32], offsets: &[usize], sums: &mut [f32], s: &GradShape) {
    // Every tap a pixel reads lies inside the padded image: the last
    // pixel's window ends at its last element (stride and padding make
    // the output size so).
    let last = (s.oh - 1) * s.row_step + (s.ow - 1) * s.column_step + offsets.iter().max().copied().unwrap_or(0);
    assert!(last < padded.len() && transposed.len() >= s.oh * s.ow * s.lanes, "the windows fit the image");
    assert!(sums.len() >= offsets.len() * s.lanes, "a sum for every tap and lane");
    for channel in (0..s.lanes).step_by(4 * LANES) {
        let vectors = ((s.lanes - channel) / LANES).min(4);
        let mut tap = 0;
        while tap < offsets.len() {
            let block = &offsets[tap..][..(offsets.len() - tap).min(ACCUMULATORS / vectors)];
            let at = (channel, tap);
            // SAFETY: `weight_gradient_applies` checked that this CPU has
            // AVX-512F; the bounds the kernel relies on are asserted above.
            unsafe {
                match (vectors, block.len()) {
                    (4, 4..) => weight_block::<4, 6>(padded, transposed, block, sums, at, s),
                    (4, _) => weight_block::<4, 3>(padded, transposed, block, sums, at, s),
                    (3, 5..) => weight_block::<3, 8>(padded, transposed, block, sums, at, s),
                    (3, _) => weight_block::<3, 4>(padded, transposed, block, sums, at, s),
                    (2, 7..) => weight_block::<2, 12>(padded, transposed, block, sums, at, s),
                    (2, _) => weight_block::<2, 6>(padded, transposed, block, sums, at, s),
                    (_, 13..) => weight_block::<1, 24>(padded, transposed, block, sums, at, s),
                    (_, 7..) => weight_block::<1, 12>(padded, transposed, block, sums, at, s),
                    (_, _) => weight_block::<1, 6>(padded, transposed, block, sums, at, s),
                }
            }
            tap += block.len();
        }
    }
}

/// Adds the gradient of the weights at `offsets` (at most `TAPS` taps,
/// from tap `first_tap` on) for the `VECTORS` channel vectors from
/// `channel` on to `sums`, over one image's output pixels.
///
/// # Safety
///
/// The CPU must support AVX-512F, and every tap of every output pixel must
/// read inside `padded` and every pixel's channels inside `transposed`
/// (see [`accumulate`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weight_block<const VECTORS: usize, const TAPS: usize>(
    padded: &[f32],
    transposed: &[f32],
    offsets: &[usize],
    sums: &mut [f32],
    (channel, first_tap): (usize, usize),
    s: &GradShape,
) {
    use std::arch::x86_64::*;
    // A short block repeats its first tap: those lanes are summed but
    // never stored.
    let mut taps = [offsets[0]; TAPS];
    taps[..offsets.len()].copy_from_slice(offsets);
    let mut acc = [[_mm512_setzero_ps(); VECTORS]; TAPS];
    for y in 0..s.oh {
        for x in 0..s.ow {
            let start = y * s.row_step + x * s.column_step;
            let mut g = [_mm512_setzero_ps(); VECTORS];
            for (v, g) in g.iter_mut().enumerate() {
                // SAFETY: pixel (y, x) < (oh, ow) and its channels
                // `channel + 16 v ..+ 16` < lanes: inside `transposed`.
                *g =
                    unsafe { _mm512_loadu_ps(transposed.as_ptr().add((y * s.ow + x) * s.lanes + channel + LANES * v)) };
            }
            for (acc, &tap) in acc.iter_mut().zip(&taps) {
                // SAFETY: `start + tap` is at most the bound asserted in `accumulate`.
                let t = _mm512_set1_ps(unsafe { *padded.get_unchecked(start + tap) });
                for (acc, &g) in acc.iter_mut().zip(&g) {
                    *acc = _mm512_fmadd_ps(t, g, *acc);
                }
            }
        }
    }
    for (t, acc) in acc.iter().enumerate().take(offsets.len()) {
        let row = &mut sums[(first_tap + t) * s.lanes + channel..][..VECTORS * LANES];
        for (dst, acc) in row.chunks_exact_mut(LANES).zip(acc) {
            // SAFETY: `dst` is 16 elements long.
            unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), _mm512_add_ps(_mm512_loadu_ps(dst.as_ptr()), *acc)) };
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn weight_block<const VECTORS: usize, const TAPS: usize>(
    _: &[f32],
    _: &[f32],
    _: &[usize],
    _: &mut [f32],
    _: (usize, usize),
    _: &GradShape,
) {
    unreachable!("`weight_gradient_applies` is false off x86-64")
}
