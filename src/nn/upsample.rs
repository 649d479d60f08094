//! Resampling: PyTorch's `F.interpolate` and `nn.Upsample` in the modes
//! `nearest`, `nearest-exact`, `linear`, `bilinear`, `bicubic` and
//! `trilinear`.
//!
//! Every mode is separable: the output is the input resampled along each
//! spatial axis in turn, the last first (PyTorch's kernels sum a row's
//! taps before the column's, so the rounding agrees too). Along one axis,
//! each output position reads one (nearest), two (linear) or four (cubic)
//! input positions with weights that depend only on the sizes, computed
//! once per call on the host; the reads are `index_select`s and the sum
//! is element-wise, so the gradient, every device and every float type
//! come from those ops.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::backend::cpu::try_collect;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// How [`interpolate`] computes a value between input positions,
/// PyTorch's `mode=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterpolateMode {
    /// The input position `floor(out · in / out_size)` (PyTorch's
    /// `"nearest"`, the default, which is not centred).
    #[default]
    Nearest,
    /// The input position `floor((out + 0.5) · in / out_size)`, centred
    /// (`"nearest-exact"`, what PIL and scikit-image compute).
    NearestExact,
    /// Linear between the two nearest positions of `[N, C, L]` (PyTorch's
    /// `"linear"`; not named `Linear`, so that compile errors can keep
    /// calling the layer [`Linear`](super::Linear) by its short name).
    Linear1d,
    /// Linear along both axes of `[N, C, H, W]` (`"bilinear"`).
    Bilinear,
    /// Cubic convolution (`a = -0.75`) over four positions along both axes
    /// of `[N, C, H, W]`, borders repeated (`"bicubic"`; values may
    /// overshoot the input's range, as in PyTorch).
    Bicubic,
    /// Linear along the three axes of `[N, C, D, H, W]` (`"trilinear"`).
    Trilinear,
}

impl InterpolateMode {
    /// PyTorch's name of the mode, for errors.
    fn name(self) -> &'static str {
        match self {
            InterpolateMode::Nearest => "nearest",
            InterpolateMode::NearestExact => "nearest-exact",
            InterpolateMode::Linear1d => "linear",
            InterpolateMode::Bilinear => "bilinear",
            InterpolateMode::Bicubic => "bicubic",
            InterpolateMode::Trilinear => "trilinear",
        }
    }

    /// The spatial ranks the mode takes (`None`: any of 1, 2 and 3).
    fn spatial_rank(self) -> Option<usize> {
        match self {
            InterpolateMode::Nearest | InterpolateMode::NearestExact => None,
            InterpolateMode::Linear1d => Some(1),
            InterpolateMode::Bilinear | InterpolateMode::Bicubic => Some(2),
            InterpolateMode::Trilinear => Some(3),
        }
    }
}

/// The output's spatial size: given outright (PyTorch's `size=`) or as a
/// factor of the input's (`scale_factor=`), one value per spatial axis or
/// one for all.
#[derive(Clone, Debug, PartialEq)]
pub enum Resize {
    /// The output's size along each spatial axis (one value: every axis).
    Size(Vec<usize>),
    /// The output is `floor(input · factor)` along each spatial axis (one
    /// value: every axis), and the positions are mapped by `1 / factor`
    /// (PyTorch's default `recompute_scale_factor=None`).
    ScaleFactor(Vec<f64>),
}

/// The settings of [`interpolate`] and [`Upsample`], PyTorch's keyword
/// arguments (`Default`: twice the size, `nearest`, `align_corners =
/// false`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Interpolate {
    /// The output's size.
    pub resize: Resize,
    /// How values between positions are computed.
    pub mode: InterpolateMode,
    /// Whether the corner pixels' centres of input and output are aligned
    /// (`true`) or their outer edges (`false`, PyTorch's default). Only
    /// for the linear and cubic modes, as in PyTorch.
    pub align_corners: bool,
}

impl Default for Interpolate {
    fn default() -> Self {
        Interpolate { resize: Resize::ScaleFactor(vec![2.0]), mode: InterpolateMode::Nearest, align_corners: false }
    }
}

