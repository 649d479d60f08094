//! Direct `f32` convolution kernels for CPUs with AVX-512 or AVX2, without
//! im2col columns: the forward (stride 1, dilation 1, one group, any kernel
//! size and padding), which also runs the image gradient, and the weight
//! gradient (any stride, padding and dilation).
//!
//! `gemm` runs a convolution's product at 40-55% of the FMA peak, because
//! its shapes are as skinny as a layer's channels. The forward keeps a
//! block of output channels x two vectors of output pixels (of one row, or
//! of two rows as narrow as a vector) in registers and, for each input
//! channel and tap, loads the two input vectors once and multiplies them by
//! one broadcast weight per channel: with AVX-512 (8 channels x 32 pixels)
//! on the ResNet layer of `benches/peers` (32x32x32x32, 3x3) it ran at
//! about 90% of the peak, 1.25 ms against 2.9 ms for unfold + `gemm`. The
//! weight gradient is laid out the other way (see [`weight_gradient`]).
//!
//! The kernels are written once over [`Vector`] and compiled for each
//! instruction set by [`run_avx512`] and [`run_avx2`].
//!
//! Each kernel can also compute what it computes on `bf16` or `f16`
//! tensors (`round`): its inputs rounded to the half type as they are
//! padded, packed or transposed, its sums in `f32`, its outputs rounded as
//! they are stored, all in `f32` storage. That is `autocast`'s half
//! convolution without the four passes of casts around it (see
//! `ConvKernel::fuses_rounding`).

use super::Unfold2d;
#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{Rounding, Vector};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuIsa, output_buffer, pool_threads};
use crate::backend::cpu::{for_each_item, map_items};
use crate::error::Result;

/// The instruction set the kernels here run with, `None` where they do not
/// run: off x86-64, under Miri, or where [`Cpu::isa`] is below AVX2.
fn level() -> Option<CpuIsa> {
    let isa = Cpu::isa();
    (cfg!(target_arch = "x86_64") && !cfg!(miri) && isa >= CpuIsa::Avx2).then_some(isa)
}

/// Output channels per block of the forward with AVX-512 and with AVX2: as
/// many as leave registers for two input vectors and a broadcast weight
/// beside two accumulators per channel (32 registers with AVX-512, 16 with
/// AVX2).
const AVX512_CHANNELS: usize = 8;
/// See [`AVX512_CHANNELS`].
const AVX2_CHANNELS: usize = 6;

/// Output channels per block of the forward.
fn block_channels(isa: CpuIsa) -> usize {
    if isa >= CpuIsa::Avx512 { AVX512_CHANNELS } else { AVX2_CHANNELS }
}

/// `f32` lanes per vector register.
fn vector_lanes(isa: CpuIsa) -> usize {
    if isa >= CpuIsa::Avx512 { 16 } else { 8 }
}

/// The instruction set [`conv2d`] runs with on this CPU for this
/// geometry, `None` where it does not run: it needs outputs at least 8
/// pixels wide, since a block is two vectors of one row, or of two rows for
/// outputs as narrow as a vector, and narrower rows would leave most of it
/// idle. Read once and passed on, so that a [`Cpu::set_max_isa`] on another
/// thread cannot change it between the check and the kernel.
pub(super) fn applies(g: &Unfold2d) -> Option<CpuIsa> {
    let w = g.window;
    let fits = w.stride == [1, 1]
        && w.dilation == [1, 1]
        && g.output[0] > 0
        && g.output[1] >= 8
        && g.image.iter().all(|&d| d > 0);
    level().filter(|_| fits)
}

