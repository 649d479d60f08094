//! A direct `f32` convolution for CPUs with AVX-512 (stride 1, dilation 1,
//! one group, any kernel size and padding), without im2col columns.
//!
//! `gemm` runs a convolution's product at 40-55% of the FMA peak, because
//! its shapes are as skinny as a layer's channels. This kernel keeps a
//! block of 8 output channels x 32 output pixels of one row in 16 vector
//! registers and, for each input channel and tap, loads the two input
//! vectors once and multiplies them by 8 broadcast weights: on the ResNet
//! layer of `benches/peers` (32x32x32x32, 3x3) it ran at about 90% of the
//! peak, 1.25 ms against 2.9 ms for unfold + `gemm`.

use super::Unfold2d;
use crate::backend::cpu::{output_buffer, pool_threads};
use crate::error::Result;
use rayon::prelude::*;

/// Output channels per register block.
const CHANNELS: usize = 8;
/// Output pixels per register block: two vectors of 16.
const PIXELS: usize = 32;

/// Whether [`conv2d`] runs on this CPU for this geometry: outputs more than
/// 16 pixels wide, since narrower rows leave half of each block idle (a
/// 16x16-pixel layer with 64 channels ran slower than unfold + `gemm`,
/// with a 16-channel x 16-pixel block as well).
pub(super) fn applies(g: &Unfold2d) -> bool {
    let w = g.window;
    !cfg!(miri)
        && w.stride == [1, 1]
        && w.dilation == [1, 1]
        && avx512()
        && g.output[0] > 0
        && g.output[1] > PIXELS / 2
        && g.image.iter().all(|&d| d > 0)
}

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512() -> bool {
    false
}

/// `conv2d` of the dense image batch `image` (`g.image`) with the dense
/// weight `[out_channels, C, KH, KW]`, into a new dense `[N, out_channels,
/// OH, OW]`. Only where [`applies`] holds.
pub(super) fn conv2d(image: &[f32], weight: &[f32], g: &Unfold2d, out_channels: usize) -> Result<Vec<f32>> {
    let [n, c, h, w] = g.image;
    let ([kh, kw], [ph, pw]) = (g.window.kernel, g.window.padding);
    let [oh, ow] = g.output;
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let taps = kh * kw;
    // The zero-padded images, with a vector's slack at the end: the last
    // row's loads may run past its last column into lanes that are never
    // stored. Fallible, like every kernel output: a size that does not fit
    // is an error, not an abort (saturating, so it fails the same way).
    let len = n.saturating_mul(c).saturating_mul(hp).saturating_mul(wp).saturating_add(PIXELS);
    let mut padded = output_buffer::<f32>("conv2d", len)?;
    padded.fill(0.0);
    for (plane, src) in image.chunks_exact(h * w).enumerate() {
        for (y, row) in src.chunks_exact(w).enumerate() {
            let at = (plane * hp + y + ph) * wp + pw;
            padded[at..at + w].copy_from_slice(row);
        }
    }
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
        // SAFETY: `applies` checked that this CPU has AVX-512F.
        unsafe { block_rows(image, weights, out, &shape) };
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
/// first channel on (`C` planes of `hp x wp`, then at least [`PIXELS`]
/// more elements), `weights` the block's `[C][KH*KW][CHANNELS]`.
///
/// # Safety
///
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_rows(image: &[f32], weights: &[f32], out: &mut [f32], s: &Shape) {
    use std::arch::x86_64::*;
    let &Shape { c, kh, kw, hp, wp, oh, ow } = s;
    let channels = out.len() / (oh * ow);
    // Every input element a load touches, masked-off lanes included, lies
    // below this: the last load of a row starts at most at its column
    // `wp - 1` and spans 32 lanes, and the slack covers them.
    assert!(image.len() >= c * hp * wp + PIXELS, "the padded image has its slack");
    assert!(weights.len() >= c * kh * kw * CHANNELS && channels <= CHANNELS, "one block of weights");
    for y in 0..oh {
        for x0 in (0..ow).step_by(PIXELS) {
            let len = (ow - x0).min(PIXELS);
            let low: __mmask16 = if len >= 16 { 0xffff } else { (1u16 << len) - 1 };
            let high: __mmask16 = if len >= PIXELS {
                0xffff
            } else if len > 16 {
                (1u16 << (len - 16)) - 1
            } else {
                0
            };
            let mut acc = [[_mm512_setzero_ps(); 2]; CHANNELS];
            for ch in 0..c {
                for dy in 0..kh {
                    // Output row y reads padded row y + dy, from column x0.
                    let row = (ch * hp + y + dy) * wp + x0;
                    for dx in 0..kw {
                        // SAFETY: with stride and dilation 1, oh + kh - 1 = hp and
                        // ow + kw - 1 = wp, so the first lane read, `row + dx`, is at most
                        // ((c - 1) * hp + hp - 1) * wp + wp - 1 = c * hp * wp - 1 and the
                        // last, 31 further, below c * hp * wp + PIXELS <= image.len()
                        // (asserted above): both unaligned loads read inside `image`.
                        let (v0, v1) = unsafe {
                            let p = image.as_ptr().add(row + dx);
                            (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)))
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
                let dst = &mut out[at..at + len];
                // SAFETY: the masks enable exactly the first `len` lanes,
                // which are `dst`'s elements; masked-off lanes are not
                // written, and the second pointer is formed only when its
                // mask enables a lane, so it stays inside `dst`.
                unsafe {
                    _mm512_mask_storeu_ps(dst.as_mut_ptr(), low, acc[0]);
                    if high != 0 {
                        _mm512_mask_storeu_ps(dst.as_mut_ptr().add(16), high, acc[1]);
                    }
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block_rows(_: &[f32], _: &[f32], _: &mut [f32], _: &Shape) {
    unreachable!("`applies` is false off x86-64")
}