impl Interpolate {
    /// Resampling to `size` (one value per spatial axis, or one for all).
    pub fn size(size: impl Into<Vec<usize>>, mode: InterpolateMode) -> Self {
        Interpolate { resize: Resize::Size(size.into()), mode, align_corners: false }
    }

    /// Resampling by `factor` along every spatial axis.
    pub fn scale_factor(factor: f64, mode: InterpolateMode) -> Self {
        Interpolate { resize: Resize::ScaleFactor(vec![factor]), mode, align_corners: false }
    }

    /// The settings with corners aligned (PyTorch's `align_corners=True`).
    pub fn align_corners(mut self, align_corners: bool) -> Self {
        self.align_corners = align_corners;
        self
    }
}

/// `x` (`[N, C, L]`, `[N, C, H, W]` or `[N, C, D, H, W]`) resampled to a
/// new spatial size, PyTorch's `F.interpolate(x, size=..., scale_factor=...,
/// mode=..., align_corners=...)`, differentiable in `x`.
///
/// ```
/// use devtensor::nn::{Interpolate, InterpolateMode, interpolate};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu, f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [1, 1, 2, 2]);
/// let nearest = interpolate(&x, &Interpolate::scale_factor(2.0, InterpolateMode::Nearest));
/// assert_eq!(nearest.to_vec()[..4], [1.0, 1.0, 2.0, 2.0]);
/// // nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True), a UNet's decoder
/// let options = Interpolate::scale_factor(2.0, InterpolateMode::Bilinear).align_corners(true);
/// let y = interpolate(&x, &options);
/// assert_eq!(y.dims(), &[1, 1, 4, 4]);
/// let first_row: Vec<f64> = y.to_vec()[..4].iter().map(|v| (v * 3.0).round() / 3.0).collect();
/// assert_eq!(first_row, [1.0, 4.0 / 3.0, 5.0 / 3.0, 2.0]);
/// ```
///
/// Fails, naming the mode and the shape, when the input's rank does not
/// suit the mode (`bilinear` needs `[N, C, H, W]`), when the sizes or
/// factors are not one per spatial axis (or one for all) or give an empty
/// output, or when `align_corners` is set for a nearest mode.
#[fallible(free)]
pub fn interpolate<D: Device, E: FloatElement>(x: &Tensor<D, E>, options: &Interpolate) -> Tensor<D, E> {
    const OP: &str = "interpolate";
    let error = |reason: String| Error::Argument { op: OP, device: D::name(), reason };
    let mode = options.mode;
    let spatial = x.rank().saturating_sub(2);
    let fits = match mode.spatial_rank() {
        Some(rank) => spatial == rank,
        None => (1..=3).contains(&spatial),
    };
    if !fits {
        let expected = match mode.spatial_rank() {
            Some(1) => "[N, C, L]",
            Some(2) => "[N, C, H, W]",
            Some(3) => "[N, C, D, H, W]",
            _ => "[N, C, L], [N, C, H, W] or [N, C, D, H, W]",
        };
        return Err(Error::Shape {
            op: OP,
            device: D::name(),
            shapes: vec![x.shape().clone()],
            reason: format!("mode '{}' expects an input {expected}", mode.name()),
        });
    }
    let nearest = matches!(mode, InterpolateMode::Nearest | InterpolateMode::NearestExact);
    if nearest && options.align_corners {
        return Err(error(format!(
            "align_corners only applies to the linear and cubic modes, not '{}' (leave it false)",
            mode.name()
        )));
    }
    let per_axis = |len: usize| len == 1 || len == spatial;
    let inputs = &x.dims()[2..];
    // Per spatial axis: the output size and PyTorch's `scale` argument.
    let axes: Vec<(usize, Option<f64>)> = match &options.resize {
        Resize::Size(size) if per_axis(size.len()) => {
            (0..spatial).map(|a| (size[a.min(size.len() - 1)], None)).collect()
        }
        Resize::ScaleFactor(factors) if per_axis(factors.len()) => {
            let mut axes = Vec::with_capacity(spatial);
            for (a, &input) in inputs.iter().enumerate() {
                let factor = factors[a.min(factors.len() - 1)];
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(error(format!("scale_factor must be positive and finite, got {factor}")));
                }
                axes.push(((input as f64 * factor).floor() as usize, Some(factor)));
            }
            axes
        }
        Resize::Size(v) => {
            return Err(error(format!(
                "expected one size per spatial axis ({spatial}) or one for all, got {}",
                v.len()
            )));
        }
        Resize::ScaleFactor(v) => {
            let got = v.len();
            return Err(error(format!(
                "expected one scale factor per spatial axis ({spatial}) or one for all, got {got}"
            )));
        }
    };
    if axes.iter().any(|&(out, _)| out == 0) || inputs.contains(&0) {
        let outputs: Vec<usize> = axes.iter().map(|&(out, _)| out).collect();
        return Err(error(format!("input size {inputs:?} and output size {outputs:?} must both be non-empty")));
    }
    // The last axis first, as PyTorch's kernels sum a row before a column.
    let mut y = x.clone();
    for (a, &(output, factor)) in axes.iter().enumerate().rev() {
        let input = inputs[a];
        // PyTorch leaves an axis whose size does not change as it is in the
        // nearest and linear modes, whatever the factor; the cubic and
        // nearest-exact modes still map positions by the factor given.
        let kept = match mode {
            InterpolateMode::Bicubic | InterpolateMode::NearestExact => factor.is_none_or(|f| f == 1.0),
            _ => true,
        };
        if input == output && kept {
            continue;
        }
        let taps = taps(mode, input, output, factor, options.align_corners)?;
        y = resample_axis(&y, 2 + a, output, &taps)?;
    }
    Ok(y)
}