/// `conv2d` of the dense image batch `image` (`g.image`) with the dense
/// weight `[out_channels, C, KH, KW]` and an optional bias
/// `[out_channels]`, into a new dense `[N, out_channels, OH, OW]`; with
/// `round`, of the three rounded to that half type, and the output rounded
/// too.
/// Only with the instruction set [`applies`] returned.
pub(super) fn conv2d(
    isa: CpuIsa,
    image: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    g: &Unfold2d,
    out_channels: usize,
    round: Option<Rounding>,
) -> Result<Vec<f32>> {
    let channels = block_channels(isa);
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
    pad_planes(isa, image, &mut padded, [h, w], [ph, pw], round);
    // The weights as [blocks][C][KH*KW][channels], zero for the channels
    // past `out_channels` in the last block.
    let blocks = out_channels.div_ceil(channels);
    let mut packed = output_buffer::<f32>("conv2d", blocks * c * taps * channels)?;
    packed.fill(0.0);
    for (o, filter) in weight.chunks_exact(c * taps).enumerate() {
        let (block, lane) = (o / channels, o % channels);
        for (i, &v) in filter.iter().enumerate() {
            packed[(block * c * taps + i) * channels + lane] = rounded(v, round);
        }
    }
    let mut out = output_buffer::<f32>("conv2d", n * out_channels * oh * ow)?;
    let shape = Shape { c, kh, kw, hp, wp, oh, ow };
    let run_task = |(task, out): (usize, &mut [f32])| {
        let (b, block) = (task / blocks, task % blocks);
        let image = &padded[b * c * hp * wp..];
        let weights = &packed[block * c * taps * channels..][..c * taps * channels];
        // The block's biases, where the accumulators start.
        let mut biases = [0.0; AVX512_CHANNELS];
        if let Some(bias) = bias {
            let first = block * channels;
            let own = &bias[first..(first + channels).min(out_channels)];
            for (b, &v) in biases.iter_mut().zip(own) {
                *b = rounded(v, round);
            }
        }
        run(isa, Job::Forward { image, weights, biases: &biases[..channels], out, shape: &shape, round });
    };
    // One task per image and block of output channels (the last block of
    // an image may be short), so that a batch of one still splits.
    let block_len = channels * oh * ow;
    let tasks = out.chunks_mut(out_channels * oh * ow).flat_map(|image| image.chunks_mut(block_len));
    if pool_threads() > 1 {
        for_each_item(tasks.enumerate().collect(), 1, &run_task);
    } else {
        tasks.enumerate().for_each(run_task);
    }
    Ok(out)
}

/// Copies the `[h, w]` planes of `src` into the middle of the zeroed
/// `[h + 2 ph, w + 2 pw]` planes of `padded`, with `round` rounding each
/// row while it is in cache.
fn pad_planes(
    isa: CpuIsa,
    src: &[f32],
    padded: &mut [f32],
    [h, w]: [usize; 2],
    [ph, pw]: [usize; 2],
    round: Option<Rounding>,
) {
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    for (plane, src) in src.chunks_exact(h * w).enumerate() {
        for (y, row) in src.chunks_exact(w).enumerate() {
            let at = (plane * hp + y + ph) * wp + pw;
            let dst = &mut padded[at..at + w];
            dst.copy_from_slice(row);
            if let Some(to) = round {
                run(isa, Job::Round { values: dst, to });
            }
        }
    }
}

/// `v`, or with `round` rounded as the vector kernels round
/// ([`Vector::round_to`]): for the few values rounded one at a time.
fn rounded(v: f32, round: Option<Rounding>) -> f32 {
    round.map_or(v, |to| to.scalar(v))
}

/// One call of a kernel, which [`run`] makes with the instruction set's
/// code.
enum Job<'a> {
    /// [`block_rows`].
    Forward {
        image: &'a [f32],
        weights: &'a [f32],
        biases: &'a [f32],
        out: &'a mut [f32],
        shape: &'a Shape,
        round: Option<Rounding>,
    },
    /// [`transpose_gradient`].
    Transpose { grad: &'a [f32], pixels: usize, out: &'a mut [f32], sums: &'a mut [f32], round: Option<Rounding> },
    /// [`round_in_place`].
    Round { values: &'a mut [f32], to: Rounding },
    /// [`accumulate`].
    Accumulate {
        padded: &'a [f32],
        transposed: &'a [f32],
        offsets: &'a [usize],
        sums: &'a mut [f32],
        shape: &'a GradShape,
    },
}

/// Runs `job` with `isa`'s kernels; `isa` is what [`level`] returned.
fn run(isa: CpuIsa, job: Job) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: `level` returned `isa`, which `Cpu::isa` allows only where
        // the CPU has it (AVX-512F and FMA for Avx512, AVX2, FMA and F16C
        // for Avx2).
        CpuIsa::Avx512 => return unsafe { run_avx512(job) },
        // SAFETY: as above.
        CpuIsa::Avx2 => return unsafe { run_avx2(job) },
        CpuIsa::Scalar => {}
    }
    unreachable!("the direct kernels run with AVX2 or AVX-512, not {isa}")
}

