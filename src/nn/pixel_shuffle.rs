//! `PixelShuffle` and `PixelUnshuffle`: channels traded for resolution
//! (sub-pixel convolution, ESPCN's upsampling), as a view, a permutation
//! and one copy, differentiable through those.

use super::Forward;
use super::module::stateless_module;
use super::{Module, TensorKind};
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// PyTorch's `nn.PixelShuffle(upscale_factor)`: `[*, C · r², H, W]`
/// becomes `[*, C, H · r, W · r]`, output pixel `(h · r + i, w · r + j)` of
/// channel `c` taken from channel `c · r² + i · r + j` at `(h, w)`.
///
/// ```
/// use devtensor::nn::{PixelShuffle, PixelUnshuffle};
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec((0..8).map(|v| v as f32).collect(), [1, 4, 1, 2]);
/// let y = PixelShuffle::new(2).forward(&x);
/// assert_eq!(y.dims(), &[1, 1, 2, 4]);
/// assert_eq!(y.to_vec(), vec![0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
/// assert_eq!(PixelUnshuffle::new(2).forward(&y).to_vec(), x.to_vec());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PixelShuffle {
    /// `r`, the factor on both spatial axes.
    pub upscale_factor: usize,
}

/// PyTorch's `nn.PixelUnshuffle(downscale_factor)`, the inverse of
/// [`PixelShuffle`]: `[*, C, H · r, W · r]` becomes `[*, C · r², H, W]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PixelUnshuffle {
    /// `r`, the factor on both spatial axes.
    pub downscale_factor: usize,
}

impl PixelShuffle {
    /// The layer with factor `upscale_factor`.
    pub fn new(upscale_factor: usize) -> Self {
        PixelShuffle { upscale_factor }
    }

    /// The shuffled `x` (rank 3 or more, any device). Fails when the rank
    /// is below 3, the factor is 0, or the channels are not a multiple of
    /// the factor's square.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let r = self.upscale_factor;
        let (lead, [c, h, w]) = split_image("PixelShuffle", x, |[c, _, _]| {
            (r > 0 && c.is_multiple_of(r * r))
                .then_some(())
                .ok_or_else(|| format!("the channels ({c}) must be a multiple of upscale_factor² ({r}²)"))
        })?;
        let c_out = c / (r * r);
        let k = lead.len();
        // [*, C, r, r, H, W] -> [*, C, H, r, W, r]
        let view: Vec<usize> = lead.iter().copied().chain([c_out, r, r, h, w]).collect();
        let mut axes: Vec<usize> = (0..k).collect();
        axes.extend([k, k + 3, k + 1, k + 4, k + 2]);
        let out: Vec<usize> = lead.iter().copied().chain([c_out, h * r, w * r]).collect();
        x.try_reshape(view)?.try_permute(axes)?.try_reshape(out)
    }
}

impl PixelUnshuffle {
    /// The layer with factor `downscale_factor`.
    pub fn new(downscale_factor: usize) -> Self {
        PixelUnshuffle { downscale_factor }
    }

    /// The unshuffled `x` (rank 3 or more, any device). Fails when the
    /// rank is below 3, the factor is 0, or the height and width are not
    /// multiples of it.
    #[fallible]
    pub fn forward<D: Device, E: FloatElement>(&self, x: &Tensor<D, E>) -> Tensor<D, E> {
        let r = self.downscale_factor;
        let (lead, [c, h, w]) = split_image("PixelUnshuffle", x, |[_, h, w]| {
            (r > 0 && h.is_multiple_of(r) && w.is_multiple_of(r))
                .then_some(())
                .ok_or_else(|| format!("the height ({h}) and width ({w}) must be multiples of downscale_factor ({r})"))
        })?;
        let (h_out, w_out) = (h / r, w / r);
        let k = lead.len();
        // [*, C, H, r, W, r] -> [*, C, r, r, H, W]
        let view: Vec<usize> = lead.iter().copied().chain([c, h_out, r, w_out, r]).collect();
        let mut axes: Vec<usize> = (0..k).collect();
        axes.extend([k, k + 2, k + 4, k + 1, k + 3]);
        let out: Vec<usize> = lead.iter().copied().chain([c * r * r, h_out, w_out]).collect();
        x.try_reshape(view)?.try_permute(axes)?.try_reshape(out)
    }
}

/// `x`'s leading axes and its last three, `[C, H, W]`, after checking the
/// rank and what `fits` asks of them.
fn split_image<D: Device, E: FloatElement>(
    op: &'static str,
    x: &Tensor<D, E>,
    fits: impl FnOnce([usize; 3]) -> std::result::Result<(), String>,
) -> Result<(Vec<usize>, [usize; 3])> {
    let error = |reason: String| Error::Shape { op, device: D::name(), shapes: vec![x.shape().clone()], reason };
    let dims = x.dims();
    let Some(k) = dims.len().checked_sub(3) else {
        return Err(error("expected an input [*, C, H, W] of rank 3 or more".into()));
    };
    let chw = [dims[k], dims[k + 1], dims[k + 2]];
    fits(chw).map_err(error)?;
    Ok((dims[..k].to_vec(), chw))
}

impl<D: Device, E: FloatElement> Forward<D, E> for PixelShuffle {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

impl<D: Device, E: FloatElement> Forward<D, E> for PixelUnshuffle {
    fn forward_on(&self, x: &Tensor<D, E>) -> Result<Tensor<D, E>> {
        self.try_forward(x)
    }
}

stateless_module!(PixelShuffle, PixelUnshuffle);