/// One tap of every output position along an axis: the input position
/// each reads and the weight it reads it with.
struct Tap {
    index: Vec<i64>,
    weight: Vec<f64>,
}

/// PyTorch's `area_pixel_compute_scale`: the step in input positions per
/// output position.
fn scale(input: usize, output: usize, factor: Option<f64>, align_corners: bool) -> f64 {
    if align_corners {
        if output > 1 { (input - 1) as f64 / (output - 1) as f64 } else { 0.0 }
    } else {
        match factor {
            Some(f) => 1.0 / f,
            None => input as f64 / output as f64,
        }
    }
}

/// The taps of `mode` for resampling `input` positions to `output`
/// (PyTorch's `area_pixel_compute_source_index` and its nearest and cubic
/// forms), in f64.
fn taps(
    mode: InterpolateMode,
    input: usize,
    output: usize,
    factor: Option<f64>,
    align_corners: bool,
) -> Result<Vec<Tap>> {
    let scale = scale(input, output, factor, align_corners);
    let last = input as i64 - 1;
    let source = |o: usize, cubic: bool| {
        if align_corners {
            scale * o as f64
        } else {
            let s = scale * (o as f64 + 0.5) - 0.5;
            if cubic { s } else { s.max(0.0) }
        }
    };
    match mode {
        InterpolateMode::Nearest | InterpolateMode::NearestExact => {
            // PyTorch computes the nearest index in f32 (`nearest_idx`),
            // which decides the rounding at exact multiples.
            let scale = match factor {
                Some(f) => (1.0 / f) as f32,
                None => input as f32 / output as f32,
            };
            let offset = if mode == InterpolateMode::NearestExact { 0.5 } else { 0.0 };
            let nearest = |o: usize| ((((o as f32 + offset) * scale).floor() as i64).min(last), 1.0);
            Ok(vec![Tap::try_from_fn(output, nearest)?])
        }
        InterpolateMode::Linear1d | InterpolateMode::Bilinear | InterpolateMode::Trilinear => {
            // The two neighbours of each output position, and its distance
            // past the first (`lambda`).
            let split = |o: usize| {
                let s = source(o, false);
                let i = s.floor() as i64;
                (i, s - i as f64)
            };
            let near = Tap::try_from_fn(output, |o| {
                let (i, lambda) = split(o);
                (i.min(last), 1.0 - lambda)
            })?;
            let far = Tap::try_from_fn(output, |o| {
                let (i, lambda) = split(o);
                ((i + 1).min(last), lambda)
            })?;
            Ok(vec![near, far])
        }
        InterpolateMode::Bicubic => {
            const A: f64 = -0.75;
            // The cubic convolution kernel at distances 1 + t, t, 1 - t, 2 - t.
            let outer = |d: f64| ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A;
            let inner = |d: f64| ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0;
            (0..4i64)
                .map(|k| {
                    Tap::try_from_fn(output, |o| {
                        let s = source(o, true);
                        let i = s.floor() as i64;
                        let t = s - i as f64;
                        let weight = [outer(t + 1.0), inner(t), inner(1.0 - t), outer(2.0 - t)][k as usize];
                        ((i - 1 + k).clamp(0, last), weight)
                    })
                })
                .collect()
        }
    }
}