impl Job<'_> {
    /// Runs the job with the vectors `V` and forward blocks of `CHANNELS`.
    ///
    /// # Safety
    ///
    /// The CPU must support `V`'s instruction set.
    #[inline(always)]
    unsafe fn run<V: WeightBlocks, const CHANNELS: usize>(self) {
        // SAFETY: the caller's.
        unsafe {
            match self {
                Job::Forward { image, weights, biases, out, shape, round } => {
                    block_rows::<V, CHANNELS>(image, weights, biases, out, shape, round)
                }
                Job::Transpose { grad, pixels, out, sums, round } => {
                    transpose_gradient::<V>(grad, pixels, out, sums, round)
                }
                Job::Round { values, to } => round_in_place::<V>(values, to),
                Job::Accumulate { padded, transposed, offsets, sums, shape } => {
                    accumulate::<V>(padded, transposed, offsets, sums, shape)
                }
            }
        }
    }
}

/// [`Job::run`] compiled for AVX-512, with forward blocks of 8 channels.
///
/// # Safety
///
/// The CPU must support AVX-512F and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn run_avx512(job: Job) {
    // SAFETY: the caller's.
    unsafe { job.run::<Avx512, AVX512_CHANNELS>() }
}

/// [`Job::run`] compiled for AVX2, with forward blocks of 6 channels.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2(job: Job) {
    // SAFETY: the caller's.
    unsafe { job.run::<Avx2, AVX2_CHANNELS>() }
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

/// One block of up to `CHANNELS` output channels of one image: `out` is
/// their `[channels, OH, OW]` planes, `image` the padded image from its
/// first channel on (`C` planes of `hp x wp`), `weights` the block's
/// `[C][KH*KW][CHANNELS]`, `biases` the block's channels' biases. Each
/// step computes two vectors of output pixels: of one row, or, for outputs
/// at most a vector wide, of one row and the next; `round` rounds them as
/// they are stored.
///
/// # Safety
///
/// The CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn block_rows<V: Vector, const CHANNELS: usize>(
    image: &[f32],
    weights: &[f32],
    biases: &[f32],
    out: &mut [f32],
    s: &Shape,
    round: Option<Rounding>,
) {
    let &Shape { c, kh, kw, hp, wp, oh, ow } = s;
    let lanes = V::LANES;
    let channels = out.len() / (oh * ow);
    assert!(image.len() >= c * hp * wp, "the padded image");
    assert!(weights.len() >= c * kh * kw * CHANNELS && channels <= CHANNELS, "one block of weights");
    // The second vector's pixels: a vector further along the row, or a row down.
    let two_rows = ow <= lanes;
    let (second_in, second_out) = if two_rows { (wp, ow) } else { (lanes, lanes) };
    let steps = if two_rows { oh.div_ceil(2) } else { oh * ow.div_ceil(2 * lanes) };
    for step in 0..steps {
        // The step's first output pixel and how many lanes each vector holds.
        let (y, x0, first, second) = if two_rows {
            let y = 2 * step;
            (y, 0, ow, if y + 1 < oh { ow } else { 0 })
        } else {
            let (y, x0) = (step / ow.div_ceil(2 * lanes), step % ow.div_ceil(2 * lanes) * 2 * lanes);
            let len = ow - x0;
            (y, x0, len.min(lanes), len.saturating_sub(lanes).min(lanes))
        };
        // Unmasked loads where both vectors are whole: the masks would take
        // two of the registers the accumulators need.
        let whole = first == lanes && second == lanes;
        // SAFETY: the caller's (the CPU has V's instruction set).
        let (first, second) = unsafe { (V::mask(first), V::mask(second)) };
        // Plain loops over arrays, which stay in registers once inlined.
        let mut acc = [[unsafe { V::zero() }; 2]; CHANNELS];
        for (acc, &b) in acc.iter_mut().zip(biases) {
            // SAFETY: as above.
            *acc = [unsafe { V::splat(b) }; 2];
        }
        // Output row y reads padded row y + dy of each channel, from column x0.
        let rows = Rows { image, weights, first_row: y * wp + x0, second_in, shape: s };
        // SAFETY: as above; `whole` says the masks enable every lane.
        acc = unsafe {
            if whole {
                sum_taps::<V, CHANNELS, false>(acc, rows, (first, second))
            } else {
                sum_taps::<V, CHANNELS, true>(acc, rows, (first, second))
            }
        };
        if let Some(to) = round {
            // A loop, not a closure: a closure would not inherit the
            // caller's target features, and the intrinsics would not inline.
            for v in acc.iter_mut().flatten() {
                // SAFETY: as above.
                *v = unsafe { V::round_to(*v, to) };
            }
        }
        for (k, acc) in acc.iter().enumerate().take(channels) {
            let at = (k * oh + y) * ow + x0;
            // SAFETY: the enabled lanes are output pixels of channel k, inside
            // `out`; disabled lanes write nothing.
            unsafe {
                let p = out.as_mut_ptr().add(at);
                V::store_masked(p, first, acc[0]);
                V::store_masked(p.wrapping_add(second_out), second, acc[1]);
            }
        }
    }
}

