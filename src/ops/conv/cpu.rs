//! Convolution kernels on the CPU: one rayon task per image plane.

use super::simd::Rounding;
use super::{ConvKernel, Unfold2d, direct};
use crate::backend::Cpu;
use crate::backend::cpu::for_each_chunk;
use crate::backend::cpu::{CpuStorage, narrowed, narrowed_all, output_buffer, pool_threads, widened};
use crate::element::{DType, FloatElement};
use crate::error::{Error, Result};
use crate::layout::Layout;
use std::any::Any;

impl ConvKernel for Cpu {
    fn unfold<E: FloatElement>(image: &CpuStorage<E>, offset: usize, g: &Unfold2d, pad: E) -> Result<CpuStorage<E>> {
        let [_, _, h, w] = g.image;
        let ([kh, kw], [sh, sw], [ph, pw], [dh, dw]) =
            (g.window.kernel, g.window.stride, g.window.padding, g.window.dilation);
        let [oh, ow] = g.output;
        let mut out = output_buffer::<E>("unfold", g.columns_len())?;
        let plane_out = kh * kw * oh * ow;
        if plane_out == 0 {
            return Ok(CpuStorage::from_vec(out));
        }
        let src = &image.as_slice()[offset..];
        let fill = |(plane, out): (usize, &mut [E])| {
            let img = &src[plane * h * w..(plane + 1) * h * w];
            for (tap, out) in out.chunks_mut(oh * ow).enumerate() {
                let (k, j) = (tap / kw, tap % kw);
                let (first, end) = inside(ow, sw, j * dw, pw, w);
                for (y, out) in out.chunks_mut(ow).enumerate() {
                    // Wrapping: a row above the image becomes a huge one, out of range.
                    let row = (y * sh + k * dh).wrapping_sub(ph);
                    if row >= h {
                        out.fill(pad);
                        continue;
                    }
                    out[..first].fill(pad);
                    out[end..].fill(pad);
                    if first == end {
                        continue;
                    }
                    // Output x reads column x·sw + j·dw − pw, inside the image
                    // for x in first..end: a plain copy at stride 1.
                    let line = &img[row * w..(row + 1) * w];
                    let start = first * sw + j * dw - pw;
                    if sw == 1 {
                        out[first..end].copy_from_slice(&line[start..start + (end - first)]);
                    } else {
                        for (o, &v) in out[first..end].iter_mut().zip(line[start..].iter().step_by(sw)) {
                            *o = v;
                        }
                    }
                }
            }
        };
        // With two or more threads every plane is a task, however small: each
        // is a gather with work per row, and running LeNet's batch-4 planes
        // (784 and 2,500 elements) on one thread made its inference 20%
        // slower. With one thread, rayon would only add two context switches.
        if pool_threads() > 1 {
            for_each_chunk(&mut out, plane_out, &|i, o| fill((i, o)));
        } else {
            out.chunks_mut(plane_out).enumerate().for_each(fill);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn fold<E: FloatElement>(columns: &CpuStorage<E>, g: &Unfold2d) -> Result<CpuStorage<E>> {
        if E::DTYPE.is_half() {
            return narrowed("conv2d", &Self::fold(&widened("conv2d", columns)?, g)?);
        }
        let [n, c, h, w] = g.image;
        let ([kh, kw], [sh, sw], [ph, pw], [dh, dw]) =
            (g.window.kernel, g.window.stride, g.window.padding, g.window.dilation);
        let [oh, ow] = g.output;
        let mut out = output_buffer::<E>("fold", n * c * h * w)?;
        if h * w == 0 {
            return Ok(CpuStorage::from_vec(out));
        }
        let cols = columns.as_slice();
        let plane_cols = kh * kw * oh * ow;
        // Each plane sums its own columns in a fixed order: deterministic,
        // and the order the CUDA kernel uses.
        let sum = |(plane, img): (usize, &mut [E])| {
            img.fill(E::ZERO);
            let cols = &cols[plane * plane_cols..(plane + 1) * plane_cols];
            for (tap, cols) in cols.chunks(oh * ow).enumerate() {
                let (k, j) = (tap / kw, tap % kw);
                let (first, end) = inside(ow, sw, j * dw, pw, w);
                if first == end {
                    continue;
                }
                let start = first * sw + j * dw - pw;
                for (y, cols) in cols.chunks(ow).enumerate() {
                    let row = (y * sh + k * dh).wrapping_sub(ph);
                    if row >= h {
                        continue;
                    }
                    let line = &mut img[row * w..(row + 1) * w];
                    let cols = &cols[first..end];
                    if sw == 1 {
                        for (l, &v) in line[start..start + cols.len()].iter_mut().zip(cols) {
                            *l = *l + v;
                        }
                    } else {
                        for (l, &v) in line[start..].iter_mut().step_by(sw).zip(cols) {
                            *l = *l + v;
                        }
                    }
                }
            }
        };
        if pool_threads() > 1 {
            for_each_chunk(&mut out, h * w, &|i, o| sum((i, o)));
        } else {
            out.chunks_mut(h * w).enumerate().for_each(sum);
        }
        Ok(CpuStorage::from_vec(out))
    }

    fn conv2d_direct<E: FloatElement>(
        image: (&CpuStorage<E>, &Layout),
        weight: (&CpuStorage<E>, &Layout),
        bias: Option<(&CpuStorage<E>, &Layout)>,
        g: &Unfold2d,
        out_channels: usize,
        round_to: Option<DType>,
    ) -> Result<Option<CpuStorage<E>>> {
        if E::DTYPE.is_half() {
            let (x, w) = (widened("conv2d", image.0)?, widened("conv2d", weight.0)?);
            let b = bias.map(|(b, layout)| Ok::<_, Error>((widened("conv2d", b)?, layout))).transpose()?;
            let b = b.as_ref().map(|(b, layout)| (b, *layout));
            let out = Self::conv2d_direct((&x, image.1), (&w, weight.1), b, g, out_channels, None)?;
            return out.map(|out| narrowed("conv2d", &out)).transpose();
        }
        let Some(round) = rounding(round_to) else { return Ok(None) };
        let (Some(image), Some(weight)) = (dense_f32(image), dense_f32(weight)) else { return Ok(None) };
        let bias = match bias.map(dense_f32) {
            Some(None) => return Ok(None),
            Some(Some(bias)) => Some(bias),
            None => None,
        };
        let Some(isa) = direct::applies(g) else { return Ok(None) };
        Ok(Some(from_f32(direct::conv2d(isa, image, weight, bias, g, out_channels, round)?)))
    }

    fn conv2d_weight_direct<E: FloatElement>(
        image: (&CpuStorage<E>, &Layout),
        grad: (&CpuStorage<E>, &Layout),
        g: &Unfold2d,
        out_channels: usize,
        round_to: Option<DType>,
    ) -> Result<Option<[CpuStorage<E>; 2]>> {
        if E::DTYPE.is_half() {
            let (x, dy) = (widened("conv2d_backward", image.0)?, widened("conv2d_backward", grad.0)?);
            let grads = Self::conv2d_weight_direct((&x, image.1), (&dy, grad.1), g, out_channels, None)?;
            return grads.map(|grads| narrowed_all("conv2d_backward", grads)).transpose();
        }
        let Some(round) = rounding(round_to) else { return Ok(None) };
        let (Some(image), Some(grad)) = (dense_f32(image), dense_f32(grad)) else { return Ok(None) };
        let Some(isa) = direct::weight_gradient_applies(g) else { return Ok(None) };
        let (weight, bias) = direct::weight_gradient(isa, image, grad, g, out_channels, round)?;
        Ok(Some([from_f32(weight), from_f32(bias)]))
    }

    /// For `bf16` and `f16`, where both direct kernels run: the CNN step of
    /// `benches/peers` under `autocast` spent about a quarter of its time
    /// casting the convolution's 4.2M-element output and gradient to the
    /// half type and back, which the kernels' rounding replaces.
    fn fuses_rounding(half: DType, g: &Unfold2d) -> bool {
        rounding(Some(half)).is_some() && direct::applies(g).is_some() && direct::weight_gradient_applies(g).is_some()
    }
}

/// How the direct kernels round for `round_to` (`Some(None)`: they do
/// not), `None` for a type they cannot round to.
fn rounding(round_to: Option<DType>) -> Option<Option<Rounding>> {
    match round_to {
        None => Some(None),
        Some(DType::BF16) => Some(Some(Rounding::Bf16)),
        Some(DType::F16) => Some(Some(Rounding::F16)),
        Some(_) => None,
    }
}

/// The elements of a dense `f32` tensor, `None` for another element type
/// or a strided layout: the direct kernels are for `f32` only, and the
/// element type is known to the kernel trait only as a type parameter.
fn dense_f32<'a, E: FloatElement>((storage, layout): (&'a CpuStorage<E>, &Layout)) -> Option<&'a [f32]> {
    let storage = (storage as &dyn Any).downcast_ref::<CpuStorage<f32>>()?;
    Some(&storage.as_slice()[layout.contiguous_range()?])
}

/// A direct kernel's `f32` output as the storage of `E`, which is `f32`
/// since [`dense_f32`] accepted its inputs.
fn from_f32<E: FloatElement>(out: Vec<f32>) -> CpuStorage<E> {
    let out: Box<dyn Any> = Box::new(CpuStorage::from_vec(out));
    *out.downcast::<CpuStorage<E>>().expect("E is f32, as the inputs were")
}

/// The output positions `first..end` (of `len`) whose tap, at `offset`
/// (`j·dilation`) from the window's start, reads a column inside an image
/// row of `width`: those with `padding <= x·stride + offset < width + padding`.
fn inside(len: usize, stride: usize, offset: usize, padding: usize, width: usize) -> (usize, usize) {
    let first = padding.saturating_sub(offset).div_ceil(stride).min(len);
    let end = (width + padding).saturating_sub(offset).div_ceil(stride).min(len);
    (first, end.max(first))
}