impl Tap {
    /// The tap whose output position `o` reads `at(o)`: an index and a
    /// weight. Its two host vectors are reserved first, so that a factor
    /// too large for memory is an [`Error::OutOfMemory`], not an abort.
    fn try_from_fn(output: usize, at: impl Fn(usize) -> (i64, f64)) -> Result<Self> {
        const OP: &str = "interpolate";
        Ok(Tap {
            index: try_collect(OP, output, (0..output).map(|o| at(o).0))?,
            weight: try_collect(OP, output, (0..output).map(|o| at(o).1))?,
        })
    }
}

/// `x` resampled along `axis` to `output` positions: `Σ_taps
/// x[.., index, ..] · weight`, each tap's weights broadcast along the
/// other axes.
fn resample_axis<D: Device, E: FloatElement>(
    x: &Tensor<D, E>,
    axis: usize,
    output: usize,
    taps: &[Tap],
) -> Result<Tensor<D, E>> {
    let mut weight_dims = vec![1; x.rank()];
    weight_dims[axis] = output;
    let mut sum: Option<Tensor<D, E>> = None;
    for tap in taps {
        let picked = x.try_index_select(axis as isize, &Tensor::<D, i64>::try_from_slice(&tap.index, [output])?)?;
        let term = if tap.weight.iter().all(|&w| w == 1.0) {
            picked
        } else {
            let weight: Vec<E> = tap.weight.iter().map(|&w| E::from_f64(w)).collect();
            picked.try_mul(&Tensor::<D, E>::try_from_vec(weight, weight_dims.clone())?)?
        };
        sum = Some(match sum {
            Some(sum) => sum.try_add(&term)?,
            None => term,
        });
    }
    Ok(sum.expect("every mode has a tap"))
}

/// PyTorch's `nn.Upsample`: [`interpolate`] as a layer, with no
/// parameters.
///
/// ```
/// use devtensor::nn::{InterpolateMode, Upsample};
/// use devtensor::{Cpu, Tensor};
/// // nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
/// let up = Upsample::new(2.0, InterpolateMode::Bilinear).align_corners(true);
/// assert_eq!(up.forward(&Tensor::<Cpu>::zeros([1, 8, 16, 16])).dims(), &[1, 8, 32, 32]);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Upsample {
    /// The size, mode and corner alignment.
    pub options: Interpolate,
}

impl Upsample {
    /// Upsampling by `scale_factor` on every spatial axis in `mode`
    /// (PyTorch's `nn.Upsample(scale_factor=..., mode=...)`).
    pub fn new(scale_factor: f64, mode: InterpolateMode) -> Self {
        Upsample { options: Interpolate::scale_factor(scale_factor, mode) }
    }

    /// Resampling to `size` (PyTorch's `nn.Upsample(size=..., mode=...)`).
    pub fn with_size(size: impl Into<Vec<usize>>, mode: InterpolateMode) -> Self {
        Upsample { options: Interpolate::size(size, mode) }
    }

    /// The layer with corners aligned (PyTorch's `align_corners=True`).
    pub fn align_corners(mut self, align_corners: bool) -> Self {
        self.options.align_corners = align_corners;
        self
    }

    /// The resampled `x` (any device); fails as [`interpolate`] does.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        try_interpolate(x, &self.options)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for Upsample {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(Upsample);