/// What [`sum_taps`] reads: the padded image and the block's weights (as
/// [`block_rows`] has them), where the step's first pixel reads in the
/// image, and the second vector's distance from the first.
#[derive(Clone, Copy)]
struct Rows<'a> {
    image: &'a [f32],
    weights: &'a [f32],
    first_row: usize,
    second_in: usize,
    shape: &'a Shape,
}

/// `acc` plus the products of one step of [`block_rows`]: for each input
/// channel and tap, the two vectors of input pixels times each channel's
/// weight. `MASKED` loads through `masks`; without it the masks must enable
/// every lane.
///
/// The accumulators go in and out by value, and the loop over a row's taps
/// has no bounds check: with a `&mut` array and a check (which may panic)
/// per tap, LLVM kept the array in registers but also stored every
/// accumulator to the stack after each multiply-add, 16 stores to 16 FMAs,
/// which halved the forward's speed on an Intel Xeon (one vector store a
/// cycle).
///
/// # Safety
///
/// The CPU must support `V`'s instruction set, and `rows` describe a step
/// of [`block_rows`] with the masks it computed.
#[inline(always)]
unsafe fn sum_taps<V: Vector, const CHANNELS: usize, const MASKED: bool>(
    mut acc: [[V; 2]; CHANNELS],
    rows: Rows,
    (first, second): (V::Mask, V::Mask),
) -> [[V; 2]; CHANNELS] {
    let Rows { image, weights, first_row, second_in, shape: &Shape { c, kh, kw, hp, wp, .. } } = rows;
    // Each tap's weights for the block's channels, in [C][KH][KW] order.
    let (taps, _) = weights.as_chunks::<CHANNELS>();
    for ch in 0..c {
        for dy in 0..kh {
            let row = ch * hp * wp + dy * wp + first_row;
            let row_taps = &taps[(ch * kh + dy) * kw..][..kw];
            for (dx, w) in row_taps.iter().enumerate() {
                // SAFETY: an enabled lane of the first vector is an output pixel
                // (y, x) with x < ow, and reads padded pixel (y + dy, x + dx),
                // inside the image since oh + kh - 1 = hp and ow + kw - 1 = wp at
                // stride and dilation 1; so does the second's, pixel (y, x + lanes)
                // or (y + 1, x). Disabled lanes read nothing; without `MASKED`
                // every lane is enabled.
                let (v0, v1) = unsafe {
                    let p = image.as_ptr().add(row + dx);
                    let q = p.wrapping_add(second_in);
                    if MASKED {
                        (V::load_masked(p, first), V::load_masked(q, second))
                    } else {
                        (V::load(p), V::load(q))
                    }
                };
                for (acc, &wk) in acc.iter_mut().zip(w) {
                    // SAFETY: the CPU has V's instruction set.
                    unsafe {
                        let wk = V::splat(wk);
                        acc[0] = V::mul_add(wk, v0, acc[0]);
                        acc[1] = V::mul_add(wk, v1, acc[1]);
                    }
                }
            }
        }
    }
    acc
}

/// The instruction set [`weight_gradient`] runs with on this CPU for this
/// geometry (any stride, padding and dilation, one group), as [`applies`].
pub(super) fn weight_gradient_applies(g: &Unfold2d) -> Option<CpuIsa> {
    level().filter(|_| g.output.iter().chain(&g.image).all(|&d| d > 0))
}

