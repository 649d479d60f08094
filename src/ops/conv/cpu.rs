//! Convolution kernels on the CPU: one rayon task per image plane.

use super::{ConvKernel, Unfold2d};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, output_buffer};
use crate::element::FloatElement;
use crate::error::Result;
use rayon::prelude::*;

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
        out.par_chunks_mut(plane_out).enumerate().for_each(|(plane, out)| {
            let img = &src[plane * h * w..(plane + 1) * h * w];
            for (tap, out) in out.chunks_mut(oh * ow).enumerate() {
                let (k, j) = (tap / kw, tap % kw);
                for (y, out) in out.chunks_mut(ow).enumerate() {
                    // Wrapping: a row above the image becomes a huge one, out of range.
                    let row = (y * sh + k * dh).wrapping_sub(ph);
                    if row >= h {
                        out.fill(pad);
                        continue;
                    }
                    let line = &img[row * w..(row + 1) * w];
                    for (x, o) in out.iter_mut().enumerate() {
                        let col = (x * sw + j * dw).wrapping_sub(pw);
                        *o = if col < w { line[col] } else { pad };
                    }
                }
            }
        });
        Ok(CpuStorage::from_vec(out))
    }

    fn fold<E: FloatElement>(columns: &CpuStorage<E>, g: &Unfold2d) -> Result<CpuStorage<E>> {
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
        out.par_chunks_mut(h * w).enumerate().for_each(|(plane, img)| {
            img.fill(E::ZERO);
            let cols = &cols[plane * plane_cols..(plane + 1) * plane_cols];
            for (tap, cols) in cols.chunks(oh * ow).enumerate() {
                let (k, j) = (tap / kw, tap % kw);
                for (y, cols) in cols.chunks(ow).enumerate() {
                    let row = (y * sh + k * dh).wrapping_sub(ph);
                    if row >= h {
                        continue;
                    }
                    let line = &mut img[row * w..(row + 1) * w];
                    for (x, &v) in cols.iter().enumerate() {
                        let col = (x * sw + j * dw).wrapping_sub(pw);
                        if col < w {
                            line[col] = line[col] + v;
                        }
                    }
                }
            }
        });
        Ok(CpuStorage::from_vec(out))
    }
}