/// The weight gradient `[out_channels, C, KH, KW]` of `conv2d` from the
/// dense image batch `image` (`g.image`) and the dense output gradient
/// `grad` `[N, out_channels, OH, OW]`: the sum over images and output
/// pixels of `grad[o, pixel] · image[tap at pixel]`; and the bias's, the
/// sum of `grad[o, pixel]`. With `round`, of `image` and `grad` rounded to
/// that half type, and both sums rounded too. With the instruction set
/// [`weight_gradient_applies`] returned.
///
/// `gemm` ran this product at about half the FMA peak after `unfold` had
/// written the columns. Here each image's output gradient is transposed to
/// `[OH * OW][channels]`, so that a vector holds a vector's worth of output
/// channels of one pixel, and accumulators hold a block of channels x taps
/// while the pixels stream past: per pixel, a few vector loads of the
/// gradient and one broadcast per tap, no columns and no horizontal sums.
pub(super) fn weight_gradient(
    isa: CpuIsa,
    image: &[f32],
    grad: &[f32],
    g: &Unfold2d,
    out_channels: usize,
    round: Option<Rounding>,
) -> Result<(Vec<f32>, Vec<f32>)> {
    const OP: &str = "conv2d";
    let [n, c, h, w] = g.image;
    let ([kh, kw], [sh, sw], [ph, pw], [dh, dw]) =
        (g.window.kernel, g.window.stride, g.window.padding, g.window.dilation);
    let [oh, ow] = g.output;
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let lanes = out_channels.div_ceil(vector_lanes(isa)) * vector_lanes(isa);
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
            pad_planes(isa, &image[b * c * h * w..][..c * h * w], &mut padded, [h, w], [ph, pw], round);
            let grad = &grad[b * out_channels * oh * ow..][..out_channels * oh * ow];
            let (pixels, out) = (oh * ow, &mut transposed);
            run(isa, Job::Transpose { grad, pixels, out, sums: &mut bias_sums, round });
            let (padded, transposed, offsets) = (&padded[..], &transposed[..], &offsets[..]);
            run(isa, Job::Accumulate { padded, transposed, offsets, sums: &mut sums, shape: &shape });
        }
        Ok((sums, bias_sums))
    };
    let starts = (0..n).step_by(per_thread);
    let partials: Vec<(Vec<f32>, Vec<f32>)> = if threads > 1 {
        map_items(starts.collect(), &partial).into_iter().collect::<Result<_>>()?
    } else {
        starts.map(partial).collect::<Result<_>>()?
    };
    let taps = offsets.len();
    let mut out = output_buffer::<f32>(OP, out_channels * taps)?;
    for (o, row) in out.chunks_exact_mut(taps).enumerate() {
        for (t, v) in row.iter_mut().enumerate() {
            *v = rounded(partials.iter().map(|(sums, _)| sums[t * lanes + o]).sum(), round);
        }
    }
    let bias = (0..out_channels).map(|o| rounded(partials.iter().map(|(_, sums)| sums[o]).sum(), round)).collect();
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
/// `[pixels][lanes]` (the lanes past `channels` zero), by square tiles
/// transposed in registers: a scalar copy cost as much as the products,
/// and a gather per pixel still half as much. Adds each channel's sum to
/// `sums` (`[lanes]`), the bias's gradient, from the transposed tiles.
/// `round` rounds `grad` as it is loaded.
///
/// # Safety
///
/// The CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn transpose_gradient<V: Vector>(
    grad: &[f32],
    pixels: usize,
    out: &mut [f32],
    sums: &mut [f32],
    round: Option<Rounding>,
) {
    let (channels, lanes) = (grad.len() / pixels, sums.len());
    assert!(channels <= lanes && lanes.is_multiple_of(V::LANES), "the bias sums have room");
    assert!(out.len() >= pixels * lanes, "the transposed gradient has room");
    for first in (0..channels).step_by(V::LANES) {
        let live = (channels - first).min(V::LANES);
        for start in (0..pixels).step_by(V::LANES) {
            let len = (pixels - start).min(V::LANES);
            // SAFETY (this block and the next): the CPU has V's instruction set.
            let mask = unsafe { V::mask(len) };
            let mut tile = unsafe { V::zero_tile() };
            for (k, row) in tile.as_mut().iter_mut().enumerate().take(live) {
                // SAFETY: the mask enables `len` lanes from pixel `start` of
                // channel `first + k` < channels: inside `grad`.
                *row = unsafe { V::load_masked(grad.as_ptr().add((first + k) * pixels + start), mask) };
                if let Some(to) = round {
                    // SAFETY: the CPU has V's instruction set.
                    *row = unsafe { V::round_to(*row, to) };
                }
            }
            let mut sum = unsafe { V::zero() };
            // SAFETY: the CPU has V's instruction set.
            let columns = unsafe { V::transpose(tile) };
            for (i, &column) in columns.as_ref().iter().enumerate().take(len) {
                // SAFETY: pixel `start + i` < pixels, and its lanes from
                // `first` on hold a vector more: inside `out` (asserted above).
                unsafe {
                    sum = V::add(sum, column);
                    V::store(out.as_mut_ptr().add((start + i) * lanes + first), column);
                }
            }
            let sums = &mut sums[first..first + V::LANES];
            // SAFETY: `sums` is a vector long.
            unsafe { V::store(sums.as_mut_ptr(), V::add(V::load(sums.as_ptr()), sum)) };
        }
    }
}

/// Rounds every element of `values` to `to`, a vector at a time.
///
/// # Safety
///
/// The CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn round_in_place<V: Vector>(values: &mut [f32], to: Rounding) {
    for start in (0..values.len()).step_by(V::LANES) {
        // SAFETY: the CPU has V's instruction set; the mask enables the
        // lanes from `start` that are inside `values`.
        unsafe {
            let (p, mask) = (values.as_mut_ptr().add(start), V::mask(values.len() - start));
            V::store_masked(p, mask, V::round_to(V::load_masked(p, mask), to));
        }
    }
}

/// The weight gradient's register blocks for one instruction set.
trait WeightBlocks: Vector {
    /// Runs [`weight_block`] for `vectors` channel vectors (at most
    /// [`WeightBlocks::MAX_VECTORS`]) and the taps at `offsets`, at most
    /// [`WeightBlocks::ACCUMULATORS`]` / vectors` of them, with the
    /// register block that fits.
    ///
    /// # Safety
    ///
    /// As [`weight_block`]'s.
    unsafe fn weight_blocks(vectors: usize, args: BlockArgs, sums: &mut [f32]);

    /// Accumulator registers of a block: as many as leave room for the
    /// output gradient's vectors and a broadcast tap.
    const ACCUMULATORS: usize;
    /// Channel vectors of a block at most.
    const MAX_VECTORS: usize;
}

/// The arguments of [`weight_block`] but its register block and `sums`.
#[derive(Clone, Copy)]
struct BlockArgs<'a> {
    padded: &'a [f32],
    transposed: &'a [f32],
    offsets: &'a [usize],
    channel: usize,
    first_tap: usize,
    shape: &'a GradShape,
}

#[cfg(target_arch = "x86_64")]
impl WeightBlocks for Avx512 {
    const ACCUMULATORS: usize = 24;
    const MAX_VECTORS: usize = 4;

    #[inline(always)]
    unsafe fn weight_blocks(vectors: usize, a: BlockArgs, sums: &mut [f32]) {
        // SAFETY: the caller's.
        unsafe {
            match (vectors, a.offsets.len()) {
                (4, 4..) => weight_block::<Self, 4, 6>(a, sums),
                (4, _) => weight_block::<Self, 4, 3>(a, sums),
                (3, 5..) => weight_block::<Self, 3, 8>(a, sums),
                (3, _) => weight_block::<Self, 3, 4>(a, sums),
                (2, 7..) => weight_block::<Self, 2, 12>(a, sums),
                (2, _) => weight_block::<Self, 2, 6>(a, sums),
                (_, 13..) => weight_block::<Self, 1, 24>(a, sums),
                (_, 7..) => weight_block::<Self, 1, 12>(a, sums),
                (_, _) => weight_block::<Self, 1, 6>(a, sums),
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl WeightBlocks for Avx2 {
    const ACCUMULATORS: usize = 12;
    /// Three vectors and 12 accumulators leave no register for the
    /// broadcast tap: one accumulator was kept on the stack.
    const MAX_VECTORS: usize = 2;

    #[inline(always)]
    unsafe fn weight_blocks(vectors: usize, a: BlockArgs, sums: &mut [f32]) {
        // SAFETY: the caller's.
        unsafe {
            match (vectors, a.offsets.len()) {
                (2, 4..) => weight_block::<Self, 2, 6>(a, sums),
                (2, _) => weight_block::<Self, 2, 3>(a, sums),
                (_, 7..) => weight_block::<Self, 1, 12>(a, sums),
                (_, _) => weight_block::<Self, 1, 6>(a, sums),
            }
        }
    }
}

/// Adds one image's weight gradient to `sums` (`[taps][lanes]`), block by
/// block: as many channel vectors as remain (up to `V::MAX_VECTORS`) times
/// as many taps as fill `V::ACCUMULATORS`, or a smaller block of taps for
/// the last few.
///
/// # Safety
///
/// The CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn accumulate<V: WeightBlocks>(
    padded: &[f32],
    transposed: &[f32],
    offsets: &[usize],
    sums: &mut [f32],
    s: &GradShape,
) {
    // Every tap a pixel reads lies inside the padded image: the last
    // pixel's window ends at its last element (stride and padding make
    // the output size so).
    let last = (s.oh - 1) * s.row_step + (s.ow - 1) * s.column_step + offsets.iter().max().copied().unwrap_or(0);
    assert!(last < padded.len() && transposed.len() >= s.oh * s.ow * s.lanes, "the windows fit the image");
    assert!(sums.len() >= offsets.len() * s.lanes && s.lanes.is_multiple_of(V::LANES), "a sum for every tap and lane");
    for channel in (0..s.lanes).step_by(V::MAX_VECTORS * V::LANES) {
        let vectors = ((s.lanes - channel) / V::LANES).min(V::MAX_VECTORS);
        let mut tap = 0;
        while tap < offsets.len() {
            let block = &offsets[tap..][..(offsets.len() - tap).min(V::ACCUMULATORS / vectors)];
            let args = BlockArgs { padded, transposed, offsets: block, channel, first_tap: tap, shape: s };
            // SAFETY: the caller's instruction set; the bounds the kernel
            // relies on are asserted above.
            unsafe { V::weight_blocks(vectors, args, sums) };
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
/// The CPU must support `V`'s instruction set, every tap of every output
/// pixel must read inside `padded`, every pixel's channels inside
/// `transposed` (see [`accumulate`]).
#[inline(always)]
unsafe fn weight_block<V: Vector, const VECTORS: usize, const TAPS: usize>(a: BlockArgs, sums: &mut [f32]) {
    let BlockArgs { padded, transposed, offsets, channel, first_tap, shape: s } = a;
    // A short block repeats its first tap: those lanes are summed but
    // never stored.
    let mut taps = [offsets[0]; TAPS];
    taps[..offsets.len()].copy_from_slice(offsets);
    // SAFETY (every block below): the caller's instruction set and bounds.
    let mut acc = [[unsafe { V::zero() }; VECTORS]; TAPS];
    for y in 0..s.oh {
        for x in 0..s.ow {
            let start = y * s.row_step + x * s.column_step;
            let mut g = [unsafe { V::zero() }; VECTORS];
            for (v, g) in g.iter_mut().enumerate() {
                // SAFETY: pixel (y, x) < (oh, ow) and its channels
                // `channel + LANES v ..+ LANES` < lanes: inside `transposed`.
                *g = unsafe { V::load(transposed.as_ptr().add((y * s.ow + x) * s.lanes + channel + V::LANES * v)) };
            }
            for (acc, &tap) in acc.iter_mut().zip(&taps) {
                // SAFETY: `start + tap` is at most the bound asserted in `accumulate`.
                let t = unsafe { V::splat(*padded.get_unchecked(start + tap)) };
                for (acc, &g) in acc.iter_mut().zip(&g) {
                    *acc = unsafe { V::mul_add(t, g, *acc) };
                }
            }
        }
    }
    for (t, acc) in acc.iter().enumerate().take(offsets.len()) {
        let row = &mut sums[(first_tap + t) * s.lanes + channel..][..VECTORS * V::LANES];
        for (dst, acc) in row.chunks_exact_mut(V::LANES).zip(acc) {
            // SAFETY: `dst` is a vector long.
            unsafe { V::store(dst.as_mut_ptr(), V::add(V::load(dst.as_ptr()), *acc)) };
        }
    }
}
